/* memory_report.c: `spmdc --memory-report FILE [--mesh a=n,...]`.
 *
 * The report runs the program's IR after autodiff abstractly, on one rank of
 * the given mesh, under the schedule the host program follows
 * (schedule.c's Schedule of each block, the very data emit_c.c prints): the
 * block's order, a tensor freed after its last use in the block defining
 * it, the fused elementwise regions (a member read only inside its region
 * is never stored; a stored one takes a dying operand's buffer where the
 * runtime's rt_reuse would hand it over, refs == 1), a bf16 GEMM with its
 * epilogue (one result), var reads that move the var's reference, and
 * all-reduces of a dying operand done in place.  Every instruction's other
 * tensor results are new buffers of their local size, or share their
 * operand's where the runtime shares (reinterpret, convert between R and I,
 * collectives over one rank, ppermute by a multiple of the axis size,
 * dropout with p = 0) or views it (reshape, index, a slice or concat's
 * gradient of a contiguous block: a Root is the runtime's rt_storage).  Var slots and the autodiff tape hold references,
 * calls borrow their arguments (an owned parameter's, schedule.c: handed
 * over where it dies at the call, else one more reference) and return new
 * references.  Host values are
 * computed where they are constants, mesh sizes, loop indices or
 * arithmetic on those; a condition it cannot compute is taken as false,
 * and a loop of main's body runs twice at most (its steps repeat).  Every
 * live tensor is counted in one component, as the runtime counts it
 * (runtime/memory.c): parameters and optimizer state while a var slot of
 * main holds it (mem_slot_kinds), residuals while the tape holds it,
 * temporaries otherwise; the high-water marks are kept per component and
 * for the sum, each as a number and as a formula of the axis sizes (the
 * sizes of the live tensors, summed). */
#include <stdint.h>
#include <string.h>

#include "memory_report.h"
#include "redistribute.h"
#include "schedule.h"

/* ---- which var slots of main hold parameters and optimizer state */

static void find_params(IrBlock *b, const int *get_slot, char *kind) {
  for (IrInst *in = b->head; in; in = in->next) {
    if (in->op == IR_VJP_CALL && in->wrt)
      for (int i = 0; i < in->nargs; i++)
        if (in->wrt[i] && get_slot[in->args[i]] >= 0)
          kind[get_slot[in->args[i]]] = MEM_SLOT_PARAM;
    find_params(&in->body, get_slot, kind);
    find_params(&in->els, get_slot, kind);
  }
}

static void find_gets(IrBlock *b, int *get_slot) {
  for (IrInst *in = b->head; in; in = in->next) {
    if (in->op == IR_VAR_GET && in->ndst && in->dst[0] >= 0)
      get_slot[in->dst[0]] = (int)IR_I(in, SLOT);
    find_gets(&in->body, get_slot);
    find_gets(&in->els, get_slot);
  }
}

const char *mem_slot_kinds(Compiler *c, IrFn *main) {
  char *kind = arena_alloc(&c->arena, (size_t)main->nvars + 1);
  int *get_slot = arena_alloc(&c->arena, sizeof(int) * (size_t)(main->nvalues + 1));
  for (int v = 0; v <= main->nvalues; v++)
    get_slot[v] = -1;
  find_gets(&main->body, get_slot);
  find_params(&main->body, get_slot, kind);
  /* assigned in main's body outside loops (ifs included): kept across steps */
  for (IrInst *in = main->body.head; in; in = in->next)
    for (int br = 0; br < 3; br++) {
      IrInst *x = br == 0 ? in : in->op != IR_IF ? NULL : br == 1 ? in->body.head : in->els.head;
      for (; x; x = br ? x->next : NULL)
        if (x->op == IR_VAR_SET && !kind[IR_I(x, SLOT)] && main->vars[IR_I(x, SLOT)].type->kind == TY_TENSOR)
          kind[IR_I(x, SLOT)] = MEM_SLOT_OPT;
    }
  return kind;
}

/* ---- formulas: sums of monomials in the axis sizes */

typedef struct Poly {
  Size *t;
  int n, cap;
} Poly;

static bool same_mono(Size a, Size b) {
  if (a.nf != b.nf)
    return false;
  for (int i = 0; i < a.nf; i++)
    if (a.f[i].axis != b.f[i].axis || a.f[i].exp != b.f[i].exp)
      return false;
  return true;
}

static long long gcd_ll(long long a, long long b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b) {
    long long t = a % b;
    a = b;
    b = t;
  }
  return a ? a : 1;
}

static void poly_add(Compiler *c, Poly *p, Size s, int sign) {
  if (s.unknown || s.num == 0)
    return;
  for (int i = 0; i < p->n; i++)
    if (same_mono(p->t[i], s)) {
      long long num = p->t[i].num * s.den + sign * s.num * p->t[i].den, den = p->t[i].den * s.den;
      long long g = gcd_ll(num, den);
      p->t[i].num = num / g;
      p->t[i].den = den / g;
      if (p->t[i].num == 0)
        p->t[i] = p->t[--p->n];
      return;
    }
  ARENA_RESERVE(&c->arena, p->t, p->n, p->cap, 8);
  s.num *= sign;
  p->t[p->n++] = s;
}

static Poly poly_copy(Compiler *c, const Poly *p) {
  Poly q = {0};
  for (int i = 0; i < p->n; i++)
    poly_add(c, &q, p->t[i], 1);
  return q;
}

/* "4*256/n_tp*128 + 8": terms with more axis factors first */
static const char *poly_text(Compiler *c, const Mesh *m, const Poly *p) {
  if (p->n == 0)
    return "0";
  StrBuf sb;
  sb_init(&sb, &c->arena);
  bool *done = arena_alloc(&c->arena, (size_t)p->n + 1);
  for (int k = 0; k < p->n; k++) {
    int best = -1;
    for (int i = 0; i < p->n; i++)
      if (!done[i] && (best < 0 || p->t[i].nf > p->t[best].nf))
        best = i;
    done[best] = true;
    Size s = p->t[best];
    bool neg = s.num < 0;
    if (neg)
      s.num = -s.num;
    sb_printf(&sb, "%s%s", k ? (neg ? " - " : " + ") : (neg ? "-" : ""), size_text(c, m, s, "n_"));
  }
  return sb.data;
}

/* ---- the abstract run */

enum { C_TEMP, C_PARAM, C_OPT, C_RESID, NCOMP };
static const char *const comp_name[NCOMP] = {"temporaries", "params", "optimizer state", "residuals"};

typedef struct Root {
  double bytes;
  Size sym;
  int refs;   /* values and var slots holding it */
  int tape;   /* references on the tape */
  int slot;   /* main's var slot holding it as a parameter or optimizer state, or -1 */
  int comp;
} Root;

typedef struct Tape {
  int root;   /* -1: a host value */
  double h;
  bool hk;    /* h is known */
} Tape;

/* a call or loop of a differentiated forward, for the residuals per site */
typedef struct Site {
  IrInst *in;
  IrFn *f;
  int depth;
  double count; /* times run */
  double bytes;
  Poly sym;
} Site;

/* per function: what schedule_block reads and keeps up to date */
typedef struct FnUses {
  int *nuses, *lastuse, *defblk;
  int nblocks;
} FnUses;

