/* check_elementwise.c: the typing rules of the elementwise built-ins and
 * the reductions (ops.def's check_unary, check_binary_builtin,
 * check_reduction rows): shapes, then combine() by the op's class, then in
 * global code the shard rule (shard_broadcast, shard_reduction). */
#include "check.h"
#include "shardprop.h"

/* Whether t is a host number (an int or a float, not a bool). */
static bool host_number(const Type *t) { return t->kind == TY_INT || t->kind == TY_FLOAT; }

Type *check_unary(Checker *k, Expr *call, Builtin op) {
  Arg *a = call_arg(call, 0);
  Type *t = a ? check_expr(k, a->value) : type_error();
  if (host_number(t))
    return check_host_type(TY_FLOAT); /* on a host number: a host number (cos(pi * t)) */
  t = a ? check_as_tensor(k, a->value, t) : t;
  if (t->kind == TY_ERROR)
    return t;
  Operand o = {a->value, t};
  Rule rule = builtin_class[op] == OPC_LINEAR ? RULE_LINEAR : RULE_NONLINEAR;
  return elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), rule, &o, 1);
}

Type *check_binary_builtin(Checker *k, Expr *call, Builtin op) {
  Type *h[2] = {check_expr(k, call_arg(call, 0)->value), check_expr(k, call_arg(call, 1)->value)};
  if (host_number(h[0]) && host_number(h[1])) /* pow(0.9, step), max(a, b) on host numbers */
    return check_host_type(op != BI_POW && h[0]->kind == TY_INT && h[1]->kind == TY_INT ? TY_INT : TY_FLOAT);
  Operand o[2];
  for (int i = 0; i < 2; i++) {
    o[i].e = call_arg(call, i)->value;
    o[i].t = check_as_tensor(k, o[i].e, h[i]);
  }
  return elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), RULE_NONLINEAR, o, 2);
}

/* sum, mean, amax, cumsum, softmax, log_softmax: over `dim=` (or all). */
Type *check_reduction(Checker *k, Expr *call, Builtin op) {
  Type *t = arg_tensor(k, call, 0);
  if (t->kind == TY_ERROR)
    return t;
  Operand o = {call_arg(call, 0)->value, t};
  Rule rule = builtin_class[op] == OPC_LINEAR ? RULE_LINEAR : RULE_NONLINEAR;
  Type *r = elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), rule, &o, 1);
  if (r->kind == TY_ERROR)
    return r;
  r = type_clone(k->c, r);
  long long dimv = 0, keep = 0;
  bool has_dim, has_keep;
  if (!named_int(k, call, "dim", &dimv, &has_dim))
    return type_error();
  Arg *ka = call_named(k, call, "keepdim");
  has_keep = ka && ka->value->kind == EX_BOOL;
  keep = has_keep && ka->value->ival;
  bool keeps_shape = builtin_flags[op] & OPF_KEEPS_SHAPE;
  if (keeps_shape && !has_dim) {
    if (r->ndim == 0)
      return r;
    dimv = -1;
    has_dim = true;
  }
  bool contracted[MAX_MESH_AXES] = {0};
  int lo = 0, hi = r->ndim;
  if (has_dim) {
    int d;
    if (!check_norm_dim(k, call_named(k, call, "dim") ? call_named(k, call, "dim")->value->span : call->span, dimv, r->ndim, &d))
      return type_error();
    lo = d;
    hi = d + 1;
  }
  if (!shard_reduction(k, call, op, o.e, r, lo, hi, has_dim, contracted))
    return type_error();
  if (keeps_shape)
    return r;
  Type *res = type_clone(k->c, r);
  res->ndim = 0;
  for (int d = 0; d < r->ndim; d++) {
    if (d >= lo && d < hi) {
      if (keep)
        res->shape[res->ndim++] = size_int(1);
      continue;
    }
    res->shape[res->ndim++] = r->shape[d];
  }
  shard_reduction_result(r, res, lo, hi, keep);
  if (op == BI_SUM || op == BI_MEAN) {
    if (!apply_out_partial(k, call, res, contracted))
      return type_error();
  }
  return res;
}
