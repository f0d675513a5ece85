/* shardprop.h: the global shard-propagation rules (SPEC section 7,
 * docs/global_rules.md), one or a few functions per op, named shard_<op>.
 * Called by the ops' checks in check_<family>.c after their shape and local
 * R/I/V/P rules (the order of docs/global_rules.md section 8: shapes, then
 * the local rules, then layouts).  Each returns false after reporting why
 * the op's layouts do not compute its single-device meaning.  See the
 * table at the top of shardprop.c. */
#ifndef SPMDC_SHARDPROP_H
#define SPMDC_SHARDPROP_H

#include "check.h"

/* "sharded on ..." in messages: tp or (dp, tp). */
const char *dim_axes_text(Checker *k, const Type *t, int d);

/* Elementwise ops (NumPy broadcasting).  The operand whose dim rd gives
 * the result's (rndim dims): the first with a size other than 1 there,
 * preferring one sharded on it; -1 when all are 1 (*first: the first that
 * has the dim). */
int shard_broadcast_ref(const Operand *ops, int n, int rndim, int rd, int *first);
/* Sets r's spec (r has the broadcast shape): aligned dims carry the same
 * spec, an operand broadcast along a sharded dim does not vary there. */
bool shard_broadcast(Checker *k, Span sp, const char *opname, const Operand *ops, int n, Type *r);

/* out_partial_axes=: a listed axis `a` must shard a contracted dim, not a
 * dim of the result r (whose spec then loses it); and every axis of a
 * sharded contracted dim must be listed. */
bool shard_out_partial_axis(Checker *k, Span sp, Type *r, int a, const bool contracted[MAX_MESH_AXES]);
bool shard_out_partial_complete(Checker *k, Expr *call, const bool contracted[MAX_MESH_AXES],
                                const bool listed[MAX_MESH_AXES]);

/* sum, mean, amax, cumsum, softmax, log_softmax over dims [lo, hi) of r:
 * the axes of the reduced dims (contracted[]; only sum may have any), and
 * the result's spec (the other dims keep theirs; keepdim ones are whole). */
bool shard_reduction(Checker *k, Expr *call, Builtin op, Expr *x, const Type *r, int lo, int hi, bool has_dim,
                     bool contracted[MAX_MESH_AXES]);
void shard_reduction_result(const Type *r, Type *res, int lo, int hi, bool keep);

/* matmul, '@': the contracted dims (ka of a, kb of b) alike; batch dim d
 * of the result (dim r->ndim, from operand `owner`'s dim od; `both`: both
 * operands have it, at da and db); then the m and n dims, and the axes of
 * the contracted dim. */
bool shard_matmul_contracted(Checker *k, const char *opname, Span sp, const Operand o[2], int ka, int kb);
bool shard_matmul_batch(Checker *k, const char *opname, Span sp, const Operand o[2], Type *r, int d, int da, int db,
                        int owner, int od, bool both);
bool shard_matmul(Checker *k, const char *opname, Span sp, const Operand o[2], Type *r, bool contracted[MAX_MESH_AXES]);

/* einsum: a label seen again (dim dy of y) is laid out as where it was
 * first seen (dim dx of x); output label `label` (result dim r->ndim) takes
 * the layout of dim fd of `from`; the axes of the contracted labels. */
bool shard_einsum_label(Checker *k, Span sp, int label, const Operand *x, int dx, const Operand *y, int dy);
bool shard_einsum_output(Checker *k, Span sp, const char *subs, const char *arrow, const Operand *ops, int n, Type *r,
                         int label, const Operand *from, int fd);
void shard_einsum_contracted(const Operand *ops, const bool lset[128], const bool in_out[128], const int lop[128],
                             const int ldim[128], bool contracted[MAX_MESH_AXES]);

/* embedding(ids, table): r has the ids' dims and the feature dim. */
bool shard_embedding(Checker *k, Span sp, const Operand o[2], Type *r, bool contracted[MAX_MESH_AXES]);

/* layer_norm, rms_norm: the last dim of x whole. */
bool shard_norm(Checker *k, Expr *call, Builtin op, const Operand *x);
/* cross_entropy(logits [..., C], targets [...], reduction red: 0 mean, 1
 * sum, 2 none): the classes whole, the targets laid out as the leading
 * dims; mean over a sharded dim rejected; sum: the axes of sharded leading
 * dims in contracted[] (out_partial_axes must list them); none: res takes
 * the leading dims' spec. */
bool shard_cross_entropy(Checker *k, Expr *call, const Operand ops[2], int red, Type *res,
                         bool contracted[MAX_MESH_AXES]);

/* where(c, a, b) (ops: c, a, b): all three laid out as for an elementwise
 * op; sets r's spec. */
bool shard_where(Checker *k, Span sp, const Operand ops[3], Type *r);
/* take_along_dim(x, idx, dim): dim whole in both; the others as for an
 * elementwise op; sets r's spec. */
bool shard_take_along_dim(Checker *k, Expr *call, const Operand o[2], int dim, Type *r);

/* concat along dim d; slice of dim d of r. */
bool shard_concat(Checker *k, Expr *call, const Operand *ops, int n, int d);
bool shard_slice(Checker *k, Expr *call, const Type *r, int d);

/* Shape ops: the spec moves with the dims.  transpose swaps dims a and b of
 * r; permute takes dim perm[i] of x as dim i of res; reshape and expand set
 * res's spec from r's (res has its new shape); x[i] drops dim 0 of x
 * (r: the result, with its shape). */
void shard_transpose(Type *r, int a, int b);
void shard_permute(const Type *x, Type *res, const int *perm);
bool shard_reshape(Checker *k, Expr *call, const Type *r, Type *res);
bool shard_reshape_even(Checker *k, Expr *call, const Type *r, int d, Size to);
void shard_expand(const Type *r, Type *res);
bool shard_index(Checker *k, Expr *e, const Type *x, Type *r);

#endif