/* An open-addressing table from a pointer to a value of vsize bytes, in
 * the arena; twice as large (from first entries) when half full. */
typedef struct PtrTable {
  const void **keys;
  char *vals;
  size_t vsize, first, cap, used;
} PtrTable;

typedef struct Frame {
  IrFn *f;
  int *root;     /* per value: its root, or -1 */
  double *hv;    /* per value: a host value */
  char *hk;      /* per value: hv is known */
  int *vroot;    /* per var slot */
  double *vh;
  char *vhk;
  int *ret;      /* RETURN's tensors (roots) */
  double *reth;
  char *rethk;
  int nret;
} Frame;

typedef struct Mem {
  Compiler *c;
  IrProgram *p;
  const Mesh *m;
  long long sizes[MAX_MESH_AXES];
  const char *slot_kind; /* main's */
  Root *roots;
  int nroots, caproots;
  Tape *tape;
  int ntape, captape;
  int *held;            /* per slot of main: the root it holds, or -1 */
  double live[NCOMP], peak[NCOMP], peak_total, at_peak[NCOMP];
  Poly plive[NCOMP], ppeak[NCOMP], pat_peak[NCOMP];
  Span peak_span;
  IrFn *peak_fn;
  /* residuals per site of the differentiated call being run */
  Site *sites;
  int nsites, capsites;
  int *stack;           /* open sites */
  int nstack, capstack;
  int recording;        /* > 0: inside a forward whose pushes are attributed */
  int depth;
  Span at;              /* the instruction being run */
  IrFn *at_fn;
  IrInst *skip;         /* run already (a remat call's push, with the call) */
  const Schedule *sched; /* of the block being run, */
  int cur_j;            /* the index of the instruction being run in it */
  /* the schedules made so far (Schedule by IrBlock), and per function the
   * arrays schedule_block keeps up to date (FnUses by IrFn) */
  PtrTable scheds, uses;
  bool guessed_if, capped_loop, unknown_loop;
  /* uneven shards (SPEC 4): the tensors with a sharded dim the mesh does
   * not divide (counted at the largest rank's block), and the first one */
  int uneven;
  Span bad_at;
  const char *bad_name;
  int bad_dim;
  long long bad_size, bad_group, bad_max, bad_min;
  int bad_axes[MAX_MESH_AXES], bad_naxes;
} Mem;

static double size_value(Mem *M, Size s) {
  if (s.unknown)
    return 0;
  double v = (double)s.num / (double)s.den;
  for (int i = 0; i < s.nf; i++)
    for (int k = 0; k < (s.f[i].exp < 0 ? -s.f[i].exp : s.f[i].exp); k++)
      v = s.f[i].exp > 0 ? v * (double)M->sizes[s.f[i].axis] : v / (double)M->sizes[s.f[i].axis];
  return v;
}

static void account(Mem *M, int comp, const Root *r, int sign) {
  M->live[comp] += sign * r->bytes;
  poly_add(M->c, &M->plive[comp], r->sym, sign);
  if (sign < 0)
    return;
  if (M->live[comp] > M->peak[comp]) {
    M->peak[comp] = M->live[comp];
    M->ppeak[comp] = poly_copy(M->c, &M->plive[comp]);
  }
  double total = 0;
  for (int k = 0; k < NCOMP; k++)
    total += M->live[k];
  if (total > M->peak_total) {
    M->peak_total = total;
    for (int k = 0; k < NCOMP; k++) {
      M->at_peak[k] = M->live[k];
      M->pat_peak[k] = poly_copy(M->c, &M->plive[k]);
    }
    M->peak_span = M->at;
    M->peak_fn = M->at_fn;
  }
}

static void settle(Mem *M, int id) {
  Root *r = &M->roots[id];
  int to = r->slot >= 0 ? (M->slot_kind[r->slot] == MEM_SLOT_PARAM ? C_PARAM : C_OPT) : r->tape > 0 ? C_RESID : C_TEMP;
  if (to == r->comp)
    return;
  account(M, r->comp, r, -1);
  r->comp = to;
  account(M, to, r, 1);
}

/* torch.chunk's split (SPEC 4): block r of n over k, its extent */
static long long chunk_ext(long long n, long long k, long long r) {
  long long c = (n + k - 1) / k, lo = r * c < n ? r * c : n;
  return (lo + c < n ? lo + c : n) - lo;
}

/* The bytes of t on the rank holding the largest block (uneven shards,
 * SPEC 4: a dim the mesh does not divide splits as torch.chunk does, nested
 * over an axis tuple, so the first block is the largest); the sum of equal
 * blocks otherwise.  The first tensor with uneven blocks is recorded, named
 * by name (a value's hint) or, without one, by its line. */
static double block_bytes(Mem *M, const Type *t, Size sym, const char *name) {
  if (t->kind != TY_TENSOR || t->local)
    return size_value(M, sym);
  double b = size_value(M, sym);
  bool uneven = false;
  for (int d = 0; d < t->ndim; d++) {
    double g = size_value(M, t->shape[d]);
    if (t->spec[d][0] < 0 || t->shape[d].unknown || g != (double)(long long)g)
      continue;
    long long n = (long long)g, group = 1, sizes[MAX_MESH_AXES];
    int k = 0;
    for (; k < MAX_MESH_AXES && t->spec[d][k] >= 0; k++)
      group *= sizes[k] = M->sizes[t->spec[d][k]];
    if (n % group == 0)
      continue;
    long long hi = 0, lo = n; /* over every block of the nested split, major to minor */
    for (long long blk = 0; blk < group; blk++) {
      long long ext = n, rem = blk, coord[MAX_MESH_AXES];
      for (int j = k - 1; j >= 0; j--) {
        coord[j] = rem % sizes[j];
        rem /= sizes[j];
      }
      for (int j = 0; j < k; j++)
        ext = chunk_ext(ext, sizes[j], coord[j]);
      hi = ext > hi ? ext : hi;
      lo = ext < lo ? ext : lo;
    }
    /* the largest rank's block instead of n / group in this dim */
    b = b / ((double)n / (double)group) * (double)hi;
    if (!uneven && M->uneven == 0) {
      M->bad_at = M->at;
      M->bad_name = name;
      M->bad_dim = d;
      M->bad_size = n;
      M->bad_group = group;
      M->bad_max = hi;
      M->bad_min = lo;
      M->bad_naxes = k;
      for (int j = 0; j < k; j++)
        M->bad_axes[j] = t->spec[d][j];
    }
    uneven = true;
  }
  M->uneven += uneven;
  return b;
}

static int new_root(Mem *M, Type *t, const char *name) {
  ARENA_RESERVE(&M->c->arena, M->roots, M->nroots, M->caproots, 1024);
  Root *r = &M->roots[M->nroots];
  r->sym = comm_local_bytes(t);
  r->bytes = block_bytes(M, t, r->sym, name);
  r->refs = 1;
  r->tape = 0;
  r->slot = -1;
  r->comp = C_TEMP;
  account(M, C_TEMP, r, 1);
  return M->nroots++;
}

static void release(Mem *M, int id) {
  if (id < 0)
    return;
  Root *r = &M->roots[id];
  if (--r->refs > 0 || r->tape > 0)
    return;
  account(M, r->comp, r, -1);
  if (r->slot >= 0 && M->held[r->slot] == id)
    M->held[r->slot] = -1;
  r->comp = -1;
}

