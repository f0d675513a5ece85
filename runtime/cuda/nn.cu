/* The CUDA target's neural-network kernels: softmax, log_softmax,
 * layer_norm, rms_norm (and their backwards), cross_entropy, embedding.
 * One thread per lane (the values along the normalised dim) computes the
 * CPU's formulas in double, each sum in order; parameter gradients (dw, db,
 * embedding rows) are one thread per output element adding its rows in row
 * order. Token ids and targets are checked on the host (the CPU target's
 * messages), which synchronises. */
#include <stdlib.h>
#include <string.h>

#include "dev.h"

#define IGNORE_INDEX (-100)

typedef enum { SOFTMAX, LOG_SOFTMAX, SOFTMAX_BWD, LOG_SOFTMAX_BWD } lane_op;

extern "C" {

/* y (or dx) for each lane of a (and b: dy for the backwards) */
static rt_tensor *map_lanes(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, int dim,
                            lane_op op, const char *what)
{
    rt_check_float(ctx, a, what);
    dim = rt_norm_dim(ctx, dim, a->ndim, what);
    if (b)
        RT_CHECK(ctx, rt_same_shape(a, b) && a->dtype == b->dtype,
                 "%s: gradient shape or dtype differs from the output", what);
    RT_KERNEL(ctx, RT_K_NN, what);
    ctx->tgt->op = what;
    int64_t outer, d, inner;
    rt_split_dims(a, dim, &outer, &d, &inner);
    rt_tensor *y = rt_empty(ctx, a->dtype, a->ndim, a->shape);
    const void *A = a->data, *B = b ? b->data : NULL;
    void *Y = y->data;
    rt_dtype dt = a->dtype;
    rt_launch(ctx, outer * inner, [=] RT_HD(int64_t t) {
        int64_t o = t / inner, i = t % inner, base = o * d * inner + i;
#define AT(j) (base + (j) * inner)
        if (op == SOFTMAX || op == LOG_SOFTMAX) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < d; j++) {
                double v = rt_ld(A, dt, AT(j));
                m = v > m ? v : m;
            }
            for (int64_t j = 0; j < d; j++)
                s += exp(rt_ld(A, dt, AT(j)) - m);
            double lse = m + log(s);
            for (int64_t j = 0; j < d; j++) {
                double v = rt_ld(A, dt, AT(j));
                rt_st(Y, dt, AT(j), op == SOFTMAX ? exp(v - m) / s : v - lse);
            }
        } else if (op == SOFTMAX_BWD) { /* dx = y * (dy - sum(dy * y)) */
            double s = 0;
            for (int64_t j = 0; j < d; j++)
                s += rt_ld(B, dt, AT(j)) * rt_ld(A, dt, AT(j));
            for (int64_t j = 0; j < d; j++)
                rt_st(Y, dt, AT(j), rt_ld(A, dt, AT(j)) * (rt_ld(B, dt, AT(j)) - s));
        } else { /* dx = dy - exp(y) * sum(dy) */
            double s = 0;
            for (int64_t j = 0; j < d; j++)
                s += rt_ld(B, dt, AT(j));
            for (int64_t j = 0; j < d; j++)
                rt_st(Y, dt, AT(j), rt_ld(B, dt, AT(j)) - exp(rt_ld(A, dt, AT(j))) * s);
        }
#undef AT
    });
    return y;
}

rt_tensor *rt_softmax(rt_ctx *ctx, const rt_tensor *x, int dim)
{
    return map_lanes(ctx, x, NULL, dim, SOFTMAX, "softmax");
}
rt_tensor *rt_log_softmax(rt_ctx *ctx, const rt_tensor *x, int dim)
{
    return map_lanes(ctx, x, NULL, dim, LOG_SOFTMAX, "log_softmax");
}
rt_tensor *rt_softmax_bwd(rt_ctx *ctx, const rt_tensor *y, const rt_tensor *dy, int dim)
{
    return map_lanes(ctx, y, dy, dim, SOFTMAX_BWD, "softmax_bwd");
}
rt_tensor *rt_log_softmax_bwd(rt_ctx *ctx, const rt_tensor *y, const rt_tensor *dy, int dim)
{
    return map_lanes(ctx, y, dy, dim, LOG_SOFTMAX_BWD, "log_softmax_bwd");
}

/* ---- layer_norm and rms_norm over the last dim */

