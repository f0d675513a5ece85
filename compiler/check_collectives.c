/* check_collectives.c: the typing rules of collectives and casts (SPEC
 * section 6).  The seed's state-transition table (collectives.def) says
 * which src -> dst each op allows and which need expert=true; one function
 * computes how a transition changes the shape and partition spec. */
#include <string.h>

#include "check.h"
#include "redistribute.h"
#include "transitions.h"

/* The three forms a src/dst can take: a whole value (R I P), the stacked
 * V form, or S(i). */
typedef enum { FORM_WHOLE, FORM_STACK, FORM_SHARD } Form;

static Form form_of(LType lt) {
  return lt.kind == LT_S ? FORM_SHARD : lt.kind == LT_V ? FORM_STACK : FORM_WHOLE;
}

typedef enum { NO, YES, EXPERT } Allowed;

/* Whether op allows src -> dst over R I V P (V covers S(i)): the seed's
 * table (collectives.def); redistribute allows whatever one of its rows
 * does, expert or not. */
static Allowed allowed(Builtin op, LTypeKind s, LTypeKind d) {
  if (op == BI_REDISTRIBUTE)
    return transition_redistribute(s, d) ? YES : NO;
  const Transition *t = transition(op, s, d);
  return !t ? NO : t->expert ? EXPERT : YES;
}

/* One sentence on why an op does not make a transition, or why it is
 * gated behind expert=true. */
static const char *transition_why(Builtin op, LTypeKind s, LTypeKind d) {
  if (op == BI_REINTERPRET && s == LT_R && d == LT_P)
    return "reinterpret(R, P) keeps every rank's copy as a term of the sum, so the value becomes the axis size times larger";
  if (op == BI_REINTERPRET && s == LT_R && d == LT_V)
    return "reinterpret(R, V) keeps the whole copy on every rank, so a later gather or sum sees it once per rank";
  if (s == LT_R && d == LT_I)
    return "R -> I drops the pending sum of the gradient: its backward is convert(I, P), which keeps one rank's gradient";
  if (op == BI_CONVERT && s == LT_I && d == LT_P)
    return "convert(I, P) zero-fills all ranks but one; its backward, reinterpret(R, I), is expert-only too";
  if (op == BI_CONVERT && s == LT_V && d == LT_P)
    return "convert(V, P) zero-fills each rank's block into the whole value; it exists as the backward of convert(R, V)";
  if (s == d && s != LT_V)
    return "the value already has that type";
  if (op == BI_ALL_GATHER)
    return "all_gather assembles the whole value on every rank: it goes from V to R or I, or in local code to V "
           "(the whole value, typed V), never to S(i)";
  if (op == BI_ALL_REDUCE)
    return "all_reduce finishes a pending sum on every rank: it goes from P (or V) to R or I";
  if (op == BI_REDUCE_SCATTER)
    return "reduce_scatter finishes a pending sum and keeps one block per rank: it goes from P (or V) to V";
  if (op == BI_ALL_TO_ALL)
    return "all_to_all exchanges blocks between ranks: it goes from V to V";
  if (d == LT_P && (s == LT_R || s == LT_I))
    return "P is made from R with convert (keep the value) or reinterpret (sum the copies)";
  if (s == LT_P)
    return "a pending sum (P) is only resolved by communication: all_reduce or reduce_scatter";
  if (s == LT_V && (d == LT_R || d == LT_I))
    return "values that differ per rank become the same only by communication: all_gather";
  if (d == LT_V)
    return "R and I become V by convert (take this rank's block) or reinterpret (keep the copy)";
  return "the seed's state-transition table has no such entry for this op";
}

/* What to write instead of an expert-only transition, as a help line;
 * *code is the call that replaces this one, when the help has one. */
static const char *expert_alternative(Checker *k, Builtin op, LType src, LType dst, const char *x, const char *ax,
                                      const char **code) {
  Compiler *c = k->c;
  LTypeKind s = ltype_base(src), d = ltype_base(dst);
  if (s == LT_R && d == LT_P) {
    *code = arena_sprintf(&c->arena, "convert(%s, %s, src=R, dst=P)", x, ax);
    return arena_sprintf(&c->arena, "to keep the value (reinterpret multiplies it by the size of '%s'): %s", ax, *code);
  }
  if (s == LT_R && d == LT_V) {
    *code = arena_sprintf(&c->arena, "convert(%s, %s, src=R, dst=%s)", x, ax, dst.kind == LT_S ? ltype_text(c, dst) : "S(0)");
    return arena_sprintf(&c->arena, "to shard a replicated value: %s", *code);
  }
  if (s == LT_R && d == LT_I)
    return arena_sprintf(&c->arena, "produce the value as I where it is reduced, e.g. all_reduce(y, %s, src=P, dst=I) rather than dst=R; "
                         "for a parameter, keep it I and use convert(w, %s, src=I, dst=R) where it is computed with", ax, ax);
  if (s == LT_I && d == LT_P)
    return *code = arena_sprintf(&c->arena, "convert(convert(%s, %s, src=I, dst=R), %s, src=R, dst=P)", x, ax, ax);
  if (s == LT_V && d == LT_P && op == BI_CONVERT)
    return arena_sprintf(&c->arena, "to sum the parts: reinterpret(%s, %s, src=%s, dst=P); to assemble the value: all_gather(%s, %s, src=%s, dst=R)",
                         x, ax, ltype_text(c, src), x, ax, src.kind == LT_S ? ltype_text(c, src) : "V");
  return "";
}

/* A help line whose code replaces the whole call (help_fix), when that loses
 * nothing: the code was built from the value's exact text, and the call has
 * no arguments but the value, the axes, src=, dst= and `also` (which the
 * code writes itself).  Otherwise a plain help line. */
static void help_call(Checker *k, Expr *call, Expr *x, const char *also, const char *code, const char *msg) {
  int npos = 0;
  bool plain = src_exact(k, x);
  for (Arg *a = call->args; a; a = a->next) {
    if (!a->name)
      npos++;
    else if (strcmp(a->name, "src") && strcmp(a->name, "dst") && !(also && strcmp(a->name, also) == 0))
      plain = false;
  }
  help_fix(k->c, call->span, plain && npos == 2 ? code : NULL, "%s", msg);
}