static void retain(Mem *M, int id) {
  if (id >= 0)
    M->roots[id].refs++;
}

/* rt_mem_hold: slot of main holds id now */
static void hold(Mem *M, int slot, int id) {
  int old = M->held[slot];
  if (old >= 0 && old != id && M->roots[old].slot == slot) {
    M->roots[old].slot = -1;
    settle(M, old);
  }
  M->held[slot] = id;
  if (id >= 0) {
    M->roots[id].slot = slot;
    settle(M, id);
  }
}

static void tape_push(Mem *M, int id, double h, bool hk) {
  ARENA_RESERVE(&M->c->arena, M->tape, M->ntape, M->captape, 256);
  M->tape[M->ntape++] = (Tape){.root = id, .h = h, .hk = hk};
  if (id < 0)
    return;
  Root *r = &M->roots[id];
  if (r->tape++ == 0 && r->comp == C_TEMP && M->recording) /* a new residual: to every open site */
    for (int k = 0; k < M->nstack; k++) {
      M->sites[M->stack[k]].bytes += r->bytes;
      poly_add(M->c, &M->sites[M->stack[k]].sym, r->sym, 1);
    }
  settle(M, id);
}

static Tape tape_pop(Mem *M) {
  if (M->ntape == 0)
    return (Tape){.root = -1};
  Tape t = M->tape[--M->ntape];
  if (t.root >= 0) {
    Root *r = &M->roots[t.root];
    r->tape--;
    r->refs++; /* the popped value owns the tape's reference */
    settle(M, t.root);
  }
  return t;
}

static int open_site(Mem *M, IrFn *f, IrInst *in) {
  if (!M->recording)
    return -1;
  int s;
  for (s = 0; s < M->nsites; s++)
    if (M->sites[s].in == in && M->sites[s].f == f)
      break;
  if (s == M->nsites) {
    ARENA_RESERVE(&M->c->arena, M->sites, M->nsites, M->capsites, 32);
    M->sites[M->nsites++] = (Site){.in = in, .f = f, .depth = M->nstack};
  }
  ARENA_RESERVE(&M->c->arena, M->stack, M->nstack, M->capstack, 32);
  M->sites[s].count += 1;
  M->stack[M->nstack++] = s;
  return s;
}

static void close_site(Mem *M, int s) {
  if (s >= 0)
    M->nstack--;
}

static void run_fn(Mem *M, IrFn *f, const int *arg_roots, const double *arg_h, const char *arg_hk, Frame *out);

static bool host(Frame *F, int v, double *x) {
  if (v < 0 || !F->hk[v])
    return false;
  *x = F->hv[v];
  return true;
}

static void set_host(Frame *F, int v, double x) {
  if (v >= 0) {
    F->hv[v] = x;
    F->hk[v] = 1;
  }
}

static double trunc_ll(double x) { return (double)(long long)x; }

static void host_binary(Frame *F, IrInst *in) {
  double a = 0, b = 0; /* set where host() says known */
  bool ka = host(F, in->args[0], &a), kb = host(F, in->args[1], &b);
  OpKind op = (OpKind)IR_I(in, HOST_OP);
  if (op == OP_AND && ((ka && a == 0) || (kb && b == 0))) {
    set_host(F, in->dst[0], 0);
    return;
  }
  if (op == OP_OR && ((ka && a != 0) || (kb && b != 0))) {
    set_host(F, in->dst[0], 1);
    return;
  }
  if (!ka || !kb)
    return;
  bool integer = F->f->values[in->dst[0]].type->kind == TY_INT;
  double r;
  switch (op) {
  case OP_ADD: r = a + b; break;
  case OP_SUB: r = a - b; break;
  case OP_MUL: r = a * b; break;
  case OP_DIV:
    if (b == 0)
      return;
    r = integer ? trunc_ll(a / b) : a / b;
    break;
  case OP_MOD:
    if (b == 0)
      return;
    r = (double)((long long)a % (long long)b);
    break;
  case OP_LT: r = a < b; break;
  case OP_LE: r = a <= b; break;
  case OP_GT: r = a > b; break;
  case OP_GE: r = a >= b; break;
  case OP_EQ: r = a == b; break;
  case OP_NE: r = a != b; break;
  case OP_AND: r = a != 0 && b != 0; break;
  case OP_OR: r = a != 0 || b != 0; break;
  default: return;
  }
  set_host(F, in->dst[0], r);
}

/* the group of a collective has one rank: the runtime shares the tensor */
static bool one_rank(Mem *M, IrInst *in) {
  long long g = 1;
  for (int i = 0; i < in->naxes; i++)
    g *= M->sizes[in->axes[i]];
  return g == 1;
}

/* Whether a slice of a tensor of type t along dim is a contiguous block
 * of it, which rt_slice returns as a view: every dim before dim has one
 * element on this rank (the largest block's rank, as block_bytes). */
static bool slice_contiguous(Mem *M, const Type *t, long long dim) {
  if (t->kind != TY_TENSOR)
    return false;
  if (dim < 0)
    dim += t->ndim;
  for (int d = 0; d < dim && d < t->ndim; d++) {
    if (t->shape[d].unknown)
      return false;
    double g = size_value(M, t->shape[d]);
    if (g != (double)(long long)g)
      return false;
    long long ext = (long long)g;
    for (int k = 0; !t->local && k < MAX_MESH_AXES && t->spec[d][k] >= 0; k++)
      ext = chunk_ext(ext, M->sizes[t->spec[d][k]], 0);
    if (ext != 1)
      return false;
  }
  return true;
}

/* Whether the runtime returns a new reference to the operand's buffer (no
 * new bytes): rt_retain in rt_reinterpret, rt_convert between R and I, a
 * collective over a group of one rank (not to or from the stacked form),
 * rt_ppermute by a multiple of the group's size, rt_dropout with p = 0;
 * and a view of it (rt_view: the same storage, Root): rt_reshape,
 * rt_index, rt_slice of a contiguous block.  (A convert from R or I to P
 * shares on the group's first rank only; the report is of the others,
 * which make zeros.) */
static bool shares(Mem *M, Frame *F, IrInst *in) {
  double p;
  switch (in->op) {
  case IR_COPY: case IR_REINTERPRET: return true;
  case IR_RESHAPE: case IR_INDEX: return true;
  case IR_SLICE: return slice_contiguous(M, F->f->values[in->args[0]].type, IR_I(in, DIM));
  case IR_CONVERT: {
    bool rep = IR_I(in, SRC) == LTY_R || IR_I(in, SRC) == LTY_I;
    if (rep && (IR_I(in, DST) == LTY_R || IR_I(in, DST) == LTY_I))
      return true;
    /* to V (from R or I) and from V to P over a group of one rank: the
     * whole operand (not to or from the stacked form) */
    return ((rep && IR_I(in, DST) == LTY_V) || (IR_I(in, SRC) == LTY_V && IR_I(in, DST) == LTY_P)) &&
           one_rank(M, in) && IR_I(in, DIM) != IR_STACK;
  }
  case IR_ALL_REDUCE: return one_rank(M, in);
  case IR_ALL_GATHER: case IR_REDUCE_SCATTER: return one_rank(M, in) && IR_I(in, DIM) != IR_STACK;
  case IR_ALL_TO_ALL: return one_rank(M, in) && IR_I(in, SRC_DIM) != IR_STACK;
  case IR_PPERMUTE: {
    long long n = 1;
    for (int i = 0; i < in->naxes; i++)
      n *= M->sizes[in->axes[i]];
    return IR_I(in, SHIFT) % n == 0;
  }
  case IR_DROPOUT: return host(F, in->args[2], &p) && p == 0;
  default: return false;
  }
}

