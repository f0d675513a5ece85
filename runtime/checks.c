/* The checks of the ops' arguments (shapes, dtypes, dims, indices), written
 * once for every target: the CPU kernels and the CUDA runtime call them
 * before they compute, so a program stopped by one gives the same message
 * on either (tests grep these messages: tests/runtime, tests/faults, the
 * e2e error cases). Each is named for its op, rt_OP_check, and returns the
 * shape it works out on the way (a broadcast, a reduced shape) where the
 * op needs it. Indices and token ids are read through rt_host_view: the
 * tensor's own memory on the CPU, a staged copy on a device. */
#include <string.h>

#include "rt_internal.h"

/* ---- broadcasting */

void rt_broadcast_add(rt_ctx *ctx, rt_bshape *b, const rt_tensor *x, const char *what)
{
    int nd = b->ndim > x->ndim ? b->ndim : x->ndim;
    int64_t s[RT_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int db = d - (nd - b->ndim), dx = d - (nd - x->ndim);
        int64_t sb = db >= 0 ? b->shape[db] : 1, sx = dx >= 0 ? x->shape[dx] : 1;
        if (sb != sx && sb != 1 && sx != 1) {
            char bs[256], xs[256];
            rt_shape_str(bs, sizeof bs, b->ndim, b->shape);
            rt_shape_str(xs, sizeof xs, x->ndim, x->shape);
            rt_fail(ctx, "%s: shapes %s and %s do not broadcast", what, bs, xs);
        }
        s[d] = sb == 1 ? sx : sb;
    }
    b->ndim = nd;
    memcpy(b->shape, s, sizeof s);
}

void rt_broadcast_strides(const rt_tensor *x, int ndim, const int64_t *shape, int64_t *str)
{
    int lead = ndim - x->ndim;
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        int xd = d - lead;
        if (xd < 0) {
            str[d] = 0;
            continue;
        }
        str[d] = x->shape[xd] == 1 && shape[d] != 1 ? 0 : s;
        s *= x->shape[xd];
    }
}

rt_bcast rt_binary_broadcast(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, const char *what)
{
    rt_bshape s = {0};
    rt_broadcast_add(ctx, &s, a, what);
    rt_broadcast_add(ctx, &s, b, what);
    rt_bcast bc = {.ndim = s.ndim};
    memcpy(bc.shape, s.shape, sizeof bc.shape);
    rt_broadcast_strides(a, bc.ndim, bc.shape, bc.sa);
    rt_broadcast_strides(b, bc.ndim, bc.shape, bc.sb);
    return bc;
}

/* ---- elementwise */

void rt_unary_bwd_check(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, const rt_tensor *dy)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NUNARY, "unary_bwd: bad op %d", (int)op);
    rt_check_float(ctx, x, rt_unary_name(op));
    RT_CHECK(ctx, rt_same_shape(x, dy) && x->dtype == dy->dtype,
             "%s backward: gradient shape or dtype differs from the input", rt_unary_name(op));
}

void rt_binary_check(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NBINARY, "binary: bad op %d", (int)op);
    RT_CHECK(ctx, a->dtype == b->dtype, "%s: dtypes differ (%s and %s); use astype",
             rt_binary_name(op), rt_dtype_name(a->dtype), rt_dtype_name(b->dtype));
    RT_CHECK(ctx, !(a->dtype == RT_I32 && (op == RT_DIV || op == RT_POW)),
             "%s: needs a float dtype (f32, f64, bf16), got i32", rt_binary_name(op));
}

/* ---- random numbers */

void rt_random_check(rt_ctx *ctx, rt_dtype dt, const rt_layout *l)
{
    rt_check_float(ctx, &(rt_tensor){.dtype = dt}, "random");
    for (int d = l->ndim - 1; d >= 0; d--)
        RT_CHECK(ctx, l->offset[d] + l->local[d] <= l->global[d],
                 "random: block exceeds the global shape in dim %d", d);
}

