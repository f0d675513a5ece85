/* shardprop.c: the global shard-propagation rules (SPEC section 7,
 * docs/global_rules.md).  In global code every op also maps its operands'
 * partition specs to its result's, and is accepted only when running it on
 * each rank's blocks computes the single-device meaning.  The local R/I/V/P
 * rules come first (combine() in check_rules.c); each op's check calls
 * its shard rule here, named after the op:
 *
 *   + - * / and comparisons, max/min/pow,
 *   unary ops, layer_norm/rms_norm weights   shard_broadcast (+ shard_broadcast_ref)
 *   matmul, '@'                              shard_matmul_contracted, shard_matmul_batch, shard_matmul
 *   einsum                                   shard_einsum_label, shard_einsum_output, shard_einsum_contracted
 *   embedding                                shard_embedding
 *   out_partial_axes= (matmul, einsum,
 *   embedding, sum, mean)                    shard_out_partial_axis, shard_out_partial_complete
 *   sum, mean, amax, cumsum,
 *   softmax, log_softmax                     shard_reduction, shard_reduction_result
 *   layer_norm, rms_norm                     shard_norm
 *   cross_entropy (mean, sum, none)          shard_cross_entropy
 *   where (condition and values)             shard_where
 *   take_along_dim                           shard_take_along_dim
 *   dropout                                  (keeps the spec: elementwise)
 *   concat                                   shard_concat
 *   slice                                    shard_slice
 *   transpose                                shard_transpose
 *   permute                                  shard_permute
 *   reshape                                  shard_reshape
 *   expand                                   shard_expand
 *   x[i]                                     shard_index
 *
 * Not here: creation ops (zeros, ones, randn, uniform, full, load, iota) take the
 * spec of their written type, which check_type_expr() in check_rules.c reads
 * (section 1 of docs/global_rules.md); local_map's local view of a spec
 * (localize(), local_map_result()) is in check.c; the collectives'
 * and casts' specs (relayout()) are in check_collectives.c, and
 * redistribute's plans in redistribute.c. */
#include <string.h>

#include "shardprop.h"

/* ---- messages ---- */

/* The axes sharding dim d of t, as source text: tp or (dp, tp). */
const char *dim_axes_text(Checker *k, const Type *t, int d) {
  StrBuf sb;
  sb_init(&sb, &k->c->arena);
  int n = 0;
  while (n < MAX_MESH_AXES && t->spec[d][n] >= 0)
    n++;
  if (n > 1)
    sb_putc(&sb, '(');
  for (int j = 0; j < n; j++)
    sb_printf(&sb, "%s%s", j ? ", " : "", axis_name(k, t->spec[d][j]));
  if (n > 1)
    sb_putc(&sb, ')');
  return sb.data;
}

/* The text for "sharded on ..." in messages: 'tp' or (dp, tp). */
static const char *dim_axes_quoted(Checker *k, const Type *t, int d) {
  const char *s = dim_axes_text(k, t, d);
  return s[0] == '(' ? s : arena_sprintf(&k->c->arena, "'%s'", s);
}

/* A spec-equal copy of t whose dim d is laid out like dim rd of `like`
 * (its axes moved there, the axes it had on d gathered to R): the target
 * of the redistribute that aligns an operand with another (help lines). */
static Type *aligned_like(Checker *k, const Type *t, int d, const Type *like, int rd) {
  Type *w = type_clone(k->c, t);
  for (int j = 0; j < MAX_MESH_AXES && t->spec[d][j] >= 0; j++) {
    type_spec_remove(w, t->spec[d][j]);
    w->lt[t->spec[d][j]] = LT_R;
  }
  for (int j = 0; j < MAX_MESH_AXES && like->spec[rd][j] >= 0; j++) {
    type_spec_remove(w, like->spec[rd][j]);
    type_spec_add(w, d, like->spec[rd][j]);
    w->lt[like->spec[rd][j]] = LT_V;
  }
  w->literal = false;
  return w;
}

/* The fix for an operand `o` whose dim d is whole where the reference is
 * sharded on `axes` (dim rd of `like`): a local convert when o is R or I
 * on every axis and sharded nowhere on them, else a redistribute. */
