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
 * softmax needs every key.  kv_len= (a host integer) reads only the first
 * kv_len keys: a key/value cache of S positions being filled.  Heads split
 * unevenly (SPEC 4) are fine where each rank's query heads are its
 * key/value heads' groups (always in the grouped layout; in [B, H, T, E]
 * see gqa_blocks_line_up). */
#include <math.h>
#include <string.h>

#include "check.h"
#include "shardprop.h"

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
  check_error(k, e->span, "attention()'s %s= takes a number or a constant", name);
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

/* How dim d of t is laid out, in words: "whole", "sharded on 'tp'". */
static const char *dim_layout(Checker *k, const Type *t, int d) {
  if (t->spec[d][0] < 0)
    return "whole";
  StrBuf sb;
  sb_init(&sb, &k->c->arena);
  sb_puts(&sb, "sharded on ");
  for (int i = 0; i < MAX_MESH_AXES && t->spec[d][i] >= 0; i++)
    sb_printf(&sb, "%s'%s'", i ? ", " : "", axis_name(k, t->spec[d][i]));
  return sb.data;
}

/* Dim dq of q and dim dk of k (or v) must be sharded alike; the help is
 * the redistribute that gives o q's layout of that dim. */
static bool same_layout(Checker *k, Expr *call, const Operand *q, int dq, const Operand *o, int dk, const char *what,
                        const char *oname) {
  if (q->t->local || o->t->local || memcmp(q->t->spec[dq], o->t->spec[dk], sizeof q->t->spec[dq]) == 0)
    return true;
  const char *qs = src_text(k, q->e), *os = src_text(k, o->e);
  const char *ql = dim_layout(k, q->t, dq), *ol = dim_layout(k, o->t, dk);
  if (dq == dk)
    check_error(k, call->span, "attention() needs the %s dim sharded alike in '%s' and '%s': dim %d is %s in '%s', %s "
                "in '%s'", what, qs, os, dq, ql, qs, ol, os);
  else
    check_error(k, call->span, "attention() needs the %s dim sharded alike in '%s' and '%s': dim %d of '%s' is %s, "
                "dim %d of '%s' %s", what, qs, os, dq, qs, ql, dk, os, ol);
  note_at(k->c, (Span){0, 0, 0}, "'%s'%s is %s, '%s'%s is %s", qs, strcmp(qs, "q") ? " (q)" : "", ck_type(k, q->t), os,
          strcmp(os, oname) ? arena_sprintf(&k->c->arena, " (%s)", oname) : "", ck_type(k, o->t));
  /* o with q's axes on dim dk (when none of them shards another dim of o) */
  Type *want = type_clone(k->c, o->t);
  bool clean = true;
  for (int i = 0; i < MAX_MESH_AXES && o->t->spec[dk][i] >= 0; i++) {
    type_spec_remove(want, o->t->spec[dk][i]);
    want->lt[o->t->spec[dk][i]] = LT_R;
  }
  for (int i = 0; i < MAX_MESH_AXES && q->t->spec[dq][i] >= 0; i++) {
    int a = q->t->spec[dq][i];
    clean &= !type_spec_has(want, a, NULL) && o->t->lt[a] != LT_P;
    type_spec_add(want, dk, a);
    want->lt[a] = LT_V;
  }
  if (clean)
    help(k->c, "give '%s' the layout of '%s' there: redistribute(%s, %s)%s", os, qs, os, ck_type(k, want),
         q->t->ndim == 4 && dq == 1 && o->t->spec[dk][0] < 0
             ? "; or, to keep few key/value heads whole, the grouped layout q: [B, Hkv, G, T, E] with G sharded"
             : "");
  else
    help(k->c, "redistribute '%s' (or '%s') so that dim %d of one is laid out as dim %d of the other", os, qs, dk, dq);
  return false;
}

/* Sizes a (of operand an) and b (of bn) must be equal. */
static bool same_size(Checker *k, Expr *call, Size a, Size b, const char *what, const char *an, const char *bn) {
  if (size_eq(a, b))
    return true;
  const char *as = size_str(k->c, k->mesh, a), *bs = size_str(k->c, k->mesh, b);
  check_error(k, call->span, "attention() needs one %s in %s and %s: %s in %s, %s in %s", what, an, bn, as, an, bs, bn);
  note_at(k->c, (Span){0, 0, 0}, "q is [B, H, T, E] (or [B, Hkv, G, T, E]), k [B, Hkv, S, E] and v [B, Hkv, S, Ev]");
  return false;
}

