/* The CUDA target's reductions: over a dim (rt_reduce_dim, which
 * composite.c's sum, mean, amax and their backwards run on) and cumsum. A
 * lane of at most RT_CHUNK terms is reduced in order by one thread, in
 * double, as the CPU kernels do: the same bits,
 * whatever the number of rows; a longer one in fixed chunks (rt_lanes_f64,
 * dev.h): no atomics, no tree whose shape depends on the grid. */
#include <string.h>

#include "dev.h"

extern "C" {

rt_tensor *rt_reduce_dim(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim,
                         rt_reduce_kind k, const char *what)
{
    int64_t outer, d, inner, shape[RT_MAX_DIMS];
    int ndim;
    rt_reduce_check(ctx, x, &dim, keepdim, k, what, &ndim, shape);
    RT_KERNEL(ctx, RT_K_REDUCE, what);
    ctx->tgt->op = what;
    rt_split_dims(x, dim, &outer, &d, &inner);
    rt_tensor *y = rt_empty(ctx, x->dtype, ndim, shape);
    const void *X = x->data;
    void *Y = y->data;
    rt_dtype dt = x->dtype;
    /* lanes in order (a long one in chunks, rt_lanes_reduce), stored at once */
    rt_lanes_reduce(ctx, outer, d, inner, k == RT_REDUCE_MAX,
                    [=] RT_HD(int64_t o, int64_t j, int64_t i) {
                        return rt_ld(X, dt, (o * d + j) * inner + i);
                    },
                    [=] RT_HD(int64_t t, double a) {
                        rt_st(Y, dt, t, k == RT_REDUCE_MEAN ? a / (double)d : a);
                    });
    return y;
}

rt_tensor *rt_lanes_combine(rt_ctx *ctx, rt_tensor *p, int64_t outer, int64_t nc, int64_t inner,
                            bool max)
{
    return rt_lanes_combine_to(ctx, p, outer, nc, inner, max, 1);
}

rt_tensor *rt_lanes_combine_to(rt_ctx *ctx, rt_tensor *p, int64_t outer, int64_t nc,
                               int64_t inner, bool max, int64_t to)
{
    while (nc > to) {
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