static const char *align_fix(Checker *k, const Operand *o, int d, const Type *like, int rd) {
  const Type *t = o->t;
  LTypeKind l0 = t->lt[like->spec[rd][0]];
  bool simple = t->spec[d][0] < 0 && (l0 == LT_R || l0 == LT_I);
  for (int j = 0; simple && j < MAX_MESH_AXES && like->spec[rd][j] >= 0; j++)
    simple = t->lt[like->spec[rd][j]] == l0 && !type_spec_has(t, like->spec[rd][j], NULL);
  if (simple)
    return arena_sprintf(&k->c->arena, "convert(%s, %s, src=%s, dst=S(%d))", src_text(k, o->e),
                         dim_axes_text(k, like, rd), lt_name(l0), d);
  return arena_sprintf(&k->c->arena, "redistribute(%s, %s)", src_text(k, o->e),
                       ck_type(k, aligned_like(k, t, d, like, rd)));
}

/* "lay both out alike: CODE", a fix of operand o. */
static void help_align(Checker *k, const Operand *o, int d, const Type *like, int rd) {
  const char *code = align_fix(k, o, d, like, rd);
  help_wrap(k, o->e, code, arena_sprintf(&k->c->arena, "lay both out alike: %s", code));
}

/* ---- the seed's einsum conditions (matmul, einsum, embedding, concat) ---- */

/* Condition 1 (and batch dims): a dim both operands have must be sharded on
 * the same axes, in the same order, in both. */
static bool same_spec(Checker *k, const char *opname, Span sp, const char *what, const Operand *x, int dx,
                      const Operand *y, int dy) {
  if (memcmp(x->t->spec[dx], y->t->spec[dy], sizeof x->t->spec[dx]) == 0)
    return true;
  if (y->t->spec[dy][0] < 0)
    check_error(k, sp, "%s: %s is sharded on %s in '%s' but whole in '%s'", opname, what, dim_axes_quoted(k, x->t, dx),
                src_text(k, x->e), src_text(k, y->e));
  else if (x->t->spec[dx][0] < 0)
    check_error(k, sp, "%s: %s is sharded on %s in '%s' but whole in '%s'", opname, what, dim_axes_quoted(k, y->t, dy),
                src_text(k, y->e), src_text(k, x->e));
  else
    check_error(k, sp, "%s: %s is sharded on %s in '%s' but on %s in '%s'", opname, what, dim_axes_quoted(k, x->t, dx),
                src_text(k, x->e), dim_axes_quoted(k, y->t, dy), src_text(k, y->e));
  note_at(k->c, (Span){0, 0, 0}, "a dim both operands have must be sharded on the same axes, in the same order, in both");
  Operand ops[2] = {*x, *y};
  note_operands(k, ops, 2);
  if (x->t->spec[dx][0] >= 0)
    help_align(k, y, dy, x->t, dx);
  else
    help_align(k, x, dx, y->t, dy);
  return false;
}

/* Condition 2: dim rd of the result r is sharded; an operand without that
 * dim must not vary on its axes (it would be sharded on them elsewhere: the
 * result would name an axis twice, or mix its blocks). */
static bool not_varying_on(Checker *k, const char *opname, Span sp, const Type *r, int rd, const Operand *o) {
  for (int j = 0; j < MAX_MESH_AXES && r->spec[rd][j] >= 0; j++) {
    int a = r->spec[rd][j], od = -1;
    const Type *t = o->t;
    if (t->kind != TY_TENSOR || t->literal || t->lt[a] != LT_V)
      continue;
    bool laid = type_spec_has(t, a, &od);
    check_error(k, sp, "%s: dim %d of the result is sharded on '%s', but '%s', which does not have that dim, is %s on '%s'",
                opname, rd, axis_name(k, a), src_text(k, o->e), laid ? arena_sprintf(&k->c->arena, "S(%d)", od) : "V",
                axis_name(k, a));
    note_at(k->c, (Span){0, 0, 0}, "an operand without a sharded dim must be the same on every rank (R) on its axes; "
            "a mesh axis shards at most one dim");
    const char *code = transition_fix(k, src_text(k, o->e), axis_name(k, a), ltype_on(t, a), (LType){LT_R, 0});
    help_wrap(k, o->e, code, arena_sprintf(&k->c->arena, "gather it first: %s", code));
    return false;
  }
  return true;
}

/* ---- elementwise ops: NumPy broadcasting ---- */