static void check_param(rt_ctx *ctx, const rt_tensor *p, const rt_tensor *x, const char *what)
{
    RT_CHECK(ctx, p->ndim == 1 && p->shape[0] == x->shape[x->ndim - 1] && p->dtype == x->dtype,
             "%s: weight/bias must be %s[%lld]", what, rt_dtype_name(x->dtype),
             (long long)x->shape[x->ndim - 1]);
}

static void norm_setup(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                       const char *what, int64_t *rows, int64_t *d)
{
    rt_check_float(ctx, x, what);
    RT_CHECK(ctx, x->ndim >= 1, "%s: input must have at least 1 dim", what);
    if (w)
        check_param(ctx, w, x, what);
    if (b)
        check_param(ctx, b, x, what);
    *d = x->shape[x->ndim - 1];
    *rows = *d ? x->numel / *d : 0;
}

/* a row's mean (0 for rms) and 1/sqrt(var + eps), each sum in order */
RT_DEV_INLINE void row_stats(const void *X, rt_dtype dt, int64_t off, int64_t d, bool rms,
                             double eps, double *mean, double *rstd)
{
    double m = 0, v = 0;
    if (!rms) {
        for (int64_t j = 0; j < d; j++)
            m += rt_ld(X, dt, off + j);
        m /= (double)d;
    }
    for (int64_t j = 0; j < d; j++) {
        double c = rt_ld(X, dt, off + j) - m;
        v += c * c;
    }
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)d + eps);
}

static rt_tensor *norm_fwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w,
                           const rt_tensor *b, double eps, bool rms, const char *what)
{
    int64_t rows, d;
    norm_setup(ctx, x, w, b, what, &rows, &d);
    RT_KERNEL(ctx, RT_K_NN, what);
    ctx->tgt->op = what;
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    const void *X = x->data, *W = w ? w->data : NULL, *B = b ? b->data : NULL;
    void *Y = y->data;
    rt_dtype dt = x->dtype;
    rt_launch(ctx, rows, [=] RT_HD(int64_t r) {
        double mean, rstd;
        row_stats(X, dt, r * d, d, rms, eps, &mean, &rstd);
        for (int64_t j = 0; j < d; j++) {
            double wj = W ? rt_ld(W, dt, j) : 1.0, bj = B ? rt_ld(B, dt, j) : 0.0;
            rt_st(Y, dt, r * d + j, (rt_ld(X, dt, r * d + j) - mean) * rstd * wj + bj);
        }
    });
    return y;
}

rt_tensor *rt_layer_norm(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w,
                         const rt_tensor *b, double eps)
{
    return norm_fwd(ctx, x, w, b, eps, false, "layer_norm");
}

rt_tensor *rt_rms_norm(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps)
{
    return norm_fwd(ctx, x, w, NULL, eps, true, "rms_norm");
}

/* xhat = (x - mean) * rstd, g = dy * w;
 * layer_norm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
 * rms_norm:   dx = rstd * (g - xhat * mean(g * xhat))
 * dw[j] = sum over rows of dy * xhat, db[j] = sum of dy, in row order */
