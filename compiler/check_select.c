/* check_select.c: the local typing rules of SPEC 13's host values, masks,
 * selection and losses, one check_<op>() each: item, axis_size,
 * axis_index, wall_time, iota, where, take_along_dim, dropout,
 * cross_entropy.  Each checks shapes, then the local R/I/V/P rules
 * (combine() in check_rules.c, with the op's own rule for a condition or
 * indices), then, in global code, the op's shard rule shard_<op>() in
 * shardprop.c.  The backwards are the IR_<OP> cases of bwd_rule() in
 * autodiff.c. */
#include <string.h>

#include "check.h"
#include "shardprop.h"

/* ---- host values from tensors and the mesh ---- */

/* item(x): a 0-d tensor that is R or I on every axis, as a host number
 * (an int for i32, else a float): the same on every rank, so it may steer
 * control flow. */
Type *check_item(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Expr *xe = call_arg(call, 0)->value;
  Type *t = check_expr(k, xe);
  if (t->kind == TY_ERROR)
    return t;
  if (t->kind != TY_TENSOR || t->literal || t->ndim != 0) {
    check_error(k, xe->span, "item() takes a 0-d tensor, got %s", t->kind == TY_TENSOR && !t->literal ? ck_type(k, t)
                                                                    : "a host number");
    if (t->kind == TY_TENSOR && !t->literal)
      help(k->c, "reduce it to one value first, e.g. item(amax(%s))", src_text(k, xe));
    return type_error();
  }
  for (int a = 0; a < k->naxes; a++) {
    LTypeKind l = t->lt[a];
    if (l == LT_R || l == LT_I)
      continue;
    if (l == LT_NONE) {
      check_error(k, xe->span, "the type of '%s' on mesh axis '%s' is not known", src_text(k, xe), axis_name(k, a));
      help(k->c, "name the axis in its type, e.g. {%s: R}", axis_name(k, a));
      return type_error();
    }
    check_error(k, call->span, "item() makes a host number, the same on every rank, but '%s' is %s on mesh axis '%s'",
                src_text(k, xe), lt_name(l), axis_name(k, a));
    note_at(k->c, (Span){0, 0, 0}, "'%s' is %s; ranks holding different numbers could take different paths and deadlock "
            "in a collective", src_text(k, xe), ck_type(k, t));
    if (l == LT_P)
      help(k->c, "reduce it first: item(all_reduce(%s, %s, src=P, dst=R))", src_text(k, xe), axis_name(k, a));
    else
      help(k->c, "combine the ranks' values first: item(all_reduce(%s, %s, src=V, dst=R, op=max)) (or op=sum, min, avg)",
           src_text(k, xe), axis_name(k, a));
    return type_error();
  }
  return type_new(k->c, t->dtype == DT_I32 ? TY_INT : TY_FLOAT);
}

/* The axes argument of axis_size/axis_index, or NULL after an error. */
static Type *axes_arg(Checker *k, Expr *call, Builtin op) {
  Expr *ae = call_arg(call, 0)->value;
  Type *t = check_expr(k, ae);
  if (t->kind == TY_AXES || t->kind == TY_ERROR)
    return t->kind == TY_AXES ? t : NULL;
  check_error(k, ae->span, "%s() takes a mesh axis, as in %s(tp), not '%s'", builtin_name[op], builtin_name[op],
              src_text(k, ae));
  return NULL;
}

/* axis_size(a): the run-time size of a mesh axis (or the product over a
 * tuple) as a host integer. */
Type *check_axis_size(Checker *k, Expr *call, Builtin op) {
  (void)op;
  return axes_arg(k, call, BI_AXIS_SIZE) ? type_new(k->c, TY_INT) : type_error();
}