int shard_broadcast_ref(const Operand *ops, int n, int rndim, int rd, int *first) {
  int ref = -1;
  long long one;
  *first = -1;
  for (int i = 0; i < n; i++) {
    const Type *t = ops[i].t;
    int d = rd - (rndim - t->ndim);
    if (d < 0)
      continue;
    if (*first < 0)
      *first = i;
    if (size_is_int(t->shape[d], &one) && one == 1)
      continue;
    if (ref < 0 || (ops[ref].t->spec[rd - (rndim - ops[ref].t->ndim)][0] < 0 && t->spec[d][0] >= 0))
      ref = i;
  }
  return ref;
}

bool shard_broadcast(Checker *k, Span sp, const char *opname, const Operand *ops, int n, Type *r) {
  for (int rd = 0; rd < r->ndim; rd++) {
    int first, ref = shard_broadcast_ref(ops, n, r->ndim, rd, &first);
    const Type *rt = ops[ref >= 0 ? ref : first].t;
    memcpy(r->spec[rd], rt->spec[rd - (r->ndim - rt->ndim)], sizeof r->spec[rd]);
    if (ref < 0)
      continue;
    for (int i = 0; i < n; i++) {
      const Type *t = ops[i].t;
      int d = rd - (r->ndim - t->ndim);
      long long one;
      bool bcast = d < 0 || (size_is_int(t->shape[d], &one) && one == 1);
      if (i == ref || t->literal)
        continue;
      /* the sizes line up: broadcast() in check_rules.c checked them */
      if (!bcast && memcmp(r->spec[rd], t->spec[d], sizeof r->spec[rd]) != 0) {
        const Operand *o = &ops[i], *re = &ops[ref];
        if (t->spec[d][0] < 0)
          check_error(k, sp, "%s: dim %d is sharded on %s in '%s' but whole in '%s'", opname, rd,
                      dim_axes_quoted(k, r, rd), src_text(k, re->e), src_text(k, o->e));
        else if (r->spec[rd][0] < 0)
          check_error(k, sp, "%s: dim %d is sharded on %s in '%s' but whole in '%s'", opname, rd,
                      dim_axes_quoted(k, t, d), src_text(k, o->e), src_text(k, re->e));
        else
          check_error(k, sp, "%s: dim %d is sharded on %s in '%s' but on %s in '%s'", opname, rd,
                      dim_axes_quoted(k, r, rd), src_text(k, re->e), dim_axes_quoted(k, t, d), src_text(k, o->e));
        note_at(k->c, (Span){0, 0, 0}, "each rank would combine its own block of one operand with another part of the other");
        note_operands(k, ops, n);
        if (r->spec[rd][0] >= 0)
          help_align(k, o, d, r, rd);
        else
          help_align(k, re, rd - (r->ndim - re->t->ndim), t, d);
        return false;
      }
      if (bcast && r->spec[rd][0] >= 0)
        for (int j = 0; j < MAX_MESH_AXES && r->spec[rd][j] >= 0; j++) {
          int a = r->spec[rd][j], od = -1;
          if (t->kind != TY_TENSOR || t->lt[a] != LT_V)
            continue; /* R broadcasts; I and P are combine()'s errors */
          bool laid = type_spec_has(t, a, &od);
          check_error(k, sp, "%s: '%s' is broadcast along dim %d, which is sharded on '%s', but it is %s on '%s'", opname,
                      src_text(k, ops[i].e), rd, axis_name(k, a),
                      laid ? arena_sprintf(&k->c->arena, "S(%d)", od) : "V", axis_name(k, a));
          note_at(k->c, (Span){0, 0, 0}, "a value broadcast along a sharded dim must be the same on every rank (R) on its axis");
          note_operands(k, ops, n);
          const char *code = transition_fix(k, src_text(k, ops[i].e), axis_name(k, a), ltype_on(t, a), (LType){LT_R, 0});
          help_wrap(k, ops[i].e, code, arena_sprintf(&k->c->arena, "gather it first: %s", code));
          return false;
        }
    }
  }
  return true;
}

/* ---- out_partial_axes= ---- */

bool shard_out_partial_axis(Checker *k, Span sp, Type *r, int a, const bool contracted[MAX_MESH_AXES]) {
  int sd;
  if (!contracted[a] && type_spec_has(r, a, &sd)) {
    check_error(k, sp, "out_partial_axes names '%s', but no contracted dim is sharded on '%s'", axis_name(k, a),
                axis_name(k, a));
    note_at(k->c, (Span){0, 0, 0}, "dim %d of the result is sharded on '%s': its blocks are parts of a tensor, not terms of a sum",
            sd, axis_name(k, a));
    help(k->c, "drop '%s' from out_partial_axes", axis_name(k, a));
    return false;
  }
  type_spec_remove(r, a);
  return true;
}

