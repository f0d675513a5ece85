/* check_nn.c: the typing rules of the contractions and shape ops: matmul
 * (and '@'), layer_norm/rms_norm, embedding, einsum, concat, and
 * transpose/permute/reshape/slice/expand/astype/detach (check_misc).  Each
 * checks shapes, then combine(), then its shard rule(s) in shardprop.c,
 * then out_partial_axes=. */
#include <string.h>

#include "check.h"
#include "shardprop.h"

Type *check_matmul(Checker *k, Expr *call, Expr *ea, Expr *eb, const char *opname) {
  Type *a = check_as_tensor(k, ea, check_expr(k, ea));
  Type *b = check_as_tensor(k, eb, check_expr(k, eb));
  if (a->kind == TY_ERROR || b->kind == TY_ERROR)
    return type_error();
  if (a->ndim < 1 || b->ndim < 1) {
    check_error(k, call->span, "%s needs tensors of at least 1 dim, got %s and %s", opname, ck_type(k, a), ck_type(k, b));
    return type_error();
  }
  if (a->dtype != b->dtype) {
    check_error(k, call->span, "%s needs operands of one dtype, got %s and %s", opname, dtype_name(a->dtype),
                dtype_name(b->dtype));
    help(k->c, "convert one: astype(%s, %s)", src_text(k, eb), dtype_name(a->dtype));
    return type_error();
  }
  int ka = a->ndim - 1, kb = b->ndim >= 2 ? b->ndim - 2 : 0;
  if (!size_eq(a->shape[ka], b->shape[kb])) {
    check_error(k, call->span, "%s: the contracted dims differ: %s has %s, %s has %s", opname, src_text(k, ea),
                size_str(k->c, k->mesh, a->shape[ka]), src_text(k, eb), size_str(k->c, k->mesh, b->shape[kb]));
    note_at(k->c, (Span){0, 0, 0}, "%s is %s", src_text(k, ea), ck_type(k, a));
    note_at(k->c, (Span){0, 0, 0}, "%s is %s", src_text(k, eb), ck_type(k, b));
    return type_error();
  }
  Operand o[2] = {{ea, a}, {eb, b}};
  if (!shard_matmul_contracted(k, opname, call->span, o, ka, kb))
    return type_error();
  Type *r = type_new(k->c, TY_TENSOR);
  r->dtype = a->dtype;
  r->local = check_all_local(k);
  if (!combine(k, RULE_MULTILINEAR, opname, call->span, o, 2, r->lt))
    return type_error();
  /* batch dims broadcast (NumPy); then m from a, n from b */
  int ba = a->ndim - 2 > 0 ? a->ndim - 2 : 0, bb = b->ndim - 2 > 0 ? b->ndim - 2 : 0;
  int nb = ba > bb ? ba : bb;
  for (int d = 0; d < nb; d++) {
    int da = d - (nb - ba), db = d - (nb - bb);
    long long one;
    bool a1 = da < 0 || (size_is_int(a->shape[da], &one) && one == 1);
    bool b1 = db < 0 || (size_is_int(b->shape[db], &one) && one == 1);
    if (!a1 && !b1 && !size_eq(a->shape[da], b->shape[db])) {
      check_error(k, call->span, "%s: batch dims differ: %s and %s", opname, size_str(k->c, k->mesh, a->shape[da]),
                  size_str(k->c, k->mesh, b->shape[db]));
      note_operands(k, o, 2);
      return type_error();
    }
    int owner = !a1 || b1 ? 0 : 1, od = owner ? db : da;
    if (od < 0) {
      owner = 1 - owner;
      od = owner ? db : da;
    }
    r->shape[r->ndim] = o[owner].t->shape[od];
    if (!shard_matmul_batch(k, opname, call->span, o, r, d, da, db, owner, od, !a1 && !b1))
      return type_error();
    r->ndim++;
  }
  if (a->ndim >= 2)
    r->shape[r->ndim++] = a->shape[a->ndim - 2];
  if (b->ndim >= 2)
    r->shape[r->ndim++] = b->shape[b->ndim - 1];
  bool contracted[MAX_MESH_AXES] = {0};
  if (!shard_matmul(k, opname, call->span, o, r, contracted))
    return type_error();
  if (!apply_out_partial(k, call, r, contracted))
    return type_error();
  return r;
}

