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

/* ---- global_norm's sum of squares over several tensors (composite.c's
 * rt_sum_squares; f32, f64): each tensor in rt_sum_all's chunks of
 * RT_CHUNK squares (rounded to its dtype) and its tree over them
 * (rt_tree_sum), rounded, then the tensors' sums added in order, each
 * addition rounded: the bits of rt_sum_all of each square added with
 * rt_binary, in three launches for up to RT_MT tensors (two more for each
 * further RT_MT). The tensors go to the device by value, RT_MT at a time.
 * Several groups (rt_sum_squares_multi: global_norm's placements) share
 * the launches: one more for each further RT_MT groups. */
#define RT_MT 32
struct rt_mt_group {
    int n;
    const void *x[RT_MT];
    void *y[RT_MT];         /* the backward's results */
    int64_t numel[RT_MT];
    int64_t off[RT_MT + 1]; /* the first chunk (backward: element) of each, from the group's */
};
RT_DEV_INLINE int rt_mt_find(const rt_mt_group &g, int64_t t)
{
    int k = 0;
    while (k + 1 < g.n && g.off[k + 1] <= t)
        k++;
    return k;
}
RT_DEV_INLINE double rt_round_to(rt_dtype dt, double v) { return dt == RT_F32 ? (double)(float)v : v; }

/* the groups' sums, RT_MT groups a launch: each its tensors' sums in order */
struct rt_mt_sums {
    int n;
    void *y[RT_MT];
    int64_t first[RT_MT + 1]; /* the group's first tensor in S */
};

void rt_sum_squares_multi_dev(rt_ctx *ctx, int ngroups, const int *counts, const rt_tensor *const *xs,
                              rt_tensor **ys)
{
    ctx->tgt->op = "sum_squares";
    rt_dtype dt = xs[0]->dtype;
    int n = 0;
    for (int g = 0; g < ngroups; g++)
        n += counts[g];
    int64_t total = 0, nn = n;
    for (int j = 0; j < n; j++)
        total += (xs[j]->numel + RT_CHUNK - 1) / RT_CHUNK;
    int64_t np = total > 0 ? total : 1;
    rt_tensor *p = rt_empty(ctx, RT_F64, 1, &np), *s = rt_empty(ctx, RT_F64, 1, &nn);
    double *P = (double *)p->data, *S = (double *)s->data;
    int64_t base = 0;
    for (int j0 = 0; j0 < n; j0 += RT_MT) {
        rt_mt_group g = {};
        g.n = n - j0 < RT_MT ? n - j0 : RT_MT;
        for (int k = 0; k < g.n; k++) {
            g.x[k] = xs[j0 + k]->data;
            g.numel[k] = xs[j0 + k]->numel;
            g.off[k + 1] = g.off[k] + (g.numel[k] + RT_CHUNK - 1) / RT_CHUNK;
        }
        int64_t b = base, j0_ = j0;
        if (g.off[g.n] > 0)
            rt_launch(ctx, g.off[g.n], [=] RT_HD(int64_t t) { /* a chunk's squares, in order */
                int k = rt_mt_find(g, t);
                int64_t i0 = (t - g.off[k]) * RT_CHUNK;
                int64_t i1 = i0 + RT_CHUNK < g.numel[k] ? i0 + RT_CHUNK : g.numel[k];
                double a = 0.0;
                for (int64_t i = i0; i < i1; i++) {
                    double v = rt_ld(g.x[k], dt, i);
                    a += rt_round_to(dt, v * v);
                }
                P[b + t] = a;
            });
        rt_launch(ctx, g.n, [=] RT_HD(int64_t k) { /* a tensor's tree over its chunks */
            rt_tree_sum tr = {};
            for (int64_t c = g.off[k]; c < g.off[k + 1]; c++)
                tr.add(P[b + c]);
            S[j0_ + k] = rt_round_to(dt, tr.total());
        });
        base += g.off[g.n];
    }
    int64_t first = 0;
    for (int g0 = 0; g0 < ngroups; g0 += RT_MT) {
        rt_mt_sums m = {};
        m.n = ngroups - g0 < RT_MT ? ngroups - g0 : RT_MT;
        m.first[0] = first;
        for (int k = 0; k < m.n; k++) {
            ys[g0 + k] = rt_empty(ctx, dt, 0, NULL);
            m.y[k] = ys[g0 + k]->data;
            m.first[k + 1] = m.first[k] + counts[g0 + k];
        }
        first = m.first[m.n];
        rt_launch(ctx, m.n, [=] RT_HD(int64_t k) { /* a group's sums in order */
            double a = S[m.first[k]];
            for (int64_t j = m.first[k] + 1; j < m.first[k + 1]; j++)
                a = rt_round_to(dt, a + S[j]);
            rt_st(m.y[k], dt, 0, a);
        });
    }
    rt_free(ctx, p);
    rt_free(ctx, s);
}

rt_tensor *rt_sum_squares_dev(rt_ctx *ctx, int n, const rt_tensor *const *xs)
{
    rt_tensor *y;
    rt_sum_squares_multi_dev(ctx, 1, &n, xs, &y);
    return y;
}

/* dxs[j] = 2 * xs[j] * dy (exact in double for f32 and bf16, rounded once
 * on storing), one launch for up to RT_MT tensors */
void rt_sum_squares_bwd_dev(rt_ctx *ctx, int n, const rt_tensor *const *xs, const rt_tensor *dy,
                            const bool *want, rt_tensor **dxs)
{
    ctx->tgt->op = "sum_squares_bwd";
    rt_dtype dt = xs[0]->dtype;
    const void *D = dy->data;
    rt_mt_group g = {};
    for (int j = 0; j <= n; j++) {
        if (j < n) {
            dxs[j] = NULL;
            if (!want[j])
                continue;
            dxs[j] = rt_empty(ctx, dt, xs[j]->ndim, xs[j]->shape);
            g.x[g.n] = xs[j]->data;
            g.y[g.n] = dxs[j]->data;
            g.numel[g.n] = xs[j]->numel;
            g.off[g.n + 1] = g.off[g.n] + xs[j]->numel;
            g.n++;
        }
        if (g.n == RT_MT || (j == n && g.n > 0)) {
            if (g.off[g.n] > 0)
                rt_launch(ctx, g.off[g.n], [=] RT_HD(int64_t t) {
                    int k = rt_mt_find(g, t);
                    int64_t i = t - g.off[k];
                    rt_st(g.y[k], dt, i, 2.0 * rt_ld(g.x[k], dt, i) * rt_ld(D, dt, 0));
                });
            g = rt_mt_group{};
        }
    }
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