/* shard_offset(n, a) and shard_extent(n, a): where this rank's block of a
 * dim of global size n sharded over a (an axis or a tuple, major to minor)
 * starts, and how many rows it holds: the torch.chunk split (SPEC 4, uneven
 * shards), n / axis_size(a) rows from axis_index(a) * that when a divides n.
 * An i32 scalar V on a's axes and R on the others, like axis_index, and
 * only where a's axes are local: it differs per rank. */
Type *check_shard_range(Checker *k, Expr *call, Builtin op) {
  Expr *ne = call_arg(call, 0)->value, *ae = call_arg(call, 1)->value;
  Type *nt = check_expr(k, ne), *ax = check_expr(k, ae);
  if (nt->kind == TY_ERROR || ax->kind == TY_ERROR)
    return type_error();
  if (nt->kind != TY_INT) {
    check_error(k, ne->span, "%s() takes the dim's global size, a host integer, not '%s'", builtin_name[op],
                src_text(k, ne));
    help(k->c, "as in %s(NV, tp) for a dim of size NV sharded over tp", builtin_name[op]);
    return type_error();
  }
  if (ax->kind != TY_AXES) {
    check_error(k, ae->span, "%s() takes a mesh axis or a tuple of them, as in %s(NV, tp), not '%s'",
                builtin_name[op], builtin_name[op], src_text(k, ae));
    return type_error();
  }
  Type *r = type_scalar(k->c, DT_I32, k->naxes, LT_R);
  for (int i = 0; i < ax->naxes; i++) {
    int a = ax->axes[i];
    if (!check_axis_local(k, a)) {
      const char *n = axis_name(k, a);
      check_error(k, call->span, "%s(..., %s) is only allowed where '%s' is local, and it is global here",
                  builtin_name[op], n, n);
      note_at(k->c, (Span){0, 0, 0}, "the block differs per rank (V on '%s'); in global code a value that varies "
              "must say how its blocks form a global tensor", n);
      help(k->c, "use it in local code: inside local_map (...) over (%s) { ... } or in a local fn", n);
      return type_error();
    }
    r->lt[a] = LT_V;
  }
  r->local = check_all_local(k);
  return r;
}

/* axis_index(a): this rank's index along a, an i32 scalar that is V on a
 * and R on every other axis; only where a is local (SPEC 13): in global code
 * a value that varies must have a layout, and the index has none. */
Type *check_axis_index(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Type *ax = axes_arg(k, call, BI_AXIS_INDEX);
  if (!ax)
    return type_error();
  if (ax->naxes != 1) {
    check_error(k, call->span, "axis_index() takes one mesh axis, not a tuple");
    if (ax->naxes == 2)
      help(k->c, "the index in the flattened group is axis_index(%s) * axis_size(%s) + axis_index(%s)",
           axis_name(k, ax->axes[0]), axis_name(k, ax->axes[1]), axis_name(k, ax->axes[1]));
    return type_error();
  }
  int a = ax->axes[0];
  if (!check_axis_local(k, a)) {
    const char *n = axis_name(k, a);
    check_error(k, call->span, "axis_index(%s) is only allowed where '%s' is local, and it is global here", n, n);
    note_at(k->c, (Span){0, 0, 0}, "the index differs per rank (V on '%s'); in global code a value that varies must say "
            "how its blocks form a global tensor, and the index has no such layout", n);
    help(k->c, "use it in local code: inside local_map (...) over (%s) { ... } or in a local fn", n);
    return type_error();
  }
  Type *r = type_scalar(k->c, DT_I32, k->naxes, LT_R);
  r->lt[a] = LT_V;
  r->local = check_all_local(k);
  return r;
}

/* wall_time(): seconds since the start, rank 0's clock. */
Type *check_wall_time(Checker *k, Expr *call, Builtin op) {
  (void)k, (void)call, (void)op;
  return check_host_type(TY_FLOAT);
}

/* ---- iota ---- */

/* iota(T, dim=d): each element's global index along d, typed T (a creation
 * op: T names every axis and is not P). */