/* matmul(a, b): the rule that `@` shares. */
Type *check_matmul_call(Checker *k, Expr *call, Builtin op) {
  (void)op;
  return check_matmul(k, call, call_arg(call, 0)->value, call_arg(call, 1)->value, "matmul()");
}

/* Norms: nonlinear over the last dim (layer_norm, rms_norm); weights
 * combine like the input.  (cross_entropy is in check_select.c.) */
Type *check_nn(Checker *k, Expr *call, Builtin op) {
  Operand ops[3];
  int n = 0;
  for (Arg *a = call->args; a && n < 3; a = a->next)
    if (!a->name) {
      ops[n].e = a->value;
      ops[n].t = check_as_tensor(k, a->value, check_expr(k, a->value));
      if (ops[n].t->kind == TY_ERROR)
        return type_error();
      n++;
    }
  const Type *x = ops[0].t;
  if (x->ndim < 1) {
    check_error(k, call->span, "%s() needs at least one dim", builtin_name[op]);
    return type_error();
  }
  if (!shard_norm(k, call, op, &ops[0]))
    return type_error();
  return elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), RULE_NONLINEAR, ops, n);
}

Type *check_embedding(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Arg *ia = call_arg(call, 0), *wa = call_arg(call, 1);
  Type *ids = arg_tensor(k, call, 0), *w = arg_tensor(k, call, 1);
  if (ids->kind == TY_ERROR || w->kind == TY_ERROR)
    return type_error();
  if (ids->dtype != DT_I32 || w->ndim != 2) {
    check_error(k, call->span, "embedding(ids, table) takes i32 ids and a [V, D] table, got %s and %s", ck_type(k, ids),
                ck_type(k, w));
    return type_error();
  }
  Operand o[2] = {{ia->value, ids}, {wa->value, w}};
  for (int a = 0; a < k->naxes; a++)
    if (ids->lt[a] == LT_P) { /* a row is looked up by the whole id, not by each rank's term of it */
      check_error(k, call->span, "embedding()'s ids '%s' are P (a pending sum) on mesh axis '%s'", src_text(k, ia->value),
                  axis_name(k, a));
      note_at(k->c, (Span){0, 0, 0}, "the rows looked up depend on the summed ids, not on each rank's term");
      note_p_origin(k, ia->value, a);
      const char *fix = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", src_text(k, ia->value), axis_name(k, a));
      help_wrap(k, ia->value, fix, arena_sprintf(&k->c->arena, "reduce them first: %s", fix));
      return type_error();
    }
  Type *r = type_clone(k->c, ids);
  r->dtype = w->dtype;
  if (!combine(k, RULE_MULTILINEAR, "embedding()", call->span, o, 2, r->lt))
    return type_error();
  r->shape[r->ndim++] = w->shape[1];
  bool contracted[MAX_MESH_AXES] = {0};
  if (!shard_embedding(k, call->span, o, r, contracted))
    return type_error();
  if (!apply_out_partial(k, call, r, contracted))
    return type_error();
  return r;
}

/* einsum("bf,fd->bd", a, b): labels give the shapes; contracted labels that
 * are sharded need out_partial_axes, as for matmul. */