/* torch.chunk's split (SPEC 4): block r of n over k ranks, its extent and
 * offset (runtime/mesh.c's rt_chunk). */
static long long chunk_of(long long n, long long k, long long r, long long *off) {
  long long c = (n + k - 1) / k, lo = r * c < n ? r * c : n, hi = lo + c < n ? lo + c : n;
  *off = lo;
  return hi - lo;
}

/* Grouped-query heads on uneven shards (SPEC 4): with q [B, H, T, E] and
 * k, v [B, Hkv, S, E] sharded alike on dim 1, each rank's query heads must
 * be the groups of its key/value heads (query head h reads key/value head
 * h / G), block for block: torch.chunk splits H and Hkv separately (H = 8,
 * Hkv = 4 on tp = 3: 3, 3, 2 query heads, 2, 2, 0 key/value heads).  Where
 * the sizes and the axes' declared sizes show a block that does not line
 * up, an error; otherwise the generated code checks it when it runs
 * (emit_c.c, rt_check_gqa_blocks). */
static bool gqa_blocks_line_up(Checker *k, Expr *call, const Operand *q, const Operand *kv) {
  long long h, hkv;
  if (q->t->local || q->t->spec[1][0] < 0 || !size_is_int(q->t->shape[1], &h) ||
      !size_is_int(kv->t->shape[1], &hkv) || hkv <= 0 || h == hkv || h % hkv)
    return true;
  long long g = h / hkv, sizes[MAX_MESH_AXES], ranks = 1;
  int n = 0;
  for (int i = 0; i < MAX_MESH_AXES && q->t->spec[1][i] >= 0; i++) {
    sizes[n] = k->mesh->axes[q->t->spec[1][i]].size;
    if (sizes[n] <= 0)
      return true; /* not declared: checked when it runs */
    ranks *= sizes[n++];
  }
  for (long long b = 0; b < ranks; b++) {
    long long coord[MAX_MESH_AXES], rem = b, eq = h, oq = 0, ek = hkv, ok = 0;
    for (int i = n - 1; i >= 0; i--) {
      coord[i] = rem % sizes[i];
      rem /= sizes[i];
    }
    for (int i = 0; i < n; i++) {
      long long o1, o2;
      eq = chunk_of(eq, sizes[i], coord[i], &o1);
      ek = chunk_of(ek, sizes[i], coord[i], &o2);
      oq += o1;
      ok += o2;
    }
    if (eq == g * ek && oq == g * ok)
      continue;
    const char *as = dim_axes_text(k, q->t, 1);
    check_error(k, call->span, "attention() splits %lld query heads and %lld key/value heads over %s%s%s (%lld ranks) "
                "into blocks that do not line up: block %lld holds query heads [%lld, %lld), but key/value heads "
                "[%lld, %lld), whose groups are query heads [%lld, %lld)", h, hkv, as[0] == '(' ? "" : "'", as,
                as[0] == '(' ? "" : "'", ranks, b, oq, oq + eq, ok, ok + ek, g * ok, g * (ok + ek));
    note_at(k->c, (Span){0, 0, 0}, "query head h reads key/value head h / %lld; torch.chunk splits the two head dims "
            "separately (SPEC 4, uneven shards), so a rank's query heads need not be its key/value heads' groups", g);
    help(k->c, "compute the queries in the grouped layout, which pairs each rank's groups with its key/value heads: "
         "q: %s[%s, %lld@%s, %lld, %s, %s] (einsum(\"btd,dkge->bkgte\", x, wq) with wq: [D, %lld@%s, %lld, HD], "
         "as nn.gqa_heads), or shard the heads over a group that divides %lld", dtype_name(q->t->dtype),
         size_str(k->c, k->mesh, q->t->shape[0]), hkv, as, g, size_str(k->c, k->mesh, q->t->shape[2]),
         size_str(k->c, k->mesh, q->t->shape[3]), hkv, as, g, hkv);
    return false;
  }
  return true;
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
    if (ca) {
      help_fix(k->c, ca->value->span, "true", "write causal=true (a decoder) or causal=false, a bool literal");
      return type_error();
    }
    Arg *sa = call_named(k, call, "scale");
    const char *fix = arena_sprintf(&k->c->arena, "attention(%s, %s, %s, causal=true%s%s)", src_text(k, o[0].e),
                                    src_text(k, o[1].e), src_text(k, o[2].e), sa ? ", scale=" : "",
                                    sa ? src_text(k, sa->value) : "");
    bool exact = src_exact(k, o[0].e) && src_exact(k, o[1].e) && src_exact(k, o[2].e) && (!sa || src_exact(k, sa->value));
    help_fix(k->c, call->span, exact ? fix : NULL, "%s (or causal=false)", fix);
    return type_error();
  }
  double scale = 0;
  bool has_scale;
  if (!named_number(k, call, "scale", &scale, &has_scale))
    return type_error();
  Arg *kl = call_named(k, call, "kv_len");
  if (kl) { /* the keys written in a cache: a host integer (a position in a decoding loop) */
    Type *lt = check_expr(k, kl->value);
    if (lt->kind == TY_ERROR)
      return lt;
    if (lt->kind != TY_INT) {
      check_error(k, kl->value->span, "attention()'s kv_len= takes a host integer (how many keys of the cache are "
                  "written), not %s", ck_type(k, lt));
      help(k->c, "pass the position as a host integer, the loop's counter: kv_len=pos + 1");
      return type_error();
    }
  }
  if (has_scale && !(scale > 0) ) {
    check_error(k, call_named(k, call, "scale")->value->span, "attention()'s scale= must be positive, got %g", scale);
    help(k->c, "the scores are q k^T * scale: leave scale= out for 1/sqrt(E), or give a positive number, as in "
         "scale=0.125");
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
  if (!same_size(k, call, q->shape[0], kt->shape[0], "batch size", "q", "k") ||
      !same_size(k, call, kt->shape[0], vt->shape[0], "batch size", "k", "v") ||
      !same_size(k, call, kt->shape[1], vt->shape[1], "number of key/value heads", "k", "v") ||
      !same_size(k, call, kt->shape[2], vt->shape[2], "key length", "k", "v") ||
      !same_size(k, call, q->shape[qt + 1], kt->shape[3], "head size", "q", "k"))
    return type_error();
  if (grouped && !same_size(k, call, q->shape[1], kt->shape[1], "number of key/value heads", "q", "k"))
    return type_error();
  long long h, hkv;
  if (!grouped && size_is_int(q->shape[1], &h) && size_is_int(kt->shape[1], &hkv) && (hkv <= 0 || h % hkv)) {
    check_error(k, call->span, "attention() needs the query heads (%lld) a multiple of the key/value heads (%lld)", h,
                hkv);
    note_at(k->c, (Span){0, 0, 0}, "query head h reads key/value head h / (H / Hkv)");
    StrBuf sb;
    sb_init(&sb, &k->c->arena);
    for (long long d = 1, n = 0; d <= h; d++)
      if (h % d == 0)
        sb_printf(&sb, "%s%lld", n++ ? ", " : "", d);
    help(k->c, "give k and v a number of heads that divides %lld: one of %s", h, sb.data);
    return type_error();
  }
  /* whole sequences and head sizes; batch and heads sharded alike */
  if (!whole_dim(k, call, &o[0], qt, "query sequence", names[0]) ||
      !whole_dim(k, call, &o[0], qt + 1, "head size", names[0]))
    return type_error();
  for (int i = 1; i < 3; i++)
    if (!whole_dim(k, call, &o[i], 2, "key sequence", names[i]) ||
        !whole_dim(k, call, &o[i], 3, "head size", names[i]) ||
        !same_layout(k, call, &o[0], 0, &o[i], 0, "batch", names[i]) ||
        !same_layout(k, call, &o[0], 1, &o[i], 1, grouped ? "key/value head" : "head", names[i]))
      return type_error();
  if (!grouped && !gqa_blocks_line_up(k, call, &o[0], &o[1]))
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