static bool get_ltype(Checker *k, Expr *call, const char *name, LType *out, bool *given) {
  Arg *a = call_named(k, call, name);
  *given = a != NULL;
  if (!a)
    return true;
  Type *t = check_expr(k, a->value);
  if (t->kind != TY_LTYPE) {
    if (t->kind != TY_ERROR)
      check_error(k, a->value->span, "%s= takes R, I, V, P or S(dim)", name);
    return false;
  }
  *out = t->ltv;
  return true;
}

static Size axes_size(Checker *k, const Type *axes) {
  Size n = size_int(1);
  for (int i = 0; i < axes->naxes; i++)
    n = size_mul(n, size_axis(axes->axes[i]));
  (void)k;
  return n;
}

static const char *axes_text(Checker *k, const Type *axes) {
  if (axes->naxes == 1)
    return k->mesh->axes[axes->axes[0]].name;
  StrBuf sb;
  sb_init(&sb, &k->c->arena);
  sb_putc(&sb, '(');
  for (int i = 0; i < axes->naxes; i++)
    sb_printf(&sb, "%s%s", i ? ", " : "", k->mesh->axes[axes->axes[i]].name);
  sb_putc(&sb, ')');
  return sb.data;
}

/* Whether dim d's spec ends with exactly the listed axes, in order: only
 * the minor-most axes of a dim can be gathered on their own. */
static bool spec_ends_with(const Type *t, int d, const Type *axes) {
  int n = 0;
  while (n < MAX_MESH_AXES && t->spec[d][n] >= 0)
    n++;
  if (n < axes->naxes)
    return false;
  for (int i = 0; i < axes->naxes; i++)
    if (t->spec[d][n - axes->naxes + i] != axes->axes[i])
      return false;
  return true;
}

static bool resolve_sdim(Checker *k, Span sp, LType *lt, int ndim) {
  if (lt->kind != LT_S)
    return true;
  int d = lt->sdim < 0 ? lt->sdim + ndim : lt->sdim;
  if (d < 0 || d >= ndim) {
    check_error(k, sp, "S(%d) is out of range for a tensor with %d dim%s", lt->sdim, ndim, ndim == 1 ? "" : "s");
    return false;
  }
  lt->sdim = d;
  return true;
}

/* Uneven shards (SPEC 4): reinterpret(x, a, src=S(d), ...) in global code
 * makes each rank's block of dim d the whole value, of one size on every
 * rank only when the blocks are equal. Where the size and the axes'
 * declared sizes show they are not, an error; otherwise the generated code
 * checks it when it runs (emit_c.c, rt_check_even_at). */
static bool even_blocks(Checker *k, Expr *call, const Type *x, int d, const Type *axes) {
  long long n, g = 1;
  if (!size_is_int(x->shape[d], &n))
    return true;
  for (int i = 0; i < axes->naxes; i++) {
    long long s = k->mesh->axes[axes->axes[i]].size;
    if (s <= 0)
      return true;
    g *= s;
  }
  if (n % g == 0)
    return true;
  const char *as = axes_text(k, axes);
  check_error(k, call->span, "reinterpret(src=S(%d)) makes each block of dim %d the whole value, but %s (%lld ranks) "
              "splits its %lld rows unevenly", d, d, as, g, n);
  note_at(k->c, (Span){0, 0, 0}, "torch.chunk's split (SPEC 4): the blocks differ in size, so the value would have a "
          "different shape on each rank");
  help(k->c, "gather the dim first: all_gather(%s, %s, src=S(%d), dst=R), or pad it to a multiple of %lld",
       src_text(k, call_arg(call, 0)->value), as, d, g);
  return false;
}

/* The shape and spec after moving `x` on `axes` from src to dst. */
static Type *relayout(Checker *k, Expr *call, Builtin op, const Type *x, const Type *axes, LType src, LType dst,
                      bool global) {
  Type *r = type_clone(k->c, x);
  Size n = axes_size(k, axes);
  Form fs = form_of(src), fd = form_of(dst);
  if (op == BI_REINTERPRET) {
    /* A no-op on the local value.  In global code an S(d) side changes
     * the global size of dim d: each rank's block becomes the whole value
     * (src) or the whole value becomes a block (dst). */
    if (global && fs == FORM_SHARD) {
      if (!even_blocks(k, call, x, src.sdim, axes))
        return type_error();
      for (int i = 0; i < axes->naxes; i++)
        type_spec_remove(r, axes->axes[i]);
      r->shape[src.sdim] = size_div(r->shape[src.sdim], n);
    }
    if (global && fd == FORM_SHARD) {
      r->shape[dst.sdim] = size_mul(r->shape[dst.sdim], n);
      for (int i = 0; i < axes->naxes; i++)
        type_spec_add(r, dst.sdim, axes->axes[i]);
    }
    for (int i = 0; i < axes->naxes; i++)
      r->lt[axes->axes[i]] = ltype_base(dst);
    return r;
  }
  if (op == BI_ALL_REDUCE || op == BI_REDUCE_SCATTER)
    fs = FORM_WHOLE; /* src=V is read as P: a whole value per rank */
  if (op == BI_ALL_GATHER)
    fd = FORM_WHOLE; /* dst=V: the whole value on every rank, typed V */
  if (global && (fs == FORM_STACK || fd == FORM_STACK) && op != BI_REINTERPRET) {
    check_error(k, call->span, "the V (stacked) form of %s() is local-only: in global code write S(dim)",
                builtin_name[op]);
    help(k->c, "use src=/dst=S(i), or call it inside local_map");
    return type_error();
  }
  if ((fs == FORM_STACK && fd == FORM_SHARD) || (fs == FORM_SHARD && fd == FORM_STACK)) {
    check_error(k, call->span, "%s() cannot mix the stacked V form with S(i)", builtin_name[op]);
    help(k->c, "write both sides as S(i) (concatenate and split dims) or both as V (stack and unstack dim 0)");
    return type_error();
  }
  if (global && op == BI_ALL_TO_ALL && fs == FORM_SHARD && fd == FORM_SHARD && src.sdim == dst.sdim) {
    /* globally the identity, but each rank would still split its block and
     * exchange the pieces, reordering the dim */
    check_error(k, call->span, "all_to_all from S(%d) to S(%d) moves nothing in global code, yet it would "
                "reorder dim %d across ranks", src.sdim, dst.sdim, src.sdim);
    help(k->c, "drop the all_to_all, or move the shard to another dim: dst=S(j)");
    return type_error();
  }
  if (fs == FORM_SHARD) {
    int d = src.sdim;
    if (global) {
      for (int i = 0; i < axes->naxes; i++)
        type_spec_remove(r, axes->axes[i]);
    } else {
      r->shape[d] = size_mul(r->shape[d], n);
    }
    (void)d;
  } else if (fs == FORM_STACK && fd != FORM_STACK) {
    if (r->ndim == MAX_DIMS) {
      check_error(k, call->span, "too many dims");
      return type_error();
    }
    for (int d = r->ndim; d > 0; d--) {
      r->shape[d] = r->shape[d - 1];
      memcpy(r->spec[d], r->spec[d - 1], sizeof r->spec[d]);
    }
    r->shape[0] = n;
    memset(r->spec[0], -1, sizeof r->spec[0]);
    r->ndim++;
  }
  if (fd == FORM_SHARD) {
    int d = dst.sdim;
    if (global) {
      for (int i = 0; i < axes->naxes; i++)
        type_spec_add(r, d, axes->axes[i]);
    } else {
      r->shape[d] = size_div(r->shape[d], n);
    }
  } else if (fd == FORM_STACK && fs != FORM_STACK) {
    if (r->ndim == 0 || !size_eq(r->shape[0], n)) {
      check_error(k, call->span, "dst=V takes the leading dim apart, one block per rank, so it must have size %s, not %s",
                  size_str(k->c, k->mesh, n), r->ndim ? size_str(k->c, k->mesh, r->shape[0]) : "(no dims)");
      help(k->c, "to split another dim use dst=S(i)");
      return type_error();
    }
    for (int d = 0; d + 1 < r->ndim; d++) {
      r->shape[d] = r->shape[d + 1];
      memcpy(r->spec[d], r->spec[d + 1], sizeof r->spec[d]);
    }
    r->ndim--;
    memset(r->spec[r->ndim], -1, sizeof r->spec[0]);
  } else if (fd == FORM_STACK && fs == FORM_STACK && op == BI_ALL_TO_ALL) {
    if (r->ndim == 0 || !size_eq(r->shape[0], n)) {
      check_error(k, call->span, "all_to_all with V exchanges blocks of the leading dim, which must have size %s",
                  size_str(k->c, k->mesh, n));
      help(k->c, "exchange blocks of another dim with src=S(i), dst=S(j)");
      return type_error();
    }
  }
  for (int i = 0; i < axes->naxes; i++)
    r->lt[axes->axes[i]] = ltype_base(dst);
  return r;
}

