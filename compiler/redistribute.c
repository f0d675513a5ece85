/* redistribute.c: the planner of `redistribute(x, T)` (SPEC section 8) and
 * the byte-cost model shared with --comm-report.
 *
 * A layout is, per mesh axis, R, I or P, or a place in the partition spec
 * (dim d, position k: the axis shards dim d, major to minor).  A step
 * changes the layout of a group of axes (one flattened communicator):
 *   all_reduce      P -> R|I
 *   reduce_scatter  P -> appended to dim d's axes
 *   all_gather      the minor-most axes of dim d -> R|I
 *   all_to_all      the minor-most axes of dim i -> appended to dim j
 *   convert         R|I -> appended to dim d (a local slice), R <-> I,
 *                   R|I -> P, the minor-most axes of dim d -> P
 * Only the minor-most axes of a dim can be removed, and new axes are always
 * appended: that is how the runtime's blocks are laid out (block index
 * i_a * n_b + i_b for [N@(a, b)]).
 *
 * The planned sequence is a cheapest path from the source layout to the
 * target in the graph of these steps over every group of axes (Dijkstra),
 * costs being bytes per rank at an evaluation size vector, ties broken by
 * fewer collectives, then fewer steps.  Intermediate layouts may shard a
 * dim only by axes that shard it in the source or in the target, so no
 * step needs a divisibility the program did not promise already.
 *
 * The axis-by-axis plan moves one axis at a time with the per-axis routing
 * of redistribute(x, a, src=, dst=), in mesh order, gathering the minor-most
 * misplaced axis first when no axis can move.  It is what the planned
 * sequence is measured against: the search runs at the declared sizes (4
 * for an axis declared without a size or with size 1) and at a few other
 * size vectors, and the result is the candidate cheapest at the declared
 * sizes among those that move no more bytes than axis by axis at every
 * mesh size (comm_cost_compare(), or every size of 1 to 8 per axis when
 * that is inconclusive); the axis-by-axis plan itself if none does. */
#include <stdlib.h>
#include <string.h>

#include "redistribute.h"

/* small numeric helpers (the compiler does not link libm) */
static double d_abs(double x) { return x < 0 ? -x : x; }
static double d_max(double a, double b) { return a > b ? a : b; }
static double d_pow(double x, int e) {
  double r = 1;
  for (int i = 0; i < (e < 0 ? -e : e); i++)
    r *= x;
  return e < 0 ? 1 / r : r;
}
static bool d_is_int(double x) { return d_abs(x) < 9e15 && (double)(long long)x == x; }
static long long d_round(double x) { return (long long)(x < 0 ? x - 0.5 : x + 0.5); }

/* ------------------------------------------------------------ cost model */

static long long dtype_bytes(DType dt) { return dt == DT_F64 ? 8 : dt == DT_BF16 ? 2 : 4; }

Size comm_local_bytes(const Type *t) {
  Size b = size_int(dtype_bytes(t->dtype));
  for (int d = 0; d < t->ndim; d++) {
    Size s = t->shape[d];
    for (int k = 0; !t->local && k < MAX_MESH_AXES && t->spec[d][k] >= 0; k++)
      s = size_div(s, size_axis(t->spec[d][k]));
    b = size_mul(b, s);
  }
  return b;
}

const char *comm_size_text(Compiler *c, const Mesh *m, Size s) { return size_text(c, m, s, "n_"); }

static Size local_dim(const Type *t, int d) {
  Size s = t->shape[d];
  for (int k = 0; !t->local && k < MAX_MESH_AXES && t->spec[d][k] >= 0; k++)
    s = size_div(s, size_axis(t->spec[d][k]));
  return s;
}

const char *comm_local_bytes_text(Compiler *c, const Mesh *m, const Type *t) {
  StrBuf sb;
  sb_init(&sb, &c->arena);
  sb_printf(&sb, "%lld", dtype_bytes(t->dtype));
  for (int d = 0; d < t->ndim; d++)
    sb_printf(&sb, "*%s", comm_size_text(c, m, local_dim(t, d)));
  return sb.data;
}

const char *comm_local_type_text(Compiler *c, const Mesh *m, const Type *t) {
  StrBuf sb;
  sb_init(&sb, &c->arena);
  sb_puts(&sb, dtype_name(t->dtype));
  if (t->ndim) {
    sb_putc(&sb, '[');
    for (int d = 0; d < t->ndim; d++)
      sb_printf(&sb, "%s%s", d ? ", " : "", comm_size_text(c, m, local_dim(t, d)));
    sb_putc(&sb, ']');
  }
  return sb.data;
}

void comm_cost_add(Compiler *c, CommCost *cost, double mult, Size group, Size bytes, const char *bytes_text) {
  ARENA_RESERVE(&c->arena, cost->t, cost->n, cost->cap, 8);
  cost->t[cost->n++] = (CommTerm){mult, group, bytes, bytes_text, false, 0};
}

void comm_cost_add_p2p(Compiler *c, CommCost *cost, double mult, Size group, Size bytes, const char *bytes_text) {
  comm_cost_add(c, cost, mult, group, bytes, bytes_text);
  cost->t[cost->n - 1].p2p = true;
}

void comm_cost_addall(Compiler *c, CommCost *cost, const CommCost *more, double times) {
  for (int i = 0; i < more->n; i++) {
    const CommTerm *t = &more->t[i];
    (t->p2p ? comm_cost_add_p2p : comm_cost_add)(c, cost, t->mult * times, t->group, t->bytes, t->bytes_text);
    cost->t[cost->n - 1].uneven = t->uneven;
  }
}

static const char *group_factor_text(Compiler *c, const Mesh *m, Size g) {
  const char *gs = comm_size_text(c, m, g);
  bool compound = strpbrk(gs, "*/") != NULL;
  return arena_sprintf(&c->arena, compound ? "(%s-1)/(%s)" : "(%s-1)/%s", gs, gs);
}

static const char *mult_text(Compiler *c, double mult) {
  if (mult == 1)
    return "";
  if (d_is_int(mult))
    return arena_sprintf(&c->arena, "%lld*", (long long)mult);
  return arena_sprintf(&c->arena, "%g*", mult);
}

/* A point-to-point term's factor: "(n_pp>1)". */
static const char *p2p_factor_text(Compiler *c, const Mesh *m, Size g) {
  return arena_sprintf(&c->arena, "(%s>1)", comm_size_text(c, m, g));
}