Type *check_einsum(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Arg *fa = call_arg(call, 0);
  if (!fa || fa->value->kind != EX_STRING) {
    check_error(k, call->span, "einsum() takes a subscripts string first, as in einsum(\"bf,fd->bd\", a, b)");
    return type_error();
  }
  const char *spec = fa->value->str;
  const char *arrow = strstr(spec, "->");
  Operand ops[4];
  int n = 0;
  for (Arg *a = fa->next; a; a = a->next)
    if (!a->name) {
      if (n == 4) {
        check_error(k, a->value->span, "einsum() takes at most 4 operands");
        return type_error();
      }
      ops[n].e = a->value;
      ops[n].t = check_as_tensor(k, a->value, check_expr(k, a->value));
      if (ops[n].t->kind == TY_ERROR)
        return type_error();
      n++;
    }
  if (!arrow) {
    check_error(k, fa->value->span, "einsum subscripts need '->' and the output labels");
    return type_error();
  }
  for (int i = 1; i < n; i++)
    if (!ops[i].t->literal && !ops[0].t->literal && ops[i].t->dtype != ops[0].t->dtype) {
      check_error(k, call->span, "einsum() needs operands of one dtype, got %s and %s", dtype_name(ops[0].t->dtype),
                  dtype_name(ops[i].t->dtype));
      help(k->c, "convert one: astype(%s, %s)", src_text(k, ops[i].e), dtype_name(ops[0].t->dtype));
      return type_error();
    }
  Size lsize[128];
  bool lset[128] = {0}, in_out[128] = {0};
  int lop[128], ldim[128]; /* where a label was first seen */
  const char *p = spec;
  for (int i = 0; i < n; i++) {
    int d = 0;
    for (; *p && *p != ',' && p < arrow; p++) {
      unsigned char ch = (unsigned char)*p;
      if (ch == ' ')
        continue;
      if (ch >= 128 || !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) || d >= ops[i].t->ndim) {
        check_error(k, fa->value->span, "einsum operand %d: subscripts do not match %s", i + 1, ck_type(k, ops[i].t));
        return type_error();
      }
      if (lset[ch] && !size_eq(lsize[ch], ops[i].t->shape[d])) {
        check_error(k, fa->value->span, "einsum label '%c' is %s in operand %d but %s in operand %d", ch,
                    size_str(k->c, k->mesh, lsize[ch]), lop[ch] + 1, size_str(k->c, k->mesh, ops[i].t->shape[d]), i + 1);
        return type_error();
      }
      if (lset[ch] && !shard_einsum_label(k, call->span, ch, &ops[lop[ch]], ldim[ch], &ops[i], d))
        return type_error();
      if (!lset[ch]) {
        lop[ch] = i;
        ldim[ch] = d;
      }
      lset[ch] = true;
      lsize[ch] = ops[i].t->shape[d];
      d++;
    }
    if (d != ops[i].t->ndim) {
      check_error(k, fa->value->span, "einsum operand %d has %d dims but %d labels", i + 1, ops[i].t->ndim, d);
      return type_error();
    }
    if (*p == ',')
      p++;
  }
  Type *r = type_new(k->c, TY_TENSOR);
  r->dtype = ops[0].t->dtype;
  r->local = check_all_local(k);
  if (!combine(k, RULE_MULTILINEAR, "einsum()", call->span, ops, n, r->lt))
    return type_error();
  for (p = arrow + 2; *p; p++) {
    unsigned char ch = (unsigned char)*p;
    if (ch == ' ')
      continue;
    if (ch >= 128 || !lset[ch] || r->ndim == MAX_DIMS) {
      check_error(k, fa->value->span, "einsum output label '%c' is not in any operand", *p);
      return type_error();
    }
    if (in_out[ch]) {
      check_error(k, fa->value->span, "einsum output label '%c' appears twice", *p);
      return type_error();
    }
    in_out[ch] = true;
    r->shape[r->ndim] = lsize[ch];
    if (!shard_einsum_output(k, call->span, spec, arrow, ops, n, r, ch, &ops[lop[ch]], ldim[ch]))
      return type_error();
    r->ndim++;
  }
  bool contracted[MAX_MESH_AXES] = {0};
  shard_einsum_contracted(ops, lset, in_out, lop, ldim, contracted);
  if (!apply_out_partial(k, call, r, contracted))
    return type_error();
  return r;
}