static Type *check_redistribute_to(Checker *k, Expr *call, Type *x);

/* ---- dtype= and bwd_dtype= (SPEC 13): the dtype on the wire */

/* Whether the backward of op from s to d sums over the axes (the table's
 * backward is an all-reduce or a reduce-scatter: all_gather and all_reduce
 * to R, convert/reinterpret I -> R, reinterpret I -> V).
 * redistribute(x, axes, ...) is the one collective it lowers to. */
static bool bwd_reduces(Builtin op, LTypeKind s, LTypeKind d) {
  return transition_bwd_reduces(op == BI_REDISTRIBUTE ? transition_redistribute(s, d) : transition(op, s, d));
}

static int precision(DType dt) { return dt == DT_BF16 ? 1 : dt == DT_F32 ? 2 : dt == DT_F64 ? 3 : 0; }

/* The dtype named by `name=`, DT_NONE if not given; false on an error. */
static bool wire_arg(Checker *k, Expr *call, const char *name, DType *out) {
  Arg *a = call_named(k, call, name);
  *out = DT_NONE;
  if (!a)
    return true;
  if (a->value->kind != EX_TYPE || a->value->type->has_dims || a->value->type->entries ||
      a->value->type->dtype == DT_I32) {
    check_error(k, a->value->span, "%s= takes a float dtype: bf16, f32 or f64", name);
    help(k->c, "for example %s=bf16", name);
    return false;
  }
  *out = a->value->type->dtype;
  return true;
}

/* The checker's rule: a dtype= that casts down on a collective whose
 * backward is a reduction needs bwd_dtype= written, so that the precision
 * of the gradient's sum is a decision, not a default. */
static bool check_wire_dtypes(Checker *k, Expr *call, Builtin op, const Type *x, bool reduces, const char *bwd_what) {
  DType fwd, bwd;
  bool fwd_ok = wire_arg(k, call, "dtype", &fwd);
  bool bwd_ok = wire_arg(k, call, "bwd_dtype", &bwd); /* both, so both are reported */
  if (!fwd_ok || !bwd_ok)
    return false;
  if ((fwd || bwd) && x->dtype == DT_I32) {
    Arg *a = call_named(k, call, fwd ? "dtype" : "bwd_dtype");
    check_error(k, a->value->span, "%s= converts a float tensor on the wire, but '%s' is i32",
                fwd ? "dtype" : "bwd_dtype", src_text(k, call_arg(call, 0)->value));
    help(k->c, "drop the argument: i32 values travel as they are");
    return false;
  }
  if (fwd && !bwd && reduces && precision(fwd) < precision(x->dtype)) {
    const char *xs = src_text(k, call_arg(call, 0)->value), *cs = src_text(k, call);
    size_t n = strlen(cs);
    while (n > 0 && cs[n - 1] != ')')
      n--;
    check_error(k, call_named(k, call, "dtype")->value->span,
                "dtype=%s casts '%s' (%s) down, and the backward of %s() is %s: write bwd_dtype= to say in which "
                "dtype the gradients are summed", dtype_name(fwd), xs, dtype_name(x->dtype), builtin_name[op], bwd_what);
    note_at(k->c, (Span){0, 0, 0}, "'%s' is %s; without bwd_dtype= the backward would sum in %s too", xs, ck_type(k, x),
            dtype_name(fwd));
    help(k->c, "%.*s, bwd_dtype=%s)", (int)(n ? n - 1 : 0), cs, dtype_name(x->dtype));
    return false;
  }
  return true;
}

/* reinterpret(x, axes, src=I, dst=V) in global code: needs expert=true.
 * In global code a V value without a layout is a stack of one value per
 * rank, as many as the axis has; claiming that the copies of an I value
 * differ lets a later sum (all_reduce(src=V)) count the value once per rank,
 * so the result would depend on the mesh (x on one rank, 2x on two).  In
 * local code (local_map, local fn) it is JAX's pvary and stays plain. */