Type *check_iota(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Type *t = check_creation(k, call, BI_IOTA);
  if (t->kind == TY_ERROR)
    return t;
  long long d;
  bool given;
  Arg *da = call_named(k, call, "dim");
  if (!named_int(k, call, "dim", &d, &given))
    return type_error();
  if (!given) {
    check_error(k, call->span, "iota() needs dim=, the dim whose index each element holds");
    help(k->c, "e.g. iota(%s, dim=0)", src_text(k, call_arg(call, 0)->value));
    return type_error();
  }
  int dim;
  if (!check_norm_dim(k, da->value->span, d, t->ndim, &dim))
    return type_error();
  return t;
}

/* ---- where ---- */

/* Whether e is the number 0 written as a literal or a constant. */
static bool host_number(Expr *e, double *v);
static bool is_zero(Expr *e) {
  double v;
  return host_number(e, &v) && v == 0;
}

/* where's local rule on each axis: the values (o[1], o[2]) are linear (both
 * P or neither, only a literal 0 beside P); the condition (o[0]) is not
 * linear and has no gradient, so it takes no part in the I rule: R or I
 * leaves the values' type, V makes it V (which I and P values cannot be). */
static bool where_types(Checker *k, Expr *call, const Operand o[3], LTypeKind out[MAX_MESH_AXES]) {
  const Type *c = o[0].t;
  for (int a = 0; a < k->naxes; a++) {
    const char *an = axis_name(k, a);
    if (c->lt[a] == LT_NONE) {
      check_error(k, o[0].e->span, "the type of '%s' on mesh axis '%s' is not known", src_text(k, o[0].e), an);
      help(k->c, "name the axis in its type, e.g. {%s: R}", an);
      return false;
    }
    if (c->lt[a] == LT_P) {
      check_error(k, call->span, "where()'s condition '%s' is P (a pending sum) on mesh axis '%s'", src_text(k, o[0].e), an);
      note_at(k->c, (Span){0, 0, 0}, "which elements are selected depends on the sum, not on each rank's term");
      help(k->c, "reduce it first: all_reduce(%s, %s, src=P, dst=R)", src_text(k, o[0].e), an);
      return false;
    }
    for (int i = 1; i <= 2; i++) {
      const Operand *p = &o[i], *q = &o[3 - i];
      if (p->t->literal || p->t->lt[a] != LT_P || (!q->t->literal && q->t->lt[a] == LT_P))
        continue;
      if (q->t->literal && is_zero(q->e))
        continue; /* where(c, p, 0) is c * p */
      if (q->t->literal)
        check_error(k, call->span, "where() selects between a P value and the literal %s on mesh axis '%s'",
                    src_text(k, q->e), an);
      else
        check_error(k, call->span, "where() selects between '%s' (P) and '%s' (%s) on mesh axis '%s'", src_text(k, p->e),
                    src_text(k, q->e), lt_name(q->t->lt[a]), an);
      if (!q->t->literal && q->t->lt[a] == LT_V)
        note_at(k->c, (Span){0, 0, 0}, "a pending sum (P) cannot meet a value that differs per rank (V)");
      else
        note_at(k->c, (Span){0, 0, 0}, "the other value would be counted once per rank when the pending sum is done; "
                "only 0 may stand beside a P value (where(c, p, 0) is c * p)");
      note_operands(k, o + 1, 2);
      help(k->c, "reduce the P operand first: all_reduce(%s, %s, src=P, dst=R)", src_text(k, p->e), an);
      return false;
    }
  }
  /* the values by the linear rule (a 0 literal stands aside: it adopts P) */
  Operand vals[2];
  int nv = 0, ntensor = 0;
  for (int i = 1; i <= 2; i++) {
    ntensor += !o[i].t->literal;
    if (!(o[i].t->literal && is_zero(o[i].e)))
      vals[nv++] = o[i];
  }
  LTypeKind vl[MAX_MESH_AXES];
  if (!combine(k, RULE_LINEAR, "where()", call->span, vals, nv, vl))
    return false;
  for (int a = 0; a < k->naxes; a++) {
    LTypeKind v = ntensor ? vl[a] : c->lt[a]; /* literal values take the condition's type */
    if (c->lt[a] == LT_V && ntensor && v != LT_V && v != LT_R) {
      const Operand *bad = !o[1].t->literal && o[1].t->lt[a] == v ? &o[1] : &o[2];
      check_error(k, call->span, "where() selects %s values with a condition that is V on mesh axis '%s'", lt_name(v),
                  axis_name(k, a));
      note_at(k->c, (Span){0, 0, 0}, "each rank selects differently, so the result varies per rank (V)%s",
              v == LT_I ? "; an I value's gradient must be the same on every rank"
                        : "; a pending sum cannot meet a value that differs per rank");
      note_operands(k, o, 3);
      if (v == LT_I)
        help(k->c, "use the I value as R where it is computed with: convert(%s, %s, src=I, dst=R)", src_text(k, bad->e),
             axis_name(k, a));
      else
        help(k->c, "reduce the P operand first: all_reduce(%s, %s, src=P, dst=R)", src_text(k, bad->e), axis_name(k, a));
      return false;
    }
    out[a] = c->lt[a] == LT_V ? LT_V : v;
  }
  return true;
}