void rt_dropout_check(rt_ctx *ctx, const rt_tensor *x, double p, const rt_layout *l)
{
    RT_CHECK(ctx, p >= 0 && p < 1, "dropout: p=%g is not in [0, 1)", p);
    RT_CHECK(ctx, l->ndim == x->ndim, "dropout: the layout does not describe the tensor");
    for (int d = 0; d < x->ndim; d++)
        RT_CHECK(ctx, l->local[d] == x->shape[d] && l->offset[d] + l->local[d] <= l->global[d],
                 "dropout: the layout does not describe the tensor (dim %d)", d);
    rt_check_float(ctx, x, "dropout");
}

/* ---- where, take_along_dim */

rt_bshape rt_where_check(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *a, const rt_tensor *b)
{
    RT_CHECK(ctx, a->dtype == b->dtype, "where: the values' dtypes differ (%s and %s); use astype",
             rt_dtype_name(a->dtype), rt_dtype_name(b->dtype));
    rt_bshape bs = {0};
    rt_broadcast_add(ctx, &bs, c, "where");
    rt_broadcast_add(ctx, &bs, a, "where");
    rt_broadcast_add(ctx, &bs, b, "where");
    return bs;
}

rt_bshape rt_take_along_dim_check(rt_ctx *ctx, int xndim, const int64_t *xshape,
                                  const rt_tensor *idx, int *dim, const char *what)
{
    *dim = rt_norm_dim(ctx, *dim, xndim, what);
    rt_check_dtype(ctx, idx, RT_I32, "take_along_dim indices");
    RT_CHECK(ctx, xndim == idx->ndim,
             "take_along_dim: the indices have %d dims but the input has %d", idx->ndim, xndim);
    rt_bshape bs = {.ndim = xndim};
    for (int d = 0; d < xndim; d++) {
        int64_t sx = xshape[d], si = idx->shape[d];
        if (d == *dim) {
            bs.shape[d] = si;
            continue;
        }
        if (sx != si && sx != 1 && si != 1) {
            char xs[256], is[256];
            rt_shape_str(xs, sizeof xs, xndim, xshape);
            rt_shape_str(is, sizeof is, idx->ndim, idx->shape);
            rt_fail(ctx, "take_along_dim: shapes %s and %s do not broadcast outside dim %d", xs,
                    is, *dim);
        }
        bs.shape[d] = sx == 1 ? si : sx;
    }
    return bs;
}

rt_bshape rt_take_along_dim_bwd_check(rt_ctx *ctx, const rt_tensor *idx, const rt_tensor *dy,
                                      int ndim, const int64_t *x_shape, int *dim)
{
    rt_bshape bs = rt_take_along_dim_check(ctx, ndim, x_shape, idx, dim, "take_along_dim_bwd");
    RT_CHECK(ctx, dy->numel == rt_numel_of(bs.ndim, bs.shape),
             "take_along_dim_bwd: the gradient's shape differs from the result's");
    return bs;
}

void rt_take_along_dim_index_fail(rt_ctx *ctx, int32_t j, int dim, int64_t size)
{
    rt_fail(ctx, "take_along_dim: index %d is out of range for dim %d of size %lld", (int)j, dim,
            (long long)size);
}

void rt_take_along_dim_walk(rt_ctx *ctx, int xndim, const int64_t *xshape, const rt_tensor *idx,
                            int dim, const rt_bshape *bs, rt_gather_visit visit, void *user)
{
    int64_t xs[RT_MAX_DIMS], si[RT_MAX_DIMS], pos[RT_MAX_DIMS] = {0}, s = 1;
    for (int d = xndim - 1; d >= 0; d--) {
        xs[d] = xshape[d] == 1 && bs->shape[d] != 1 && d != dim ? 0 : s;
        s *= xshape[d];
    }
    rt_broadcast_strides(idx, bs->ndim, bs->shape, si);
    int64_t n = rt_numel_of(bs->ndim, bs->shape), oi = 0, ox = 0;
    const int32_t *iv = n ? rt_host_view(ctx, idx) : NULL;
    for (int64_t i = 0; i < n; i++) {
        int32_t j = iv[oi];
        if (j < 0 || j >= xshape[dim])
            rt_take_along_dim_index_fail(ctx, j, dim, xshape[dim]);
        visit(user, i, ox + (int64_t)j * xs[dim]);
        for (int d = bs->ndim - 1; d >= 0; d--) {
            oi += si[d];
            if (d != dim)
                ox += xs[d];
            if (++pos[d] < bs->shape[d])
                break;
            oi -= si[d] * bs->shape[d];
            if (d != dim)
                ox -= xs[d] * bs->shape[d];
            pos[d] = 0;
        }
    }
}