bool shard_out_partial_complete(Checker *k, Expr *call, const bool contracted[MAX_MESH_AXES],
                                const bool listed[MAX_MESH_AXES]) {
  StrBuf need, all;
  sb_init(&need, &k->c->arena);
  sb_init(&all, &k->c->arena);
  int nneed = 0, nall = 0, first = -1;
  for (int a = 0; a < k->naxes; a++) {
    if (contracted[a] || listed[a])
      sb_printf(&all, "%s%s", nall++ ? ", " : "", axis_name(k, a));
    if (contracted[a] && !listed[a]) {
      sb_printf(&need, "%s%s", nneed++ ? ", " : "", axis_name(k, a));
      if (first < 0)
        first = a;
    }
  }
  if (first < 0)
    return true;
  const char *opn = call->kind == EX_CALL && call->lhs->kind == EX_NAME ? call->lhs->name
                  : call->kind == EX_BINARY                           ? "'@'"
                                                                      : "this op";
  const char *axs = nall > 1 ? arena_sprintf(&k->c->arena, "(%s)", all.data) : all.data;
  check_error(k, call->span, "%s sums over a dim sharded on '%s': the local result is only a part of the sum", opn,
              axis_name(k, first));
  note_at(k->c, (Span){0, 0, 0}, "in global code the result must be declared a pending sum (P) on %s%s%s",
          nneed > 1 ? "(" : "'", need.data, nneed > 1 ? ")" : "'");
  help(k->c, "add out_partial_axes=%s, then reduce it: all_reduce(y, %s, src=P, dst=R)", axs, axs);
  return false;
}

/* ---- sum, mean, amax, cumsum, softmax, log_softmax ---- */

bool shard_reduction(Checker *k, Expr *call, Builtin op, Expr *x, const Type *r, int lo, int hi, bool has_dim,
                     bool contracted[MAX_MESH_AXES]) {
  for (int d = lo; d < hi; d++)
    for (int j = 0; j < MAX_MESH_AXES && r->spec[d][j] >= 0; j++)
      contracted[r->spec[d][j]] = true;
  bool any = false;
  for (int a = 0; a < k->naxes; a++)
    any |= contracted[a];
  /* a mean over sharded dims is a pending sum of each rank's part divided by
   * the global count (lower.c), whatever the blocks' sizes (SPEC 4): it
   * needs out_partial_axes= like sum's (apply_out_partial) */
  if (!any || op == BI_SUM || op == BI_MEAN)
    return true;
  int sd = lo;
  while (r->spec[sd][0] < 0)
    sd++;
  const char *xs = src_text(k, x), *axs = dim_axes_text(k, r, sd);
  check_error(k, call->span, "%s() over a dim sharded on %s would use only this rank's part", builtin_name[op],
              dim_axes_quoted(k, r, sd));
  (void)has_dim;
  if (op == BI_AMAX)
    note_at(k->c, (Span){0, 0, 0}, "each rank would find the maximum of its block only");
  else
    note_at(k->c, (Span){0, 0, 0}, "%s() along a dim needs the whole dim on every rank", builtin_name[op]);
  const char *code = arena_sprintf(&k->c->arena, "all_gather(%s, %s, src=S(%d), dst=R)", xs, axs, sd);
  help_wrap(k, x, code, arena_sprintf(&k->c->arena, "gather the dim first: %s", code));
  return false;
}

void shard_reduction_result(const Type *r, Type *res, int lo, int hi, bool keep) {
  int rd = 0;
  for (int d = 0; d < r->ndim; d++) {
    if (d >= lo && d < hi) {
      if (keep)
        memset(res->spec[rd++], -1, sizeof res->spec[0]);
      continue;
    }
    memcpy(res->spec[rd++], r->spec[d], sizeof r->spec[d]);
  }
  for (; rd < MAX_DIMS; rd++)
    memset(res->spec[rd], -1, sizeof res->spec[rd]);
}

/* ---- matmul, '@' ---- */

