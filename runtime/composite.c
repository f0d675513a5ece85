/* The ops every target shares because they are made of other ops, with no
 * kernels of their own: sum, mean and amax over a dim or over everything
 * (on the target's rt_reduce_dim) and their backwards (rt_expand,
 * rt_binary, rt_scale), where's backward (rt_where, rt_sum_to_shape),
 * cross_entropy (the mean of rt_cross_entropy_reduce; the vocabulary-
 * parallel one: its kernels around two all-reduces), transpose (a
 * permute), index_bwd and index_add (on rt_index_add_), scale, and a binary
 * op's backward (rt_binary_bwd_f64 over the target's rt_binary_grads),
 * and the padding of uneven blocks to equal ones (rt_pad_blocks). */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

rt_tensor *rt_sum(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim)
{
    return rt_reduce_dim(ctx, x, dim, keepdim, RT_REDUCE_SUM, "sum");
}

rt_tensor *rt_mean(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim)
{
    rt_check_float(ctx, x, "mean");
    return rt_reduce_dim(ctx, x, dim, keepdim, RT_REDUCE_MEAN, "mean");
}

rt_tensor *rt_amax(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim)
{
    return rt_reduce_dim(ctx, x, dim, keepdim, RT_REDUCE_MAX, "amax");
}

static rt_tensor *reduce_all(rt_ctx *ctx, const rt_tensor *x, rt_reduce_kind k, const char *what)
{
    rt_tensor flat = *x;
    flat.ndim = 1;
    flat.shape[0] = x->numel;
    return rt_reduce_dim(ctx, &flat, 0, false, k, what);
}

rt_tensor *rt_sum_all(rt_ctx *ctx, const rt_tensor *x) { return reduce_all(ctx, x, RT_REDUCE_SUM, "sum"); }
rt_tensor *rt_mean_all(rt_ctx *ctx, const rt_tensor *x)
{
    rt_check_float(ctx, x, "mean");
    return reduce_all(ctx, x, RT_REDUCE_MEAN, "mean");
}
rt_tensor *rt_amax_all(rt_ctx *ctx, const rt_tensor *x) { return reduce_all(ctx, x, RT_REDUCE_MAX, "amax"); }

/* global_norm's sum of squares over several tensors: the target's kernel
 * for f32 and f64; bf16 (whose squares and partial sums round to bf16) as
 * the ops it stands for, which give those bits by construction */
rt_tensor *rt_sum_squares(rt_ctx *ctx, int n, const rt_tensor *const *xs)
{
    rt_sum_squares_check(ctx, n, xs, NULL);
    RT_KERNEL(ctx, RT_K_REDUCE, "sum_squares");
    if (xs[0]->dtype != RT_BF16)
        return rt_sum_squares_dev(ctx, n, xs);
    rt_tensor *total = NULL;
    for (int j = 0; j < n; j++) {
        rt_tensor *q = rt_unary(ctx, RT_SQUARE, xs[j]);
        rt_tensor *s = rt_sum_all(ctx, q);
        rt_free(ctx, q);
        if (total) {
            rt_tensor *t = rt_binary(ctx, RT_ADD, total, s);
            rt_free(ctx, total);
            rt_free(ctx, s);
            s = t;
        }
        total = s;
    }
    return total;
}

void rt_sum_squares_multi(rt_ctx *ctx, int ngroups, const int *counts, const rt_tensor *const *xs,
                          rt_tensor **ys)
{
    RT_CHECK(ctx, ngroups >= 1, "sum_squares: no groups");
    bool dev = xs[0]->dtype != RT_BF16;
    for (int g = 0, o = 0; g < ngroups; o += counts[g++]) {
        rt_sum_squares_check(ctx, counts[g], xs + o, NULL);
        dev = dev && xs[o]->dtype == xs[0]->dtype;
    }
    RT_KERNEL(ctx, RT_K_REDUCE, "sum_squares");
    if (dev) {
        rt_sum_squares_multi_dev(ctx, ngroups, counts, xs, ys);
        return;
    }
    for (int g = 0, o = 0; g < ngroups; o += counts[g++])
        ys[g] = rt_sum_squares(ctx, counts[g], xs + o);
}