/* ---- reductions */

void rt_reduce_check(rt_ctx *ctx, const rt_tensor *x, int *dim, bool keepdim, rt_reduce_kind k,
                     const char *what, int *ndim, int64_t *shape)
{
    *dim = rt_norm_dim(ctx, *dim, x->ndim, what);
    RT_CHECK(ctx, !(k == RT_REDUCE_MAX && x->shape[*dim] == 0),
             "%s: reduction over an empty dim", what);
    *ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d != *dim)
            shape[(*ndim)++] = x->shape[d];
        else if (keepdim)
            shape[(*ndim)++] = 1;
    }
}

void rt_sum_squares_check(rt_ctx *ctx, int n, const rt_tensor *const *xs, const rt_tensor *dy)
{
    RT_CHECK(ctx, n >= 1, "sum_squares: no tensors");
    rt_dtype dt = xs[0]->dtype;
    RT_CHECK(ctx, dt == RT_F32 || dt == RT_F64 || dt == RT_BF16,
             "sum_squares: needs floating-point tensors");
    for (int j = 1; j < n; j++)
        RT_CHECK(ctx, xs[j]->dtype == dt, "sum_squares: tensor %d's dtype differs from the first's", j);
    if (dy)
        RT_CHECK(ctx, dy->dtype == dt && dy->numel == 1,
                 "sum_squares backward: the gradient is not one element of the tensors' dtype");
}

bool rt_sum_to_shape_check(rt_ctx *ctx, const rt_tensor *g, int ndim, const int64_t *shape)
{
    RT_CHECK(ctx, ndim <= g->ndim, "sum_to_shape: target has more dims than the gradient");
    if (ndim == g->ndim && memcmp(shape, g->shape, (size_t)ndim * sizeof *shape) == 0)
        return false;
    for (int d = 0; d < ndim; d++)
        RT_CHECK(ctx, shape[d] == 1 || shape[d] == g->shape[g->ndim - ndim + d],
                 "sum_to_shape: dim %d of size %lld cannot come from %lld", d,
                 (long long)shape[d], (long long)g->shape[g->ndim - ndim + d]);
    return true;
}

/* ---- neural-network ops */

void rt_softmax_check(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, int *dim,
                      const char *what)
{
    rt_check_float(ctx, a, what);
    RT_CHECK(ctx, !b || (rt_same_shape(a, b) && a->dtype == b->dtype),
             "%s: operand shapes or dtypes differ", what);
    *dim = rt_norm_dim(ctx, *dim, a->ndim, what);
}

static void check_norm_param(rt_ctx *ctx, const rt_tensor *p, const rt_tensor *x, const char *what)
{
    RT_CHECK(ctx, p->ndim == 1 && p->shape[0] == x->shape[x->ndim - 1] && p->dtype == x->dtype,
             "%s: weight/bias must be %s[%lld]", what, rt_dtype_name(x->dtype),
             (long long)x->shape[x->ndim - 1]);
}

void rt_norm_check(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                   const rt_tensor *dy, const char *what, int64_t *rows, int64_t *d)
{
    rt_check_float(ctx, x, what);
    RT_CHECK(ctx, x->ndim >= 1, "%s: input must have at least 1 dim", what);
    if (w)
        check_norm_param(ctx, w, x, what);
    if (b)
        check_norm_param(ctx, b, x, what);
    *d = x->shape[x->ndim - 1];
    *rows = *d ? x->numel / *d : 0;
    if (dy)
        RT_CHECK(ctx, rt_same_shape(x, dy) && x->dtype == dy->dtype,
                 "%s backward: gradient shape or dtype differs from the input", what);
}