bool shard_matmul_contracted(Checker *k, const char *opname, Span sp, const Operand o[2], int ka, int kb) {
  return same_spec(k, opname, sp, "the contracted dim", &o[0], ka, &o[1], kb);
}

bool shard_matmul_batch(Checker *k, const char *opname, Span sp, const Operand o[2], Type *r, int d, int da, int db,
                        int owner, int od, bool both) {
  memcpy(r->spec[r->ndim], o[owner].t->spec[od], sizeof r->spec[0]);
  if (both)
    return same_spec(k, opname, sp, arena_sprintf(&k->c->arena, "batch dim %d", d), &o[0], da, &o[1], db);
  return not_varying_on(k, opname, sp, r, r->ndim, &o[1 - owner]);
}

bool shard_matmul(Checker *k, const char *opname, Span sp, const Operand o[2], Type *r, bool contracted[MAX_MESH_AXES]) {
  const Type *a = o[0].t, *b = o[1].t;
  int rn = b->ndim >= 2 ? r->ndim - 1 : -1;
  int rm = a->ndim >= 2 ? (rn >= 0 ? rn : r->ndim) - 1 : -1;
  if (rm >= 0) {
    memcpy(r->spec[rm], a->spec[a->ndim - 2], sizeof r->spec[0]);
    if (!not_varying_on(k, opname, sp, r, rm, &o[1]))
      return false;
  }
  if (rn >= 0) {
    memcpy(r->spec[rn], b->spec[b->ndim - 1], sizeof r->spec[0]);
    if (!not_varying_on(k, opname, sp, r, rn, &o[0]))
      return false;
  }
  int ka = a->ndim - 1;
  for (int j = 0; j < MAX_MESH_AXES && a->spec[ka][j] >= 0; j++)
    contracted[a->spec[ka][j]] = true;
  return true;
}

/* ---- einsum ---- */

bool shard_einsum_label(Checker *k, Span sp, int label, const Operand *x, int dx, const Operand *y, int dy) {
  return same_spec(k, "einsum()", sp, arena_sprintf(&k->c->arena, "label '%c'", label), x, dx, y, dy);
}

bool shard_einsum_output(Checker *k, Span sp, const char *subs, const char *arrow, const Operand *ops, int n, Type *r,
                         int label, const Operand *from, int fd) {
  memcpy(r->spec[r->ndim], from->t->spec[fd], sizeof r->spec[0]);
  /* the seed's condition 2: an operand without this label must not be
   * sharded on the axes that shard it */
  const char *q = subs;
  for (int i = 0; i < n; i++) {
    bool has = false;
    for (; *q && *q != ',' && q < arrow; q++)
      has |= (unsigned char)*q == label;
    if (*q == ',')
      q++;
    if (!has && !not_varying_on(k, "einsum()", sp, r, r->ndim, &ops[i]))
      return false;
  }
  return true;
}

void shard_einsum_contracted(const Operand *ops, const bool lset[128], const bool in_out[128], const int lop[128],
                             const int ldim[128], bool contracted[MAX_MESH_AXES]) {
  for (int ch = 0; ch < 128; ch++)
    if (lset[ch] && !in_out[ch])
      for (int j = 0; j < MAX_MESH_AXES && ops[lop[ch]].t->spec[ldim[ch]][j] >= 0; j++)
        contracted[ops[lop[ch]].t->spec[ldim[ch]][j]] = true;
}

/* ---- embedding ---- */

bool shard_embedding(Checker *k, Span sp, const Operand o[2], Type *r, bool contracted[MAX_MESH_AXES]) {
  const Type *w = o[1].t;
  memcpy(r->spec[r->ndim - 1], w->spec[1], sizeof r->spec[0]);
  /* the seed's condition 2: the table has none of the ids' dims, the ids
   * not the feature dim */
  for (int d = 0; d + 1 < r->ndim; d++)
    if (!not_varying_on(k, "embedding()", sp, r, d, &o[1]))
      return false;
  if (!not_varying_on(k, "embedding()", sp, r, r->ndim - 1, &o[0]))
    return false;
  for (int j = 0; j < MAX_MESH_AXES && w->spec[0][j] >= 0; j++)
    contracted[w->spec[0][j]] = true;
  return true;
}

/* ---- norms and losses ---- */