const char *comm_term_text(Compiler *c, const Mesh *m, const CommTerm *t) {
  return arena_sprintf(&c->arena, "%s%s * %s", mult_text(c, t->mult),
                       (t->p2p ? p2p_factor_text : group_factor_text)(c, m, t->group),
                       t->bytes_text ? t->bytes_text : comm_size_text(c, m, t->bytes));
}

static bool size_same(Size a, Size b) { return !a.unknown && !b.unknown && size_eq(a, b); }

/* Terms of equal n and N added up, in first-seen order. */
static CommCost merged(Compiler *c, const CommCost *cost) {
  CommCost out = {0};
  for (int i = 0; i < cost->n; i++) {
    int j;
    for (j = 0; j < out.n; j++)
      if (size_same(out.t[j].group, cost->t[i].group) && size_same(out.t[j].bytes, cost->t[i].bytes) &&
          out.t[j].p2p == cost->t[i].p2p)
        break;
    if (j < out.n)
      out.t[j].mult += cost->t[i].mult;
    else
      (cost->t[i].p2p ? comm_cost_add_p2p : comm_cost_add)(c, &out, cost->t[i].mult, cost->t[i].group,
                                                            cost->t[i].bytes, NULL);
  }
  return out;
}

const char *comm_cost_text(Compiler *c, const Mesh *m, const CommCost *cost) {
  CommCost mc = merged(c, cost);
  if (mc.n == 0)
    return "0";
  StrBuf sb;
  sb_init(&sb, &c->arena);
  for (int i = 0; i < mc.n; i++)
    sb_printf(&sb, "%s%s", i ? " + " : "", comm_term_text(c, m, &mc.t[i]));
  return sb.data;
}

static bool size_eval(Size s, const long long *sizes, double *out) {
  if (s.unknown)
    return false;
  double v = (double)s.num / (double)s.den;
  for (int i = 0; i < s.nf; i++) {
    long long n = sizes[s.f[i].axis];
    if (n <= 0)
      return false;
    v *= d_pow((double)n, s.f[i].exp);
  }
  *out = v;
  return true;
}

bool comm_cost_eval(const Mesh *m, const CommCost *cost, const long long *sizes, double *out) {
  (void)m;
  double sum = 0;
  for (int i = 0; i < cost->n; i++) {
    double g, b;
    if (!size_eval(cost->t[i].group, sizes, &g) || !size_eval(cost->t[i].bytes, sizes, &b))
      return false;
    if (cost->t[i].uneven > 0)
      b *= cost->t[i].uneven;
    sum += cost->t[i].mult * (cost->t[i].p2p ? (g > 1) : (g - 1) / g) * b;
  }
  *out = sum;
  return true;
}

static const char *number_text(Compiler *c, double v) {
  if (d_abs(v - (double)d_round(v)) < 1e-9 * (d_abs(v) > 1 ? d_abs(v) : 1))
    return arena_sprintf(&c->arena, "%lld", d_round(v));
  return arena_sprintf(&c->arena, "%.6g", v);
}


/* s with the declared axis sizes multiplied in. */
static Size substitute(Size s, const long long *sizes) {
  Size r = size_int(1);
  r.num = s.num;
  r.den = s.den;
  for (int k = 0; k < s.nf; k++) {
    int ax = s.f[k].axis, e = s.f[k].exp;
    for (int j = 0; j < (e > 0 ? e : -e); j++) {
      if (sizes[ax] > 0 && e > 0)
        r.num *= sizes[ax];
      else if (sizes[ax] > 0)
        r.den *= sizes[ax];
      else
        r = e > 0 ? size_mul(r, size_axis(ax)) : size_div(r, size_axis(ax));
    }
  }
  long long g = size_gcd(r.num, r.den);
  r.num /= g;
  r.den /= g;
  return r;
}

static bool same_factors(Size a, Size b) {
  a.num = b.num = a.den = b.den = 1;
  return size_same(a, b);
}

const char *comm_cost_value(Compiler *c, const Mesh *m, const CommCost *cost) {
  long long sizes[MAX_MESH_AXES];
  for (int a = 0; a < m->naxes; a++)
    sizes[a] = m->axes[a].size;
  double v;
  if (comm_cost_eval(m, cost, sizes, &v))
    return number_text(c, v);
  /* substitute the declared sizes; the rest stays symbolic: parts are
   * coef * monomial [* (g-1)/g for a group of undeclared size g] */
  struct { Size mono, group; bool sym, p2p; } parts[64];
  int np = 0;
  for (int i = 0; i < cost->n; i++) {
    const CommTerm *t = &cost->t[i];
    if (t->bytes.unknown || t->group.unknown || !d_is_int(t->mult))
      return "?";
    Size mono = substitute(t->bytes, sizes), g = substitute(t->group, sizes);
    mono.num *= (long long)t->mult;
    bool sym = g.nf > 0;
    if (!sym && t->p2p) {
      mono.num *= g.num > g.den;
    } else if (!sym) {
      mono.num *= g.num - g.den;
      mono.den *= g.num;
    }
    long long gg = size_gcd(mono.num, mono.den);
    mono.num /= gg;
    mono.den /= gg;
    if (mono.num == 0)
      continue;
    int j;
    for (j = 0; j < np; j++)
      if (parts[j].sym == sym && same_factors(parts[j].mono, mono) &&
          (!sym || (size_same(parts[j].group, g) && parts[j].p2p == t->p2p)))
        break;
    if (j < np) {
      Size p = parts[j].mono;
      long long num = p.num * mono.den + mono.num * p.den, den = p.den * mono.den, g2 = size_gcd(num, den);
      parts[j].mono.num = num / g2;
      parts[j].mono.den = den / g2;
    } else if (np < 64) {
      parts[np].mono = mono;
      parts[np].group = g;
      parts[np].p2p = t->p2p;
      parts[np++].sym = sym;
    } else {
      return "?";
    }
  }
  StrBuf sb;
  sb_init(&sb, &c->arena);
  for (int i = 0; i < np; i++) {
    if (parts[i].mono.num == 0)
      continue;
    sb_printf(&sb, "%s%s", sb.len ? " + " : "", comm_size_text(c, m, parts[i].mono));
    if (parts[i].sym)
      sb_printf(&sb, "*%s", (parts[i].p2p ? p2p_factor_text : group_factor_text)(c, m, parts[i].group));
  }
  return sb.len ? sb.data : "0";
}