/* where(c, a, b): select a where c != 0, else b, with NumPy broadcasting of
 * all three; c is a mask of any dtype, a and b share one dtype (a literal
 * adopts the other's). */
Type *check_where(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Operand o[3];
  for (int i = 0; i < 3; i++) {
    o[i].e = call_arg(call, i)->value;
    o[i].t = check_as_tensor(k, o[i].e, check_expr(k, o[i].e));
    if (o[i].t->kind == TY_ERROR)
      return type_error();
  }
  if (o[0].t->literal) {
    check_error(k, o[0].e->span, "where() takes a mask tensor as its condition, not a number");
    help(k->c, "compare tensors to make one, e.g. where(x > 0.0, x, 0.0)");
    return type_error();
  }
  const Type *a = o[1].t, *b = o[2].t;
  if (!a->literal && !b->literal && a->dtype != b->dtype) {
    check_error(k, call->span, "where() selects between values of one dtype, got %s and %s", dtype_name(a->dtype),
                dtype_name(b->dtype));
    help(k->c, "convert one: astype(%s, %s)", src_text(k, o[2].e), dtype_name(a->dtype));
    return type_error();
  }
  /* NumPy broadcasting of the three shapes (the condition's dtype aside) */
  Type *r = type_clone(k->c, o[0].t);
  r->dtype = !a->literal ? a->dtype : !b->literal ? b->dtype : o[0].t->dtype;
  r->local = check_all_local(k);
  for (int i = 1; i < 3; i++) {
    const Type *t = o[i].t;
    int nd = t->ndim > r->ndim ? t->ndim : r->ndim;
    Size shape[MAX_DIMS];
    for (int d = 0; d < nd; d++) {
      int dr = d - (nd - r->ndim), dt = d - (nd - t->ndim);
      long long one;
      bool r1 = dr < 0 || (size_is_int(r->shape[dr], &one) && one == 1);
      bool t1 = dt < 0 || (size_is_int(t->shape[dt], &one) && one == 1);
      if (!r1 && !t1 && !size_eq(r->shape[dr], t->shape[dt])) {
        check_error(k, call->span, "where(): shapes do not broadcast: dim %d is %s in one operand and %s in another", d,
                    size_str(k->c, k->mesh, r->shape[dr]), size_str(k->c, k->mesh, t->shape[dt]));
        note_operands(k, o, 3);
        return type_error();
      }
      shape[d] = r1 && dt >= 0 ? t->shape[dt] : r->shape[dr];
    }
    r->ndim = nd;
    memcpy(r->shape, shape, sizeof(Size) * (size_t)nd);
  }
  memset(r->spec, -1, sizeof r->spec);
  if (!where_types(k, call, o, r->lt) || !shard_where(k, call->span, o, r))
    return type_error();
  return r;
}