static bool check_global_pvary(Checker *k, Expr *call, Expr *x, const Type *axes, LType dst) {
  const char *xs = src_text(k, x), *as = axes_text(k, axes);
  check_error(k, call->span, "reinterpret(I -> %s) in global code claims the copies of '%s' on %s differ",
              ltype_text(k->c, dst), xs, as);
  note_at(k->c, (Span){0, 0, 0},
          "a V value without a layout is one value per rank: a later sum or gather would see '%s' once per rank, "
          "so the result would depend on the mesh", xs);
  const char *code = arena_sprintf(&k->c->arena, "convert(%s, %s, src=I, dst=S(0))", xs, as);
  help_call(k, call, x, NULL, code, arena_sprintf(&k->c->arena, "to shard the value: %s", code));
  help(k->c, "as JAX's pvary, write it inside local_map (...) over (%s), or if it is meant: "
       "reinterpret(%s, %s, src=I, dst=%s, expert=true)", as, xs, as, ltype_text(k->c, dst));
  return false;
}

/* all_reduce(x, axes, src=P, op=max|min|avg): rejected.  A P value is the
 * sum of its per-rank parts, and the parts are not the value: how it is
 * split depends on the mesh (a sum on one rank, any split of it on two).
 * The max or min of the parts, or their mean (the sum divided by the
 * axis size), would change with the mesh; only op=sum reads P.  A V value
 * (one value per rank) may be reduced with any op. */
static bool check_reduce_op_of_p(Checker *k, Expr *call, Expr *x, const Type *axes, const char *o, LType dst) {
  const char *xs = src_text(k, x), *as = axes_text(k, axes);
  bool avg = strcmp(o, "avg") == 0;
  check_error(k, call->span, "all_reduce(op=%s) reads the parts of '%s', which is P (a pending sum) on %s", o, xs, as);
  if (avg)
    note_at(k->c, (Span){0, 0, 0},
            "the mean of a pending sum's parts is its sum divided by the size of %s: the result would depend on the mesh",
            as);
  else
    note_at(k->c, (Span){0, 0, 0},
            "a pending sum's per-rank parts are not its value: their %s would depend on how the mesh splits the sum", o);
  note_p_origin(k, x, axes->axes[0]);
  const char *code = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=%s)", xs, as, ltype_text(k->c, dst));
  help_call(k, call, x, "op", code, arena_sprintf(&k->c->arena, "reduce the sum first: %s", code));
  help(k->c, "to take the %s over ranks of one value per rank, reduce a V value: all_reduce(v, %s, src=V, dst=%s, op=%s)",
       avg ? "mean" : o, as, ltype_text(k->c, dst), o);
  if (avg)
    help(k->c, "if the sum over the axis size is meant, say so: %s / axis_size(%s)", code, as);
  return false;
}

/* reduce_scatter's op=: sum (the default) or avg.  avg divides each rank's
 * block of the sum by the axis size, which reads the per-rank values as
 * values: only of V (JAX's psum_scatter then a division, pmean's scatter).
 * A P value's per-rank parts are not its value, so op=avg of a P value
 * would be its value over the number of ranks, which differs per mesh. */
static bool check_reduce_scatter_op(Checker *k, Expr *call, Expr *x, LType src, LType dst, const char *as) {
  Arg *opa = call_named(k, call, "op");
  if (!opa)
    return true;
  const char *o = opa->value->kind == EX_NAME ? opa->value->name : "", *xs = src_text(k, x);
  if (strcmp(o, "sum") && strcmp(o, "avg")) {
    bool minmax = !strcmp(o, "max") || !strcmp(o, "min");
    check_error(k, opa->value->span, "reduce_scatter() op= takes sum or avg%s", minmax ? arena_sprintf(&k->c->arena,
                ", not %s", o) : "");
    if (minmax) {
      note_at(k->c, (Span){0, 0, 0}, "the %s of the blocks is all_reduce's op=%s followed by this rank's block", o, o);
      help(k->c, "convert(all_reduce(%s, %s, src=V, dst=R, op=%s), %s, src=R, dst=%s)", xs, as, o, as,
           ltype_text(k->c, dst));
    } else {
      const char *code = arena_sprintf(&k->c->arena, "reduce_scatter(%s, %s, src=%s, dst=%s, op=sum)", xs, as,
                                       ltype_text(k->c, src), ltype_text(k->c, dst));
      help_call(k, call, x, "op", code, code);
    }
    return false;
  }
  if (!strcmp(o, "avg") && src.kind != LT_V) {
    check_error(k, opa->value->span, "reduce_scatter(op=avg) of a P value on %s: the parts of a pending sum are not "
                "its value", as);
    note_at(k->c, (Span){0, 0, 0}, "averaging the parts gives the value divided by the number of ranks, which differs "
            "from mesh to mesh; op=avg averages values that are V on %s", as);
    const char *code = arena_sprintf(&k->c->arena, "reduce_scatter(%s, %s, src=P, dst=%s)", xs, as, ltype_text(k->c, dst));
    help_call(k, call, x, "op", code,
              arena_sprintf(&k->c->arena, "finish the sum: %s; to average per-rank values, pass the V value they "
                            "came from with src=V, op=avg", code));
    return false;
  }
  return true;
}

