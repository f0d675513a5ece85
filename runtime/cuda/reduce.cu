/* The CUDA target's reductions: sum, mean, amax over a dim or everything,
 * their backwards, cumsum. A lane of at most RT_CHUNK terms is reduced in
 * order by one thread, in double, as the CPU kernels do: the same bits,
 * whatever the number of rows; a longer one in fixed chunks (rt_lanes_f64,
 * dev.h): no atomics, no tree whose shape depends on the grid. */
#include <string.h>

#include "dev.h"

typedef enum { RED_SUM, RED_MEAN, RED_MAX } red_kind;

extern "C" {

static void reduced_shape(const rt_tensor *x, int dim, bool keepdim, int *ndim, int64_t *shape)
{
    *ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d != dim)
            shape[(*ndim)++] = x->shape[d];
        else if (keepdim)
            shape[(*ndim)++] = 1;
    }
}

static rt_tensor *reduce_dim(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim,
                             red_kind k, const char *what)
{
    dim = rt_norm_dim(ctx, dim, x->ndim, what);
    RT_KERNEL(ctx, RT_K_REDUCE, what);
    ctx->tgt->op = what;
    int64_t outer, d, inner, shape[RT_MAX_DIMS];
    int ndim;
    RT_CHECK(ctx, !(k == RED_MAX && x->shape[dim] == 0), "%s: reduction over an empty dim", what);
    rt_split_dims(x, dim, &outer, &d, &inner);
    reduced_shape(x, dim, keepdim, &ndim, shape);
    rt_tensor *y = rt_empty(ctx, x->dtype, ndim, shape);
    const void *X = x->data;
    void *Y = y->data;
    rt_dtype dt = x->dtype;
    if (d > RT_CHUNK) { /* long lanes: in chunks */
        rt_tensor *s = rt_lanes_f64(ctx, outer, d, inner, k == RED_MAX,
                                    [=] RT_HD(int64_t o, int64_t j, int64_t i) {
                                        return rt_ld(X, dt, (o * d + j) * inner + i);
                                    });
        const double *S = (const double *)s->data;
        rt_launch(ctx, outer * inner, [=] RT_HD(int64_t t) {
            rt_st(Y, dt, t, k == RED_MEAN ? S[t] / (double)d : S[t]);
        });
        rt_free(ctx, s);
        return y;
    }
    rt_launch(ctx, outer * inner, [=] RT_HD(int64_t t) {
        int64_t o = t / inner, i = t % inner;
        double a = k == RED_MAX ? -INFINITY : 0.0;
        for (int64_t j = 0; j < d; j++) {
            double v = rt_ld(X, dt, (o * d + j) * inner + i);
            if (k == RED_MAX)
                a = v > a || isnan(v) ? v : a;
            else
                a += v;
        }
        if (k == RED_MEAN)
            a /= (double)d;
        rt_st(Y, dt, t, a);
    });
    return y;
}

rt_tensor *rt_lanes_combine(rt_ctx *ctx, rt_tensor *p, int64_t outer, int64_t nc, int64_t inner,
                            bool max)
{
    while (nc > 1) {
        const double *P = (const double *)p->data;
        int64_t m = (nc + RT_CHUNK - 1) / RT_CHUNK, n = outer * m * inner, len = nc;
        rt_tensor *q = rt_empty(ctx, RT_F64, 1, &n);
        double *Q = (double *)q->data;
        rt_launch(ctx, n, [=] RT_HD(int64_t t) {
            int64_t i = t % inner, c = t / inner % m, o = t / inner / m;
            int64_t j1 = c * RT_CHUNK + RT_CHUNK < len ? c * RT_CHUNK + RT_CHUNK : len;
            double a = max ? -INFINITY : 0.0;
            for (int64_t j = c * RT_CHUNK; j < j1; j++)
                a = rt_red_step(a, P[(o * len + j) * inner + i], max);
            Q[t] = a;
        });
        rt_free(ctx, p);
        p = q;
        nc = m;
    }
    return p;
}

rt_tensor *rt_sum(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim)
{
    return reduce_dim(ctx, x, dim, keepdim, RED_SUM, "sum");
}

rt_tensor *rt_mean(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim)
{
    rt_check_float(ctx, x, "mean");
    return reduce_dim(ctx, x, dim, keepdim, RED_MEAN, "mean");
}

rt_tensor *rt_amax(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim)
{
    return reduce_dim(ctx, x, dim, keepdim, RED_MAX, "amax");
}

static rt_tensor *reduce_all(rt_ctx *ctx, const rt_tensor *x, red_kind k, const char *what)
{
    rt_tensor flat = *x;
    flat.ndim = 1;
    flat.shape[0] = x->numel;
    return reduce_dim(ctx, &flat, 0, false, k, what);
}

rt_tensor *rt_sum_all(rt_ctx *ctx, const rt_tensor *x) { return reduce_all(ctx, x, RED_SUM, "sum"); }
rt_tensor *rt_mean_all(rt_ctx *ctx, const rt_tensor *x)
{
    rt_check_float(ctx, x, "mean");
    return reduce_all(ctx, x, RED_MEAN, "mean");
}
rt_tensor *rt_amax_all(rt_ctx *ctx, const rt_tensor *x) { return reduce_all(ctx, x, RED_MAX, "amax"); }

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

static rt_tensor *scan(rt_ctx *ctx, const rt_tensor *x, int dim, bool reverse)
{
    dim = rt_norm_dim(ctx, dim, x->ndim, "cumsum");
    RT_KERNEL(ctx, RT_K_REDUCE, reverse ? "cumsum_bwd" : "cumsum");
    ctx->tgt->op = reverse ? "cumsum_bwd" : "cumsum";
    int64_t outer, d, inner;
    rt_split_dims(x, dim, &outer, &d, &inner);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    const void *X = x->data;
    void *Y = y->data;
    rt_dtype dt = x->dtype;
    rt_launch(ctx, outer * inner, [=] RT_HD(int64_t t) {
        int64_t o = t / inner, i = t % inner;
        double acc = 0;
        for (int64_t jj = 0; jj < d; jj++) {
            int64_t j = reverse ? d - 1 - jj : jj, off = (o * d + j) * inner + i;
            acc += rt_ld(X, dt, off);
            rt_st(Y, dt, off, acc);
        }
    });
    return y;
}

rt_tensor *rt_cumsum(rt_ctx *ctx, const rt_tensor *x, int dim) { return scan(ctx, x, dim, false); }
rt_tensor *rt_cumsum_bwd(rt_ctx *ctx, const rt_tensor *dy, int dim) { return scan(ctx, dy, dim, true); }

} /* extern "C" */