bool shard_norm(Checker *k, Expr *call, Builtin op, const Operand *x) {
  const Type *t = x->t;
  if (t->spec[t->ndim - 1][0] < 0)
    return true;
  check_error(k, call->span, "%s() normalises over the last dim, which is sharded on %s", builtin_name[op],
              dim_axes_quoted(k, t, t->ndim - 1));
  note_at(k->c, (Span){0, 0, 0}, "each rank would normalise its block with its block's own statistics");
  help(k->c, "gather it first: all_gather(%s, %s, src=S(%d), dst=R)", src_text(k, x->e), dim_axes_text(k, t, t->ndim - 1),
       t->ndim - 1);
  return false;
}

bool shard_cross_entropy(Checker *k, Expr *call, const Operand ops[2], int red, Type *res,
                         bool contracted[MAX_MESH_AXES]) {
  const Type *x = ops[0].t, *tg = ops[1].t;
  int cd = x->ndim - 1;
  /* the classes split (vocabulary parallel): each row's statistics are
   * all-reduced over the class dim's axes, so every rank of them gets the
   * whole loss (R); the targets, global class ids, must be R there too */
  for (int j = 0; j < MAX_MESH_AXES && x->spec[cd][j] >= 0; j++) {
    int a = x->spec[cd][j];
    if (tg->lt[a] != LT_R) {
      check_error(k, call->span, "cross_entropy() with the classes sharded on '%s' takes targets that are R on '%s', "
                  "got %s", axis_name(k, a), axis_name(k, a), ck_type(k, tg));
      note_at(k->c, (Span){0, 0, 0}, "each rank of '%s' holds some classes of every row and needs every row's target",
              axis_name(k, a));
      return false;
    }
    res->lt[a] = LT_R;
  }
  for (int d = 0; d < cd; d++)
    if (!same_spec(k, "cross_entropy()", call->span, arena_sprintf(&k->c->arena, "dim %d", d), &ops[0], d, &ops[1], d))
      return false;
  for (int d = 0; d < cd; d++) {
    if (x->spec[d][0] < 0)
      continue;
    if (red == 0) { /* mean: each rank would divide by its own count */
      StrBuf axes; /* every axis of the sharded leading dims */
      sb_init(&axes, &k->c->arena);
      int nax = 0;
      for (int j = 0; j < cd; j++)
        for (int q = 0; q < MAX_MESH_AXES && x->spec[j][q] >= 0; q++)
          sb_printf(&axes, "%s%s", nax++ ? ", " : "", axis_name(k, x->spec[j][q]));
      const char *ax = nax > 1 ? arena_sprintf(&k->c->arena, "(%s)", axes.data) : axes.data;
      check_error(k, call->span, "cross_entropy() takes the mean over a dim sharded on %s", dim_axes_quoted(k, x, d));
      note_at(k->c, (Span){0, 0, 0}, "each rank would average its own rows only");
      Size n = size_int(1);
      for (int j = 0; j < cd; j++)
        n = size_mul(n, x->shape[j]);
      help(k->c, "sum the parts and divide by the number of targets: cross_entropy(%s, %s, reduction=\"sum\", "
           "out_partial_axes=%s) / %s", src_text(k, ops[0].e), src_text(k, ops[1].e), ax, size_str(k->c, k->mesh, n));
      return false;
    }
    for (int j = 0; j < MAX_MESH_AXES && x->spec[d][j] >= 0; j++)
      contracted[x->spec[d][j]] |= red == 1; /* sum: a part of the sum on each rank */
    if (red == 2)                            /* none: the rows keep their layout */
      memcpy(res->spec[d], x->spec[d], sizeof res->spec[d]);
  }
  return true;
}

/* ---- masks and selection (SPEC 13) ---- */

/* where(c, a, b): the condition lines up with the values like any operand
 * of an elementwise op (ops: condition, a, b; r has the broadcast shape). */
bool shard_where(Checker *k, Span sp, const Operand ops[3], Type *r) {
  return shard_broadcast(k, sp, "where()", ops, 3, r);
}

/* take_along_dim(x, idx, dim=d): the dim taken along is whole in both (each
 * rank's indices point into the whole dim); the others line up as in an
 * elementwise op. */