Type *check_collective(Checker *k, Expr *call, Builtin op) {
  const char *name = builtin_name[op];
  Arg *xa = call_arg(call, 0), *aa = call_arg(call, 1);
  if (!xa || !aa || call_arg(call, 2)) {
    check_error(k, call->span, "%s() takes a value and mesh axes: %s(x, axes, src=..., dst=...)", name, name);
    return type_error();
  }
  Type *x = check_expr(k, xa->value);
  if (x->kind == TY_ERROR)
    return x;
  if (x->kind != TY_TENSOR || x->literal) {
    check_error(k, xa->value->span, "%s() needs a tensor, got %s", name, ck_type(k, x));
    return type_error();
  }
  if (op == BI_REDISTRIBUTE && aa->value->kind == EX_TYPE)
    return check_redistribute_to(k, call, x);
  Type *axes = check_expr(k, aa->value);
  if (axes->kind != TY_AXES || axes->naxes == 0) {
    if (axes->kind != TY_ERROR)
      check_error(k, aa->value->span, "%s() needs mesh axes as its second argument, such as tp or (dp, tp)", name);
    return type_error();
  }
  LType src = {LT_NONE, 0}, dst = {LT_NONE, 0};
  bool has_src, has_dst;
  if (!get_ltype(k, call, "src", &src, &has_src) || !get_ltype(k, call, "dst", &dst, &has_dst))
    return type_error();
  if (!has_src && (op == BI_ALL_REDUCE || op == BI_REDUCE_SCATTER)) {
    src.kind = LT_P;
    has_src = true;
  }
  if (!has_src || !has_dst) {
    check_error(k, call->span, "%s() needs %s", name, !has_src && !has_dst ? "src= and dst=" : !has_src ? "src=" : "dst=");
    note_at(k->c, (Span){0, 0, 0}, "the source type is always written down, so that erasing the types leaves a program with the same meaning");
    const char *code = arena_sprintf(&k->c->arena, "%s(%s, %s, src=%s, dst=%s)", name, src_text(k, xa->value),
                                     axes_text(k, axes), ltype_text(k->c, has_src ? src : ltype_on(x, axes->axes[0])),
                                     has_dst ? ltype_text(k->c, dst) : "R");
    help_call(k, call, xa->value, NULL, code, code);
    return type_error();
  }
  Arg *ex = call_named(k, call, "expert");
  bool expert = ex && ex->value->kind == EX_BOOL && ex->value->ival;
  if (ex && ex->value->kind != EX_BOOL) {
    check_error(k, ex->value->span, "expert= takes true or false");
    help_fix(k->c, ex->value->span, "true", "write expert=true");
    return type_error();
  }
  if (!resolve_sdim(k, call->span, &src, x->ndim))
    return type_error();
  const char *xs = src_text(k, xa->value), *as = axes_text(k, axes);
  /* local or global semantics, per axis (SPEC 7): the listed axes must
   * all be local here (local_map over them, local fn) or all global */
  int nloc = 0, a_loc = -1, a_glob = -1;
  for (int i = 0; i < axes->naxes; i++) {
    if (check_axis_local(k, axes->axes[i])) {
      nloc++;
      a_loc = axes->axes[i];
    } else {
      a_glob = axes->axes[i];
    }
  }
  if (nloc && nloc != axes->naxes) {
    check_error(k, call->span, "%s() over %s mixes a local axis ('%s') with a global one ('%s')", name, as,
                k->mesh->axes[a_loc].name, k->mesh->axes[a_glob].name);
    note_at(k->c, (Span){0, 0, 0}, "a local axis has the stacked and per-rank meaning, a global one the partition spec's");
    help(k->c, "take '%s' local in the local_map as well, or make one call per kind of axis", k->mesh->axes[a_glob].name);
    return type_error();
  }
  bool global = nloc == 0;
  /* On local axes inside a partly global region, S(i) splits or joins
   * this rank's block of dim i: not allowed when a global axis shards the
   * dim (the blocks would interleave with the global layout). */
  for (int side = 0; side < 2 && !global && !x->local; side++) {
    LType lt = side ? dst : src;
    int d = lt.kind == LT_S ? (lt.sdim < 0 ? lt.sdim + x->ndim : lt.sdim) : -1;
    if (d < 0 || d >= x->ndim || x->spec[d][0] < 0)
      continue;
    check_error(k, call->span, "%s() on the local axis %s %s dim %d, which is sharded on the global axis '%s'", name, as,
                side ? "splits" : "joins", d, k->mesh->axes[x->spec[d][0]].name);
    note_at(k->c, (Span){0, 0, 0}, "'%s' is %s; its local blocks of dim %d are not contiguous in the global layout", xs,
            ck_type(k, x), d);
    help(k->c, "take '%s' local as well (local_map ... over (%s, ...)), or use another dim", k->mesh->axes[x->spec[d][0]].name,
         k->mesh->axes[x->spec[d][0]].name);
    return type_error();
  }
  /* every listed axis must carry the same type, and it must be src */
  for (int i = 0; i < axes->naxes; i++) {
    int a = axes->axes[i];
    LTypeKind have = x->lt[a];
    if (have != ltype_base(src)) {
      check_error(k, xa->value->span, "src=%s, but '%s' is %s on mesh axis '%s'", ltype_text(k->c, src), xs,
                  ltype_text(k->c, ltype_on(x, a)), k->mesh->axes[a].name);
      note_at(k->c, (Span){0, 0, 0}, "'%s' is %s", xs, ck_type(k, x));
      if (axes->naxes > 1) {
        note_at(k->c, (Span){0, 0, 0}, "a collective over %s needs the same type on every listed axis", as);
        const char *code = transition_fix(k, xs, k->mesh->axes[a].name, ltype_on(x, a), src);
        help_fix(k->c, xa->value->span, src_exact(k, xa->value) ? code : NULL, "bring '%s' to %s first: %s",
                 k->mesh->axes[a].name, lt_name(ltype_base(src)), code);
      } else if (have == ltype_base(dst) && have != LT_V) {
        help_call(k, call, xa->value, NULL, xs,
                  arena_sprintf(&k->c->arena, "'%s' is %s on '%s' already: drop the call", xs, lt_name(have), as));
      } else if (allowed(op, have, ltype_base(dst)) == NO) {
        const char *code = transition_fix(k, xs, as, ltype_on(x, a), dst);
        help_call(k, call, xa->value, NULL, code,
                  arena_sprintf(&k->c->arena, "for %s -> %s write %s", lt_name(have), ltype_text(k->c, dst), code));
      } else {
        const char *code = arena_sprintf(&k->c->arena, "%s(%s, %s, src=%s, dst=%s)", name, xs, as,
                                         ltype_text(k->c, ltype_on(x, a)), ltype_text(k->c, dst));
        help_call(k, call, xa->value, NULL, code,
                  arena_sprintf(&k->c->arena, "write src=%s: %s", ltype_text(k->c, ltype_on(x, a)), code));
      }
      return type_error();
    }
  }
  if (src.kind == LT_S && global && !spec_ends_with(x, src.sdim, axes)) {
    int d;
    check_error(k, call->span, "src=S(%d), but dim %d of '%s' is not sharded on %s as its last axes", src.sdim,
                src.sdim, xs, as);
    note_at(k->c, (Span){0, 0, 0}, "'%s' is %s", xs, ck_type(k, x));
    if (type_spec_has(x, axes->axes[0], &d) && spec_ends_with(x, d, axes)) {
      const char *code = arena_sprintf(&k->c->arena, "%s(%s, %s, src=S(%d), dst=%s)", name, xs, as, d, ltype_text(k->c, dst));
      help_call(k, call, xa->value, NULL, code, arena_sprintf(&k->c->arena, "write src=S(%d): %s", d, code));
    }
    else if (type_spec_has(x, axes->axes[0], &d))
      help(k->c, "only the last axes of a dim can be moved on their own: first gather the axes after them, or use redistribute(%s, T)", xs);
    else
      help(k->c, "'%s' has no layout on %s; inside local_map write src=V", xs, as);
    return type_error();
  }
  if (src.kind == LT_V && global && op != BI_ALL_REDUCE && op != BI_REDUCE_SCATTER) {
    int d;
    for (int i = 0; i < axes->naxes; i++)
      if (type_spec_has(x, axes->axes[i], &d)) {
        check_error(k, call->span, "src=V, but '%s' is S(%d) on mesh axis '%s'", xs, d, k->mesh->axes[axes->axes[i]].name);
        note_at(k->c, (Span){0, 0, 0}, "in global code the source names its layout, so that the global shape is known");
        const char *code = arena_sprintf(&k->c->arena, "%s(%s, %s, src=S(%d), dst=%s)", name, xs, as, d,
                                         ltype_text(k->c, dst));
        help_call(k, call, xa->value, NULL, code, arena_sprintf(&k->c->arena, "write src=S(%d): %s", d, code));
        return type_error();
      }
  }
  if ((op == BI_ALL_REDUCE || op == BI_REDUCE_SCATTER) && global) {
    int d;
    for (int i = 0; i < axes->naxes; i++)
      if (type_spec_has(x, axes->axes[i], &d)) {
        check_error(k, call->span, "%s() sums whole values, but '%s' is S(%d) on mesh axis '%s'", name, xs, d,
                    k->mesh->axes[axes->axes[i]].name);
        note_at(k->c, (Span){0, 0, 0}, "summing the blocks of a sharded dim changes its global size; say so with a reinterpret");
        const char *code = arena_sprintf(&k->c->arena, "%s(reinterpret(%s, %s, src=S(%d), dst=P), %s, src=P, dst=%s)",
                                         name, xs, as, d, as, ltype_text(k->c, dst));
        help_call(k, call, xa->value, NULL, code,
                  arena_sprintf(&k->c->arena, "declare the blocks terms of a sum first: %s", code));
        return type_error();
      }
  }
  if (src.kind == LT_S && (op == BI_ALL_REDUCE || op == BI_REDUCE_SCATTER)) {
    check_error(k, call->span, "%s() takes src=P or src=V, not src=S(%d)", name, src.sdim);
    note_at(k->c, (Span){0, 0, 0}, "it sums one whole value per rank; S(i) would say the values are blocks of one tensor");
    const char *code = arena_sprintf(&k->c->arena, "%s(%s, %s, src=V, dst=%s)", name, xs, as, ltype_text(k->c, dst));
    help_call(k, call, xa->value, NULL, code, arena_sprintf(&k->c->arena, "write src=V: %s", code));
    return type_error();
  }
  if (src.kind == LT_S && !global && x->ndim <= src.sdim) {
    check_error(k, call->span, "S(%d) is out of range", src.sdim);
    return type_error();
  }
  Type *rt = type_new(k->c, TY_TENSOR);
  rt->ndim = x->ndim;
  if (!resolve_sdim(k, call->span, &dst, x->ndim + (src.kind == LT_V && dst.kind == LT_S ? 1 : 0)))
    return type_error();
  Allowed ok = allowed(op, ltype_base(src), ltype_base(dst));
  if (op == BI_ALL_GATHER && dst.kind == LT_S) /* its result is whole on every rank */
    ok = NO;
  if (op == BI_ALL_REDUCE && (src.kind == LT_R || src.kind == LT_I)) {
    check_error(k, call->span, "all_reduce() of an %s value on %s: it is already the same on every rank", lt_name(src.kind), as);
    note_at(k->c, (Span){0, 0, 0}, "all_reduce sums pending values (P); summing copies would multiply by the axis size");
    const char *code =
        src.kind == LT_R
            ? arena_sprintf(&k->c->arena, "all_reduce(reinterpret(%s, %s, src=R, dst=P, expert=true), %s, src=P, dst=%s)",
                            xs, as, as, ltype_text(k->c, dst))
            : arena_sprintf(&k->c->arena, "all_reduce(reinterpret(%s, %s, src=I, dst=V), %s, src=V, dst=%s)", xs, as,
                            as, ltype_text(k->c, dst));
    help_call(k, call, xa->value, NULL, code,
              arena_sprintf(&k->c->arena, "if that sum is meant, make the copies terms of a sum first: %s", code));
    return type_error();
  }
  if (global && op == BI_REINTERPRET && ltype_base(src) == LT_I && ltype_base(dst) == LT_V && !expert &&
      !check_global_pvary(k, call, xa->value, axes, dst))
    return type_error();
  if (ok == NO) {
    check_error(k, call->span, "%s() cannot go from %s to %s", name, ltype_text(k->c, src), ltype_text(k->c, dst));
    if (op == BI_ALL_GATHER && ltype_base(src) == LT_V && dst.kind == LT_S) {
      note_at(k->c, (Span){0, 0, 0}, "%s", transition_why(op, ltype_base(src), ltype_base(dst)));
      const char *code = transition_fix(k, xs, as, src, dst);
      help(k->c, "to move the split to dim %d: %s; to gather the whole value%s: all_gather(%s, %s, src=%s, dst=%s)",
           dst.sdim, code, global ? "" : " and keep it typed V", xs, as, ltype_text(k->c, src), global ? "R" : "V");
    } else if (ltype_base(src) != ltype_base(dst) || ltype_base(src) == LT_V) {
      note_at(k->c, (Span){0, 0, 0}, "%s", transition_why(op, ltype_base(src), ltype_base(dst)));
      const char *code = transition_fix(k, xs, as, src, dst);
      help_call(k, call, xa->value, NULL, code,
                arena_sprintf(&k->c->arena, "for %s -> %s write %s", lt_name(ltype_base(src)), lt_name(ltype_base(dst)), code));
    } else {
      note_at(k->c, (Span){0, 0, 0}, "'%s' is already %s on %s", xs, lt_name(ltype_base(src)), as);
      help_call(k, call, xa->value, NULL, xs, arena_sprintf(&k->c->arena, "drop the call and use '%s' as it is", xs));
    }
    return type_error();
  }
  if (ok == EXPERT && !expert) {
    check_error(k, call->span, "%s(%s -> %s) is rarely meant in forward code; it needs expert=true", name,
                ltype_text(k->c, src), ltype_text(k->c, dst));
    note_at(k->c, (Span){0, 0, 0}, "%s", transition_why(op, ltype_base(src), ltype_base(dst)));
    const char *code = NULL;
    const char *alt = expert_alternative(k, op, src, dst, xs, as, &code);
    if (!*alt) {
      code = arena_sprintf(&k->c->arena, "%s(%s, %s, src=%s, dst=%s, expert=true)", name, xs, as, ltype_text(k->c, src),
                           ltype_text(k->c, dst));
      alt = arena_sprintf(&k->c->arena, "if it is meant: %s", code);
    }
    help_call(k, call, xa->value, "expert", code, alt);
    return type_error();
  }
  if (op == BI_ALL_REDUCE) {
    Arg *opa = call_named(k, call, "op");
    if (opa) {
      const char *o = opa->value->kind == EX_NAME ? opa->value->name : "";
      if (strcmp(o, "sum") && strcmp(o, "avg") && strcmp(o, "max") && strcmp(o, "min")) {
        check_error(k, opa->value->span, "op= takes sum, avg, max or min");
        const char *code =
            arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=%s, dst=%s, op=sum)", xs, as, ltype_text(k->c, src),
                          ltype_text(k->c, dst));
        help_call(k, call, xa->value, "op", code, code);
        return type_error();
      }
      if (strcmp(o, "sum") && ltype_base(src) == LT_P && !check_reduce_op_of_p(k, call, xa->value, axes, o, dst))
        return type_error();
    }
  }
  if (op == BI_REDUCE_SCATTER && !check_reduce_scatter_op(k, call, xa->value, src, dst, as))
    return type_error();
  if (op == BI_ALL_GATHER && dst.kind == LT_V && global) {
    check_error(k, call->span, "all_gather(dst=V) is local-only: in global code a value that varies is a block of a "
                "global tensor, and the gathered value is every rank's whole value");
    note_at(k->c, (Span){0, 0, 0}, "dst=V (JAX's all_gather of a varying value) types the whole value V, so that the "
            "backward sums the ranks' cotangents; it belongs in local code");
    const char *code = arena_sprintf(&k->c->arena, "all_gather(%s, %s, src=%s, dst=R)", xs, as, ltype_text(k->c, src));
    help_call(k, call, xa->value, NULL, code,
              arena_sprintf(&k->c->arena, "gather to R, whose backward is the same reduce-scatter: %s; or gather "
                            "inside local_map (...) over (%s)", code, as));
    return type_error();
  }
  (void)rt;
  Type *res = relayout(k, call, op, x, axes, src, dst, global);
  if (res->kind == TY_ERROR)
    return res;
  bool red = bwd_reduces(op, ltype_base(src), ltype_base(dst));
  bool rs = op == BI_ALL_GATHER || (op == BI_REDISTRIBUTE && ltype_base(src) == LT_V);
  if (!check_wire_dtypes(k, call, op, x, red, rs ? "a reduce-scatter" : "an all-reduce"))
    return type_error();
  return res;
}