static void norm_bwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                     const rt_tensor *dy, rt_tensor **dx, rt_tensor **dw, rt_tensor **db,
                     bool rms, const char *what)
{
    int64_t rows, d;
    norm_setup(ctx, x, w, NULL, what, &rows, &d);
    RT_CHECK(ctx, rt_same_shape(x, dy) && x->dtype == dy->dtype,
             "%s backward: gradient shape or dtype differs from the input", what);
    RT_KERNEL(ctx, RT_K_NN, what);
    ctx->tgt->op = what;
    const void *X = x->data, *W = w ? w->data : NULL, *DY = dy->data;
    rt_dtype dt = x->dtype;
    if (dx) {
        *dx = rt_empty(ctx, x->dtype, x->ndim, x->shape);
        void *DX = (*dx)->data;
        rt_launch(ctx, rows, [=] RT_HD(int64_t r) {
            double mean, rstd, mg = 0, mgx = 0;
            int64_t off = r * d;
            row_stats(X, dt, off, d, rms, eps, &mean, &rstd);
            for (int64_t j = 0; j < d; j++) {
                double xh = (rt_ld(X, dt, off + j) - mean) * rstd;
                double gj = rt_ld(DY, dt, off + j) * (W ? rt_ld(W, dt, j) : 1.0);
                mg += gj;
                mgx += gj * xh;
            }
            mg = rms ? 0.0 : mg / (double)d;
            mgx /= (double)d;
            for (int64_t j = 0; j < d; j++) {
                double xh = (rt_ld(X, dt, off + j) - mean) * rstd;
                double gj = rt_ld(DY, dt, off + j) * (W ? rt_ld(W, dt, j) : 1.0);
                rt_st(DX, dt, off + j, rstd * (gj - mg - xh * mgx));
            }
        });
    }
    bool want_w = dw && w, want_b = db != NULL;
    if (dw)
        *dw = NULL;
    if (!want_w && !want_b)
        return;
    rt_tensor *gw = want_w ? rt_empty(ctx, x->dtype, 1, &d) : NULL;
    rt_tensor *gb = want_b ? rt_empty(ctx, x->dtype, 1, &d) : NULL;
    void *GW = gw ? gw->data : NULL, *GB = gb ? gb->data : NULL;
    /* each row's mean and rstd once, then the columns' sums over the rows
     * (in row order, long columns in chunks: rt_lanes_f64) */
    int64_t n2 = 2 * rows;
    rt_tensor *st = rt_empty(ctx, RT_F64, 1, &n2);
    double *ST = (double *)st->data;
    rt_launch(ctx, rows, [=] RT_HD(int64_t r) {
        row_stats(X, dt, r * d, d, rms, eps, &ST[2 * r], &ST[2 * r + 1]);
    });
    const double *CST = ST;
    if (GW) {
        rt_tensor *sw = rt_lanes_f64(ctx, 1, rows, d, false, [=] RT_HD(int64_t, int64_t r, int64_t j) {
            return rt_ld(DY, dt, r * d + j) * ((rt_ld(X, dt, r * d + j) - CST[2 * r]) * CST[2 * r + 1]);
        });
        const double *SW = (const double *)sw->data;
        rt_launch(ctx, d, [=] RT_HD(int64_t j) { rt_st(GW, dt, j, SW[j]); });
        rt_free(ctx, sw);
    }
    if (GB) {
        rt_tensor *sb = rt_lanes_f64(ctx, 1, rows, d, false, [=] RT_HD(int64_t, int64_t r, int64_t j) {
            return rt_ld(DY, dt, r * d + j);
        });
        const double *SB = (const double *)sb->data;
        rt_launch(ctx, d, [=] RT_HD(int64_t j) { rt_st(GB, dt, j, SB[j]); });
        rt_free(ctx, sb);
    }
    rt_free(ctx, st);
    if (dw)
        *dw = gw;
    if (db)
        *db = gb;
}

void rt_layer_norm_bwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                       const rt_tensor *dy, rt_tensor **dx, rt_tensor **dw, rt_tensor **db)
{
    norm_bwd(ctx, x, w, eps, dy, dx, dw, db, false, "layer_norm_bwd");
}

void rt_rms_norm_bwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                     const rt_tensor *dy, rt_tensor **dx, rt_tensor **dw)
{
    norm_bwd(ctx, x, w, eps, dy, dx, dw, NULL, true, "rms_norm_bwd");
}

/* ---- cross entropy */

/* the targets on the host (synchronises), checked with the CPU's messages;
 * the caller frees them */
static int32_t *host_targets(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                             int64_t *kept)
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
    int32_t *t = (int32_t *)malloc((size_t)(targets->numel ? targets->numel : 1) * sizeof *t);
    RT_CHECK(ctx, t != NULL, "out of memory");
    rt_dev_d2h(ctx, t, targets->data, (size_t)targets->numel * sizeof *t);
    int64_t c = logits->shape[logits->ndim - 1];
    *kept = 0;
    for (int64_t r = 0; r < targets->numel; r++) {
        if (!(t[r] == IGNORE_INDEX || (t[r] >= 0 && t[r] < c))) {
            int bad = t[r];
            free(t);
            rt_fail(ctx, "cross_entropy: target %d at row %lld is out of range for %lld classes",
                    bad, (long long)r, (long long)c);
        }
        *kept += t[r] != IGNORE_INDEX;
    }
    return t;
}

/* a row's -log_softmax(logits[r])[t] in double */
RT_DEV_INLINE double row_loss(const void *L, rt_dtype dt, int64_t off, int64_t c, int32_t t)
{
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; j++) {
        double v = rt_ld(L, dt, off + j);
        m = v > m ? v : m;
    }
    for (int64_t j = 0; j < c; j++)
        s += exp(rt_ld(L, dt, off + j) - m);
    return -(rt_ld(L, dt, off + t) - (m + log(s)));
}