void rt_cross_entropy_check(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets)
{
    rt_check_float(ctx, logits, "cross_entropy");
    rt_check_dtype(ctx, targets, RT_I32, "cross_entropy targets");
    bool ok = logits->ndim >= 1 && targets->ndim == logits->ndim - 1;
    for (int d = 0; ok && d < targets->ndim; d++)
        ok = targets->shape[d] == logits->shape[d];
    if (!ok) {
        char ls[256], ts[256];
        rt_shape_str(ls, sizeof ls, logits->ndim, logits->shape);
        rt_shape_str(ts, sizeof ts, targets->ndim, targets->shape);
        rt_fail(ctx, "cross_entropy: expects logits [..., C] and targets [...], got %s and %s", ls, ts);
    }
}

int64_t rt_cross_entropy_check_targets(rt_ctx *ctx, const rt_tensor *logits,
                                       const rt_tensor *targets)
{
    return rt_cross_entropy_check_targets_n(ctx, targets, logits->shape[logits->ndim - 1]);
}

int64_t rt_cross_entropy_check_targets_n(rt_ctx *ctx, const rt_tensor *targets, int64_t c)
{
    const int32_t *t = targets->numel ? rt_host_view(ctx, targets) : NULL;
    int64_t kept = 0;
    for (int64_t r = 0; r < targets->numel; r++) {
        if (!(t[r] == RT_IGNORE_INDEX || (t[r] >= 0 && t[r] < c)))
            rt_cross_entropy_target_fail(ctx, "", t[r], r, c);
        kept += t[r] != RT_IGNORE_INDEX;
    }
    return kept;
}

void rt_cross_entropy_vp_check(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                               const rt_layout *l, const rt_tensor *lse, int64_t *first,
                               int64_t *classes)
{
    rt_cross_entropy_check(ctx, logits, targets);
    int last = logits->ndim - 1;
    RT_CHECK(ctx, l && l->ndim == logits->ndim && l->local[last] == logits->shape[last] &&
                  l->offset[last] >= 0 && l->offset[last] + l->local[last] <= l->global[last],
             "cross_entropy: the layout's class block differs from the logits' %lld classes",
             (long long)logits->shape[last]);
    if (lse)
        RT_CHECK(ctx, lse->dtype == RT_F64 && lse->numel == targets->numel,
                 "cross_entropy_bwd: the log-sum-exp needs one f64 per row");
    *first = l->offset[last];
    *classes = l->global[last];
}

void rt_cross_entropy_target_fail(rt_ctx *ctx, const char *at, int64_t t, int64_t row,
                                  int64_t classes)
{
    rt_fail(ctx, "cross_entropy%s: target %lld at row %lld is out of range for %lld classes", at,
            (long long)t, (long long)row, (long long)classes);
}

void rt_cross_entropy_bwd_check(rt_ctx *ctx, const rt_tensor *targets, const rt_tensor *dy,
                                rt_ce_reduction red)
{
    RT_CHECK(ctx, red == RT_CE_NONE ? dy->numel == targets->numel : dy->numel == 1,
             "cross_entropy_bwd: the gradient's shape differs from the loss's");
}

void rt_embedding_check(rt_ctx *ctx, const rt_tensor *table, const rt_tensor *ids)
{
    RT_CHECK(ctx, table->ndim == 2, "embedding: table must be [V, D]");
    RT_CHECK(ctx, ids->ndim < RT_MAX_DIMS, "embedding: ids have too many dims");
    rt_check_dtype(ctx, ids, RT_I32, "embedding ids");
}

void rt_embedding_bwd_check(rt_ctx *ctx, const rt_tensor *ids, const rt_tensor *dy)
{
    rt_check_dtype(ctx, ids, RT_I32, "embedding ids");
    rt_check_float(ctx, dy, "embedding_bwd");
    RT_CHECK(ctx, dy->numel == ids->numel * dy->shape[dy->ndim - 1],
             "embedding_bwd: gradient shape mismatch");
}