/* redistribute(x, T): the full target type.  The planner (SPEC section 8,
 * redistribute.c) chooses the collectives; here the target must be a valid
 * type with the same global shape and dtype that the planner can reach.
 * An axis T leaves open keeps x's type there, and its place in x's
 * partition spec when that place is unambiguous. */
static Type *check_redistribute_to(Checker *k, Expr *call, Type *x) {
  RsPlan plan;
  Type *t = redistribute_target(k, call->span, src_text(k, call_arg(call, 0)->value), x, call_arg(call, 1)->value->type,
                                "redistribute()", &plan);
  if (t->kind == TY_ERROR)
    return t;
  /* the backward of the plan sums if one of its steps' backwards does */
  const char *what = NULL;
  for (int i = 0; i < plan.nsteps && !what; i++) {
    RsStep *st = &plan.steps[i];
    if (st->op == RS_ALL_GATHER && st->dst == LT_R)
      what = "a reduce-scatter (of its all_gather to R)";
    else if ((st->op == RS_ALL_REDUCE && st->dst == LT_R) || (st->op == RS_CONVERT && st->src == LT_I && st->dst == LT_R))
      what = st->op == RS_ALL_REDUCE ? "an all-reduce (of its all_reduce to R)" : "an all-reduce (of its convert I -> R)";
  }
  if (!check_wire_dtypes(k, call, BI_REDISTRIBUTE, x, what != NULL, what ? what : ""))
    return type_error();
  return t;
}