bool shard_take_along_dim(Checker *k, Expr *call, const Operand o[2], int dim, Type *r) {
  for (int i = 0; i < 2; i++) {
    const Type *t = o[i].t;
    if (t->spec[dim][0] < 0)
      continue;
    check_error(k, call->span, "take_along_dim() along dim %d, which is sharded on %s in '%s'", dim,
                dim_axes_quoted(k, t, dim), src_text(k, o[i].e));
    note_at(k->c, (Span){0, 0, 0}, i == 0 ? "each rank holds a block of the dim, but the indices point into the whole dim"
                                          : "take along a whole dim: the indices' blocks would select from the whole dim "
                                            "of each rank");
    help(k->c, "gather the dim first: all_gather(%s, %s, src=S(%d), dst=R), or take along it per rank inside local_map",
         src_text(k, o[i].e), dim_axes_text(k, t, dim), dim);
    return false;
  }
  /* the other dims: elementwise broadcasting, the dim taken along set aside */
  Type tx = *o[0].t, ti = *o[1].t;
  tx.shape[dim] = ti.shape[dim] = size_int(1);
  Operand ops[2] = {{o[0].e, &tx}, {o[1].e, &ti}};
  return shard_broadcast(k, call->span, "take_along_dim()", ops, 2, r);
}

/* ---- concat, slice ---- */

bool shard_concat(Checker *k, Expr *call, const Operand *ops, int n, int d) {
  for (int i = 0; i < n; i++)
    if (ops[i].t->spec[d][0] >= 0) {
      check_error(k, call->span, "concat() along a dim sharded on %s", dim_axes_quoted(k, ops[i].t, d));
      note_at(k->c, (Span){0, 0, 0}, "'%s' is %s: each rank would join its own blocks, which are not the blocks of the result",
              src_text(k, ops[i].e), ck_type(k, ops[i].t));
      help(k->c, "concatenate along an unsharded dim, or gather first: all_gather(%s, %s, src=S(%d), dst=R)",
           src_text(k, ops[i].e), dim_axes_text(k, ops[i].t, d), d);
      return false;
    }
  for (int i = 1; i < n; i++)
    for (int j = 0; j < ops[0].t->ndim; j++)
      if (!same_spec(k, "concat()", call->span, arena_sprintf(&k->c->arena, "dim %d", j), &ops[0], j, &ops[i], j))
        return false;
  return true;
}

bool shard_slice(Checker *k, Expr *call, const Type *r, int d) {
  if (r->spec[d][0] < 0)
    return true;
  check_error(k, call->span, "slice() of a dim sharded on %s", dim_axes_quoted(k, r, d));
  note_at(k->c, (Span){0, 0, 0}, "each rank holds one block of dimension %d (its %s elements split over %s); the slice would be taken from every block",
          d, size_str(k->c, k->mesh, r->shape[d]), dim_axes_quoted(k, r, d));
  Expr *x = call_arg(call, 0)->value;
  const char *code = arena_sprintf(&k->c->arena, "all_gather(%s, %s, src=S(%d), dst=R)", src_text(k, x),
                                   dim_axes_text(k, r, d), d);
  help_wrap(k, x, code, arena_sprintf(&k->c->arena, "gather the dim first: %s, or slice per rank inside local_map", code));
  return false;
}

/* ---- shape ops ---- */

void shard_transpose(Type *r, int a, int b) {
  int8_t sp[MAX_MESH_AXES];
  memcpy(sp, r->spec[a], sizeof sp);
  memcpy(r->spec[a], r->spec[b], sizeof sp);
  memcpy(r->spec[b], sp, sizeof sp);
}

void shard_permute(const Type *x, Type *res, const int *perm) {
  for (int i = 0; i < x->ndim; i++)
    memcpy(res->spec[i], x->spec[perm[i]], sizeof res->spec[i]);
}

/* SPEC 7: a sharded dim may be split or merged only as the outermost
 * factor.  Its per-rank blocks stay contiguous runs of the flattened
 * tensor exactly when some new dim starts where it starts (the same
 * product of the dims before it); that dim takes its axes. */