const int32_t *rt_embedding_check_ids(rt_ctx *ctx, const rt_tensor *ids, int64_t vocab)
{
    const int32_t *id = ids->numel ? rt_host_view(ctx, ids) : NULL;
    for (int64_t i = 0; i < ids->numel; i++)
        if (!(id[i] >= 0 && id[i] < vocab))
            rt_embedding_id_fail(ctx, "", id[i], i, vocab);
    return id;
}

void rt_embedding_id_fail(rt_ctx *ctx, const char *at, int64_t id, int64_t pos, int64_t vocab)
{
    rt_fail(ctx, "embedding%s: id %lld at position %lld is out of range for %lld rows", at,
            (long long)id, (long long)pos, (long long)vocab);
}

/* ---- collectives and convert over a group of n ranks (dim: RT_STACK for
 * the V form, i for S(i)) */

int rt_coll_check_dim(rt_ctx *ctx, const rt_tensor *x, int dim, const char *what)
{
    if (dim == RT_STACK)
        return dim;
    RT_CHECK(ctx, dim >= 0 && dim < x->ndim, "%s: dim %d out of range for a %d-d tensor", what,
             dim, x->ndim);
    return dim;
}

int64_t rt_coll_split(rt_ctx *ctx, const rt_tensor *x, int dim, int n, const char *what)
{
    RT_CHECK(ctx, x->shape[dim] % n == 0,
             "%s: dim %d (size %lld) is not divisible by the group size %d", what, dim,
             (long long)x->shape[dim], n);
    return x->shape[dim] / n;
}

void rt_coll_check_block(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t want, int64_t extent, int n,
                         const char *what)
{
    RT_CHECK(ctx, x->shape[dim] == want,
             "%s: this rank's block has %lld rows on dim %d, but dim %d's extent %lld split over %d "
             "ranks gives it %lld", what, (long long)x->shape[dim], dim, dim, (long long)extent, n,
             (long long)want);
}

void rt_coll_check_stack(rt_ctx *ctx, const rt_tensor *x, int n, const char *what)
{
    RT_CHECK(ctx, x->ndim >= 1 && x->shape[0] == n,
             "%s: V form needs a leading dim of the group size %d", what, n);
}

int rt_all_gather_shape(rt_ctx *ctx, const rt_tensor *x, int dim, int n, int64_t *shape)
{
    if (dim != RT_STACK) {
        memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
        shape[dim] *= n;
        return x->ndim;
    }
    RT_CHECK(ctx, x->ndim < RT_MAX_DIMS, "all_gather: result would exceed %d dims", RT_MAX_DIMS);
    shape[0] = n;
    memcpy(shape + 1, x->shape, (size_t)x->ndim * sizeof *shape);
    return x->ndim + 1;
}

int64_t rt_all_to_all_shapes(rt_ctx *ctx, const rt_tensor *x, int si, int dj, int n,
                             int64_t *chunk, int64_t *shape)
{
    int64_t m = rt_coll_split(ctx, x, dj, n, "all_to_all");
    memcpy(chunk, x->shape, (size_t)x->ndim * sizeof *chunk);
    chunk[dj] = m;
    memcpy(shape, chunk, (size_t)x->ndim * sizeof *shape);
    shape[si] *= n;
    return m;
}

void rt_all_reduce_check(rt_ctx *ctx, const rt_tensor *x, rt_reduce_op op)
{
    RT_CHECK(ctx, !(op == RT_RED_AVG && x->dtype == RT_I32), "all_reduce: op=avg needs a float tensor");
}

void rt_reduce_scatter_check(rt_ctx *ctx, const rt_tensor *x, rt_reduce_op op)
{
    RT_CHECK(ctx, op == RT_RED_SUM || op == RT_RED_AVG, "reduce_scatter: op must be sum or avg");
    RT_CHECK(ctx, !(op == RT_RED_AVG && x->dtype == RT_I32),
             "reduce_scatter: op=avg needs a float tensor");
}