/* ---- symbolic comparison: is b - a >= 0 for every n_axis >= 1?
 * b - a is a Laurent polynomial in the axis sizes.  Times a monomial it is a
 * polynomial; with n = 1 + t it is >= 0 for all t >= 0 when every
 * coefficient is >= 0 (a sufficient test). */
typedef struct Mono {
  int8_t e[MAX_MESH_AXES];
  double c;
} Mono;

typedef struct Poly {
  Mono *m;
  int n, cap;
  bool overflow;
} Poly;

enum { POLY_MAX = 4096 };

static void poly_add(Poly *p, const int8_t *e, double c) {
  for (int i = 0; i < p->n; i++)
    if (memcmp(p->m[i].e, e, MAX_MESH_AXES) == 0) {
      p->m[i].c += c;
      return;
    }
  if (p->n == POLY_MAX) {
    p->overflow = true;
    return;
  }
  if (p->n == p->cap) {
    p->cap = p->cap ? p->cap * 2 : 16;
    p->m = realloc(p->m, sizeof(Mono) * (size_t)p->cap);
    if (!p->m) {
      p->n = p->cap = 0;
      p->overflow = true;
      return;
    }
  }
  memcpy(p->m[p->n].e, e, MAX_MESH_AXES);
  p->m[p->n++].c = c;
}

static bool poly_add_size(Poly *p, Size s, double coef, Size div) {
  if (s.unknown || div.unknown)
    return false;
  int8_t e[MAX_MESH_AXES] = {0};
  for (int i = 0; i < s.nf; i++)
    e[s.f[i].axis] = (int8_t)(e[s.f[i].axis] + s.f[i].exp);
  for (int i = 0; i < div.nf; i++)
    e[div.f[i].axis] = (int8_t)(e[div.f[i].axis] - div.f[i].exp);
  poly_add(p, e, coef * (double)s.num / (double)s.den * (double)div.den / (double)div.num);
  return true;
}

static double binom(int n, int k) {
  double r = 1;
  for (int i = 1; i <= k; i++)
    r = r * (n - k + i) / i;
  return r;
}

/* Adds c * prod (1 + t_a)^e_a, expanded, to q. */
static void expand_into(Poly *q, const int8_t *e, double c, int axis, int8_t *acc) {
  if (axis == MAX_MESH_AXES) {
    poly_add(q, acc, c);
    return;
  }
  for (int k = 0; k <= e[axis] && !q->overflow; k++) {
    acc[axis] = (int8_t)k;
    expand_into(q, e, c * binom(e[axis], k), axis + 1, acc);
  }
  acc[axis] = 0;
}

static bool poly_signs(const Poly *p, double tol, bool *nonneg, bool *nonpos, bool *zero) {
  *nonneg = *nonpos = *zero = true;
  for (int i = 0; i < p->n; i++) {
    if (p->m[i].c < -tol)
      *nonneg = false;
    if (p->m[i].c > tol)
      *nonpos = false;
    if (d_abs(p->m[i].c) > tol)
      *zero = false;
  }
  return !p->overflow;
}

CommCmp comm_cost_compare(const CommCost *a, const CommCost *b) {
  Poly d = {0};
  bool ok = true;
  double scale = 0;
  for (int s = 0; s < 2 && ok; s++) {
    const CommCost *x = s ? a : b;
    double sign = s ? -1 : 1;
    for (int i = 0; i < x->n && ok; i++) {
      const CommTerm *t = &x->t[i];
      ok &= !t->p2p;
      ok &= poly_add_size(&d, t->bytes, sign * t->mult, size_int(1));
      ok &= poly_add_size(&d, t->bytes, -sign * t->mult, t->group);
    }
  }
  for (int i = 0; i < d.n; i++)
    scale = d_max(scale, d_abs(d.m[i].c));
  double tol = 1e-9 * (scale > 1 ? scale : 1);
  CommCmp r = CMP_UNKNOWN;
  bool nonneg, nonpos, zero;
  if (ok && poly_signs(&d, tol, &nonneg, &nonpos, &zero) && zero) {
    r = CMP_EQUAL;
  } else if (ok && !d.overflow) {
    int8_t lo[MAX_MESH_AXES] = {0};
    for (int i = 0; i < d.n; i++)
      for (int x = 0; x < MAX_MESH_AXES; x++)
        if (d_abs(d.m[i].c) > tol && d.m[i].e[x] < lo[x])
          lo[x] = d.m[i].e[x];
    Poly q = {0};
    for (int i = 0; i < d.n && !q.overflow; i++) {
      if (d_abs(d.m[i].c) <= tol)
        continue;
      int8_t e[MAX_MESH_AXES], acc[MAX_MESH_AXES] = {0};
      for (int x = 0; x < MAX_MESH_AXES; x++)
        e[x] = (int8_t)(d.m[i].e[x] - lo[x]);
      expand_into(&q, e, d.m[i].c, 0, acc);
    }
    if (poly_signs(&q, tol, &nonneg, &nonpos, &zero))
      r = zero ? CMP_EQUAL : nonneg ? CMP_LESS : nonpos ? CMP_GREATER : CMP_UNKNOWN;
    free(q.m);
  }
  free(d.m);
  return r;
}

/* ------------------------------------------------------------ the planner */

typedef struct St {
  int8_t spec[MAX_DIMS][MAX_MESH_AXES];
  uint8_t lt[MAX_MESH_AXES];
} St;

typedef struct Move {
  uint8_t op, src, dst, naxes;
  int8_t sdim, ddim;
  int8_t axes[MAX_MESH_AXES];
} Move;

typedef struct Node {
  St s;
  double cost;
  int ncoll, nsteps;
  int parent;
  Move mv;
  bool done;
} Node;

typedef struct Planner {
  int naxes, ndim;
  DType dtype;
  Size shape[MAX_DIMS];
  double esize[MAX_MESH_AXES];
  St src, dst;
  int8_t tdim[MAX_MESH_AXES], tpos[MAX_MESH_AXES]; /* the target place, -1: none */
  unsigned srcset[MAX_DIMS], dstset[MAX_DIMS];
  Node *nodes;
  int nnodes, capnodes;
  int *hash;
  size_t hcap;
  int *heap;
  int nheap, capheap;
  bool overflow;
} Planner;

enum { MAX_NODES = 20000 };

static int spec_len(const St *s, int d) {
  int n = 0;
  while (n < MAX_MESH_AXES && s->spec[d][n] >= 0)
    n++;
  return n;
}