static size_t ptr_hash(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 2654435761u); }

static size_t ptr_probe(const void **keys, size_t cap, const void *key) {
  size_t i = ptr_hash(key) & (cap - 1);
  while (keys[i] && keys[i] != key)
    i = (i + 1) & (cap - 1);
  return i;
}

/* key's value; *fresh: key was absent and now has a zeroed value to fill */
static void *ptr_slot(Arena *a, PtrTable *t, const void *key, bool *fresh) {
  if (2 * (t->used + 1) > t->cap) { /* grow: entries placed again */
    size_t n = t->cap ? 2 * t->cap : t->first;
    const void **keys = arena_alloc(a, sizeof(void *) * n);
    char *vals = arena_alloc(a, t->vsize * n);
    for (size_t i = 0; i < t->cap; i++)
      if (t->keys[i]) {
        size_t k = ptr_probe(keys, n, t->keys[i]);
        keys[k] = t->keys[i];
        memcpy(vals + k * t->vsize, t->vals + i * t->vsize, t->vsize);
      }
    t->keys = keys;
    t->vals = vals;
    t->cap = n;
  }
  size_t i = ptr_probe(t->keys, t->cap, key);
  *fresh = !t->keys[i];
  if (*fresh) {
    t->keys[i] = key;
    t->used++;
  }
  return t->vals + i * t->vsize;
}

static FnUses *fn_uses(Mem *M, IrFn *f) {
  bool fresh;
  FnUses *u = ptr_slot(&M->c->arena, &M->uses, f, &fresh);
  if (fresh) {
    size_t nv = (size_t)f->nvalues + 1;
    *u = (FnUses){arena_alloc(&M->c->arena, sizeof(int) * nv), arena_alloc(&M->c->arena, sizeof(int) * nv),
                  arena_alloc(&M->c->arena, sizeof(int) * nv), 0};
    sched_count_uses(&f->body, u->nuses);
  }
  return u;
}

/* Whether value v (of the block being run) is freed right after the
 * instruction being run: emit_c.c's dies_here, for an all-reduce in place. */
static bool dies_here(Mem *M, int v) {
  for (int x = M->sched->free_after[M->cur_j]; x >= 0; x = M->sched->next_free[x])
    if (x == v)
      return true;
  return false;
}

static Type *type_with_dtype(Compiler *c, const Type *t, DType d) {
  Type *n = type_clone(c, t);
  n->dtype = d;
  return n;
}

static void run_at(Mem *M, Frame *F, const Schedule *S, int k);

static void run_block(Mem *M, Frame *F, IrBlock *b);

static void run_call(Mem *M, Frame *F, IrInst *in, IrFn *callee) {
  int n = in->nargs;
  int *ar = arena_alloc(&M->c->arena, sizeof(int) * (size_t)(n + 1));
  double *ah = arena_alloc(&M->c->arena, sizeof(double) * (size_t)(n + 1));
  char *ak = arena_alloc(&M->c->arena, (size_t)n + 1);
  for (int i = 0; i < n; i++) {
    ar[i] = F->root[in->args[i]];
    ak[i] = host(F, in->args[i], &ah[i]);
  }
  /* owned parameters (schedule.c): an argument that dies here is handed
   * over, any other gets a reference (the callee releases it) */
  for (int i = 0; i < n; i++) {
    if (!sched_param_owned(M->c, callee, i))
      continue;
    int twice = 0;
    for (int k = 0; k < n; k++)
      twice += in->args[k] == in->args[i];
    if (twice == 1 && dies_here(M, in->args[i]))
      F->root[in->args[i]] = -1;
    else
      retain(M, ar[i]);
  }
  Frame out = {0};
  run_fn(M, callee, ar, ah, ak, &out);
  for (int d = 0; d < in->ndst; d++) {
    int v = in->dst[d];
    int r = d < out.nret ? out.ret[d] : -1;
    if (v < 0) {
      release(M, r);
      continue;
    }
    F->root[v] = r;
    if (d < out.nret && out.rethk[d])
      set_host(F, v, out.reth[d]);
  }
}

/* value_and_grad: the forward on a fresh tape, the seed, the backward */
static void run_vjp(Mem *M, Frame *F, IrInst *in) {
  IrFn *w = in->callee;
  int n = in->nargs;
  int *ar = arena_alloc(&M->c->arena, sizeof(int) * (size_t)(n + 1));
  double *ah = arena_alloc(&M->c->arena, sizeof(double) * (size_t)(n + 1));
  char *ak = arena_alloc(&M->c->arena, (size_t)n + 1);
  for (int i = 0; i < n; i++) {
    ar[i] = F->root[in->args[i]];
    ak[i] = host(F, in->args[i], &ah[i]);
  }
  Frame fo = {0}, bo = {0};
  bool first = true; /* residuals per site: the first run of each differentiated call */
  for (int s = 0; s < M->nsites; s++)
    first &= M->sites[s].in != in;
  M->recording += first;
  int site = open_site(M, F->f, in);
  run_fn(M, w->vjp_fwd, ar, ah, ak, &fo);
  close_site(M, site);
  M->recording -= first;
  int value = fo.nret ? fo.ret[0] : -1;
  int seed = new_root(M, w->vjp_fwd->ret_types[0], NULL);
  int sr[1] = {seed};
  double sh[1] = {0};
  char sk[1] = {0};
  run_fn(M, w->vjp_bwd, sr, sh, sk, &bo);
  release(M, seed);
  for (int d = 0; d < in->ndst; d++) {
    int v = in->dst[d];
    int r = d == 0 ? value : d - 1 < bo.nret ? bo.ret[d - 1] : -1;
    if (v < 0)
      release(M, r);
    else
      F->root[v] = r;
  }
}

/* v gets root r's tensor (a new reference), or a new tensor of its type */
static void give(Mem *M, Frame *F, int v, int r) {
  if (v < 0)
    return;
  if (r >= 0) {
    F->root[v] = r;
    retain(M, r);
  } else {
    F->root[v] = new_root(M, F->f->values[v].type, F->f->values[v].hint);
  }
}

/* rt_binary_bwd and rt_sum_to_shape (runtime/kernels.c) hand the incoming
 * gradient on where it already has the operand's shape: + and - of one
 * shape give dy itself as da (and as db for +), a sum to dy's own shape is
 * dy; everything else is a new tensor. */
