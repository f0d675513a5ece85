/* check_collectives.c: the typing rules of collectives and casts (SPEC
 * section 6; the seed's state-transition table).  One table says which
 * src -> dst each op allows and which need expert=true; one function
 * computes how a transition changes the shape and partition spec. */
#include <string.h>

#include "check.h"

/* The three forms a src/dst can take: a whole value (R I P), the stacked
 * V form, or S(i). */
typedef enum { FORM_WHOLE, FORM_STACK, FORM_SHARD } Form;

static Form form_of(LType lt) {
  return lt.kind == LT_S ? FORM_SHARD : lt.kind == LT_V ? FORM_STACK : FORM_WHOLE;
}

/* The letter for rules: S(i) is V. */
static LTypeKind base(LType lt) { return lt.kind == LT_S ? LT_V : lt.kind; }

typedef enum { NO, YES, EXPERT } Allowed;

/* allowed[op][src][dst] over R I V P (V covers S(i)) */
static Allowed allowed(Builtin op, LTypeKind s, LTypeKind d) {
#define T(a, b) (s == LT_##a && d == LT_##b)
  switch (op) {
  case BI_ALL_REDUCE: return (s == LT_P || s == LT_V) && (d == LT_R || d == LT_I) ? YES : NO;
  case BI_ALL_GATHER: return s == LT_V && (d == LT_R || d == LT_I) ? YES : NO;
  case BI_REDUCE_SCATTER: return (s == LT_P || s == LT_V) && d == LT_V ? YES : NO;
  case BI_ALL_TO_ALL: return s == LT_V && d == LT_V ? YES : NO;
  case BI_REINTERPRET:
    if (T(I, R) || T(I, V) || T(V, P))
      return YES;
    return T(R, I) || T(R, V) || T(R, P) ? EXPERT : NO;
  case BI_CONVERT:
    if (T(I, R) || T(R, V) || T(I, V) || T(R, P))
      return YES;
    return T(R, I) || T(I, P) || T(V, P) ? EXPERT : NO;
  case BI_REDISTRIBUTE: return s != d || s == LT_V ? YES : NO;
  default: return NO;
  }
#undef T
}

/* The call that does src -> dst (the seed's state-transition table). */
static const char *transition_call(LTypeKind s, LTypeKind d) {
  static const char *const table[5][5] = {
      [LT_R] = {[LT_I] = "reinterpret(x, a, src=R, dst=I, expert=true)", [LT_V] = "convert(x, a, src=R, dst=S(i))",
                [LT_P] = "convert(x, a, src=R, dst=P)"},
      [LT_I] = {[LT_R] = "convert(x, a, src=I, dst=R)", [LT_V] = "convert(x, a, src=I, dst=S(i))",
                [LT_P] = "convert(x, a, src=I, dst=P, expert=true)"},
      [LT_V] = {[LT_R] = "all_gather(x, a, src=S(i), dst=R)", [LT_I] = "all_gather(x, a, src=S(i), dst=I)",
                [LT_V] = "all_to_all(x, a, src=S(i), dst=S(j))", [LT_P] = "reinterpret(x, a, src=V, dst=P)"},
      [LT_P] = {[LT_R] = "all_reduce(x, a, src=P, dst=R)", [LT_I] = "all_reduce(x, a, src=P, dst=I)",
                [LT_V] = "reduce_scatter(x, a, src=P, dst=S(i))"},
  };
  return table[s][d] ? table[s][d] : "redistribute(x, a, src=..., dst=...)";
}

/* What to do instead of an expert-only transition. */
static const char *expert_alternative(Builtin op, LTypeKind s, LTypeKind d) {
  if (s == LT_R && d == LT_P)
    return "reinterpret(R, P) multiplies the value by the axis size; to keep the value use convert(x, a, src=R, dst=P)";
  if (s == LT_R && d == LT_V)
    return "to shard a replicated value use convert(x, a, src=R, dst=S(i))";
  if (s == LT_R && d == LT_I)
    return "R -> I drops the pending sum of the gradient; keep parameters I and use convert(w, a, src=I, dst=R) where they are computed with";
  if (s == LT_I && d == LT_P)
    return "use convert(x, a, src=I, dst=R) and then convert(..., src=R, dst=P)";
  if (s == LT_V && d == LT_P)
    return op == BI_CONVERT ? "to sum the parts per rank use reinterpret(x, a, src=V, dst=P); to assemble the value use all_gather(x, a, src=S(i), dst=R)"
                            : "";
  return "";
}