/* ---- take_along_dim ---- */

/* take_along_dim(x, idx, dim=d): PyTorch's; i32 idx with x's number of dims,
 * the others broadcast.  Linear in x; idx combines with x by the
 * elementwise rules and cannot be P. */
Type *check_take_along_dim(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Operand o[2];
  for (int i = 0; i < 2; i++) {
    o[i].e = call_arg(call, i)->value;
    o[i].t = check_as_tensor(k, o[i].e, check_expr(k, o[i].e));
    if (o[i].t->kind == TY_ERROR)
      return type_error();
    if (o[i].t->literal) {
      check_error(k, o[i].e->span, "take_along_dim() takes tensors, not a number");
      return type_error();
    }
  }
  const Type *x = o[0].t, *ix = o[1].t;
  if (ix->dtype != DT_I32) {
    check_error(k, o[1].e->span, "take_along_dim() takes i32 indices, got %s", ck_type(k, ix));
    help(k->c, "convert them: astype(%s, i32)", src_text(k, o[1].e));
    return type_error();
  }
  if (x->ndim == 0 || ix->ndim != x->ndim) {
    check_error(k, call->span, "take_along_dim() needs indices with as many dims as the input (%d), got %s", x->ndim,
                ck_type(k, ix));
    if (ix->ndim + 1 == x->ndim)
      help(k->c, "add the size-1 dim to take along: reshape(%s, [...]) with a 1 where the input's dim is", src_text(k, o[1].e));
    return type_error();
  }
  long long dv;
  bool given;
  Arg *da = call_named(k, call, "dim");
  if (!named_int(k, call, "dim", &dv, &given))
    return type_error();
  if (!given) {
    check_error(k, call->span, "take_along_dim() needs dim=, the dim to take along");
    help(k->c, "e.g. take_along_dim(%s, %s, dim=-1)", src_text(k, o[0].e), src_text(k, o[1].e));
    return type_error();
  }
  int dim;
  if (!check_norm_dim(k, da->value->span, dv, x->ndim, &dim))
    return type_error();
  Type *r = type_clone(k->c, x);
  memset(r->spec, -1, sizeof r->spec);
  r->local = check_all_local(k);
  for (int d = 0; d < x->ndim; d++) {
    long long one;
    bool x1 = size_is_int(x->shape[d], &one) && one == 1, i1 = size_is_int(ix->shape[d], &one) && one == 1;
    if (d != dim && !x1 && !i1 && !size_eq(x->shape[d], ix->shape[d])) {
      check_error(k, call->span, "take_along_dim(): dim %d is %s in '%s' but %s in '%s'; only dim %d may differ", d,
                  size_str(k->c, k->mesh, x->shape[d]), src_text(k, o[0].e), size_str(k->c, k->mesh, ix->shape[d]),
                  src_text(k, o[1].e), dim);
      note_operands(k, o, 2);
      return type_error();
    }
    r->shape[d] = d == dim || x1 ? ix->shape[d] : x->shape[d];
  }
  for (int a = 0; a < k->naxes; a++)
    if (ix->lt[a] == LT_P) {
      check_error(k, call->span, "take_along_dim()'s indices '%s' are P (a pending sum) on mesh axis '%s'",
                  src_text(k, o[1].e), axis_name(k, a));
      note_at(k->c, (Span){0, 0, 0}, "the elements taken depend on the summed indices, not on each rank's term");
      help(k->c, "reduce them first: all_reduce(%s, %s, src=P, dst=R)", src_text(k, o[1].e), axis_name(k, a));
      return type_error();
    }
  if (!combine(k, RULE_MULTILINEAR, "take_along_dim()", call->span, o, 2, r->lt) ||
      !shard_take_along_dim(k, call, o, dim, r))
    return type_error();
  return r;
}