Type *check_concat(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Arg *p = call_arg(call, 0);
  /* a tuple, or a list as PyTorch's torch.cat([a, b], dim=d) takes it */
  if (!p || (p->value->kind != EX_TUPLE && p->value->kind != EX_LIST) || !p->value->elems) {
    check_error(k, call->span, "concat((a, b, ...), dim=d) takes a tuple or a list of tensors");
    return type_error();
  }
  int n = 0;
  for (Expr *e = p->value->elems; e; e = e->next)
    n++;
  Operand *ops = arena_alloc(&k->c->arena, sizeof(Operand) * (size_t)n);
  n = 0;
  for (Expr *e = p->value->elems; e; e = e->next, n++) {
    ops[n].e = e;
    ops[n].t = check_as_tensor(k, e, check_expr(k, e));
    if (ops[n].t->kind == TY_ERROR)
      return type_error();
  }
  long long dv = 0;
  bool hd;
  int d;
  if (!named_int(k, call, "dim", &dv, &hd) || !check_norm_dim(k, call->span, dv, ops[0].t->ndim, &d))
    return type_error();
  Type *r = type_clone(k->c, ops[0].t);
  if (!combine(k, RULE_LINEAR, "concat()", call->span, ops, n, r->lt))
    return type_error();
  Size total = ops[0].t->shape[d];
  for (int i = 1; i < n; i++) {
    const Type *t = ops[i].t;
    if (t->ndim != r->ndim || t->dtype != r->dtype) {
      check_error(k, ops[i].e->span, "concat(): %s does not match %s", ck_type(k, t), ck_type(k, ops[0].t));
      return type_error();
    }
    for (int j = 0; j < t->ndim; j++)
      if (j != d && !size_eq(t->shape[j], r->shape[j])) {
        check_error(k, ops[i].e->span, "concat(): dim %d differs: %s vs %s", j, ck_type(k, t), ck_type(k, ops[0].t));
        return type_error();
      }
    long long x, y;
    if (size_is_int(total, &x) && size_is_int(t->shape[d], &y))
      total = size_int(x + y);
    else if (size_eq(total, t->shape[d]))
      total = size_mul(total, size_int(2));
    else {
      k->value_dependent |= size_has_symbol(total) || size_has_symbol(t->shape[d]);
      total = (Size){.unknown = true, .den = 1};
    }
  }
  if (!shard_concat(k, call, ops, n, d))
    return type_error();
  r->shape[d] = total;
  return r;
}