static unsigned spec_mask(const St *s, int d) {
  unsigned m = 0;
  for (int k = 0; k < MAX_MESH_AXES && s->spec[d][k] >= 0; k++)
    m |= 1u << s->spec[d][k];
  return m;
}

static bool place_of(const St *s, int ndim, int a, int *dim, int *pos) {
  for (int d = 0; d < ndim; d++)
    for (int k = 0; k < MAX_MESH_AXES && s->spec[d][k] >= 0; k++)
      if (s->spec[d][k] == a) {
        *dim = d;
        *pos = k;
        return true;
      }
  return false;
}

static St state_of(const Type *t, int naxes) {
  St s;
  memset(&s, 0, sizeof s);
  memset(s.spec, -1, sizeof s.spec);
  for (int d = 0; d < t->ndim; d++)
    for (int k = 0; k < MAX_MESH_AXES && t->spec[d][k] >= 0; k++)
      s.spec[d][k] = t->spec[d][k];
  for (int a = 0; a < naxes; a++)
    s.lt[a] = (uint8_t)t->lt[a];
  return s;
}

static double st_bytes(const Planner *P, const St *s) {
  double b = (double)dtype_bytes(P->dtype);
  for (int d = 0; d < P->ndim; d++) {
    double v;
    Size sz = P->shape[d];
    if (sz.unknown) {
      v = 1;
    } else {
      v = (double)sz.num / (double)sz.den;
      for (int i = 0; i < sz.nf; i++)
        v *= d_pow(P->esize[sz.f[i].axis], sz.f[i].exp);
    }
    for (int k = 0; k < MAX_MESH_AXES && s->spec[d][k] >= 0; k++)
      v /= P->esize[s->spec[d][k]];
    b *= v;
  }
  return b;
}

static double group_size(const Planner *P, const Move *mv) {
  double n = 1;
  for (int i = 0; i < mv->naxes; i++)
    n *= P->esize[mv->axes[i]];
  return n;
}

/* The state after a move; false if the move breaks the layout rules. */
static bool apply(const Planner *P, const St *s, const Move *mv, St *out) {
  *out = *s;
  int n = mv->naxes;
  if (mv->sdim >= 0) { /* remove the minor-most n axes of sdim */
    int len = spec_len(out, mv->sdim);
    if (len < n)
      return false;
    for (int i = 0; i < n; i++) {
      if (out->spec[mv->sdim][len - n + i] != mv->axes[i])
        return false;
      out->spec[mv->sdim][len - n + i] = -1;
    }
  }
  if (mv->ddim >= 0) {
    int len = spec_len(out, mv->ddim);
    if (len + n > MAX_MESH_AXES)
      return false;
    for (int i = 0; i < n; i++)
      out->spec[mv->ddim][len + i] = mv->axes[i];
    unsigned mk = spec_mask(out, mv->ddim);
    if ((mk & ~P->srcset[mv->ddim]) && (mk & ~P->dstset[mv->ddim]))
      return false; /* would need a divisibility nobody promised */
  }
  for (int i = 0; i < n; i++)
    out->lt[mv->axes[i]] = mv->dst;
  return true;
}

static double move_cost(const Planner *P, const St *before, const St *after, const Move *mv) {
  double g = group_size(P, mv);
  switch (mv->op) {
  case RS_ALL_REDUCE: return 2 * st_bytes(P, before) * (g - 1) / g;
  case RS_ALL_GATHER: return st_bytes(P, after) * (g - 1) / g;
  case RS_REDUCE_SCATTER:
  case RS_ALL_TO_ALL: return st_bytes(P, before) * (g - 1) / g;
  default: return 0;
  }
}

static uint64_t st_hash(const St *s) {
  const unsigned char *p = (const unsigned char *)s;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof *s; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* The node of state s, creating it; -1 when the search is too big. */
static int node_of(Planner *P, const St *s, bool *fresh) {
  if ((size_t)(P->nnodes + 1) * 2 > P->hcap) {
    size_t cap = P->hcap ? P->hcap * 2 : 1024;
    int *h = malloc(sizeof(int) * cap);
    if (!h)
      return -1;
    for (size_t i = 0; i < cap; i++)
      h[i] = -1;
    for (int i = 0; i < P->nnodes; i++) {
      size_t j = st_hash(&P->nodes[i].s) & (cap - 1);
      while (h[j] >= 0)
        j = (j + 1) & (cap - 1);
      h[j] = i;
    }
    free(P->hash);
    P->hash = h;
    P->hcap = cap;
  }
  size_t j = st_hash(s) & (P->hcap - 1);
  while (P->hash[j] >= 0) {
    if (memcmp(&P->nodes[P->hash[j]].s, s, sizeof *s) == 0) {
      *fresh = false;
      return P->hash[j];
    }
    j = (j + 1) & (P->hcap - 1);
  }
  if (P->nnodes == MAX_NODES)
    return -1;
  if (P->nnodes == P->capnodes) {
    int cap = P->capnodes ? P->capnodes * 2 : 256;
    Node *n = realloc(P->nodes, sizeof(Node) * (size_t)cap);
    if (!n)
      return -1;
    P->nodes = n;
    P->capnodes = cap;
  }
  memset(&P->nodes[P->nnodes], 0, sizeof(Node));
  P->nodes[P->nnodes].s = *s;
  P->hash[j] = P->nnodes;
  *fresh = true;
  return P->nnodes++;
}

static bool close_to(double a, double b) {
  double m = d_max(1.0, d_max(d_abs(a), d_abs(b)));
  return d_abs(a - b) <= 1e-9 * m;
}

/* a before b: cheaper, then fewer collectives, then fewer steps */
static bool node_less(const Node *a, const Node *b) {
  if (!close_to(a->cost, b->cost))
    return a->cost < b->cost;
  if (a->ncoll != b->ncoll)
    return a->ncoll < b->ncoll;
  return a->nsteps < b->nsteps;
}

static bool heap_less(const Planner *P, int x, int y) {
  const Node *a = &P->nodes[x], *b = &P->nodes[y];
  if (node_less(a, b))
    return true;
  if (node_less(b, a))
    return false;
  return x < y;
}

static bool heap_push(Planner *P, int v) {
  if (P->nheap == P->capheap) {
    int cap = P->capheap ? P->capheap * 2 : 256;
    int *h = realloc(P->heap, sizeof(int) * (size_t)cap);
    if (!h)
      return false;
    P->heap = h;
    P->capheap = cap;
  }
  int i = P->nheap++;
  P->heap[i] = v;
  while (i > 0 && heap_less(P, P->heap[i], P->heap[(i - 1) / 2])) {
    int p = (i - 1) / 2, t = P->heap[p];
    P->heap[p] = P->heap[i];
    P->heap[i] = t;
    i = p;
  }
  return true;
}

static int heap_pop(Planner *P) {
  int top = P->heap[0];
  P->heap[0] = P->heap[--P->nheap];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < P->nheap && heap_less(P, P->heap[l], P->heap[m]))
      m = l;
    if (r < P->nheap && heap_less(P, P->heap[r], P->heap[m]))
      m = r;
    if (m == i)
      break;
    int t = P->heap[m];
    P->heap[m] = P->heap[i];
    P->heap[i] = t;
    i = m;
  }
  return top;
}