rt_tensor *rt_cross_entropy_reduce(rt_ctx *ctx, const rt_tensor *logits,
                                   const rt_tensor *targets, rt_ce_reduction red)
{
    int64_t kept;
    free(host_targets(ctx, logits, targets, &kept));
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy");
    ctx->tgt->op = "cross_entropy";
    int64_t n = targets->numel, c = logits->shape[logits->ndim - 1];
    rt_tensor *loss = rt_empty(ctx, RT_F64, targets->ndim, targets->shape);
    const void *L = logits->data;
    const int32_t *T = (const int32_t *)targets->data;
    double *LS = (double *)loss->data;
    rt_dtype dt = logits->dtype;
    rt_launch(ctx, n, [=] RT_HD(int64_t r) {
        LS[r] = T[r] == IGNORE_INDEX ? 0.0 : row_loss(L, dt, r * c, c, T[r]);
    });
    rt_tensor *y;
    if (red == RT_CE_NONE) {
        y = rt_astype(ctx, loss, logits->dtype);
    } else { /* the rows' losses added in row order */
        y = rt_empty(ctx, logits->dtype, 0, NULL);
        void *Y = y->data;
        rt_launch(ctx, 1, [=] RT_HD(int64_t) {
            double total = 0;
            for (int64_t r = 0; r < n; r++)
                if (T[r] != IGNORE_INDEX)
                    total += LS[r];
            rt_st(Y, dt, 0, red == RT_CE_SUM ? total : kept ? total / (double)kept : NAN);
        });
    }
    rt_free(ctx, loss);
    return y;
}