void rt_all_to_all_check(rt_ctx *ctx, const rt_tensor *x, int *src_dim, int *dst_dim)
{
    *src_dim = rt_coll_check_dim(ctx, x, *src_dim, "all_to_all");
    *dst_dim = rt_coll_check_dim(ctx, x, *dst_dim, "all_to_all");
    RT_CHECK(ctx, (*src_dim == RT_STACK) == (*dst_dim == RT_STACK),
             "all_to_all: src and dst must both be V or both be S(i)");
}

/* ---- shape ops */

void rt_contiguous_strides(int ndim, const int64_t *shape, int64_t *str)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        str[d] = s;
        s *= shape[d];
    }
}

void rt_reshape_check(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape, int64_t *sh)
{
    int64_t known = 1;
    int infer = -1;
    for (int d = 0; d < ndim; d++) {
        sh[d] = shape[d];
        if (sh[d] == -1) {
            RT_CHECK(ctx, infer < 0, "reshape: more than one -1 size");
            infer = d;
        } else {
            known *= sh[d];
        }
    }
    if (infer >= 0 && known > 0)
        sh[infer] = x->numel / known;
    if (rt_numel_of(ndim, sh) != x->numel) {
        char a[256], b[256];
        rt_shape_str(a, sizeof a, x->ndim, x->shape);
        rt_shape_str(b, sizeof b, ndim, sh);
        rt_fail(ctx, "reshape: cannot view %s as %s", a, b);
    }
}

void rt_permute_check(rt_ctx *ctx, const rt_tensor *x, const int *perm, int64_t *shape,
                      int64_t *sstr)
{
    int64_t str[RT_MAX_DIMS];
    int seen = 0;
    rt_contiguous_strides(x->ndim, x->shape, str);
    for (int d = 0; d < x->ndim; d++) {
        int p = rt_norm_dim(ctx, perm[d], x->ndim, "permute");
        RT_CHECK(ctx, !(seen & (1 << p)), "permute: dim %d repeated", p);
        seen |= 1 << p;
        shape[d] = x->shape[p];
        sstr[d] = str[p];
    }
}

void rt_concat_check(rt_ctx *ctx, int n, const rt_tensor *const *xs, int *dim, int64_t *shape)
{
    RT_CHECK(ctx, n > 0, "concat: no tensors");
    const rt_tensor *x0 = xs[0];
    *dim = rt_norm_dim(ctx, *dim, x0->ndim, "concat");
    memcpy(shape, x0->shape, sizeof x0->shape);
    shape[*dim] = 0;
    for (int i = 0; i < n; i++) {
        RT_CHECK(ctx, xs[i]->ndim == x0->ndim && xs[i]->dtype == x0->dtype,
                 "concat: tensor %d differs in rank or dtype", i);
        for (int d = 0; d < x0->ndim; d++)
            RT_CHECK(ctx, d == *dim || xs[i]->shape[d] == x0->shape[d],
                     "concat: tensor %d has size %lld in dim %d, expected %lld", i,
                     (long long)xs[i]->shape[d], d, (long long)x0->shape[d]);
        shape[*dim] += xs[i]->shape[*dim];
    }
}

void rt_slice_check(rt_ctx *ctx, const rt_tensor *x, int *dim, int64_t start, int64_t end)
{
    *dim = rt_norm_dim(ctx, *dim, x->ndim, "slice");
    int64_t n = x->shape[*dim];
    RT_CHECK(ctx, 0 <= start && start <= end && end <= n,
             "slice: [%lld:%lld] out of range for dim %d of size %lld", (long long)start,
             (long long)end, *dim, (long long)n);
}

void rt_slice_bwd_check(rt_ctx *ctx, const rt_tensor *dy, int ndim, const int64_t *in_shape,
                        int *dim, int64_t start)
{
    *dim = rt_norm_dim(ctx, *dim, ndim, "slice_bwd");
    RT_CHECK(ctx, start + dy->shape[*dim] <= in_shape[*dim], "slice_bwd: block does not fit");
}

