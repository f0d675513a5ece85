/* Indices and values along a whole dim, and the categorical draw
 * (docs/weights.md, "Sampling"): argmax, argmin, topk, categorical.
 *
 * Core code over host memory (host_hold / host_out: the inputs and the
 * output apart, as a device target stages every view in one buffer), so
 * both targets run the same loops: these ops pick a few numbers per row of
 * logits, once per generated token, never in a training step's inner loop.
 * NaN counts as the largest value (as PyTorch's argmax); ties go to the
 * lowest index. categorical draws by the Gumbel-max trick: the class
 * maximising logit / temperature - log(-log u) over the top_k classes, u
 * the runtime's uniform generator at the logit's global index (rt_uniform
 * with the logits' layout), so a draw is the same on every mesh. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

static double elem(const rt_tensor *x, const void *data, int64_t i)
{
    switch (x->dtype) {
    case RT_F32: return ((const float *)data)[i];
    case RT_F64: return ((const double *)data)[i];
    case RT_BF16: return rt_bf16_to_f32(((const uint16_t *)data)[i]);
    case RT_I32: return ((const int32_t *)data)[i];
    }
    return 0;
}

/* a > b, NaN the largest */
static bool above(double a, double b)
{
    return (isnan(a) && !isnan(b)) || a > b;
}

/* x's data readable by the host until host_release: x->data itself where
 * the target keeps tensors in host memory, else a copy of the staged view
 * (a device target stages every view in one buffer, which the next view
 * or output buffer reuses) */
static const void *host_hold(rt_ctx *ctx, const rt_tensor *x)
{
    const void *v = rt_host_view(ctx, x);
    if (v == x->data)
        return v;
    size_t bytes = (size_t)x->numel * rt_dtype_size(x->dtype);
    void *h = malloc(bytes ? bytes : 1);
    RT_CHECK(ctx, h != NULL, "out of memory");
    memcpy(h, v, bytes);
    return h;
}

static void host_release(const rt_tensor *x, const void *h)
{
    if (h && h != x->data)
        free((void *)h);
}

/* a host buffer for y's data (host_commit moves it into y) */
static void *host_out(rt_ctx *ctx, const rt_tensor *y)
{
    void *h = malloc((size_t)y->numel * rt_dtype_size(y->dtype) + 1);
    RT_CHECK(ctx, h != NULL, "out of memory");
    return h;
}

static void host_commit(rt_ctx *ctx, rt_tensor *y, void *h)
{
    size_t bytes = (size_t)y->numel * rt_dtype_size(y->dtype);
    void *dst = rt_host_buffer(ctx, y); /* y->data, or the staging buffer */
    memcpy(dst, h, bytes);
    rt_host_commit(ctx, y, dst);
    free(h);
}

static void split_dims(const rt_tensor *x, int dim, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < dim; d++)
        *outer *= x->shape[d];
    *n = x->shape[dim];
    for (int d = dim + 1; d < x->ndim; d++)
        *inner *= x->shape[d];
}

static int check_dim(rt_ctx *ctx, const char *what, const rt_tensor *x, int64_t dim)
{
    RT_CHECK(ctx, x->ndim > 0 && dim >= -x->ndim && dim < x->ndim, "%s: dim %lld is out of range for %d dims", what,
             (long long)dim, x->ndim);
    RT_CHECK(ctx, x->shape[dim < 0 ? dim + x->ndim : dim] > 0, "%s: the dim is empty", what);
    return (int)(dim < 0 ? dim + x->ndim : dim);
}

static rt_tensor *arg_extreme(rt_ctx *ctx, const rt_tensor *x, int64_t dim64, bool keep, bool max)
{
    const char *what = max ? "argmax" : "argmin";
    int dim = check_dim(ctx, what, x, dim64);
    int64_t outer, n, inner;
    split_dims(x, dim, &outer, &n, &inner);
    int64_t shape[RT_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != dim || keep)
            shape[nd++] = d == dim ? 1 : x->shape[d];
    rt_tensor *y = rt_empty(ctx, RT_I32, nd, shape);
    int32_t *out = host_out(ctx, y);
    const void *xd = host_hold(ctx, x);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t best = 0;
            double bv = elem(x, xd, o * n * inner + i);
            for (int64_t j = 1; j < n; j++) {
                double v = elem(x, xd, (o * n + j) * inner + i);
                if (max ? above(v, bv) : above(bv, v)) {
                    best = j;
                    bv = v;
                }
            }
            out[o * inner + i] = (int32_t)best;
        }
    host_release(x, xd);
    host_commit(ctx, y, out);
    return y;
}