static const char *lt_text(Compiler *c, LType lt) {
  return lt.kind == LT_S ? arena_sprintf(&c->arena, "S(%d)", lt.sdim) : lt_name(lt.kind);
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

Size axes_size(Checker *k, const Type *axes) {
  Size n = size_int(1);
  for (int i = 0; i < axes->naxes; i++)
    n = size_mul(n, size_axis(axes->axes[i]));
  (void)k;
  return n;
}

const char *axes_text(Checker *k, const Type *axes) {
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

/* The shape and spec after moving `x` on `axes` from src to dst. */
static Type *relayout(Checker *k, Expr *call, Builtin op, const Type *x, const Type *axes, LType src, LType dst) {
  Type *r = type_clone(k->c, x);
  bool global = k->local_depth == 0;
  Size n = axes_size(k, axes);
  Form fs = form_of(src), fd = form_of(dst);
  if (op == BI_REINTERPRET)
    fs = fd = FORM_WHOLE; /* a no-op on the local value */
  if (global && (fs == FORM_STACK || fd == FORM_STACK) && op != BI_REINTERPRET) {
    check_error(k, call->span, "the V (stacked) form of %s() is local-only: in global code write S(dim)",
                builtin_name[op]);
    help(k->c, "use src=/dst=S(i), or call it inside local_map");
    return type_error();
  }
  if ((fs == FORM_STACK && fd == FORM_SHARD) || (fs == FORM_SHARD && fd == FORM_STACK)) {
    check_error(k, call->span, "%s() cannot mix the stacked V form with S(i)", builtin_name[op]);
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
      return type_error();
    }
  }
  for (int i = 0; i < axes->naxes; i++)
    r->lt[axes->axes[i]] = base(dst);
  return r;
}

static Type *check_redistribute_to(Checker *k, Expr *call, Type *x);

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
    help(k->c, "%s(%s, %s, src=%s, dst=...)", name, "x", axes_text(k, axes), lt_name(x->lt[axes->axes[0]]));
    return type_error();
  }
  Arg *ex = call_named(k, call, "expert");
  bool expert = ex && ex->value->kind == EX_BOOL && ex->value->ival;
  if (ex && ex->value->kind != EX_BOOL) {
    check_error(k, ex->value->span, "expert= takes true or false");
    return type_error();
  }
  if (!resolve_sdim(k, call->span, &src, x->ndim))
    return type_error();
  /* every listed axis must carry the same type, and it must be src */
  for (int i = 0; i < axes->naxes; i++) {
    int a = axes->axes[i];
    LTypeKind have = x->lt[a];
    if (have != base(src)) {
      check_error(k, xa->value->span, "src=%s, but '%s' is %s on mesh axis '%s'", lt_text(k->c, src),
                  xa->value->kind == EX_NAME ? xa->value->name : "the operand", lt_name(have), k->mesh->axes[a].name);
      if (axes->naxes > 1)
        note_at(k->c, (Span){0, 0, 0}, "a collective over %s needs the same type on every listed axis", axes_text(k, axes));
      else
        help(k->c, "write src=%s", lt_name(have));
      return type_error();
    }
  }
  if (src.kind == LT_S && k->local_depth == 0 && !spec_ends_with(x, src.sdim, axes)) {
    check_error(k, call->span, "src=S(%d), but dim %d of %s is not sharded on %s as its last axes", src.sdim, src.sdim,
                ck_type(k, x), axes_text(k, axes));
    int d;
    if (type_spec_has(x, axes->axes[0], &d))
      help(k->c, "write src=S(%d)", d);
    return type_error();
  }
  if (src.kind == LT_S && k->local_depth && x->ndim <= src.sdim) {
    check_error(k, call->span, "S(%d) is out of range", src.sdim);
    return type_error();
  }
  Type *rt = type_new(k->c, TY_TENSOR);
  rt->ndim = x->ndim;
  if (!resolve_sdim(k, call->span, &dst, x->ndim + (src.kind == LT_V && dst.kind == LT_S ? 1 : 0)))
    return type_error();
  Allowed ok = allowed(op, base(src), base(dst));
  if (op == BI_ALL_REDUCE && (src.kind == LT_R || src.kind == LT_I)) {
    check_error(k, call->span, "all_reduce() of a %s value: it is already the same on every rank", lt_name(src.kind));
    note_at(k->c, (Span){0, 0, 0}, "all_reduce sums pending values (P); summing copies would multiply by the axis size");
    help(k->c, "if that sum is meant, make the copies terms of a sum first: reinterpret(x, %s, src=%s, dst=P%s)",
         axes_text(k, axes), lt_name(src.kind), src.kind == LT_R ? ", expert=true" : "");
    return type_error();
  }
  if (ok == NO) {
    check_error(k, call->span, "%s() cannot go from %s to %s", name, lt_text(k->c, src), lt_text(k->c, dst));
    if (base(src) != base(dst) || base(src) == LT_V)
      help(k->c, "for %s -> %s use %s", lt_name(base(src)), lt_name(base(dst)), transition_call(base(src), base(dst)));
    return type_error();
  }
  if (ok == EXPERT && !expert) {
    check_error(k, call->span, "%s(%s -> %s) is rarely meant in forward code; it needs expert=true", name,
                lt_text(k->c, src), lt_text(k->c, dst));
    const char *alt = expert_alternative(op, base(src), base(dst));
    if (*alt)
      help(k->c, "%s", alt);
    return type_error();
  }
  if (op == BI_ALL_REDUCE) {
    Arg *opa = call_named(k, call, "op");
    if (opa) {
      const char *o = opa->value->kind == EX_NAME ? opa->value->name : "";
      if (strcmp(o, "sum") && strcmp(o, "avg") && strcmp(o, "max") && strcmp(o, "min")) {
        check_error(k, opa->value->span, "op= takes sum, avg, max or min");
        return type_error();
      }
    }
  }
  (void)rt;
  return relayout(k, call, op, x, axes, src, dst);
}

/* redistribute(x, T): the full target type.  The planner (SPEC section 8)
 * chooses the collectives; here the target must be a valid type with the
 * same global shape and dtype. */
static Type *check_redistribute_to(Checker *k, Expr *call, Type *x) {
  Arg *ta = call_arg(call, 1);
  bool named[MAX_MESH_AXES];
  Type *t = check_type_expr(k, ta->value->type, named);
  if (!t)
    return type_error();
  for (int a = 0; a < k->naxes; a++)
    if (!named[a])
      t->lt[a] = x->lt[a];
  bool same = t->dtype == x->dtype && t->ndim == x->ndim;
  for (int d = 0; same && d < t->ndim; d++)
    same = size_eq(t->shape[d], x->shape[d]);
  if (!same) {
    check_error(k, call->span, "redistribute() keeps the global shape and dtype: %s cannot become %s", ck_type(k, x),
                ck_type(k, t));
    return type_error();
  }
  return t;
}