static void relax(Planner *P, int from, const Move *mv) {
  St next;
  const St *s = &P->nodes[from].s;
  if (!apply(P, s, mv, &next))
    return;
  double cost = P->nodes[from].cost + move_cost(P, s, &next, mv);
  int ncoll = P->nodes[from].ncoll + (mv->op != RS_CONVERT);
  int nsteps = P->nodes[from].nsteps + 1;
  bool fresh;
  int v = node_of(P, &next, &fresh);
  if (v < 0) {
    P->overflow = true;
    return;
  }
  Node cand = {.cost = cost, .ncoll = ncoll, .nsteps = nsteps};
  Node *n = &P->nodes[v];
  if (n->done || (!fresh && !node_less(&cand, n)))
    return;
  n->cost = cost;
  n->ncoll = ncoll;
  n->nsteps = nsteps;
  n->parent = from;
  n->mv = *mv;
  if (!heap_push(P, v))
    P->overflow = true;
}

static Move make_move(RsOp op, LTypeKind src, LTypeKind dst, int sdim, int ddim, const int *axes, int n) {
  Move mv;
  memset(&mv, 0, sizeof mv);
  mv.op = (uint8_t)op;
  mv.src = (uint8_t)src;
  mv.dst = (uint8_t)dst;
  mv.sdim = (int8_t)sdim;
  mv.ddim = (int8_t)ddim;
  mv.naxes = (uint8_t)(n < MAX_MESH_AXES ? n : MAX_MESH_AXES);
  for (int i = 0; i < MAX_MESH_AXES; i++)
    mv.axes[i] = (int8_t)(i < n ? axes[i] : -1);
  return mv;
}

/* The axes of mask, in mesh order, or in target position order on dim d. */
static int mask_axes(const Planner *P, unsigned mask, int by_pos_dim, int *out) {
  int n = 0;
  for (int a = 0; a < P->naxes; a++)
    if (mask & (1u << a))
      out[n++] = a;
  if (by_pos_dim >= 0)
    for (int i = 1; i < n; i++)
      for (int j = i; j > 0 && P->tpos[out[j - 1]] > P->tpos[out[j]]; j--) {
        int t = out[j];
        out[j] = out[j - 1];
        out[j - 1] = t;
      }
  return n;
}

static unsigned letter_mask(const Planner *P, const St *s, LTypeKind lt) {
  unsigned m = 0;
  for (int a = 0; a < P->naxes; a++) {
    int d, k;
    if (s->lt[a] == lt && !(lt == LT_V && place_of(s, P->ndim, a, &d, &k)))
      m |= 1u << a;
  }
  return m;
}

static LTypeKind tletter(const Planner *P, int a) { return (LTypeKind)P->dst.lt[a]; }

/* Every move the search considers from node u. */
static void expand(Planner *P, int u) {
  St s = P->nodes[u].s;
  int ax[MAX_MESH_AXES], n;
  unsigned pm = letter_mask(P, &s, LT_P), rm = letter_mask(P, &s, LT_R), im = letter_mask(P, &s, LT_I);
  unsigned want_i = 0, want_r = 0, want_p = 0, want_s[MAX_DIMS] = {0};
  for (int a = 0; a < P->naxes; a++) {
    if (P->tdim[a] >= 0)
      want_s[P->tdim[a]] |= 1u << a;
    else if (tletter(P, a) == LT_I)
      want_i |= 1u << a;
    else if (tletter(P, a) == LT_R)
      want_r |= 1u << a;
    else if (tletter(P, a) == LT_P)
      want_p |= 1u << a;
  }
  unsigned want_any_s = 0;
  for (int d = 0; d < P->ndim; d++)
    want_any_s |= want_s[d];
  /* all_reduce: P axes that must stop being P */
  unsigned e = pm & ~want_p;
  for (unsigned g = e; g; g = (g - 1) & e) {
    n = mask_axes(P, g, -1, ax);
    Move mv = make_move(RS_ALL_REDUCE, LT_P, LT_R, -1, -1, ax, n);
    relax(P, u, &mv);
    if ((g & ~want_i) == 0) {
      mv.dst = LT_I;
      relax(P, u, &mv);
    }
  }
  for (int d = 0; d < P->ndim; d++) {
    /* reduce_scatter and convert onto the target dim, in target order */
    unsigned sets[3] = {pm & want_s[d], rm & want_s[d], im & want_s[d]};
    static const RsOp ops[3] = {RS_REDUCE_SCATTER, RS_CONVERT, RS_CONVERT};
    static const LTypeKind from[3] = {LT_P, LT_R, LT_I};
    for (int i = 0; i < 3; i++)
      for (unsigned g = sets[i]; g; g = (g - 1) & sets[i]) {
        n = mask_axes(P, g, d, ax);
        Move mv = make_move(ops[i], from[i], LT_V, -1, d, ax, n);
        relax(P, u, &mv);
      }
    /* the minor-most axes of dim d: gather, move to another dim, or to P */
    int len = spec_len(&s, d);
    for (int k = 1; k <= len; k++) {
      unsigned gm = 0;
      for (int i = 0; i < k; i++) {
        ax[i] = s.spec[d][len - k + i];
        gm |= 1u << ax[i];
      }
      Move mv = make_move(RS_ALL_GATHER, LT_V, LT_R, d, -1, ax, k);
      relax(P, u, &mv);
      if ((gm & ~want_i) == 0) {
        mv.dst = LT_I;
        relax(P, u, &mv);
      }
      if ((gm & ~want_p) == 0) {
        mv = make_move(RS_CONVERT, LT_V, LT_P, d, -1, ax, k);
        relax(P, u, &mv);
      }
      if ((gm & ~want_any_s) == 0)
        for (int j = 0; j < P->ndim; j++)
          if (j != d) {
            mv = make_move(RS_ALL_TO_ALL, LT_V, LT_V, d, j, ax, k);
            relax(P, u, &mv);
          }
    }
  }
  /* local casts to the target letter: all at once, or one axis */
  static const LTypeKind cf[4] = {LT_R, LT_I, LT_R, LT_I}, ct[4] = {LT_I, LT_R, LT_P, LT_P};
  for (int i = 0; i < 4; i++) {
    unsigned have = cf[i] == LT_R ? rm : im, want = ct[i] == LT_I ? want_i : ct[i] == LT_R ? want_r : want_p;
    unsigned g = have & want;
    if (!g)
      continue;
    n = mask_axes(P, g, -1, ax);
    Move mv = make_move(RS_CONVERT, cf[i], ct[i], -1, -1, ax, n);
    relax(P, u, &mv);
    for (int j = 0; n > 1 && j < n; j++) {
      mv = make_move(RS_CONVERT, cf[i], ct[i], -1, -1, &ax[j], 1);
      relax(P, u, &mv);
    }
  }
}