static void run_grad_to_shape(Mem *M, Frame *F, IrInst *in) {
  IrFn *f = F->f;
  const Type *dy = f->values[in->args[in->op == IR_SUM_TO_SHAPE ? 0 : 2]].type;
  int rdy = F->root[in->args[in->op == IR_SUM_TO_SHAPE ? 0 : 2]];
  if (in->op == IR_SUM_TO_SHAPE) {
    give(M, F, in->dst[0], sched_same_shape(f->values[in->args[1]].type, dy) ? rdy : -1);
    return;
  }
  const Type *a = f->values[in->args[0]].type, *b = f->values[in->args[1]].type;
  bool addsub = in->binop == BIN_ADD || in->binop == BIN_SUB;
  bool one_dtype = a->dtype == b->dtype && a->dtype == dy->dtype;
  if (one_dtype && sched_same_shape(a, b) && sched_same_shape(a, dy) && (addsub || in->binop == BIN_MUL)) {
    give(M, F, in->dst[0], addsub ? rdy : -1);
    give(M, F, in->ndst > 1 ? in->dst[1] : -1, in->binop == BIN_ADD ? rdy : -1);
    return;
  }
  if (addsub && one_dtype) { /* each gradient dy summed to its operand's shape */
    give(M, F, in->dst[0], sched_same_shape(a, dy) ? rdy : -1);
    if (in->ndst > 1 && in->dst[1] >= 0) {
      bool same = sched_same_shape(b, dy);
      if (in->binop == BIN_ADD) {
        give(M, F, in->dst[1], same ? rdy : -1);
      } else { /* the sum, then its negation */
        int s = same ? rdy : new_root(M, f->values[in->dst[1]].type, f->values[in->dst[1]].hint);
        if (same)
          retain(M, s);
        give(M, F, in->dst[1], -1);
        release(M, s);
      }
    }
    return;
  }
  for (int d = 0; d < in->ndst; d++)
    give(M, F, in->dst[d], -1);
}

static void run_inst(Mem *M, Frame *F, IrInst *in) {
  IrFn *f = F->f;
  M->at = in->span;
  M->at_fn = f;
  double x, y;
  switch (in->op) {
  case IR_HOST_CONST:
    set_host(F, in->dst[0], in->t->kind == TY_FLOAT ? in->f : (double)IR_I(in, VALUE));
    return;
  case IR_HOST_SIZE:
    set_host(F, in->dst[0], size_value(M, in->size));
    return;
  case IR_HOST_BINARY: host_binary(F, in); return;
  case IR_HOST_NEG:
    if (host(F, in->args[0], &x))
      set_host(F, in->dst[0], -x);
    return;
  case IR_HOST_NOT:
    if (host(F, in->args[0], &x))
      set_host(F, in->dst[0], x == 0);
    return;
  case IR_HOST_MATH:
    if (in->nargs == 2 && host(F, in->args[0], &x) && host(F, in->args[1], &y) &&
        (in->binop == BIN_MAX || in->binop == BIN_MIN)) {
      double r = in->binop == BIN_MAX ? (x >= y ? x : y) : (x <= y ? x : y);
      set_host(F, in->dst[0], F->f->values[in->dst[0]].type->kind == TY_INT ? trunc_ll(r) : r);
    }
    return;
  case IR_VAR_SET: {
    int s = (int)IR_I(in, SLOT), v = in->args[0];
    if (f->values[v].type->kind == TY_TENSOR) {
      int old = F->vroot[s];
      F->vroot[s] = F->root[v];
      retain(M, F->root[v]);
      release(M, old);
      if (f == M->p->main && M->slot_kind[s] != MEM_SLOT_TEMP)
        hold(M, s, F->root[v]);
    } else {
      F->vhk[s] = host(F, v, &F->vh[s]);
    }
    return;
  }
  case IR_VAR_GET: {
    int s = (int)IR_I(in, SLOT), v = in->dst[0];
    if (f->values[v].type->kind == TY_TENSOR) {
      F->root[v] = F->vroot[s];
      retain(M, F->vroot[s]);
    } else if (F->vhk[s]) {
      set_host(F, v, F->vh[s]);
    }
    return;
  }
  case IR_FOR: {
    double lo, hi;
    bool known = host(F, in->args[0], &lo) && host(F, in->args[1], &hi);
    if (!known) {
      M->unknown_loop = true;
      lo = 0;
      hi = 1;
    }
    long long n = hi > lo ? (long long)(hi - lo) : 0, runs = n;
    if (f == M->p->main && runs > 2) { /* the training loop: its steps repeat */
      runs = 2;
      M->capped_loop = true;
    }
    int site = open_site(M, f, in);
    for (long long k = 0; k < runs; k++) {
      if (in->ndst && in->dst[0] >= 0)
        set_host(F, in->dst[0], IR_I(in, BACKWARDS) ? hi - 1 - (double)k : lo + (double)k);
      run_block(M, F, &in->body);
    }
    close_site(M, site);
    return;
  }
  case IR_IF: {
    double cnd;
    bool k = host(F, in->args[0], &cnd);
    if (!k)
      M->guessed_if = true;
    run_block(M, F, k && cnd != 0 ? &in->body : &in->els);
    return;
  }
  case IR_RETURN:
    F->nret = in->nargs;
    F->ret = arena_alloc(&M->c->arena, sizeof(int) * (size_t)(in->nargs + 1));
    F->reth = arena_alloc(&M->c->arena, sizeof(double) * (size_t)(in->nargs + 1));
    F->rethk = arena_alloc(&M->c->arena, (size_t)in->nargs + 1);
    for (int i = 0; i < in->nargs; i++) {
      int v = in->args[i];
      F->ret[i] = f->values[v].type->kind == TY_TENSOR ? F->root[v] : -1;
      retain(M, F->ret[i]);
      F->rethk[i] = host(F, v, &F->reth[i]);
    }
    return;
  case IR_PUSH:
    for (int i = 0; i < in->nargs; i++) {
      int v = in->args[i];
      if (f->values[v].type->kind == TY_TENSOR) {
        tape_push(M, F->root[v], 0, false); /* the tape's reference: Root.tape */
      } else {
        tape_push(M, -1, F->hv[v], F->hk[v]);
      }
    }
    return;
  case IR_POP:
    for (int i = in->ndst - 1; i >= 0; i--) {
      Tape t = tape_pop(M);
      int v = in->dst[i];
      if (f->values[v].type->kind == TY_TENSOR)
        F->root[v] = t.root;
      else if (t.hk)
        set_host(F, v, t.h);
    }
    return;
  case IR_FREE:
    release(M, F->root[in->args[0]]);
    F->root[in->args[0]] = -1;
    return;
  case IR_INDEX_ADD_SLOT: { /* in place: the slot's tensor, unless shared (rt_index_add copies it) */
    int s = (int)IR_I(in, SLOT), r = F->vroot[s];
    if (r >= 0 && (M->roots[r].refs > 1 || M->roots[r].tape > 0)) {
      F->vroot[s] = new_root(M, f->vars[s].type, NULL);
      release(M, r);
    }
    return;
  }
  case IR_CALL: {
    int site = open_site(M, f, in);
    run_call(M, F, in, in->callee);
    if (IR_I(in, REMAT) && ir_uses_tape(f) && in->next && in->next->op == IR_PUSH) { /* remat: its arguments */
      run_inst(M, F, in->next);
      M->skip = in->next;
    }
    close_site(M, site);
    return;
  }
  case IR_VJP_CALL: run_vjp(M, F, in); return;
  default: break;
  }
  /* a tensor op: its results are new buffers, or share the operand's */
  if (ir_has(in->op, IRF_COMM) && in->wire != DT_NONE && in->wire != f->values[in->args[0]].type->dtype) {
    /* dtype= on the wire (emit_comm): the operand converted, the
     * collective in the wire dtype, the result converted back */
    Type *wt = type_with_dtype(M->c, f->values[in->args[0]].type, in->wire);
    Type *ot = type_with_dtype(M->c, f->values[in->dst[0]].type, in->wire);
    int win = new_root(M, wt, NULL), wout = shares(M, F, in) ? (retain(M, win), win) : new_root(M, ot, NULL);
    F->root[in->dst[0]] = new_root(M, f->values[in->dst[0]].type, f->values[in->dst[0]].hint);
    release(M, win);
    release(M, wout);
    return;
  }
  if ((in->op == IR_ALL_REDUCE || in->op == IR_CROSS_ENTROPY_VP_BWD) && dies_here(M, in->args[0]) &&
      F->root[in->args[0]] >= 0) {
    /* rt_all_reduce_reuse (and _start_reuse), rt_cross_entropy_vp_bwd_reuse:
     * in the operand's buffer when the block's reference is its only one */
    Root *o = &M->roots[F->root[in->args[0]]];
    if (o->refs == 1 && o->tape == 0) {
      F->root[in->dst[0]] = F->root[in->args[0]];
      retain(M, F->root[in->dst[0]]);
      return;
    }
  }
  if (in->op == IR_BINARY_BWD || in->op == IR_SUM_TO_SHAPE) {
    run_grad_to_shape(M, F, in);
    return;
  }
  if (in->op == IR_CONCAT_BWD && F->root[in->args[0]] >= 0 &&
      slice_contiguous(M, f->values[in->args[0]].type, IR_I(in, DIM))) { /* each gradient a view (rt_slice) */
    for (int d = 0; d < in->ndst; d++)
      give(M, F, in->dst[d], F->root[in->args[0]]);
    return;
  }
  bool share = in->nargs > 0 && shares(M, F, in);
  for (int d = 0; d < in->ndst; d++) {
    int v = in->dst[d];
    if (v < 0 || f->values[v].type->kind != TY_TENSOR)
      continue;
    if ((in->op == IR_ATTENTION || in->op == IR_CROSS_ENTROPY_VP) && d == 1 && fn_uses(M, f)->nuses[v] == 0)
      continue; /* the log-sum-exp is made only for a backward (emit_c.c) */
    if (share && d == 0 && F->root[in->args[0]] >= 0) {
      F->root[v] = F->root[in->args[0]];
      retain(M, F->root[v]);
    } else {
      F->root[v] = new_root(M, f->values[v].type, f->values[v].hint);
    }
  }
}