/* The type `te` makes of `x` (written xs) by a redistribution, and its plan
 * (SPEC section 8, redistribute.c): `redistribute(x, T)` and the `x: T` and
 * `-> T` of local_map (`what` names which in messages).  The target must be
 * a valid type with the same global shape and dtype that the planner can
 * reach.  An axis T leaves open keeps x's type there, and its place in x's
 * partition spec when that place is unambiguous.  An error type on an error
 * (or when the plan waits for the sizes of a call: value_dependent). */
Type *redistribute_target(Checker *k, Span sp, const char *xs, const Type *x, TypeExpr *te, const char *what,
                          RsPlan *plan) {
  bool named[MAX_MESH_AXES];
  Type *t = check_type_expr(k, te, named);
  if (!t)
    return type_error();
  for (int a = 0; a < k->naxes; a++) {
    int d;
    if (named[a])
      continue;
    t->lt[a] = x->lt[a];
    if (x->local || !type_spec_has(x, a, &d) || d >= t->ndim)
      continue;
    bool open_dim = true; /* every axis sharding dim d in x is left open */
    for (int i = 0; i < MAX_MESH_AXES && x->spec[d][i] >= 0; i++)
      open_dim &= !named[x->spec[d][i]];
    if (!open_dim || t->spec[d][0] >= 0) {
      check_error_rule(k, "type/redistribute-target-leaves-mesh-axis-open", sp,
                       "%s target leaves mesh axis '%s' open, but '%s' shards dim %d together with "
                  "axes the target names", what, k->mesh->axes[a].name, k->mesh->axes[a].name, d);
      note_at(k->c, (Span){0, 0, 0}, "'%s' is %s", xs, ck_type(k, x));
      help(k->c, "say what '%s' becomes: a place in the partition spec (@%s, or @(...) in order) or a letter ({%s: R})",
           k->mesh->axes[a].name, k->mesh->axes[a].name, k->mesh->axes[a].name);
      return type_error();
    }
  }
  for (int d = 0; !x->local && d < x->ndim && d < t->ndim; d++)
    if (t->spec[d][0] < 0 && x->spec[d][0] >= 0 && !named[x->spec[d][0]])
      memcpy(t->spec[d], x->spec[d], sizeof t->spec[d]);
  bool same = t->dtype == x->dtype && t->ndim == x->ndim;
  for (int d = 0; same && d < t->ndim; d++)
    same = size_eq(t->shape[d], x->shape[d]);
  if (!same) {
    check_error_rule(k, "type/redistribute-keeps-global-shape-dtype-cannot", sp,
                     "%s keeps the global shape and dtype: %s cannot become %s", what, ck_type(k, x),
                ck_type(k, t));
    if (t->dtype != x->dtype)
      help(k->c, "change the dtype separately: astype(%s, %s)", xs, dtype_name(t->dtype));
    else
      help(k->c, "change the shape separately, with reshape(%s, [...]) before or after", xs);
    return type_error();
  }
  const char *why = NULL, *fix = NULL;
  if (type_has_symbol(x)) { /* the plan depends on the sizes: it waits for a call */
    k->value_dependent = true;
    return type_error();
  }
  if (!rs_plan(k->c, k->mesh, x, t, true, plan, xs, &why, &fix)) {
    check_error_rule(k, "type/redistribute-no-plan", sp, "%s", why);
    note_at(k->c, (Span){0, 0, 0}, "'%s' is %s", xs, ck_type(k, x));
    if (fix && *fix)
      help(k->c, "%s", fix);
    return type_error();
  }
  return t;
}

