/* check_autodiff.c: the typing rules of value_and_grad, grad (SPEC 9) and
 * remat (SPEC 15): a call of a user function, a scalar loss that is never
 * R, gradients of the dual types of the wrt= arguments.  The backward
 * itself is autodiff.c's. */
#include "check.h"

/* help for a loss that is R on axis a, fitted to how the loss was made: an
 * all_reduce to R becomes one to I; any other R value is made P by keeping
 * one rank's copy, convert(l, a, src=R, dst=P), the form the tutorial uses
 * (R -> I would need expert=true). */
static void loss_r_help(Checker *k, FnDecl *fn, const Type *v, int a) {
  Expr *l = fn ? final_return(fn->body) : NULL;
  const char *ax = axis_name(k, a);
  /* the convert fixes every axis where the loss is R at once: (dp, tp) */
  int nr = 0;
  StrBuf rs;
  sb_init(&rs, &k->c->arena);
  for (int b = 0; b < k->naxes; b++)
    if (v->lt[b] == LT_R)
      sb_printf(&rs, "%s%s", nr++ ? ", " : "", axis_name(k, b));
  const char *rax = nr > 1 ? arena_sprintf(&k->c->arena, "(%s)", rs.data) : ax;
  if (l && l->kind == EX_CALL && l->lhs->sym && l->lhs->sym->kind == SYM_BUILTIN &&
      l->lhs->sym->index == BI_ALL_REDUCE && call_arg(l, 0) && call_arg(l, 1)) {
    Arg *dst = call_named(k, l, "dst");
    const Type *ax_t = call_arg(l, 1)->value->ty;
    bool on_a = false;
    for (int i = 0; ax_t && ax_t->kind == TY_AXES && i < ax_t->naxes; i++)
      on_a |= ax_t->axes[i] == a;
    if (dst && on_a) {
      note_at(k->c, l->span, "the loss is made R here, the same on every rank of '%s'", ax);
      help_fix(k->c, dst->span, "dst=I", "reduce it to I instead, whose gradient is counted once%s: dst=I",
               fn->ret ? arena_sprintf(&k->c->arena, " (and declare the result I on %s)", ax) : "");
      return;
    }
  }
  if (l) {
    note_at(k->c, l->span, "'%s' returns an R value here: every rank of '%s' holds the whole loss", fn->name, ax);
    const char *code = arena_sprintf(&k->c->arena, "convert(%s, %s, src=R, dst=P)", src_text(k, l), rax);
    help_wrap(k, l, code,
              arena_sprintf(&k->c->arena, "keep one rank's copy as the only term of a pending sum%s: return %s;",
                            fn->ret ? arena_sprintf(&k->c->arena, " (and declare the result P on %s)", rs.data) : "",
                            code));
    return;
  }
  help(k->c, "return the loss as P, one rank's copy the only term: return convert(l, %s, src=R, dst=P);", rax);
}

/* remat(f(args)) (SPEC 15): a call of a user function whose forward the
 * backward runs again instead of keeping its residuals.  Its type is the
 * call's; what cannot be recomputed (a function with effects) is reported
 * by autodiff.c, which sees the instructions. */
Type *check_remat(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Expr *fc = call_arg(call, 0)->value;
  if (fc->kind != EX_CALL || !fc->lhs->sym || fc->lhs->sym->kind != SYM_FN) {
    bool builtin = fc->kind == EX_CALL && fc->lhs->sym && fc->lhs->sym->kind == SYM_BUILTIN;
    if (builtin)
      check_error(k, fc->span, "remat() takes a call of a user function; %s() is a built-in",
                  builtin_name[fc->lhs->sym->index]);
    else
      check_error(k, fc->span, "remat() takes a call of a function, as in remat(block(x, w)); '%s' is not a call",
                  src_text(k, fc));
    help(k->c, "put the computation to recompute in a fn and wrap a call of it: remat(f(...))");
    return type_error();
  }
  Type *t = check_expr(k, fc);
  if (t->kind == TY_VOID) {
    check_error(k, fc->span, "remat() recomputes a result, but '%s' returns nothing", fc->lhs->sym->name);
    help(k->c, "call it without remat(): %s", src_text(k, fc));
    return type_error();
  }
  return t;
}