/* the members of a fused elementwise region (Schedule.out): a value read
 * only inside it is never stored; a stored one takes its donor's buffer
 * when rt_reuse would hand it over (the block's reference is its only
 * one), else a new one.  A GEMM with its epilogue makes its last result
 * only. */
static void run_region(Mem *M, Frame *F, const Schedule *S, int j) {
  IrFn *f = F->f;
  int end = S->run_end[j];
  M->at = S->insts[j]->span;
  M->at_fn = f;
  if (S->gemm[j]) {
    for (int k = j + 1; k < end; k++) /* a differentiated forward's saves between the matmul and the add */
      if (S->insts[k]->op == IR_PUSH)
        run_at(M, F, S, k);
    int v = S->insts[end - 1]->dst[0];
    F->root[v] = new_root(M, f->values[v].type, f->values[v].hint);
    return;
  }
  for (int k = j; k < end; k++) /* the host work and var reads, before the loop */
    if (sched_transparent(S->insts[k]))
      run_at(M, F, S, k);
  for (int k = j; k < end; k++) {
    IrInst *in = S->insts[k];
    if (sched_transparent(in))
      continue;
    int v = in->dst[0], d = S->out[k];
    if (d == SCHED_IN_REGISTER)
      continue;
    int r = d >= 0 ? F->root[d] : -1;
    if (r >= 0 && M->roots[r].refs == 1 && M->roots[r].tape == 0) {
      F->root[v] = r;
      retain(M, r);
    } else {
      F->root[v] = new_root(M, f->values[v].type, f->values[v].hint);
    }
  }
}

/* Runs instruction k of a scheduled block (a var read that the schedule
 * makes a move hands the var's reference over). */
static void run_at(Mem *M, Frame *F, const Schedule *S, int k) {
  IrInst *in = S->insts[k];
  if (in == M->skip)
    return;
  M->sched = S;
  M->cur_j = k;
  if (S->special[k] && in->op == IR_VAR_GET && F->f->values[in->dst[0]].type->kind == TY_TENSOR) {
    int s = (int)IR_I(in, SLOT);
    F->root[in->dst[0]] = F->vroot[s];
    F->vroot[s] = -1;
    return;
  }
  if (S->hscalar[k] >= 0 && in->op == IR_SCALAR) /* read as a host number (sched_host_div_grad) */
    return;
  if (S->acc[k] >= 0) { /* a gradient's sum done by a dX GEMM (sched_gemm_accumulate) */
    if (in->op == IR_ACCUM)
      return;
    /* the GEMM's other results as usual; its dX is not made: the sum is the
     * operand's buffer where the block's reference is its only one (else a
     * copy of it), and that reference is the sum's */
    IrInst *sum = S->insts[S->acc[k]];
    int gv = in->dst[0], p = sum->args[sum->args[0] == gv ? 1 : 0], r = F->root[p], sv = sum->dst[0];
    in->dst[0] = -1;
    run_inst(M, F, in);
    in->dst[0] = gv;
    if (r >= 0 && M->roots[r].refs == 1 && M->roots[r].tape == 0) {
      F->root[sv] = r;
    } else {
      F->root[sv] = new_root(M, F->f->values[sv].type, F->f->values[sv].hint);
      if (r >= 0)
        release(M, r);
    }
    F->root[p] = -1;
    return;
  }
  run_inst(M, F, in);
}

/* The block's schedule (schedule.c), made once per block the way emit_c.c
 * makes it: its order, regions and frees. */
static const Schedule *block_schedule(Mem *M, IrFn *f, IrBlock *b) {
  bool fresh;
  Schedule *S = ptr_slot(&M->c->arena, &M->scheds, b, &fresh);
  if (fresh) {
    FnUses *u = fn_uses(M, f);
    schedule_block(M->c, f, b, ++u->nblocks, u->nuses, u->lastuse, u->defblk, S);
  }
  return S;
}

/* A block under its schedule: regions as one, then the tensors that die
 * after each instruction released (emit_c.c's emit_block). */
static void run_block(Mem *M, Frame *F, IrBlock *b) {
  if (!b->head)
    return;
  const Schedule *S = block_schedule(M, F->f, b);
  for (int j = 0; j < S->n;) {
    int end = S->run_end[j] ? S->run_end[j] : j + 1, group = S->run_end[j] ? 0 : sched_multi_group(F->f, S, j);
    if (S->run_end[j]) {
      M->sched = S;
      M->cur_j = j;
      run_region(M, F, S, j);
    } else if (group) { /* one multi-tensor call: each member's work, then their frees */
      for (int k = j; k < group; k++)
        run_at(M, F, S, k);
      end = group;
    } else {
      run_at(M, F, S, j);
    }
    for (; j < end; j++) {
      for (int v = S->free_after[j]; v >= 0; v = S->next_free[v])
        if (F->root[v] >= 0) {
          release(M, F->root[v]);
          F->root[v] = -1;
        }
    }
  }
}