/* ---- dropout ---- */

/* The value of a number written as a literal or a constant. */
static bool host_number(Expr *e, double *v) {
  if (e->kind == EX_UNARY && e->op == OP_NEG && host_number(e->lhs, v)) {
    *v = -*v;
    return true;
  }
  if (e->kind == EX_INT || e->kind == EX_FLOAT) {
    *v = e->kind == EX_INT ? (double)e->ival : e->fval;
    return true;
  }
  if ((e->kind == EX_NAME || e->kind == EX_FIELD) && e->sym && e->sym->kind == SYM_CONST && e->sym->evaluated) {
    *v = e->sym->is_float ? e->sym->fval : (double)e->sym->ival;
    return true;
  }
  return false;
}

/* dropout(x, p=, seed=): linear in x, so every type is kept; p a host
 * number in [0, 1) (checked here when it is a constant, else at run time),
 * seed a host integer. */
Type *check_dropout(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Expr *xe = call_arg(call, 0)->value;
  Type *x = check_as_tensor(k, xe, check_expr(k, xe));
  if (x->kind == TY_ERROR)
    return x;
  if (x->literal || x->dtype == DT_I32) {
    check_error(k, xe->span, "dropout() takes a float tensor, got %s", x->literal ? "a number" : ck_type(k, x));
    return type_error();
  }
  Arg *sa = call_named(k, call, "seed"), *pa = call_named(k, call, "p");
  if (!sa) {
    check_error(k, call->span, "dropout() needs seed=: its mask is a function of the seed and each element's index");
    help(k->c, "e.g. dropout(%s, p=0.1, seed=step), with a seed that changes every step", src_text(k, xe));
    return type_error();
  }
  Type *st = check_expr(k, sa->value);
  if (st->kind != TY_INT && st->kind != TY_ERROR) {
    check_error(k, sa->value->span, "dropout()'s seed= must be a host integer, not %s", ck_type(k, st));
    help(k->c, "use a constant, a loop index, or item() of an i32 scalar that is R or I");
    return type_error();
  }
  if (pa) {
    Type *pt = check_expr(k, pa->value);
    if (pt->kind != TY_INT && pt->kind != TY_FLOAT && pt->kind != TY_ERROR) {
      check_error(k, pa->value->span, "dropout()'s p= must be a host number, not %s", ck_type(k, pt));
      return type_error();
    }
    double p;
    if (host_number(pa->value, &p) && !(p >= 0 && p < 1)) {
      check_error(k, pa->value->span, "dropout() takes 0 <= p < 1, got p=%s", src_text(k, pa->value));
      help(k->c, "p is the probability of zeroing an element; p=0 keeps every element");
      return type_error();
    }
  }
  Operand o = {xe, x};
  return elementwise(k, call->span, "dropout()", RULE_LINEAR, &o, 1);
}

/* ---- cross_entropy ---- */

/* reduction= as rt_ce_reduction's order (mean, sum, none), or -1. */
static int reduction_of(Checker *k, Expr *call) {
  Arg *ra = call_named(k, call, "reduction");
  if (!ra)
    return 0;
  Expr *e = ra->value;
  if (e->kind == EX_STRING) {
    if (!strcmp(e->str, "mean"))
      return 0;
    if (!strcmp(e->str, "sum"))
      return 1;
    if (!strcmp(e->str, "none"))
      return 2;
  }
  check_error(k, e->span, "reduction= is \"mean\", \"sum\" or \"none\", not %s", src_text(k, e));
  return -1;
}

/* cross_entropy(logits, targets, reduction=): logits [..., C] (classes
 * last), i32 targets [...]; nonlinear in both; "none" keeps the leading
 * dims, "sum" and "mean" give a scalar (out_partial_axes as for sum). */