void rt_expand_check(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape,
                     int64_t *sstr)
{
    RT_CHECK(ctx, ndim >= x->ndim, "expand: cannot expand a %d-d tensor to %d dims", x->ndim,
             ndim);
    int64_t str[RT_MAX_DIMS];
    rt_contiguous_strides(x->ndim, x->shape, str);
    int lead = ndim - x->ndim;
    for (int d = 0; d < lead; d++)
        sstr[d] = 0;
    for (int d = 0; d < x->ndim; d++) {
        int64_t s = x->shape[d], t = shape[lead + d];
        RT_CHECK(ctx, s == t || s == 1, "expand: dim %d of size %lld cannot become %lld", d,
                 (long long)s, (long long)t);
        sstr[lead + d] = s == t ? str[d] : 0;
    }
}

void rt_index_check(rt_ctx *ctx, const rt_tensor *x, int64_t i)
{
    RT_CHECK(ctx, x->ndim >= 1, "index: a 0-d tensor has no leading dim");
    RT_CHECK(ctx, i >= 0 && i < x->shape[0], "index %lld out of range for dim 0 of size %lld",
             (long long)i, (long long)x->shape[0]);
}

void rt_add_check(rt_ctx *ctx, const rt_tensor *acc, const rt_tensor *x)
{
    RT_CHECK(ctx, rt_writable(acc), "add_: accumulator is shared (%d references%s)", acc->st->refs,
             acc->refs < acc->st->refs ? ", views included" : "");
    RT_CHECK(ctx, rt_same_shape(acc, x) && acc->dtype == x->dtype,
             "add_: shapes or dtypes differ");
}

void rt_index_add_multi_check(rt_ctx *ctx, int n, rt_tensor *const *accs, int64_t i,
                              const rt_tensor *const *xs)
{
    RT_CHECK(ctx, n >= 1, "index_add_multi_: no tensors");
    for (int k = 0; k < n; k++) {
        rt_index_add_check(ctx, accs[k], i, xs[k]);
        for (int m = 0; m < k; m++)
            RT_CHECK(ctx, accs[m]->st != accs[k]->st,
                     "index_add_multi_: accumulators %d and %d share a storage", m, k);
    }
}

void rt_zero_multi_check(rt_ctx *ctx, int n, rt_tensor *const *xs)
{
    for (int k = 0; k < n; k++) /* writable: each its storage's only reference, so distinct */
        RT_CHECK(ctx, rt_writable(xs[k]), "zero_multi: tensor %d is shared (%d references)", k,
                 xs[k]->st->refs);
}

void rt_index_add_check(rt_ctx *ctx, const rt_tensor *acc, int64_t i, const rt_tensor *x)
{
    RT_CHECK(ctx, rt_writable(acc), "index_add_: accumulator is shared (%d references%s)", acc->st->refs,
             acc->refs < acc->st->refs ? ", views included" : "");
    RT_CHECK(ctx, acc->ndim == x->ndim + 1 && acc->dtype == x->dtype,
             "index_add_: rank or dtype mismatch");
    RT_CHECK(ctx, i >= 0 && i < acc->shape[0], "index_add_: index %lld out of range",
             (long long)i);
    for (int d = 0; d < x->ndim; d++)
        RT_CHECK(ctx, acc->shape[d + 1] == x->shape[d], "index_add_: shape mismatch in dim %d",
                 d);
}

/* ---- attention */

rt_dtype rt_attention_lse_dtype(rt_dtype q) { return q == RT_F64 ? RT_F64 : RT_F32; }

