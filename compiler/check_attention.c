/* check_attention.c: the typing rule of the fused attention op (ops.def:
 * ATTENTION).  attention(q, k, v, causal=, scale=) is softmax(q k^T *
 * scale, masked) v per head, with grouped-query heads:
 *   q [B, H, T, E] with k [B, Hkv, S, E] and v [B, Hkv, S, Ev], H a
 *     multiple of Hkv (query head h reads key/value head h / (H/Hkv));
 *   q [B, Hkv, G, T, E] (the library's grouped layout) with the same k, v.
 * The result is [B, H, T, Ev] (or [B, Hkv, G, T, Ev]) with q's layout.
 * Per mesh axis the operands combine as a nonlinear op (no P; I only with
 * I).  B and the head dims may be sharded, alike in q, k and v (q's G dim
 * on axes where k and v are whole); T, S, E and Ev are whole: a row of the
 * softmax needs every key. */
#include <math.h>
#include <string.h>

#include "check.h"

/* A named float option: a number literal, a negated one or a constant. */
static bool named_number(Checker *k, Expr *call, const char *name, double *v, bool *given) {
  Arg *a = call_named(k, call, name);
  *given = a != NULL;
  if (!a)
    return true;
  Expr *e = a->value;
  bool neg = e->kind == EX_UNARY && e->op == OP_NEG;
  Expr *x = neg ? e->lhs : e;
  if (x->kind == EX_FLOAT || x->kind == EX_INT || (x->sym && x->sym->kind == SYM_CONST && x->sym->evaluated)) {
    double d = x->kind == EX_FLOAT ? x->fval
             : x->kind == EX_INT ? (double)x->ival
             : x->sym->is_float ? x->sym->fval : (double)x->sym->ival;
    *v = neg ? -d : d;
    return true;
  }
  check_error(k, e->span, "%s= takes a number or a constant", name);
  help(k->c, "compute it as a constant: const SCALE = ...; then %s=SCALE", name);
  return false;
}

/* Dim d of operand o must not be sharded (a whole sequence or head size). */
static bool whole_dim(Checker *k, Expr *call, const Operand *o, int d, const char *what, const char *oname) {
  if (o->t->local || o->t->spec[d][0] < 0)
    return true;
  int a = o->t->spec[d][0];
  const char *xs = src_text(k, o->e);
  check_error(k, call->span, "attention() needs the whole %s, but dim %d of '%s' is sharded on mesh axis '%s'", what,
              d, xs, axis_name(k, a));
  note_at(k->c, (Span){0, 0, 0}, "'%s' (%s) is %s; each row of the softmax reads every key", xs, oname,
          ck_type(k, o->t));
  help(k->c, "gather it first: all_gather(%s, %s, src=S(%d), dst=R), or split the work in local code (local_map)",
       xs, axis_name(k, a), d);
  return false;
}

/* Dim dq of q and dim dk of k (or v) must be sharded alike. */
static bool same_layout(Checker *k, Expr *call, const Operand *q, int dq, const Operand *o, int dk, const char *what) {
  if (q->t->local || o->t->local || memcmp(q->t->spec[dq], o->t->spec[dk], sizeof q->t->spec[dq]) == 0)
    return true;
  check_error(k, call->span, "attention() needs the %s dim sharded alike in '%s' and '%s'", what, src_text(k, q->e),
              src_text(k, o->e));
  note_at(k->c, (Span){0, 0, 0}, "'%s' is %s, '%s' is %s", src_text(k, q->e), ck_type(k, q->t), src_text(k, o->e),
          ck_type(k, o->t));
  help(k->c, "redistribute one of them to the other's layout of that dim: redistribute(%s, T)", src_text(k, o->e));
  return false;
}

static bool same_size(Checker *k, Expr *call, Size a, Size b, const char *what) {
  if (size_eq(a, b))
    return true;
  check_error(k, call->span, "attention() needs one %s in q, k and v: %s and %s differ", what,
              size_str(k->c, k->mesh, a), size_str(k->c, k->mesh, b));
  return false;
}