/* value_and_grad(f(args), wrt=(a, b)) and grad(...): the value's type is
 * f's result; each gradient has the dual type of its argument. */
Type *check_autodiff(Checker *k, Expr *call, Builtin op) {
  Arg *fa = call_arg(call, 0);
  Arg *wrt = call_named(k, call, "wrt");
  if (!fa || fa->value->kind != EX_CALL || !fa->value->lhs->sym || fa->value->lhs->sym->kind == SYM_BUILTIN ||
      (fa->value->lhs->sym->kind != SYM_FN)) {
    check_error(k, fa ? fa->value->span : call->span, "%s() takes a call of a function, as in %s(loss(x, w), wrt=w)",
                builtin_name[op], builtin_name[op]);
    help(k->c, "wrap the expression in a fn returning the scalar loss, and differentiate a call of it");
    return type_error();
  }
  if (!wrt) {
    check_error(k, call->span, "%s() needs wrt=: the arguments to differentiate with respect to", builtin_name[op]);
    help(k->c, "name them: %s(%s, wrt=...)", builtin_name[op], src_text(k, fa->value));
    return type_error();
  }
  Type *v = check_expr(k, fa->value);
  if (v->kind == TY_ERROR)
    return v;
  if (v->kind != TY_TENSOR || v->ndim != 0) {
    check_error(k, fa->value->span, "%s() differentiates a scalar, but '%s' returns %s", builtin_name[op],
                fa->value->lhs->sym->name, ck_type(k, v));
    help(k->c, "return a scalar loss, e.g. sum(y, out_partial_axes=...) / N");
    return type_error();
  }
  for (int a = 0; a < k->naxes; a++)
    if (v->lt[a] == LT_R) {
      check_error(k, fa->value->span, "the loss is R on mesh axis '%s': its gradient would be counted once per rank",
                  axis_name(k, a));
      loss_r_help(k, fa->value->lhs->sym->fn, v, a);
      return type_error();
    }
  Expr *list = wrt->value->kind == EX_TUPLE ? wrt->value->elems : wrt->value;
  int nw = 0;
  for (Expr *w = list; w; w = wrt->value->kind == EX_TUPLE ? w->next : NULL)
    nw++;
  Type *res = type_new(k->c, TY_TUPLE);
  res->elems = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(nw + 2));
  if (op == BI_VALUE_AND_GRAD)
    res->elems[res->nelems++] = v;
  for (Expr *w = list; w; w = wrt->value->kind == EX_TUPLE ? w->next : NULL) {
    bool passed = false;
    for (Arg *a = fa->value->args; a; a = a->next)
      passed |= a->value->kind == EX_NAME && w->kind == EX_NAME && a->value->sym == w->sym && w->sym;
    if (!passed) {
      check_error(k, w->span, "wrt= names '%s', which is not an argument of the call", src_text(k, w));
      help(k->c, "pass it to the function and name it: %s(f(..., %s), wrt=%s)", builtin_name[op], src_text(k, w), src_text(k, w));
      return type_error();
    }
    Type *t = check_expr(k, w);
    if (t->kind == TY_ERROR)
      return t;
    /* a tensor, or a record all of whose fields are float tensors: its
     * gradient is a record of the same struct with the dual types */
    for (int l = 0, nl = type_nleaves(t); l < nl; l++) {
      Type *leaf = type_leaf(t, l);
      if (t->kind == TY_TUPLE || leaf->kind != TY_TENSOR || leaf->dtype == DT_I32) {
        if (t->kind == TY_RECORD)
          check_error(k, w->span, "cannot differentiate with respect to '%s': field '%s' is %s", src_text(k, w),
                      type_leaf_path(k->c, t, l, "."), ck_type(k, leaf));
        else
          check_error(k, w->span, "cannot differentiate with respect to '%s' (%s)", src_text(k, w), ck_type(k, t));
        help(k->c, "differentiate with respect to float tensors, or records of them, only");
        return type_error();
      }
    }
    res->elems[res->nelems++] = type_dual(k->c, t, k->naxes);
  }
  if (res->nelems == 1)
    return res->elems[0];
  return res;
}