/* ---- the axis-by-axis plan */

static bool settled(const Planner *P, const St *s, int a) {
  int d = P->tdim[a];
  if (d >= 0) {
    int p = P->tpos[a];
    for (int k = 0; k <= p; k++)
      if (s->spec[d][k] != P->dst.spec[d][k])
        return false;
    return true;
  }
  int dd, kk;
  return s->lt[a] == P->dst.lt[a] && !place_of(s, P->ndim, a, &dd, &kk);
}

/* The one step the per-axis routing takes for axis a now, if any. */
static bool direct_move(const Planner *P, const St *s, int a, Move *mv) {
  int d, k, ax[1] = {a};
  bool placed = place_of(s, P->ndim, a, &d, &k);
  bool last = placed && k == spec_len(s, d) - 1;
  LTypeKind have = (LTypeKind)s->lt[a], want = tletter(P, a);
  int td = P->tdim[a];
  if (td < 0) {
    if (placed) {
      if (!last)
        return false;
      *mv = want == LT_P ? make_move(RS_CONVERT, LT_V, LT_P, d, -1, ax, 1)
                         : make_move(RS_ALL_GATHER, LT_V, want, d, -1, ax, 1);
      return true;
    }
    if (have == LT_P)
      *mv = make_move(RS_ALL_REDUCE, LT_P, want, -1, -1, ax, 1);
    else
      *mv = make_move(RS_CONVERT, have, want, -1, -1, ax, 1);
    return true;
  }
  int p = P->tpos[a];
  if (spec_len(s, td) != p)
    return false;
  for (int i = 0; i < p; i++)
    if (s->spec[td][i] != P->dst.spec[td][i])
      return false;
  if (placed) {
    if (!last || d == td)
      return false;
    *mv = make_move(RS_ALL_TO_ALL, LT_V, LT_V, d, td, ax, 1);
  } else {
    *mv = make_move(have == LT_P ? RS_REDUCE_SCATTER : RS_CONVERT, have, LT_V, -1, td, ax, 1);
  }
  return true;
}

static int axis_by_axis(Planner *P, Move *moves, int max) {
  St s = P->src;
  int n = 0;
  while (memcmp(&s, &P->dst, sizeof s) != 0) {
    if (n == max)
      return -1;
    Move mv;
    memset(&mv, 0, sizeof mv);
    bool found = false;
    for (int a = 0; a < P->naxes && !found; a++)
      found = !settled(P, &s, a) && direct_move(P, &s, a, &mv);
    for (int a = 0; a < P->naxes && !found; a++) {
      int d, k;
      if (!settled(P, &s, a) && place_of(&s, P->ndim, a, &d, &k) && k == spec_len(&s, d) - 1) {
        LTypeKind w = tletter(P, a);
        int ax[1] = {a};
        mv = make_move(RS_ALL_GATHER, LT_V, P->tdim[a] < 0 && (w == LT_R || w == LT_I) ? w : LT_R, d, -1, ax, 1);
        found = true;
      }
    }
    St next;
    if (!found || !apply(P, &s, &mv, &next)) {
      /* the per-axis routing ignores the divisibility rule */
      if (!found)
        return -1;
      next = s;
      int len = mv.sdim >= 0 ? spec_len(&next, mv.sdim) : 0;
      if (len > 0)
        next.spec[mv.sdim][len - 1] = -1;
      len = mv.ddim >= 0 ? spec_len(&next, mv.ddim) : MAX_MESH_AXES;
      if (len < MAX_MESH_AXES)
        next.spec[mv.ddim][len] = (int8_t)mv.axes[0];
      next.lt[mv.axes[0]] = mv.dst;
    }
    moves[n++] = mv;
    s = next;
  }
  return n;
}

static int search(Planner *P, Move *moves, int max) {
  bool fresh;
  int start = node_of(P, &P->src, &fresh);
  if (start < 0)
    return -1;
  P->nodes[start].parent = -1;
  heap_push(P, start);
  int goal = -1;
  while (P->nheap && !P->overflow) {
    int u = heap_pop(P);
    if (P->nodes[u].done)
      continue;
    P->nodes[u].done = true;
    if (memcmp(&P->nodes[u].s, &P->dst, sizeof(St)) == 0) {
      goal = u;
      break;
    }
    expand(P, u);
  }
  if (goal < 0)
    return -1;
  int n = 0;
  for (int v = goal; P->nodes[v].parent >= 0; v = P->nodes[v].parent)
    n++;
  if (n > max)
    return -1;
  int i = n;
  for (int v = goal; P->nodes[v].parent >= 0; v = P->nodes[v].parent)
    moves[--i] = P->nodes[v].mv;
  return n;
}

static Type *type_at(Compiler *c, const Type *from, const St *s, int naxes) {
  Type *t = type_clone(c, from);
  for (int d = 0; d < t->ndim; d++)
    memcpy(t->spec[d], s->spec[d], sizeof t->spec[d]);
  for (int a = 0; a < naxes; a++)
    t->lt[a] = (LTypeKind)s->lt[a];
  t->literal = false;
  return t;
}