Type *check_attention(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Operand o[3];
  static const char *const names[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++) {
    o[i].e = call_arg(call, i)->value;
    o[i].t = check_as_tensor(k, o[i].e, check_expr(k, o[i].e));
    if (o[i].t->kind == TY_ERROR)
      return type_error();
  }
  const Type *q = o[0].t, *kt = o[1].t, *vt = o[2].t;
  Arg *ca = call_named(k, call, "causal");
  if (!ca || ca->value->kind != EX_BOOL) {
    check_error(k, ca ? ca->value->span : call->span, "attention() needs causal=true or causal=false");
    note_at(k->c, (Span){0, 0, 0}, "PyTorch's scaled_dot_product_attention defaults to is_causal=False, a decoder "
            "wants true: the choice is written down");
    help(k->c, "attention(%s, %s, %s, causal=true)", src_text(k, o[0].e), src_text(k, o[1].e), src_text(k, o[2].e));
    return type_error();
  }
  double scale = 0;
  bool has_scale;
  if (!named_number(k, call, "scale", &scale, &has_scale))
    return type_error();
  if (has_scale && !(scale > 0) ) {
    check_error(k, call_named(k, call, "scale")->value->span, "attention()'s scale= must be positive");
    return type_error();
  }
  for (int i = 0; i < 3; i++)
    if (o[i].t->dtype == DT_I32 || o[i].t->dtype != q->dtype) {
      check_error(k, call->span, "attention() takes q, k and v of one float dtype, got %s, %s and %s",
                  dtype_name(q->dtype), dtype_name(kt->dtype), dtype_name(vt->dtype));
      help(k->c, "cast them alike: astype(%s, %s)", src_text(k, o[i].e), dtype_name(q->dtype == DT_I32 ? DT_F32 : q->dtype));
      return type_error();
    }
  bool grouped = q->ndim == 5;
  if ((q->ndim != 4 && q->ndim != 5) || kt->ndim != 4 || vt->ndim != 4) {
    check_error(k, call->span, "attention() takes q [B, H, T, E] or [B, Hkv, G, T, E] and k, v [B, Hkv, S, E], "
                "got q %s, k %s, v %s", ck_type(k, q), ck_type(k, kt), ck_type(k, vt));
    help(k->c, "put the heads before the sequence: permute(x, [0, 2, 1, 3]) turns [B, T, H, E] into [B, H, T, E]");
    return type_error();
  }
  int qt = grouped ? 3 : 2; /* q's sequence dim */
  if (!same_size(k, call, q->shape[0], kt->shape[0], "batch size") ||
      !same_size(k, call, kt->shape[0], vt->shape[0], "batch size") ||
      !same_size(k, call, kt->shape[1], vt->shape[1], "number of key/value heads") ||
      !same_size(k, call, kt->shape[2], vt->shape[2], "key length") ||
      !same_size(k, call, q->shape[qt + 1], kt->shape[3], "head size (q and k)"))
    return type_error();
  if (grouped && !same_size(k, call, q->shape[1], kt->shape[1], "number of key/value heads"))
    return type_error();
  long long h, hkv;
  if (!grouped && size_is_int(q->shape[1], &h) && size_is_int(kt->shape[1], &hkv) && (hkv <= 0 || h % hkv)) {
    check_error(k, call->span, "attention() needs the query heads (%lld) a multiple of the key/value heads (%lld)", h,
                hkv);
    note_at(k->c, (Span){0, 0, 0}, "query head h reads key/value head h / (H / Hkv)");
    return type_error();
  }
  /* whole sequences and head sizes; batch and heads sharded alike */
  if (!whole_dim(k, call, &o[0], qt, "query sequence", names[0]) ||
      !whole_dim(k, call, &o[0], qt + 1, "head size", names[0]))
    return type_error();
  for (int i = 1; i < 3; i++)
    if (!whole_dim(k, call, &o[i], 2, "key sequence", names[i]) ||
        !whole_dim(k, call, &o[i], 3, "head size", names[i]) ||
        !same_layout(k, call, &o[0], 0, &o[i], 0, "batch") ||
        !same_layout(k, call, &o[0], 1, &o[i], 1, grouped ? "key/value head" : "head"))
      return type_error();
  Type *r = type_clone(k->c, q);
  r->shape[r->ndim - 1] = vt->shape[3];
  Operand ops[3] = {o[0], o[1], o[2]};
  if (!combine(k, RULE_NONLINEAR, "attention()", call->span, ops, 3, r->lt))
    return type_error();
  if (!has_scale) {
    long long e;
    if (!size_is_int(q->shape[qt + 1], &e) || e <= 0) {
      check_error(k, call->span, "attention()'s default scale 1/sqrt(E) needs a known head size, not %s",
                  size_str(k->c, k->mesh, q->shape[qt + 1]));
      help(k->c, "write scale= as a constant");
      return type_error();
    }
  }
  return r;
}