static void run_fn(Mem *M, IrFn *f, const int *arg_roots, const double *arg_h, const char *arg_hk, Frame *out) {
  Compiler *c = M->c;
  Frame F = {.f = f};
  size_t nv = (size_t)f->nvalues + 1, ns = (size_t)f->nvars + 1;
  F.root = arena_alloc(&c->arena, sizeof(int) * nv);
  F.hv = arena_alloc(&c->arena, sizeof(double) * nv);
  F.hk = arena_alloc(&c->arena, nv);
  F.vroot = arena_alloc(&c->arena, sizeof(int) * ns);
  F.vh = arena_alloc(&c->arena, sizeof(double) * ns);
  F.vhk = arena_alloc(&c->arena, ns);
  for (size_t v = 0; v < nv; v++)
    F.root[v] = -1;
  for (size_t s = 0; s < ns; s++)
    F.vroot[s] = -1;
  for (int i = 0; i < f->nparams; i++) {
    int v = f->params[i];
    if (f->values[v].type->kind == TY_TENSOR)
      F.root[v] = arg_roots ? arg_roots[i] : -1;
    else if (arg_hk && arg_hk[i])
      set_host(&F, v, arg_h[i]);
  }
  M->depth++;
  if (M->depth < 200) /* a recursive program: not followed past this depth */
    run_block(M, &F, &f->body);
  M->depth--;
  for (int s = 0; s < f->nvars; s++) /* the function's var slots are freed at its end */
    if (F.vroot[s] >= 0 && !(f == M->p->main))
      release(M, F.vroot[s]);
  *out = F;
}

/* ---- printing */

static const char *where(Mem *M, Span sp) {
  if (!sp.file)
    return "<generated>";
  int line, col;
  source_position(M->c, sp, &line, &col);
  return arena_sprintf(&M->c->arena, "%s:%d", source_file(M->c, sp.file)->path, line);
}

static const char *fn_role(Mem *M, IrFn *f) {
  const char *name = f && f->fn ? f->fn->name : f ? f->cname : "?";
  const char *role = !f ? "" : f->role == IRFN_BACKWARD ? " (backward)" : f->role == IRFN_FORWARD ? " (forward)" : "";
  return arena_sprintf(&M->c->arena, "%s%s", name, role);
}

/* The formula's value on the mesh of M. */
static double poly_value(Mem *M, const Poly *p) {
  double v = 0;
  for (int i = 0; i < p->n; i++)
    v += size_value(M, p->t[i]);
  return v;
}

/* The abstract run of p's main on the mesh `sizes` (0: the declared size,
 * 1 when undeclared). */
static void mem_run(Compiler *c, IrProgram *p, const long long *sizes, Mem *M) {
  *M = (Mem){.c = c, .p = p, .m = p->mesh, .scheds = {.vsize = sizeof(Schedule), .first = 256},
             .uses = {.vsize = sizeof(FnUses), .first = 64}};
  for (int a = 0; a < p->mesh->naxes; a++)
    M->sizes[a] = sizes && sizes[a] > 0 ? sizes[a] : p->mesh->axes[a].size > 0 ? p->mesh->axes[a].size : 1;
  M->slot_kind = mem_slot_kinds(c, p->main);
  M->held = arena_alloc(&c->arena, sizeof(int) * (size_t)(p->main->nvars + 1));
  for (int s = 0; s <= p->main->nvars; s++)
    M->held[s] = -1;
  Frame F;
  run_fn(M, p->main, NULL, NULL, NULL, &F);
}

/* The formulas of a report: the components at the total's high-water and
 * the total, each component's own high-water, each site's residuals.  A
 * formula is checked on other meshes (below): mask has the axes whose size
 * it holds for only. */
enum { F_AT = 0, F_TOTAL = NCOMP, F_OWN = NCOMP + 1, F_SITES = 2 * NCOMP + 1 };

typedef struct Formulas {
  int n;
  const Poly **poly;
  double *value;
  unsigned *mask;
} Formulas;

static Formulas formulas_of(Mem *M, const Poly *total) {
  Formulas fs = {.n = F_SITES + M->nsites};
  fs.poly = arena_alloc(&M->c->arena, sizeof(Poly *) * (size_t)fs.n);
  fs.value = arena_alloc(&M->c->arena, sizeof(double) * (size_t)fs.n);
  fs.mask = arena_alloc(&M->c->arena, sizeof(unsigned) * (size_t)fs.n);
  for (int k = 0; k < NCOMP; k++) {
    fs.poly[F_AT + k] = &M->pat_peak[k];
    fs.value[F_AT + k] = M->at_peak[k];
    fs.poly[F_OWN + k] = &M->ppeak[k];
    fs.value[F_OWN + k] = M->peak[k];
  }
  fs.poly[F_TOTAL] = total;
  fs.value[F_TOTAL] = M->peak_total;
  for (int s = 0; s < M->nsites; s++) {
    fs.poly[F_SITES + s] = &M->sites[s].sym;
    fs.value[F_SITES + s] = M->sites[s].bytes;
  }
  return fs;
}

/* the components in the order the report prints them */
static const int order[] = {C_PARAM, C_OPT, C_RESID, C_TEMP};

static Poly total_of(Mem *M) {
  Poly total = {0};
  for (int i = 0; i < NCOMP; i++)
    for (int j = 0; j < M->pat_peak[order[i]].n; j++)
      poly_add(M->c, &total, M->pat_peak[order[i]].t[j], 1);
  return total;
}

/* Each formula of the report of M evaluated on other meshes against the
 * report there: every combination of the axes' sizes at 1, 2, 4, 8, here
 * and twice here (where the high-water falls can depend on several sizes
 * at once), on the meshes the program can run on; with more than
 * GRID_MAX such meshes, those differing from here on at most two axes.
 * A formula that differs gets the axes that differ in its mask. *tried:
 * the meshes compared. */
enum { NCAND = 6, GRID_MAX = 1296 };
static void check_formulas(Compiler *c, IrProgram *p, Mem *M, Formulas *fs, int *tried) {
  *tried = 0;
  int na = p->mesh->naxes;
  long long cand[MAX_MESH_AXES][NCAND];
  int ncand[MAX_MESH_AXES];
  double grid = 1;
  for (int a = 0; a < na; a++) { /* here first, then the others once each */
    long long all[NCAND] = {M->sizes[a], 1, 2, 4, 8, 2 * M->sizes[a]};
    ncand[a] = 0;
    for (int ci = 0; ci < NCAND; ci++) {
      bool seen = false;
      for (int cj = 0; cj < ncand[a]; cj++)
        seen |= cand[a][cj] == all[ci];
      if (!seen)
        cand[a][ncand[a]++] = all[ci];
    }
    grid *= ncand[a];
  }
  int pick[MAX_MESH_AXES] = {0};
  for (;;) { /* the odometer over the candidates; pick 0 is here */
    int a = 0;
    while (a < na && ++pick[a] == ncand[a])
      pick[a++] = 0;
    if (a == na)
      break;
    unsigned differ = 0;
    int ndiff = 0;
    long long sizes[MAX_MESH_AXES];
    memcpy(sizes, M->sizes, sizeof sizes);
    for (int b = 0; b < na; b++)
      if (pick[b]) {
        sizes[b] = cand[b][pick[b]];
        differ |= 1u << b;
        ndiff++;
      }
    if (grid > GRID_MAX && ndiff > 2)
      continue;
    Mem *Q = arena_alloc(&c->arena, sizeof(Mem));
    mem_run(c, p, sizes, Q);
    if (Q->uneven)
      continue; /* the formulas count equal blocks */
    ++*tried;
    Poly qtotal = total_of(Q);
    Formulas qs = formulas_of(Q, &qtotal);
    /* M's formulas at Q's sizes */
    Mem at = *M;
    memcpy(at.sizes, sizes, sizeof at.sizes);
    for (int i = 0; i < fs->n; i++) {
      double want;
      if (i < F_SITES) {
        want = qs.value[i];
      } else {
        int s = i - F_SITES, q = 0;
        while (q < Q->nsites && !(Q->sites[q].in == M->sites[s].in && Q->sites[q].f == M->sites[s].f))
          q++;
        if (q == Q->nsites) { /* the site is not run there */
          fs->mask[i] |= differ;
          continue;
        }
        want = Q->sites[q].bytes;
      }
      double got = poly_value(&at, fs->poly[i]);
      if (got - want > 0.5 || want - got > 0.5)
        fs->mask[i] |= differ;
    }
  }
}