static void build_plan(Compiler *c, const Mesh *m, Planner *P, const Type *from, const Move *moves, int n, RsPlan *out) {
  memset(out, 0, sizeof *out);
  out->steps = arena_alloc(&c->arena, sizeof(RsStep) * (size_t)(n ? n : 1));
  St s = P->src;
  Type *cur = type_at(c, from, &s, P->naxes);
  for (int i = 0; i < n; i++) {
    const Move *mv = &moves[i];
    St next;
    if (!apply(P, &s, mv, &next)) { /* an axis-by-axis step outside the rule */
      next = s;
      int len = mv->sdim >= 0 ? spec_len(&next, mv->sdim) : 0;
      if (len > 0)
        next.spec[mv->sdim][len - 1] = -1;
      len = mv->ddim >= 0 ? spec_len(&next, mv->ddim) : MAX_MESH_AXES;
      if (len < MAX_MESH_AXES)
        next.spec[mv->ddim][len] = (int8_t)mv->axes[0];
      next.lt[mv->axes[0]] = mv->dst;
    }
    RsStep *st = &out->steps[out->nsteps++];
    st->op = (RsOp)mv->op;
    st->naxes = mv->naxes;
    Size g = size_int(1);
    for (int k = 0; k < mv->naxes; k++) {
      st->axes[k] = mv->axes[k];
      g = size_mul(g, size_axis(mv->axes[k]));
    }
    st->src = (LTypeKind)mv->src;
    st->dst = (LTypeKind)mv->dst;
    st->src_dim = mv->sdim;
    st->dst_dim = mv->ddim;
    st->in = cur;
    st->out = type_at(c, from, &next, P->naxes);
    const Type *priced = st->op == RS_ALL_GATHER ? st->out : st->in;
    if (st->op != RS_CONVERT) {
      out->ncollectives++;
      comm_cost_add(c, &out->cost, st->op == RS_ALL_REDUCE ? 2 : 1, g, comm_local_bytes(priced),
                    comm_local_bytes_text(c, m, priced));
    }
    cur = st->out;
    s = next;
  }
}

static const char *axis_name(const Mesh *m, int a) { return m->axes[a].name; }

static bool setup(Compiler *c, const Mesh *m, Planner *P, const Type *from, const Type *to, const char *x,
                  const char **why, const char **fix) {
  memset(P, 0, sizeof *P);
  if (from->kind != TY_TENSOR || to->kind != TY_TENSOR) {
    *why = "redistribute() moves tensors";
    *fix = "";
    return false;
  }
  if (from->local || to->local) {
    *why = "redistribute(x, T) plans from partition specs, and local code has none";
    *fix = arena_sprintf(&c->arena, "move one axis at a time: redistribute(%s, axis, src=..., dst=...), or call it outside local code", x);
    return false;
  }
  bool same = from->dtype == to->dtype && from->ndim == to->ndim;
  for (int d = 0; same && d < from->ndim; d++)
    same = size_eq(from->shape[d], to->shape[d]);
  if (!same) {
    *why = "redistribute() keeps the global shape and dtype";
    *fix = from->dtype != to->dtype ? arena_sprintf(&c->arena, "change the dtype with astype(%s, %s)", x, dtype_name(to->dtype))
                                    : arena_sprintf(&c->arena, "change the shape with reshape(%s, [...]) before or after", x);
    return false;
  }
  P->naxes = m->naxes;
  P->ndim = from->ndim;
  P->dtype = from->dtype;
  memcpy(P->shape, from->shape, sizeof P->shape);
  for (int a = 0; a < m->naxes; a++)
    P->esize[a] = m->axes[a].size >= 2 ? (double)m->axes[a].size : 4.0;
  P->src = state_of(from, m->naxes);
  P->dst = state_of(to, m->naxes);
  for (int d = 0; d < P->ndim; d++) {
    P->srcset[d] = spec_mask(&P->src, d);
    P->dstset[d] = spec_mask(&P->dst, d);
  }
  for (int a = 0; a < m->naxes; a++) {
    int d, k, sd, sk;
    bool tp = place_of(&P->dst, P->ndim, a, &d, &k), sp = place_of(&P->src, P->ndim, a, &sd, &sk);
    P->tdim[a] = (int8_t)(tp ? d : -1);
    P->tpos[a] = (int8_t)(tp ? k : -1);
    LTypeKind s = (LTypeKind)P->src.lt[a], t = (LTypeKind)P->dst.lt[a];
    if (s == LT_NONE || t == LT_NONE) {
      *why = arena_sprintf(&c->arena, "the %s type says nothing about mesh axis '%s'", s == LT_NONE ? "source" : "target",
                           axis_name(m, a));
      *fix = arena_sprintf(&c->arena, "give the target a type on '%s', e.g. {%s: R}", axis_name(m, a), axis_name(m, a));
      return false;
    }
    bool sx = s == LT_V && !sp, tx = t == LT_V && !tp; /* V without a layout */
    if (sx && !tx) {
      *why = arena_sprintf(&c->arena, "'%s' is V on mesh axis '%s' without a layout, so it has no global value to redistribute", x,
                           axis_name(m, a));
      *fix = arena_sprintf(&c->arena, "give it a layout where it is made (@%s on a dim, or S(i)), or move it per axis: "
                           "redistribute(%s, %s, src=V, dst=...)", axis_name(m, a), x, axis_name(m, a));
      return false;
    }
    if (tx && !sx) {
      *why = arena_sprintf(&c->arena, "the target is V on mesh axis '%s' without a layout, so it does not say where the blocks go", axis_name(m, a));
      *fix = arena_sprintf(&c->arena, "say which dim '%s' shards: write @%s on that dim, or %s: S(i)", axis_name(m, a), axis_name(m, a),
                           axis_name(m, a));
      return false;
    }
  }
  return true;
}

static void planner_free(Planner *P) {
  free(P->nodes);
  free(P->hash);
  free(P->heap);
}

enum { MAX_PLAN = 64 };

static bool sampled_compare(const Mesh *m, const CommCost *a, const CommCost *b, int *worse, int *better);

/* Whether plan moves no more bytes than axis by axis at every mesh size:
 * proved symbolically, or else tried at every size of 1 to 8 per axis. */
static bool never_worse(const Mesh *m, const CommCost *plan, const CommCost *naive) {
  CommCmp cmp = comm_cost_compare(plan, naive);
  if (cmp == CMP_EQUAL || cmp == CMP_LESS)
    return true;
  if (cmp == CMP_GREATER)
    return false;
  int worse = 0, better = 0;
  return sampled_compare(m, plan, naive, &worse, &better) && worse == 0;
}