Type *check_cross_entropy(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Operand o[2];
  for (int i = 0; i < 2; i++) {
    o[i].e = call_arg(call, i)->value;
    o[i].t = check_as_tensor(k, o[i].e, check_expr(k, o[i].e));
    if (o[i].t->kind == TY_ERROR)
      return type_error();
  }
  const Type *x = o[0].t, *tg = o[1].t;
  int red = reduction_of(k, call);
  if (red < 0)
    return type_error();
  if (x->literal || tg->literal || x->ndim < 1 || x->dtype == DT_I32 || tg->dtype != DT_I32 ||
      tg->ndim != x->ndim - 1) {
    check_error(k, call->span, "cross_entropy(logits, targets) takes float logits [..., C] and i32 targets [...] (the "
                "logits' dims without the last), got %s and %s", x->literal ? "a number" : ck_type(k, x),
                tg->literal ? "a number" : ck_type(k, tg));
    if (!tg->literal && tg->dtype != DT_I32 && tg->ndim == x->ndim - 1)
      help(k->c, "convert the targets: astype(%s, i32)", src_text(k, o[1].e));
    return type_error();
  }
  for (int d = 0; d < tg->ndim; d++)
    if (!size_eq(x->shape[d], tg->shape[d])) {
      check_error(k, call->span, "cross_entropy(): dim %d is %s in the logits but %s in the targets", d,
                  size_str(k->c, k->mesh, x->shape[d]), size_str(k->c, k->mesh, tg->shape[d]));
      note_operands(k, o, 2);
      return type_error();
    }
  Type *r = type_new(k->c, TY_TENSOR);
  r->dtype = x->dtype;
  r->local = check_all_local(k);
  memset(r->spec, -1, sizeof r->spec);
  if (red == 2) { /* none: the targets' shape */
    r->ndim = tg->ndim;
    memcpy(r->shape, tg->shape, sizeof r->shape);
  }
  if (!combine(k, RULE_NONLINEAR, "cross_entropy()", call->span, o, 2, r->lt))
    return type_error();
  Arg *opa = call_named(k, call, "out_partial_axes");
  if (opa && red == 2) {
    check_error(k, opa->name_span, "out_partial_axes needs a reduction, but reduction=\"none\" keeps the dims");
    help(k->c, "sum the losses: cross_entropy(..., reduction=\"sum\", out_partial_axes=...)");
    return type_error();
  }
  bool contracted[MAX_MESH_AXES] = {0};
  if (!shard_cross_entropy(k, call, o, red, r, contracted))
    return type_error();
  if (red != 2 && !apply_out_partial(k, call, r, contracted))
    return type_error();
  return r;
}

/* ---- indices and values along a whole dim (docs/weights.md, "Sampling") ---- */

/* The rule these share: x a tensor, never P (a pending sum's parts say
 * nothing of its maximum), the dim whole on every rank (shard_reduction). */
static Type *whole_dim_operand(Checker *k, Expr *call, Builtin op, int *dim, bool need_dim) {
  Type *t = arg_tensor(k, call, 0);
  if (t->kind == TY_ERROR)
    return t;
  Operand o = {call_arg(call, 0)->value, t};
  Type *r = elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), RULE_NONLINEAR, &o, 1);
  if (r->kind == TY_ERROR)
    return r;
  if (r->ndim == 0) {
    check_error(k, call->span, "%s() picks along a dim, but '%s' has none", builtin_name[op], src_text(k, o.e));
    return type_error();
  }
  long long dv = -1;
  bool has_dim = false;
  if (!named_int(k, call, "dim", &dv, &has_dim))
    return type_error();
  if (need_dim && !has_dim) {
    check_error(k, call->span, "%s() needs dim=, the dim to pick along", builtin_name[op]);
    help(k->c, "%s(%s, dim=-1)", builtin_name[op], src_text(k, o.e));
    return type_error();
  }
  Arg *da = call_named(k, call, "dim");
  if (!check_norm_dim(k, da ? da->value->span : call->span, has_dim ? dv : -1, r->ndim, dim))
    return type_error();
  bool contracted[MAX_MESH_AXES] = {0};
  if (!shard_reduction(k, call, op, o.e, r, *dim, *dim + 1, true, contracted))
    return type_error();
  return r;
}