/* ppermute(x, axis, shift=K) (SPEC 15): in local code, each rank's block
 * goes to the rank K steps further along the axis (cyclically).  V in, V out
 * on that axis; the other axes flow through.  An R or I value is the same on
 * every rank, so the shift would be an identity; a P value's terms would be
 * moved between ranks, which leaves the sum as it was.  Its backward is
 * ppermute(dy, axis, shift=-K) (autodiff.c). */
Type *check_ppermute(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Arg *xa = call_arg(call, 0), *aa = call_arg(call, 1);
  if (!xa || !aa || call_arg(call, 2)) {
    check_error(k, call->span, "ppermute() takes a value and one mesh axis: ppermute(x, axis, shift=K)");
    return type_error();
  }
  Type *x = check_expr(k, xa->value);
  if (x->kind == TY_ERROR)
    return x;
  if (x->kind != TY_TENSOR || x->literal) {
    check_error(k, xa->value->span, "ppermute() needs a tensor, got %s", ck_type(k, x));
    return type_error();
  }
  Type *axes = check_expr(k, aa->value);
  if (axes->kind != TY_AXES || axes->naxes != 1) {
    if (axes->kind == TY_AXES)
      check_error(k, aa->value->span, "ppermute() shifts along one mesh axis, not a tuple");
    else if (axes->kind != TY_ERROR)
      check_error(k, aa->value->span, "ppermute() needs a mesh axis as its second argument, such as pp");
    return type_error();
  }
  int a = axes->axes[0];
  const char *as = axes_text(k, axes), *xs = src_text(k, xa->value);
  long long shift = 0;
  bool given;
  if (!named_int(k, call, "shift", &shift, &given))
    return type_error();
  if (!given) {
    check_error(k, call->span, "ppermute() needs shift=, how many ranks further along '%s' each block goes", as);
    help(k->c, "e.g. ppermute(%s, %s, shift=1) sends each rank's block to the next rank", xs, as);
    return type_error();
  }
  if (!check_axis_local(k, a)) {
    check_error(k, call->span, "ppermute(%s) is only allowed where '%s' is local, and it is global here", as, as);
    note_at(k->c, (Span){0, 0, 0}, "it moves each rank's block to another rank; in global code a value that varies is "
            "a block of a global tensor, and moving the blocks would reorder it");
    help(k->c, "use it in local code: inside local_map (...) over (%s) { ... } or in a local fn", as);
    return type_error();
  }
  LTypeKind have = x->lt[a];
  if (have == LT_R || have == LT_I) {
    check_error(k, call->span, "ppermute() of an %s value on '%s' is an identity: every rank holds the same value",
                lt_name(have), as);
    note_at(k->c, (Span){0, 0, 0}, "'%s' is %s", xs, ck_type(k, x));
    help_fix(k->c, call->span, src_exact(k, xa->value) ? xs : NULL,
             "drop the call and use '%s' as it is; to shift blocks of it, take this rank's block first: "
             "ppermute(convert(%s, %s, src=%s, dst=S(0)), %s, shift=%lld)",
             xs, xs, as, lt_name(have), as, shift);
    return type_error();
  }
  if (have == LT_P) {
    check_error(k, call->span, "ppermute() of a pending sum (P) on '%s': moving the terms between ranks leaves the sum "
                "as it was", as);
    note_at(k->c, (Span){0, 0, 0}, "'%s' is %s", xs, ck_type(k, x));
    help(k->c, "finish the sum first and shift blocks of it: ppermute(reduce_scatter(%s, %s, src=P, dst=V), %s, shift=%lld)",
         xs, as, as, shift);
    return type_error();
  }
  if (have != LT_V) {
    check_error(k, xa->value->span, "the type of '%s' on mesh axis '%s' is not known", xs, as);
    help(k->c, "name the axis in its type, e.g. {%s: V}", as);
    return type_error();
  }
  return type_clone(k->c, x);
}