bool shard_reshape(Checker *k, Expr *call, const Type *r, Type *res) {
  memset(res->spec, -1, sizeof res->spec);
  for (int d = 0; d < r->ndim; d++) {
    if (r->spec[d][0] < 0)
      continue;
    Size pre = size_int(1), opre = size_int(1);
    for (int j = 0; j < d; j++)
      pre = size_mul(pre, r->shape[j]);
    int o = -1;
    for (int j = 0; j < res->ndim && o < 0; j++) {
      long long one;
      if (size_eq(opre, pre) && !(size_is_int(res->shape[j], &one) && one == 1))
        o = j;
      opre = size_mul(opre, res->shape[j]);
    }
    if (o < 0 || res->spec[o][0] >= 0) {
      const char *xs = src_text(k, call_arg(call, 0)->value);
      check_error(k, call->span, "reshape() of a dim sharded on %s is only allowed on the outermost dim",
                  dim_axes_quoted(k, r, d));
      note_at(k->c, (Span){0, 0, 0}, "dim %d of %s would become an inner factor of a new dim, and its blocks would not be "
              "contiguous", d, ck_type(k, r));
      const char *code = arena_sprintf(&k->c->arena, "all_gather(%s, %s, src=S(%d), dst=R)", xs, dim_axes_text(k, r, d), d);
      help_wrap(k, call_arg(call, 0)->value, code,
                arena_sprintf(&k->c->arena, "gather the dim first: %s, or reshape per rank inside local_map", code));
      return false;
    }
    memcpy(res->spec[o], r->spec[d], sizeof res->spec[o]);
    if (!shard_reshape_even(k, call, r, d, res->shape[o]))
      return false;
  }
  return true;
}

/* Uneven shards (SPEC 4): a reshape that merges the sharded dim d with
 * inner dims, or splits it, keeps each rank's elements only when the
 * blocks are equal ([3@dp, 4] -> [12@dp] on dp = 2 holds 8 + 4 elements,
 * the layout of [12@dp] 6 + 6). Where the sizes and the axes' declared
 * sizes show a group that divides neither, an error; otherwise the
 * generated code checks it when it runs (emit_c.c, rt_check_reshape_even). */
bool shard_reshape_even(Checker *k, Expr *call, const Type *r, int d, Size to) {
  if (size_eq(r->shape[d], to))
    return true;
  long long n, m, g = 1;
  if (!size_is_int(r->shape[d], &n) || !size_is_int(to, &m))
    return true;
  for (int j = 0; j < MAX_MESH_AXES && r->spec[d][j] >= 0; j++) {
    long long s = k->mesh->axes[r->spec[d][j]].size;
    if (s <= 0)
      return true; /* not declared: checked at run time */
    g *= s;
  }
  if (n % g == 0 && m % g == 0)
    return true;
  const char *xs = src_text(k, call_arg(call, 0)->value);
  check_error(k, call->span, "reshape() %s dim %d (size %lld), sharded on %s, into a dim of size %lld, but %lld ranks "
              "do not divide %lld", m > n ? "merges" : "splits", d, n, dim_axes_quoted(k, r, d), m, g, n % g ? n : m);
  note_at(k->c, (Span){0, 0, 0}, "the blocks are uneven (SPEC 4: torch.chunk's split), and the blocks of the new dim "
          "are not the old blocks %s", m > n ? "merged" : "split");
  const char *code = arena_sprintf(&k->c->arena, "all_gather(%s, %s, src=S(%d), dst=R)", xs, dim_axes_text(k, r, d), d);
  help_wrap(k, call_arg(call, 0)->value, code,
            arena_sprintf(&k->c->arena, "gather the dim first: %s, or pad it to a multiple of %lld", code, g));
  return false;
}

void shard_expand(const Type *r, Type *res) {
  memset(res->spec, -1, sizeof res->spec);
  int shift = res->ndim - r->ndim;
  for (int d = 0; d < r->ndim; d++)
    memcpy(res->spec[d + shift], r->spec[d], sizeof res->spec[0]);
}

bool shard_index(Checker *k, Expr *e, const Type *x, Type *r) {
  if (x->spec[0][0] >= 0) {
    check_error(k, e->span, "indexing selects from dim 0, which is sharded on %s", dim_axes_quoted(k, x, 0));
    note_at(k->c, (Span){0, 0, 0}, "index %s is on one rank's block only", src_text(k, e->rhs));
    help(k->c, "gather the dim first (all_gather(%s, %s, src=S(0), dst=R)), or keep the leading dim (the layer index) "
         "unsharded, e.g. f32[L, D, H@%s]", src_text(k, e->lhs), dim_axes_text(k, x, 0), axis_name(k, x->spec[0][0]));
    return false;
  }
  for (int d = 0; d < r->ndim; d++)
    memcpy(r->spec[d], x->spec[d + 1], sizeof r->spec[d]);
  memset(r->spec[r->ndim], -1, sizeof r->spec[0]);
  return true;
}