/* argmax(x, dim=d), argmin: i32 indices, the dim removed (kept as 1 with
 * keepdim=true); the first one on ties. */
Type *check_argmax(Checker *k, Expr *call, Builtin op) {
  int d = 0;
  Type *r = whole_dim_operand(k, call, op, &d, true);
  if (r->kind == TY_ERROR)
    return r;
  Arg *ka = call_named(k, call, "keepdim");
  bool keep = ka && ka->value->kind == EX_BOOL && ka->value->ival;
  Type *res = type_clone(k->c, r);
  res->dtype = DT_I32;
  res->ndim = 0;
  for (int i = 0; i < r->ndim; i++) {
    if (i == d) {
      if (keep)
        res->shape[res->ndim++] = size_int(1);
      continue;
    }
    res->shape[res->ndim++] = r->shape[i];
  }
  shard_reduction_result(r, res, d, d + 1, keep);
  return res;
}

/* topk(x, k=K, dim=d): the K largest values along d, largest first. */
Type *check_topk(Checker *k, Expr *call, Builtin op) {
  int d = 0;
  Type *r = whole_dim_operand(k, call, op, &d, false);
  if (r->kind == TY_ERROR)
    return r;
  long long kv = 0, n = 0;
  bool has_k = false;
  if (!named_int(k, call, "k", &kv, &has_k))
    return type_error();
  if (!has_k || kv < 1) {
    check_error(k, call->span, "topk() needs k=, a positive number of values (a constant)");
    help(k->c, "topk(%s, k=40)", src_text(k, call_arg(call, 0)->value));
    return type_error();
  }
  if (size_is_int(r->shape[d], &n) && kv > n) {
    check_error(k, call->span, "topk() takes %lld values along dim %d, which has %lld", kv, d, n);
    return type_error();
  }
  Type *res = type_clone(k->c, r);
  res->shape[d] = size_int(kv);
  return res;
}

/* categorical(logits, seed=s, temperature=t, top_k=k): an i32 class per
 * row of the last dim, drawn from softmax(logits / t) over the k largest
 * (k = 0: all; t = 0: the largest, greedy). */
Type *check_categorical(Checker *k, Expr *call, Builtin op) {
  Arg *da = call_named(k, call, "dim");
  if (da) {
    check_error(k, da->value->span, "categorical() draws along the last dim; it takes no dim=");
    return type_error();
  }
  int d = 0;
  Type *r = whole_dim_operand(k, call, op, &d, false);
  if (r->kind == TY_ERROR)
    return r;
  if (r->dtype == DT_I32) {
    check_error(k, call->span, "categorical() draws from float logits, not i32");
    return type_error();
  }
  if (!call_named(k, call, "seed")) {
    check_error(k, call->span, "categorical() needs seed=, which draws the classes");
    help(k->c, "categorical(%s, seed=step, temperature=0.8, top_k=40): the same seed draws the same on every mesh",
         src_text(k, call_arg(call, 0)->value));
    return type_error();
  }
  for (Arg *a = call->args; a; a = a->next)
    if (a->name) {
      Type *at = check_expr(k, a->value);
      if (!is_scalar_like(at) && at->kind != TY_ERROR)
        check_error(k, a->value->span, "'%s=' takes a number", a->name);
    }
  Type *res = type_clone(k->c, r);
  res->dtype = DT_I32;
  res->ndim = r->ndim - 1;
  shard_reduction_result(r, res, d, d + 1, false);
  return res;
}