Type *check_misc(Checker *k, Expr *call, Builtin op) {
  Type *x = arg_tensor(k, call, 0);
  if (x->kind == TY_ERROR)
    return x;
  Operand o = {call_arg(call, 0)->value, x};
  Type *r = elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), RULE_LINEAR, &o, 1);
  if (r->kind == TY_ERROR)
    return r;
  r = type_clone(k->c, r);
  switch (op) {
  case BI_DETACH: return r;
  case BI_ASTYPE: {
    Arg *d = call_arg(call, 1);
    if (!d || d->value->kind != EX_TYPE || d->value->type->has_dims) {
      check_error(k, d ? d->value->span : call->span, "astype(x, dtype) takes a dtype: f32, f64, i32 or bf16");
      return type_error();
    }
    r->dtype = d->value->type->dtype;
    if (r->dtype == DT_I32 && x->dtype != DT_I32)
      for (int a = 0; a < k->naxes; a++)
        if (x->lt[a] == LT_P) { /* truncating each term is not truncating the sum */
          Expr *xe = call_arg(call, 0)->value;
          check_error(k, call->span, "astype() to i32 is not linear, but '%s' is P (a pending sum) on mesh axis '%s'",
                      src_text(k, xe), axis_name(k, a));
          note_at(k->c, (Span){0, 0, 0}, "rounding each rank's term is not rounding the sum: the sum must happen first");
          note_p_origin(k, xe, a);
          const char *fix = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", src_text(k, xe), axis_name(k, a));
          help_wrap(k, xe, fix, arena_sprintf(&k->c->arena, "reduce it first: %s", fix));
          return type_error();
        }
    return r;
  }
  case BI_TRANSPOSE: {
    long long d0, d1;
    int a, b;
    if (!call_arg(call, 1) || !call_arg(call, 2) || !host_int(k, call_arg(call, 1)->value, &d0) ||
        !host_int(k, call_arg(call, 2)->value, &d1) || !check_norm_dim(k, call->span, d0, r->ndim, &a) ||
        !check_norm_dim(k, call->span, d1, r->ndim, &b))
      return type_error();
    Size s = r->shape[a];
    r->shape[a] = r->shape[b];
    r->shape[b] = s;
    shard_transpose(r, a, b);
    return r;
  }
  case BI_PERMUTE: {
    Arg *p = call_arg(call, 1);
    if (!p || p->value->kind != EX_LIST) {
      check_error(k, call->span, "permute(x, [dims]) takes a list of dims");
      return type_error();
    }
    Type *res = type_clone(k->c, r);
    int i = 0, perm[MAX_DIMS];
    bool seen[MAX_DIMS] = {0};
    for (Expr *e = p->value->elems; e; e = e->next, i++) {
      long long v;
      int d;
      if (i >= r->ndim || !host_int(k, e, &v) || !check_norm_dim(k, e->span, v, r->ndim, &d) || seen[d]) {
        check_error(k, p->value->span, "permute needs each of the %d dims exactly once", r->ndim);
        return type_error();
      }
      seen[d] = true;
      perm[i] = d;
      res->shape[i] = r->shape[d];
    }
    if (i != r->ndim) {
      check_error(k, p->value->span, "permute needs each of the %d dims exactly once", r->ndim);
      return type_error();
    }
    shard_permute(r, res, perm);
    return res;
  }
  case BI_RESHAPE:
  case BI_EXPAND: {
    Arg *p = call_arg(call, 1);
    if (!p || p->value->kind != EX_LIST) {
      check_error(k, call->span, "%s(x, [sizes]) takes a list of sizes", builtin_name[op]);
      return type_error();
    }
    Type *res = type_clone(k->c, r);
    res->ndim = 0;
    for (Expr *e = p->value->elems; e; e = e->next) {
      if (res->ndim == MAX_DIMS || !size_of(k, e, &res->shape[res->ndim]))
        return type_error();
      res->ndim++;
    }
    if (op == BI_EXPAND) {
      int shift = res->ndim - r->ndim;
      for (int d = 0; d < r->ndim && shift >= 0; d++) {
        long long one;
        if (!(size_is_int(r->shape[d], &one) && one == 1) && !size_eq(r->shape[d], res->shape[d + shift])) {
          check_error(k, call->span, "expand() can only grow dims of size 1, but dim %d is %s and the new size is %s", d,
                      size_str(k->c, k->mesh, r->shape[d]), size_str(k->c, k->mesh, res->shape[d + shift]));
          help(k->c, "keep the size of dim %d: %s", d, size_str(k->c, k->mesh, r->shape[d]));
          return type_error();
        }
      }
      if (shift < 0) {
        check_error(k, call->span, "expand() cannot drop dims: %s has %d, the new shape %d", src_text(k, call_arg(call, 0)->value),
                    r->ndim, res->ndim);
        help(k->c, "list every dim, adding leading ones if needed");
        return type_error();
      }
      shard_expand(r, res);
      return res;
    }
    Size before = size_int(1), after = size_int(1);
    for (int d = 0; d < r->ndim; d++)
      before = size_mul(before, r->shape[d]);
    for (int d = 0; d < res->ndim; d++)
      after = size_mul(after, res->shape[d]);
    if (!size_eq(before, after)) {
      check_error(k, call->span, "reshape() cannot change the number of elements: %s has %s, the new shape %s",
                  src_text(k, call_arg(call, 0)->value), size_str(k->c, k->mesh, before), size_str(k->c, k->mesh, after));
      note_at(k->c, (Span){0, 0, 0}, "'%s' is %s", src_text(k, call_arg(call, 0)->value), ck_type(k, r));
      help(k->c, "give sizes whose product is %s", size_str(k->c, k->mesh, before));
      return type_error();
    }
    if (!shard_reshape(k, call, r, res))
      return type_error();
    return res;
  }
  case BI_SLICE: {
    long long dv = 0, st = 0, en = 0;
    bool hd, hs, he;
    int d;
    if (!named_int(k, call, "dim", &dv, &hd) || !named_int(k, call, "start", &st, &hs) ||
        !named_int(k, call, "end", &en, &he) || !check_norm_dim(k, call->span, dv, r->ndim, &d))
      return type_error();
    if (!shard_slice(k, call, r, d))
      return type_error();
    long long full;
    if (!hs)
      st = 0;
    if (!he) {
      if (!size_is_int(r->shape[d], &full)) {
        k->value_dependent |= size_has_symbol(r->shape[d]);
        check_error(k, call->span, "slice() needs end= on a dim of symbolic size");
        return type_error();
      }
      en = full;
    }
    if (en <= st || st < 0) {
      check_error(k, call->span, "slice() needs 0 <= start < end");
      return type_error();
    }
    r->shape[d] = size_int(en - st);
    return r;
  }
  default: return r;
  }
}