static void search_reset(Planner *P) {
  planner_free(P);
  P->nodes = NULL;
  P->hash = NULL;
  P->heap = NULL;
  P->nnodes = P->capnodes = P->nheap = P->capheap = 0;
  P->hcap = 0;
  P->overflow = false;
}

/* a better than b: cheaper at the primary sizes, then fewer collectives,
 * then fewer steps */
static bool plan_better(const Mesh *m, const long long *sizes, const RsPlan *a, const RsPlan *b) {
  double ca = 0, cb = 0;
  comm_cost_eval(m, &a->cost, sizes, &ca);
  comm_cost_eval(m, &b->cost, sizes, &cb);
  if (!close_to(ca, cb))
    return ca < cb;
  if (a->ncollectives != b->ncollectives)
    return a->ncollectives < b->ncollectives;
  return a->nsteps < b->nsteps;
}

bool rs_plan(Compiler *c, const Mesh *m, const Type *from, const Type *to, bool grouped, RsPlan *out,
             const char *x, const char **why, const char **fix) {
  Planner P;
  const char *w = NULL, *f = NULL;
  memset(out, 0, sizeof *out);
  if (!setup(c, m, &P, from, to, x ? x : "x", &w, &f)) {
    if (why)
      *why = w;
    if (fix)
      *fix = f;
    return false;
  }
  Move naive[MAX_PLAN], moves[MAX_PLAN];
  int nn = axis_by_axis(&P, naive, MAX_PLAN);
  if (nn < 0) { /* cannot happen: every layout is reachable axis by axis */
    planner_free(&P);
    if (why)
      *why = "no sequence of collectives reaches that layout";
    if (fix)
      *fix = "redistribute in two steps, through a replicated type";
    return false;
  }
  build_plan(c, m, &P, from, naive, nn, out);
  if (grouped) {
    /* the cheapest path at the primary sizes, and at a few other size
     * vectors (plans that tie at one size can differ at another); the best
     * at the primary sizes among those never worse than axis by axis */
    double primary[MAX_MESH_AXES];
    long long psizes[MAX_MESH_AXES];
    memcpy(primary, P.esize, sizeof primary);
    for (int a = 0; a < m->naxes; a++)
      psizes[a] = (long long)primary[a];
    int nvec = 3 + 2 * m->naxes;
    RsPlan naive_plan = *out;
    for (int v = 0; v < nvec; v++) {
      for (int a = 0; a < m->naxes; a++) {
        double e = primary[a];
        if (v == 1 || v == 2)
          e = v + 1;
        else if (v >= 3 && v < 3 + m->naxes)
          e = a == v - 3 ? 8 : 1;
        else if (v >= 3 + m->naxes && a == v - 3 - m->naxes)
          e = 1;
        P.esize[a] = e;
      }
      search_reset(&P);
      int nb = search(&P, moves, MAX_PLAN);
      if (nb < 0)
        continue;
      RsPlan cand;
      build_plan(c, m, &P, from, moves, nb, &cand);
      if (plan_better(m, psizes, &cand, out) && never_worse(m, &cand.cost, &naive_plan.cost))
        *out = cand;
    }
    memcpy(P.esize, primary, sizeof primary);
  }
  planner_free(&P);
  return true;
}

const char *rs_op_name(RsOp op) {
  static const char *const names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "convert"};
  return names[op];
}

/* Compares a and b at every size vector with each axis in {1, 2, 3, 4, 6,
 * 8}: counts where a costs more and where it costs less.  False when the
 * mesh has too many axes to try them all. */
static bool sampled_compare(const Mesh *m, const CommCost *a, const CommCost *b, int *worse, int *better) {
  static const long long vals[] = {1, 2, 3, 4, 6, 8};
  enum { NV = 6 };
  if (m->naxes > 5)
    return false;
  long long total = 1;
  for (int x = 0; x < m->naxes; x++)
    total *= NV;
  for (long long i = 0; i < total; i++) {
    long long sizes[MAX_MESH_AXES], r = i;
    for (int x = 0; x < m->naxes; x++, r /= NV)
      sizes[x] = vals[r % NV];
    double va, vb;
    if (!comm_cost_eval(m, a, sizes, &va) || !comm_cost_eval(m, b, sizes, &vb))
      return false;
    if (close_to(va, vb))
      continue;
    if (va > vb)
      (*worse)++;
    else
      (*better)++;
  }
  return true;
}

const char *rs_plan_note(Compiler *c, const Mesh *m, const Type *from, const Type *to) {
  RsPlan p, a;
  if (!rs_plan(c, m, from, to, true, &p, NULL, NULL, NULL) || !rs_plan(c, m, from, to, false, &a, NULL, NULL, NULL))
    return NULL;
  CommCmp cmp = comm_cost_compare(&p.cost, &a.cost);
  const char *how;
  switch (cmp) {
  case CMP_EQUAL: how = "the same at every mesh size"; break;
  case CMP_LESS: how = "fewer at every mesh size whose axes all have more than one rank"; break;
  case CMP_GREATER: how = "more at some mesh sizes"; break;
  default: {
    int worse = 0, better = 0;
    if (sampled_compare(m, &p.cost, &a.cost, &worse, &better) && worse == 0) {
      how = better ? "fewer or the same at every mesh size of 1 to 8 ranks per axis, checked one by one"
                   : "the same at every mesh size of 1 to 8 ranks per axis, checked one by one";
      break;
    }
    StrBuf sb;
    sb_init(&sb, &c->arena);
    sb_puts(&sb, "compared at ");
    for (int x = 0; x < m->naxes; x++)
      sb_printf(&sb, "%sn_%s=%lld", x ? ", " : "", m->axes[x].name, m->axes[x].size >= 2 ? m->axes[x].size : 4);
    how = sb.data;
  }
  }
  if (p.nsteps == 0 && a.nsteps == 0)
    return "plan: nothing to do, the layouts are the same";
  if (p.ncollectives == 0 && a.ncollectives == 0)
    return "plan: local converts only, no collective";
  return arena_sprintf(&c->arena, "plan: %d collective%s, %s bytes; axis by axis: %d collective%s, %s bytes (%s)",
                       p.ncollectives, p.ncollectives == 1 ? "" : "s", comm_cost_value(c, m, &p.cost), a.ncollectives,
                       a.ncollectives == 1 ? "" : "s", comm_cost_value(c, m, &a.cost), how);
}