rt_tensor *rt_argmax(rt_ctx *ctx, const rt_tensor *x, int64_t dim, bool keepdim)
{
    RT_KERNEL(ctx, RT_K_NN, "argmax");
    return arg_extreme(ctx, x, dim, keepdim, true);
}

rt_tensor *rt_argmin(rt_ctx *ctx, const rt_tensor *x, int64_t dim, bool keepdim)
{
    RT_KERNEL(ctx, RT_K_NN, "argmin");
    return arg_extreme(ctx, x, dim, keepdim, false);
}

typedef struct ranked {
    double v;
    int64_t j;
} ranked;

/* largest first; ties: the lower index first */
static int by_rank(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (above(x->v, y->v))
        return -1;
    if (above(y->v, x->v))
        return 1;
    return (x->j > y->j) - (x->j < y->j);
}

/* the k largest of row (o, i) into r[0..k), largest first */
static void rank_row(const rt_tensor *x, const void *xd, int64_t o, int64_t i, int64_t n, int64_t inner, ranked *r,
                     int64_t k)
{
    for (int64_t j = 0; j < n; j++)
        r[j] = (ranked){elem(x, xd, (o * n + j) * inner + i), j};
    if (k < n)
        qsort(r, (size_t)n, sizeof *r, by_rank);
}

rt_tensor *rt_topk(rt_ctx *ctx, const rt_tensor *x, int64_t k, int64_t dim64)
{
    RT_KERNEL(ctx, RT_K_NN, "topk");
    int dim = check_dim(ctx, "topk", x, dim64);
    int64_t outer, n, inner;
    split_dims(x, dim, &outer, &n, &inner);
    RT_CHECK(ctx, k >= 1 && k <= n, "topk: k=%lld of a dim of %lld", (long long)k, (long long)n);
    int64_t shape[RT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = k;
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, shape);
    void *out = host_out(ctx, y);
    const void *xd = host_hold(ctx, x);
    ranked *r = malloc((size_t)n * sizeof *r);
    RT_CHECK(ctx, r != NULL, "out of memory");
    size_t es = rt_dtype_size(x->dtype);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            rank_row(x, xd, o, i, n, inner, r, k);
            if (k == n)
                qsort(r, (size_t)n, sizeof *r, by_rank);
            for (int64_t j = 0; j < k; j++) /* the element itself: its bits, whatever the dtype */
                memcpy((char *)out + (size_t)((o * k + j) * inner + i) * es,
                       (const char *)xd + (size_t)((o * n + r[j].j) * inner + i) * es, es);
        }
    free(r);
    host_release(x, xd);
    host_commit(ctx, y, out);
    return y;
}

rt_tensor *rt_categorical(rt_ctx *ctx, const rt_tensor *logits, const rt_layout *l, uint64_t seed,
                          double temperature, int64_t top_k)
{
    RT_KERNEL(ctx, RT_K_NN, "categorical");
    int dim = check_dim(ctx, "categorical", logits, -1);
    RT_CHECK(ctx, logits->dtype != RT_I32, "categorical: the logits are i32, not float");
    RT_CHECK(ctx, l->ndim == logits->ndim && l->local[dim] == l->global[dim],
             "categorical: the last dim must be whole on every rank");
    RT_CHECK(ctx, !isnan(temperature), "categorical: temperature is NaN");
    int64_t outer, n, inner;
    split_dims(logits, dim, &outer, &n, &inner);
    int64_t k = top_k <= 0 || top_k > n ? n : top_k;
    rt_tensor *u = temperature > 0 ? rt_uniform(ctx, RT_F64, l, seed, 0.0, 1.0) : NULL;
    const double *ud = u ? host_hold(ctx, u) : NULL;
    rt_tensor *y = rt_empty(ctx, RT_I32, logits->ndim - 1, logits->shape);
    int32_t *out = host_out(ctx, y);
    const void *xd = host_hold(ctx, logits);
    ranked *r = malloc((size_t)n * sizeof *r);
    RT_CHECK(ctx, r != NULL, "out of memory");
    for (int64_t o = 0; o < outer; o++) {
        rank_row(logits, xd, o, 0, n, 1, r, k);
        /* Gumbel-max over the k largest (greedy: their largest) */
        int64_t best = -1;
        double bv = 0;
        for (int64_t c = 0; c < k; c++) {
            double g = ud ? r[c].v / temperature - log(-log(ud[o * n + r[c].j])) : r[c].v;
            if (best < 0 || above(g, bv) || (g == bv && r[c].j < best)) {
                best = r[c].j;
                bv = g;
            }
        }
        out[o] = (int32_t)best;
    }
    free(r);
    if (u)
        host_release(u, ud);
    rt_free(ctx, u);
    host_release(logits, xd);
    host_commit(ctx, y, out);
    return y;
}