void rt_sum_squares_bwd(rt_ctx *ctx, int n, const rt_tensor *const *xs, const rt_tensor *dy,
                        const bool *want, rt_tensor **dxs)
{
    rt_sum_squares_check(ctx, n, xs, dy);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, "sum_squares_bwd");
    rt_sum_squares_bwd_dev(ctx, n, xs, dy, want, dxs);
}

/* dy of a reduction, broadcast back to x's shape (RT_ALL: reduced everything) */
static rt_tensor *expand_back(rt_ctx *ctx, const rt_tensor *x, int dim, const rt_tensor *dy)
{
    if (dim != RT_ALL)
        dim = rt_norm_dim(ctx, dim, x->ndim, "reduction backward");
    int64_t shape[RT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = dim == RT_ALL || d == dim ? 1 : x->shape[d];
    RT_CHECK(ctx, dy->numel == rt_numel_of(x->ndim, shape),
             "reduction backward: gradient has %lld elements, expected %lld",
             (long long)dy->numel, (long long)rt_numel_of(x->ndim, shape));
    rt_tensor kept = *dy;
    kept.ndim = x->ndim;
    memcpy(kept.shape, shape, sizeof shape);
    return rt_expand(ctx, &kept, x->ndim, x->shape);
}

rt_tensor *rt_sum_bwd(rt_ctx *ctx, const rt_tensor *x, int dim, const rt_tensor *dy)
{
    RT_KERNEL(ctx, RT_K_REDUCE, "sum_bwd");
    return expand_back(ctx, x, dim, dy);
}

rt_tensor *rt_mean_bwd(rt_ctx *ctx, const rt_tensor *x, int dim, const rt_tensor *dy)
{
    RT_KERNEL(ctx, RT_K_REDUCE, "mean_bwd");
    int64_t n = dim == RT_ALL ? x->numel : x->shape[rt_norm_dim(ctx, dim, x->ndim, "mean")];
    rt_tensor *e = expand_back(ctx, x, dim, dy);
    rt_tensor *y = rt_scale(ctx, e, 1.0 / (double)n);
    rt_free(ctx, e);
    return y;
}

/* gradient shared evenly among the maxima, as torch.amax does */
rt_tensor *rt_amax_bwd(rt_ctx *ctx, const rt_tensor *x, int dim, const rt_tensor *dy)
{
    RT_KERNEL(ctx, RT_K_REDUCE, "amax_bwd");
    rt_tensor *flat = NULL, *m, *mask, *cnt, *cntb, *share, *g, *dx;
    if (dim == RT_ALL) {
        int64_t n = x->numel;
        flat = rt_reshape(ctx, x, 1, &n);
        m = rt_amax(ctx, flat, 0, true);
    } else {
        m = rt_amax(ctx, x, dim, true);
    }
    const rt_tensor *src = flat ? flat : x;
    mask = rt_binary(ctx, RT_EQ, src, m);
    cnt = rt_sum(ctx, mask, dim == RT_ALL ? 0 : dim, true);
    cntb = rt_expand(ctx, cnt, src->ndim, src->shape);
    share = rt_binary(ctx, RT_DIV, mask, cntb);
    g = expand_back(ctx, src, dim == RT_ALL ? 0 : dim, dy);
    dx = rt_binary(ctx, RT_MUL, share, g);
    if (flat) {
        rt_tensor *r = rt_reshape(ctx, dx, x->ndim, x->shape);
        rt_free(ctx, dx);
        dx = r;
    }
    rt_free(ctx, flat); rt_free(ctx, m); rt_free(ctx, mask); rt_free(ctx, cnt);
    rt_free(ctx, cntb); rt_free(ctx, share); rt_free(ctx, g);
    return dx;
}

/* where(c, dy, 0) (or where(c, 0, dy)) summed to like's shape, in like's dtype */
static rt_tensor *selected_grad(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *dy,
                                const rt_tensor *like, bool first)
{
    rt_tensor *g = rt_where_zero(ctx, c, dy, first);
    rt_tensor *s = rt_sum_to_shape(ctx, g, like->ndim, like->shape);
    rt_free(ctx, g);
    if (s->dtype == like->dtype)
        return s;
    rt_tensor *r = rt_astype(ctx, s, like->dtype);
    rt_free(ctx, s);
    return r;
}

void rt_where_bwd(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *a, const rt_tensor *b,
                  const rt_tensor *dy, rt_tensor **da, rt_tensor **db)
{
    if (da)
        *da = selected_grad(ctx, c, dy, a, true);
    if (db)
        *db = selected_grad(ctx, c, dy, b, false);
}

rt_tensor *rt_cross_entropy(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets)
{
    return rt_cross_entropy_reduce(ctx, logits, targets, RT_CE_MEAN);
}

rt_tensor *rt_cross_entropy_bwd(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                                const rt_tensor *dy)
{
    return rt_cross_entropy_reduce_bwd(ctx, logits, targets, dy, RT_CE_MEAN);
}

/* The vocabulary-parallel cross-entropy: the target's kernels around two
 * all-reduces of per-row statistics (f64, in the group's fixed order): the
 * maximum, then the sums of exponentials with the targets' logits.  What
 * they make and free here is the op's scratch, not counted as tensors
 * (docs/memory.md); the loss and lse are. */
rt_tensor *rt_cross_entropy_vp(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                               rt_ce_reduction red, const rt_layout *l, rt_axes axes,
                               rt_tensor **lse)
{
    int64_t first, classes;
    rt_cross_entropy_vp_check(ctx, logits, targets, l, NULL, &first, &classes);
    ctx->mem_off++;
    rt_tensor *m, *sums;
    if (rt_group_size(ctx, axes) == 1) { /* all the classes here: both statistics in one pass */
        rt_ce_vp_rowstats(ctx, logits, targets, &m, &sums);
    } else {
        rt_tensor *mx = rt_ce_vp_rowmax(ctx, logits);
        m = rt_all_reduce_reuse(ctx, mx, axes, RT_RED_MAX);
        rt_free(ctx, mx);
        rt_tensor *sx = rt_ce_vp_rowsums(ctx, logits, targets, m, first);
        sums = rt_all_reduce_reuse(ctx, sx, axes, RT_RED_SUM);
        rt_free(ctx, sx);
    }
    ctx->mem_off--;
    rt_tensor *y = rt_ce_vp_finish(ctx, targets, m, sums, classes, red, logits->dtype, lse);
    rt_free(ctx, m);
    rt_free(ctx, sums);
    return y;
}

rt_tensor *rt_cross_entropy_vp_bwd(rt_ctx *ctx, const rt_tensor *logits,
                                   const rt_tensor *targets, const rt_tensor *lse,
                                   const rt_tensor *dy, rt_ce_reduction red,
                                   const rt_layout *l)
{
    int64_t first, classes;
    rt_cross_entropy_vp_check(ctx, logits, targets, l, lse, &first, &classes);
    rt_cross_entropy_bwd_check(ctx, targets, dy, red);
    rt_tensor *dx = rt_empty(ctx, logits->dtype, logits->ndim, logits->shape);
    rt_ce_vp_grad(ctx, logits, targets, lse, dy, red, first, classes, dx);
    return dx;
}

rt_tensor *rt_cross_entropy_vp_bwd_reuse(rt_ctx *ctx, rt_tensor *logits,
                                         const rt_tensor *targets, const rt_tensor *lse,
                                         const rt_tensor *dy, rt_ce_reduction red,
                                         const rt_layout *l)
{
    int64_t first, classes;
    rt_cross_entropy_vp_check(ctx, logits, targets, l, lse, &first, &classes);
    rt_cross_entropy_bwd_check(ctx, targets, dy, red);
    rt_tensor *dx = rt_reuse(ctx, logits);
    rt_ce_vp_grad(ctx, logits, targets, lse, dy, red, first, classes, dx);
    return dx;
}

rt_tensor *rt_transpose(rt_ctx *ctx, const rt_tensor *x, int d0, int d1)
{
    int perm[RT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        perm[d] = d;
    d0 = rt_norm_dim(ctx, d0, x->ndim, "transpose");
    d1 = rt_norm_dim(ctx, d1, x->ndim, "transpose");
    perm[d0] = d1;
    perm[d1] = d0;
    return rt_permute(ctx, x, perm);
}

rt_tensor *rt_index_bwd(rt_ctx *ctx, const rt_tensor *dy, int ndim, const int64_t *in_shape,
                        int64_t i)
{
    RT_KERNEL(ctx, RT_K_COPY, "index_bwd");
    rt_tensor *dx = rt_zeros(ctx, dy->dtype, ndim, in_shape);
    rt_index_add_(ctx, dx, i, dy);
    return dx;
}

rt_tensor *rt_index_add(rt_ctx *ctx, rt_tensor *acc, int64_t i, const rt_tensor *x)
{
    if (!rt_writable(acc)) { /* copy on write (shared, or a view of it alive) */
        rt_tensor *own = rt_copy(ctx, acc);
        rt_free(ctx, acc);
        acc = own;
    }
    rt_index_add_(ctx, acc, i, x);
    return acc;
}

void rt_index_add_multi(rt_ctx *ctx, int n, rt_tensor **accs, int64_t i, const rt_tensor *const *xs)
{
    for (int k = 0; k < n; k++)
        if (!rt_writable(accs[k])) { /* copy on write, as rt_index_add */
            rt_tensor *own = rt_copy(ctx, accs[k]);
            rt_free(ctx, accs[k]);
            accs[k] = own;
        }
    rt_index_add_multi_(ctx, n, accs, i, xs);
}

rt_tensor *rt_scale(rt_ctx *ctx, const rt_tensor *x, double s)
{
    return rt_binary_scalar(ctx, RT_MUL, x, s, false);
}

/* ---- a binary op's backward (rt_internal.h) */

static rt_tensor *as_f64_full(rt_ctx *ctx, const rt_tensor *x, const rt_bcast *bc)
{
    rt_tensor *e = rt_expand(ctx, x, bc->ndim, bc->shape);
    rt_tensor *f = rt_astype(ctx, e, RT_F64);
    rt_free(ctx, e);
    return f;
}

/* g64 (consumed) summed to like's shape, in like's dtype */
static rt_tensor *grad_to(rt_ctx *ctx, rt_tensor *g64, const rt_tensor *like)
{
    rt_tensor *s = rt_sum_to_shape(ctx, g64, like->ndim, like->shape);
    rt_tensor *r = rt_astype(ctx, s, like->dtype);
    rt_free(ctx, s);
    rt_free(ctx, g64);
    return r;
}

/* The common case of a backward without broadcasting: +, -, * of tensors of
 * one shape need no f64 copies and no reduction. */
static bool binary_bwd_same_shape(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a,
                                  const rt_tensor *b, const rt_tensor *dy, rt_tensor **da,
                                  rt_tensor **db)
{
    if (!rt_same_shape(a, b) || !rt_same_shape(a, dy) || a->dtype != b->dtype ||
        a->dtype != dy->dtype || (op != RT_ADD && op != RT_SUB && op != RT_MUL))
        return false;
    if (da)
        *da = op == RT_MUL ? rt_binary(ctx, RT_MUL, dy, b) : rt_retain((rt_tensor *)dy);
    if (db)
        *db = op == RT_MUL ? rt_binary(ctx, RT_MUL, dy, a)
            : op == RT_SUB ? rt_unary(ctx, RT_NEG, dy) : rt_retain((rt_tensor *)dy);
    return true;
}

void rt_binary_bwd_f64(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                       const rt_tensor *dy, rt_tensor **da, rt_tensor **db)
{
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_binary_bwd_name(op));
    if (binary_bwd_same_shape(ctx, op, a, b, dy, da, db))
        return;
    if ((op == RT_ADD || op == RT_SUB) && a->dtype == b->dtype && a->dtype == dy->dtype) {
        /* a bias or a position added to every row: each gradient is dy
         * summed to the operand's shape (in f64, rounded once, as below),
         * with no full-size f64 copies */
        if (da)
            *da = rt_sum_to_shape(ctx, dy, a->ndim, a->shape);
        if (db) {
            rt_tensor *s = rt_sum_to_shape(ctx, dy, b->ndim, b->shape);
            *db = op == RT_SUB ? rt_unary(ctx, RT_NEG, s) : rt_retain(s);
            rt_free(ctx, s);
        }
        return;
    }
    if (op == RT_MUL && a->dtype == b->dtype && a->dtype == dy->dtype &&
        ((b->numel == 1 && !db && rt_same_shape(a, dy)) || (a->numel == 1 && !da && rt_same_shape(b, dy)))) {
        /* x * s for a scalar s whose gradient nobody wants (a host number):
         * dy * s; a product of two floats rounds the same in f32 as in f64 */
        if (da)
            *da = rt_binary(ctx, RT_MUL, dy, b);
        if (db)
            *db = rt_binary(ctx, RT_MUL, dy, a);
        return;
    }
    if (op == RT_DIV && da && !db && b->numel == 1 && b->ndim == 0 && a->dtype == b->dtype &&
        a->dtype == dy->dtype && (a->dtype == RT_F32 || a->dtype == RT_F64) && rt_same_shape(a, dy)) {
        /* x / s for a 0-d s whose gradient nobody wants (a host number,
         * the mean's count): dy * (1 / s) in f64, rounded once, as below */
        *da = rt_div_scalar_grad(ctx, dy, b);
        return;
    }
    rt_bcast bc = rt_binary_broadcast(ctx, a, b, rt_binary_name(op));
    RT_CHECK(ctx, dy->ndim == bc.ndim && rt_numel_of(bc.ndim, bc.shape) == dy->numel,
             "%s backward: gradient shape differs from the result", rt_binary_name(op));
    rt_tensor *A = as_f64_full(ctx, a, &bc), *B = as_f64_full(ctx, b, &bc);
    rt_tensor *DY = rt_astype(ctx, dy, RT_F64);
    rt_tensor *GA = rt_empty(ctx, RT_F64, bc.ndim, bc.shape);
    rt_tensor *GB = rt_empty(ctx, RT_F64, bc.ndim, bc.shape);
    rt_binary_grads(ctx, op, A, B, DY, GA, GB);
    rt_free(ctx, A);
    rt_free(ctx, B);
    rt_free(ctx, DY);
    if (da)
        *da = grad_to(ctx, GA, a);
    else
        rt_free(ctx, GA);
    if (db)
        *db = grad_to(ctx, GB, b);
    else
        rt_free(ctx, GB);
}

/* ---- uneven shards by padding (the CUDA target's collectives: NCCL has
 * no all-gather with counts) */

rt_tensor *rt_pad_blocks(rt_ctx *ctx, const rt_tensor *x, int dim, const rt_blocks *b, int64_t c)
{
    rt_tensor **xs = malloc((size_t)b->n * sizeof *xs);
    RT_CHECK(ctx, xs != NULL, "out of memory");
    int64_t shape[RT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = c;
    for (int k = 0; k < b->n; k++) {
        rt_tensor *s = rt_slice(ctx, x, dim, b->off[k], b->off[k] + b->ext[k]);
        xs[k] = rt_slice_bwd(ctx, s, x->ndim, shape, dim, 0);
        rt_free(ctx, s);
    }
    rt_tensor *y = rt_concat(ctx, b->n, (const rt_tensor *const *)xs, dim);
    for (int k = 0; k < b->n; k++)
        rt_free(ctx, xs[k]);
    free(xs);
    return y;
}

rt_tensor *rt_unpad_blocks(rt_ctx *ctx, const rt_tensor *y, int dim, const rt_blocks *b, int64_t c)
{
    rt_tensor **xs = malloc((size_t)b->n * sizeof *xs);
    RT_CHECK(ctx, xs != NULL, "out of memory");
    for (int k = 0; k < b->n; k++)
        xs[k] = rt_slice(ctx, y, dim, k * c, k * c + b->ext[k]);
    rt_tensor *x = rt_concat(ctx, b->n, (const rt_tensor *const *)xs, dim);
    for (int k = 0; k < b->n; k++)
        rt_free(ctx, xs[k]);
    free(xs);
    return x;
}