void rt_attention_check(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                        const rt_tensor *out, const rt_tensor *lse, const rt_tensor *dout,
                        int64_t kv_len, rt_attn_dims *d)
{
    const char *what = dout ? "attention backward" : "attention";
    rt_check_float(ctx, q, what);
    RT_CHECK(ctx, k->dtype == q->dtype && v->dtype == q->dtype, "%s: q, k and v must have one dtype", what);
    RT_CHECK(ctx, (q->ndim == 4 || q->ndim == 5) && k->ndim == 4 && v->ndim == 4,
             "%s: q must be [B, H, T, E] or [B, Hkv, G, T, E] and k, v [B, Hkv, S, E]", what);
    bool grouped = q->ndim == 5;
    d->b = q->shape[0];
    d->hkv = k->shape[1];
    d->t = q->shape[q->ndim - 2];
    d->e = q->shape[q->ndim - 1];
    d->s = k->shape[2];
    d->ev = v->shape[3];
    d->h = grouped ? q->shape[1] * q->shape[2] : q->shape[1];
    RT_CHECK(ctx, k->shape[0] == d->b && v->shape[0] == d->b && v->shape[1] == d->hkv && v->shape[2] == d->s &&
                      k->shape[3] == d->e && (!grouped || q->shape[1] == d->hkv),
             "%s: q, k and v disagree on the batch, the key/value heads, the key length or the head size", what);
    RT_CHECK(ctx, d->hkv > 0 ? d->h % d->hkv == 0 : d->h == 0,
             "%s: %lld query heads are not a multiple of %lld key/value heads", what, (long long)d->h,
             (long long)d->hkv);
    d->g = d->hkv ? d->h / d->hkv : 0;
    RT_CHECK(ctx, kv_len < 0 || (kv_len >= 1 && kv_len <= d->s),
             "%s: kv_len=%lld is outside 1..%lld, the number of keys", what, (long long)kv_len, (long long)d->s);
    d->sn = kv_len < 0 ? d->s : kv_len;
    if (out) {
        bool ok = out->ndim == q->ndim && out->dtype == q->dtype && out->shape[q->ndim - 1] == d->ev;
        for (int i = 0; ok && i < q->ndim - 1; i++)
            ok = out->shape[i] == q->shape[i];
        RT_CHECK(ctx, ok, "%s: the output's shape or dtype differs from the forward's", what);
        RT_CHECK(ctx, dout && rt_same_shape(out, dout) && dout->dtype == out->dtype,
                 "%s: the gradient's shape or dtype differs from the output's", what);
        ok = lse && lse->ndim == q->ndim - 1 && lse->dtype == rt_attention_lse_dtype(q->dtype);
        for (int i = 0; ok && i < q->ndim - 1; i++)
            ok = lse->shape[i] == q->shape[i];
        RT_CHECK(ctx, ok, "%s: the log-sum-exp's shape or dtype differs from the forward's", what);
    }
}

rt_tensor rt_attn_logical(const rt_tensor *x, bool tm)
{
    rt_tensor l = *x;
    if (tm && x->ndim >= 3) {
        for (int i = 1; i < x->ndim - 2; i++)
            l.shape[i] = x->shape[i + 1];
        l.shape[x->ndim - 2] = x->shape[1];
    }
    return l;
}

void rt_attn_to_tokens(rt_tensor *x, bool tm)
{
    if (!tm || x->ndim < 3)
        return;
    int64_t t = x->shape[x->ndim - 2];
    for (int i = x->ndim - 2; i > 1; i--)
        x->shape[i] = x->shape[i - 1];
    x->shape[1] = t;
}

rt_tensor *rt_attention_outputs(rt_ctx *ctx, const rt_tensor *q, const rt_attn_dims *d, bool want_lse,
                                rt_tensor **lse)
{
    int64_t shape[RT_MAX_DIMS];
    memcpy(shape, q->shape, sizeof shape);
    shape[q->ndim - 1] = d->ev;
    *lse = want_lse ? rt_empty(ctx, rt_attention_lse_dtype(q->dtype), q->ndim - 1, q->shape) : NULL;
    return rt_empty(ctx, q->dtype, q->ndim, shape);
}

void rt_hand_over(rt_ctx *ctx, rt_tensor *t, rt_tensor **out)
{
    if (out)
        *out = t;
    else
        rt_free(ctx, t);
}