rt_tensor *rt_cross_entropy_reduce_bwd(rt_ctx *ctx, const rt_tensor *logits,
                                       const rt_tensor *targets, const rt_tensor *dy,
                                       rt_ce_reduction red)
{
    int64_t kept;
    free(host_targets(ctx, logits, targets, &kept));
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy_bwd");
    int64_t n = targets->numel, c = logits->shape[logits->ndim - 1];
    RT_CHECK(ctx, red == RT_CE_NONE ? dy->numel == n : dy->numel == 1,
             "cross_entropy_bwd: the gradient's shape differs from the loss's");
    double scale = red == RT_CE_NONE ? 1.0
                 : red == RT_CE_SUM  ? rt_item(ctx, dy)
                 : kept              ? rt_item(ctx, dy) / (double)kept
                                     : 0.0;
    ctx->tgt->op = "cross_entropy_bwd";
    rt_tensor *dx = rt_empty(ctx, logits->dtype, logits->ndim, logits->shape);
    const void *L = logits->data, *DY = dy->data;
    const int32_t *T = (const int32_t *)targets->data;
    void *DX = dx->data;
    rt_dtype dt = logits->dtype, ddt = dy->dtype;
    bool none = red == RT_CE_NONE;
    rt_launch(ctx, n, [=] RT_HD(int64_t r) {
        int32_t t = T[r];
        double sr = none ? rt_ld(DY, ddt, r) : scale, m = -INFINITY, s = 0;
        int64_t off = r * c;
        for (int64_t j = 0; j < c; j++) {
            double v = rt_ld(L, dt, off + j);
            m = v > m ? v : m;
        }
        for (int64_t j = 0; j < c; j++)
            s += exp(rt_ld(L, dt, off + j) - m);
        for (int64_t j = 0; j < c; j++) {
            double p = exp(rt_ld(L, dt, off + j) - m) / s;
            rt_st(DX, dt, off + j, t == IGNORE_INDEX ? 0.0 : sr * (p - (double)(j == t)));
        }
    });
    return dx;
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

/* ---- embedding */

/* the ids on the host (synchronises), checked with the CPU's messages */
static int32_t *host_ids(rt_ctx *ctx, const rt_tensor *ids, int64_t vocab)
{
    rt_check_dtype(ctx, ids, RT_I32, "embedding ids");
    int32_t *id = (int32_t *)malloc((size_t)(ids->numel ? ids->numel : 1) * sizeof *id);
    RT_CHECK(ctx, id != NULL, "out of memory");
    rt_dev_d2h(ctx, id, ids->data, (size_t)ids->numel * sizeof *id);
    for (int64_t i = 0; i < ids->numel; i++)
        if (!(id[i] >= 0 && id[i] < vocab)) {
            int bad = id[i];
            free(id);
            rt_fail(ctx, "embedding: id %d at position %lld is out of range for %lld rows", bad,
                    (long long)i, (long long)vocab);
        }
    return id;
}

rt_tensor *rt_embedding(rt_ctx *ctx, const rt_tensor *table, const rt_tensor *ids)
{
    RT_CHECK(ctx, table->ndim == 2, "embedding: table must be [V, D]");
    RT_CHECK(ctx, ids->ndim < RT_MAX_DIMS, "embedding: ids have too many dims");
    free(host_ids(ctx, ids, table->shape[0]));
    RT_KERNEL(ctx, RT_K_NN, "embedding");
    ctx->tgt->op = "embedding";
    int64_t shape[RT_MAX_DIMS], d = table->shape[1];
    memcpy(shape, ids->shape, (size_t)ids->ndim * sizeof *shape);
    shape[ids->ndim] = d;
    rt_tensor *y = rt_empty(ctx, table->dtype, ids->ndim + 1, shape);
    size_t esz = rt_dtype_size(table->dtype);
    const char *TB = (const char *)table->data;
    const int32_t *ID = (const int32_t *)ids->data;
    char *Y = (char *)y->data;
    rt_launch(ctx, ids->numel * d, [=] RT_HD(int64_t k) {
        int64_t i = k / d, j = k % d;
        const char *src = TB + ((size_t)ID[i] * (size_t)d + (size_t)j) * esz;
        char *dst = Y + (size_t)k * esz;
        for (size_t b = 0; b < esz; b++)
            dst[b] = src[b];
    });
    return y;
}

/* Rows grouped by id with a stable counting sort on the host (positions in
 * increasing order within an id), then one thread per (row of the table,
 * column) adds its positions in that order: the CPU's order, no atomics. */
rt_tensor *rt_embedding_bwd(rt_ctx *ctx, const rt_tensor *ids, const rt_tensor *dy,
                            int64_t vocab)
{
    int32_t *id = host_ids(ctx, ids, vocab);
    rt_check_float(ctx, dy, "embedding_bwd");
    RT_KERNEL(ctx, RT_K_NN, "embedding_bwd");
    ctx->tgt->op = "embedding_bwd";
    int64_t d = dy->shape[dy->ndim - 1], n = ids->numel;
    RT_CHECK(ctx, dy->numel == n * d, "embedding_bwd: gradient shape mismatch");
    int64_t *start = (int64_t *)calloc((size_t)vocab + 1, sizeof *start);
    int64_t *pos = (int64_t *)malloc((size_t)(n ? n : 1) * sizeof *pos);
    RT_CHECK(ctx, start && pos, "out of memory");
    for (int64_t i = 0; i < n; i++)
        start[id[i] + 1]++;
    for (int64_t v = 0; v < vocab; v++)
        start[v + 1] += start[v];
    int64_t *fill = (int64_t *)malloc((size_t)(vocab ? vocab : 1) * sizeof *fill);
    RT_CHECK(ctx, fill != NULL, "out of memory");
    memcpy(fill, start, (size_t)vocab * sizeof *fill);
    for (int64_t i = 0; i < n; i++)
        pos[fill[id[i]]++] = i;
    size_t sb = (size_t)(vocab + 1) * sizeof *start, pb = (size_t)n * sizeof *pos;
    size_t cap;
    int64_t *dev = (int64_t *)rt_pool_alloc(ctx, sb + pb, &cap);
    rt_dev_h2d(ctx, dev, start, sb);
    rt_dev_h2d(ctx, dev + vocab + 1, pos, pb);
    free(id);
    free(start);
    free(pos);
    free(fill);
    int64_t shape[2] = {vocab, d};
    rt_tensor *g = rt_empty(ctx, dy->dtype, 2, shape);
    const int64_t *S = dev, *P = dev + vocab + 1;
    const void *DY = dy->data;
    void *G = g->data;
    rt_dtype dt = dy->dtype;
    rt_launch(ctx, vocab * d, [=] RT_HD(int64_t k) {
        int64_t v = k / d, j = k % d;
        double s = 0;
        for (int64_t q = S[v]; q < S[v + 1]; q++)
            s += rt_ld(DY, dt, P[q] * d + j);
        rt_st(G, dt, k, s);
    });
    rt_pool_release(ctx, dev, cap);
    return g;
}

} /* extern "C" */