/* "  [holds for n_pp=4]": the sizes a formula holds for only */
static const char *holds_for(Mem *M, unsigned mask) {
  if (!mask)
    return "";
  StrBuf sb;
  sb_init(&sb, &M->c->arena);
  sb_puts(&sb, "  [holds for");
  const char *sep = " ";
  for (int a = 0; a < M->m->naxes; a++)
    if (mask & (1u << a)) {
      sb_printf(&sb, "%sn_%s=%lld", sep, M->m->axes[a].name, M->sizes[a]);
      sep = ", ";
    }
  sb_putc(&sb, ']');
  return sb.data;
}

static void line(Mem *M, FILE *out, const char *label, double v, const Poly *p, unsigned mask) {
  fprintf(out, "  %-16s %14.0f B  = %s%s\n", label, v, poly_text(M->c, M->m, p), holds_for(M, mask));
}

/* "uneven shards: ..." (SPEC 4): the tensors the mesh splits unevenly are
 * counted at the largest rank's block; the first one named. */
static void report_uneven(Mem *M, FILE *out) {
  Compiler *c = M->c;
  StrBuf axes;
  sb_init(&axes, &c->arena);
  if (M->bad_naxes == 1)
    sb_printf(&axes, "axis '%s'", M->m->axes[M->bad_axes[0]].name);
  else
    for (int j = 0; j < M->bad_naxes; j++)
      sb_printf(&axes, "%s%s", j ? ", " : "axes (", M->m->axes[M->bad_axes[j]].name);
  if (M->bad_naxes > 1)
    sb_putc(&axes, ')');
  const char *name = M->bad_name ? arena_sprintf(&c->arena, "'%s'", M->bad_name) : "a tensor";
  fprintf(out, "uneven shards (SPEC 4, torch.chunk's split): %d tensor%s ha%s a dim this mesh does not divide, "
               "first %s at %s, dim %d (size %lld) over %s (size %lld): blocks of %lld down to %lld; the bytes are "
               "the largest rank's, the formulas count equal blocks\n",
          M->uneven, M->uneven == 1 ? "" : "s", M->uneven == 1 ? "s" : "ve", name, where(M, M->bad_at), M->bad_dim,
          M->bad_size, axes.data, M->bad_group, M->bad_max, M->bad_min);
}

bool memory_report(Compiler *c, IrProgram *p, FILE *out, const char *source_path, const long long *sizes) {
  if (!p->main) {
    fprintf(out, "%s has no `fn main()`: the memory report follows a program's run\n", source_path);
    return true;
  }
  Mem M;
  mem_run(c, p, sizes, &M);
  Poly total = total_of(&M);
  Formulas fs = formulas_of(&M, &total);
  int tried;
  check_formulas(c, p, &M, &fs, &tried);

  fprintf(out, "memory of %s, per rank, on the mesh", source_path);
  for (int a = 0; a < p->mesh->naxes; a++)
    fprintf(out, "%s %s=%lld", a ? "," : "", p->mesh->axes[a].name, M.sizes[a]);
  fprintf(out, " (n_AXIS in the formulas): live tensor bytes as requested\n");
  if (M.uneven)
    report_uneven(&M, out);
  fprintf(out, "high-water of the total: %.0f B, in %s at %s\n", M.peak_total, fn_role(&M, M.peak_fn),
          where(&M, M.peak_span));
  for (int i = 0; i < NCOMP; i++)
    line(&M, out, comp_name[order[i]], M.at_peak[order[i]], &M.pat_peak[order[i]], fs.mask[F_AT + order[i]]);
  line(&M, out, "total", M.peak_total, &total, fs.mask[F_TOTAL]);
  fprintf(out, "each component's own high-water (as --profile prints it):\n");
  for (int i = 0; i < NCOMP; i++)
    line(&M, out, comp_name[order[i]], M.peak[order[i]], &M.ppeak[order[i]], fs.mask[F_OWN + order[i]]);
  if (M.nsites) {
    fprintf(out, "residuals the backward keeps, per differentiated call, call and loop of its forward "
                 "(all runs; a recomputed call keeps its arguments):\n");
    for (int s = 0; s < M.nsites; s++) {
      Site *st = &M.sites[s];
      const char *what;
      if (st->in->op == IR_VJP_CALL)
        what = arena_sprintf(&c->arena, "value_and_grad(%s)", st->in->callee->fn ? st->in->callee->fn->name : "?");
      else if (st->in->op == IR_FOR)
        what = arena_sprintf(&c->arena, "for %s", st->f->values[st->in->dst[0]].hint ? st->f->values[st->in->dst[0]].hint
                                                                                          : "loop");
      else
        what = arena_sprintf(&c->arena, "%s%s", IR_I(st->in, REMAT) ? "remat " : "",
                             st->in->callee && st->in->callee->fn ? st->in->callee->fn->name : "?");
      const char *lab = arena_sprintf(&c->arena, "%*s%s (%s)", 2 * st->depth, "", what, where(&M, st->in->span));
      fprintf(out, "  %-52s %6.0fx %12.0f B  = %s%s\n", lab, st->count, st->bytes, poly_text(c, M.m, &st->sym),
              holds_for(&M, fs.mask[F_SITES + s]));
    }
  }
  if (p->mesh->naxes)
    fprintf(out, "formulas: each holds on the %d other meshes tried (the axes' sizes at 1, 2, 4, 8, here and twice here, "
                 "in every combination where the mesh divides every sharded dim), but for the sizes named in "
                 "[holds for ...]\n", tried);
  if (M.capped_loop || M.guessed_if || M.unknown_loop)
    fprintf(out, "assumed:%s%s%s\n", M.capped_loop ? " main's loops run twice (later steps repeat them);" : "",
            M.guessed_if ? " conditions not known before the run are false;" : "",
            M.unknown_loop ? " loops with bounds not known before the run run once;" : "");
  fprintf(out, "not seen here: buffers a runtime kernel makes and frees within one call (the runtime counts "
               "them; docs/memory.md)\n");
  return true;
}
