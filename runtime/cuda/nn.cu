/* The CUDA target's neural-network kernels: softmax, log_softmax,
 * layer_norm, rms_norm (and their backwards), cross_entropy, embedding.
 * Along the last dim a row is one warp's (rt_launch_rows, dev.h): the CPU's
 * formulas in double, each sum and max over the row a lane-strided sum in
 * order then a fixed tree; softmax over another dim keeps one thread per
 * lane (its sums in order). The norms' parameter gradients (dw, db) are
 * each column's rows in rt_lanes_f64's tree (chunks of 64 rows in order,
 * then the chunks), in the launch that computes dx (rt_launch_last); the
 * embedding's rows one thread per output element in row order. Token
 * ids and targets are checked on the device (check_ids: the first bad one
 * is reported at the next synchronisation with the CPU target's message),
 * so neither op waits for the device; the other checks are checks.c's,
 * the CPU target's. */
#include <stdlib.h>
#include <string.h>

#include "dev.h"

#define IGNORE_INDEX RT_IGNORE_INDEX

typedef enum { SOFTMAX, LOG_SOFTMAX, SOFTMAX_BWD, LOG_SOFTMAX_BWD } lane_op;

extern "C" {

/* y (or dx) for each lane of a (and b: dy for the backwards) */
static rt_tensor *map_lanes(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, int dim,
                            lane_op op, const char *what)
{
    rt_softmax_check(ctx, a, b, &dim, what);
    RT_KERNEL(ctx, RT_K_NN, what);
    ctx->tgt->op = what;
    int64_t outer, d, inner;
    rt_split_dims(a, dim, &outer, &d, &inner);
    rt_tensor *y = rt_empty(ctx, a->dtype, a->ndim, a->shape);
    const void *A = a->data, *B = b ? b->data : NULL;
    void *Y = y->data;
    rt_dtype dt = a->dtype;
    if (inner == 1) { /* a warp per row */
        rt_launch_rows(ctx, outer, [=] RT_HD(const rt_warp &w, int64_t r) {
            int64_t off = r * d;
            if (op == SOFTMAX || op == LOG_SOFTMAX) {
                double m = w.max(d, [&](int64_t j) { return rt_ld(A, dt, off + j); });
                double s = w.sum(d, [&](int64_t j) { return exp(rt_ld(A, dt, off + j) - m); });
                double lse = m + log(s);
                w.each(d, [&](int64_t j) {
                    double v = rt_ld(A, dt, off + j);
                    rt_st(Y, dt, off + j, op == SOFTMAX ? exp(v - m) / s : v - lse);
                });
            } else if (op == SOFTMAX_BWD) {
                double s = w.sum(d, [&](int64_t j) {
                    return rt_ld(B, dt, off + j) * rt_ld(A, dt, off + j);
                });
                w.each(d, [&](int64_t j) {
                    rt_st(Y, dt, off + j, rt_ld(A, dt, off + j) * (rt_ld(B, dt, off + j) - s));
                });
            } else {
                double s = w.sum(d, [&](int64_t j) { return rt_ld(B, dt, off + j); });
                w.each(d, [&](int64_t j) {
                    rt_st(Y, dt, off + j, rt_ld(B, dt, off + j) - exp(rt_ld(A, dt, off + j)) * s);
                });
            }
        });
        return y;
    }
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

/* a row's mean (0 for rms) and 1/sqrt(var + eps), on the row's warp */
RT_DEV_INLINE void row_stats(const rt_warp &w, const void *X, rt_dtype dt, int64_t off, int64_t d,
                             bool rms, double eps, double *mean, double *rstd)
{
    double m = rms ? 0.0 : w.sum(d, [&](int64_t j) { return rt_ld(X, dt, off + j); }) / (double)d;
    double v = w.sum(d, [&](int64_t j) {
        double c = rt_ld(X, dt, off + j) - m;
        return c * c;
    });
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)d + eps);
}

static rt_tensor *norm_fwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w,
                           const rt_tensor *b, double eps, bool rms, const char *what)
{
    int64_t rows, d;
    rt_norm_check(ctx, x, w, b, NULL, what, &rows, &d);
    RT_KERNEL(ctx, RT_K_NN, what);
    ctx->tgt->op = what;
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    const void *X = x->data, *W = w ? w->data : NULL, *B = b ? b->data : NULL;
    void *Y = y->data;
    rt_dtype dt = x->dtype;
    rt_launch_rows(ctx, rows, [=] RT_HD(const rt_warp &w, int64_t r) {
        double mean, rstd;
        row_stats(w, X, dt, r * d, d, rms, eps, &mean, &rstd);
        w.each(d, [&](int64_t j) {
            double wj = W ? rt_ld(W, dt, j) : 1.0, bj = B ? rt_ld(B, dt, j) : 0.0;
            rt_st(Y, dt, r * d + j, (rt_ld(X, dt, r * d + j) - mean) * rstd * wj + bj);
        });
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

/* one row's part on its warp: its mean and rstd, and its dx (if DX; plus A, the addend, if any) */
RT_DEV_INLINE void norm_bwd_row(const rt_warp &w, const void *X, const void *W, const void *DY, const void *A,
                                void *DX, rt_dtype dt, int64_t off, int64_t d, bool rms, double eps,
                                double *mean_, double *rstd_)
{
    double mean, rstd;
    row_stats(w, X, dt, off, d, rms, eps, &mean, &rstd);
    *mean_ = mean;
    *rstd_ = rstd;
    if (!DX)
        return;
    auto g = [&](int64_t j) { return rt_ld(DY, dt, off + j) * (W ? rt_ld(W, dt, j) : 1.0); };
    auto xhat = [&](int64_t j) { return (rt_ld(X, dt, off + j) - mean) * rstd; };
    double mg = rms ? 0.0 : w.sum(d, g) / (double)d;
    double mgx = w.sum(d, [&](int64_t j) { return g(j) * xhat(j); }) / (double)d;
    w.each(d, [&](int64_t j) {
        rt_st(DX, dt, off + j, rstd * (g(j) - mg - xhat(j) * mgx));
        if (A) /* the addend plus dx as stored: rt_binary's RT_ADD, the same bits */
            rt_st(DX, dt, off + j, rt_ld(A, dt, off + j) + rt_ld(DX, dt, off + j));
    });
}

static void norm_bwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                     const rt_tensor *dy, const rt_tensor *addend, rt_tensor **dx, rt_tensor **dw,
                     rt_tensor **db, bool rms, const char *what)
{
    int64_t rows, d;
    rt_norm_check(ctx, x, w, NULL, dy, what, &rows, &d);
    if (addend)
        RT_CHECK(ctx, rt_same_shape(x, addend) && x->dtype == addend->dtype,
                 "%s backward: the addend's shape or dtype differs from the input", what);
    RT_KERNEL(ctx, RT_K_NN, what);
    ctx->tgt->op = what;
    const void *X = x->data, *W = w ? w->data : NULL, *DY = dy->data;
    const void *A = addend && dx ? addend->data : NULL; /* dx = addend + dx */
    rt_dtype dt = x->dtype;
    bool want_w = dw && w, want_b = db != NULL;
    if (dw)
        *dw = NULL;
    if (dx)
        *dx = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    void *DX = dx ? (*dx)->data : NULL;
    rt_tensor *gw = want_w ? rt_empty(ctx, x->dtype, 1, &d) : NULL;
    rt_tensor *gb = want_b ? rt_empty(ctx, x->dtype, 1, &d) : NULL;
    void *GW = gw ? gw->data : NULL, *GB = gb ? gb->data : NULL;
    if (dw)
        *dw = gw;
    if (db)
        *db = gb;
    if (!want_w && !want_b) { /* dx alone: a warp per row */
        if (DX)
            rt_launch_rows(ctx, rows, [=] RT_HD(const rt_warp &w, int64_t r) {
                double mean, rstd;
                norm_bwd_row(w, X, W, DY, A, DX, dt, r * d, d, rms, eps, &mean, &rstd);
            });
        return;
    }
    /* dw and db: each column summed over the rows in rt_lanes_f64's order
     * (chunks of RT_CHUNK rows, then rt_tree_sum's tree over them) */
    int64_t nc = (rows + RT_CHUNK - 1) / RT_CHUNK, nsum = (want_w ? 1 : 0) + (want_b ? 1 : 0);
    if (rows > 0 && nsum * nc * d <= RT_LAST_MAX) {
        /* one launch (rt_launch_last): a block a chunk of RT_CHUNK rows, a
         * warp a row (its dx, its mean and rstd kept in shared memory),
         * then a thread a column adds the chunk's rows in order into the
         * workspace ([dw, db][chunk][column]); the last block adds each
         * column's chunks (rt_tree_finish) */
        int64_t ws = rt_tree_ws(nsum * d, nc);
        rt_tensor *p = rt_empty(ctx, RT_F64, 1, &ws);
        double *P = (double *)p->data;
        int64_t bo = want_w ? nc * d : 0; /* db's chunks */
        rt_launch_last(ctx, nc, 2 * RT_CHUNK * sizeof(double),
                       [=] RT_HD(const rt_block &blk, int64_t c) {
                           double *SM = (double *)blk.smem;
                           int64_t r0 = c * RT_CHUNK, nr = rows - r0 < RT_CHUNK ? rows - r0 : RT_CHUNK;
                           blk.rows(nr, [&](const rt_warp &w, int64_t k) {
                               double mean, rstd;
                               norm_bwd_row(w, X, W, DY, A, DX, dt, (r0 + k) * d, d, rms, eps, &mean, &rstd);
                               if (w.leader()) {
                                   SM[2 * k] = mean;
                                   SM[2 * k + 1] = rstd;
                               }
                           });
                           blk.par(d, [&](int64_t j) {
                               double sw = 0.0, sb = 0.0;
                               for (int64_t k = 0; k < nr; k++) {
                                   int64_t at = (r0 + k) * d + j;
                                   double g = rt_ld(DY, dt, at);
                                   if (GW)
                                       sw += g * ((rt_ld(X, dt, at) - SM[2 * k]) * SM[2 * k + 1]);
                                   if (GB)
                                       sb += g;
                               }
                               if (GW)
                                   P[c * d + j] = sw;
                               if (GB)
                                   P[bo + c * d + j] = sb;
                           });
                       },
                       [=] RT_HD(const rt_block &blk) {
                           rt_tree_finish(blk, P, nsum, nc, d, false, [&](int64_t t, double v) {
                               rt_st(GW && t < d ? GW : GB, dt, t % d, v);
                           });
                       });
        rt_free(ctx, p);
        return;
    }
    /* many columns and chunks: two kernels, a warp per row (dx, and each
     * row's mean and rstd), then a thread per column (rt_tree_sum) */
    int64_t n2 = 2 * rows;
    rt_tensor *st = rt_empty(ctx, RT_F64, 1, &n2);
    double *ST = (double *)st->data;
    rt_launch_rows(ctx, rows, [=] RT_HD(const rt_warp &w, int64_t r) {
        double mean, rstd;
        norm_bwd_row(w, X, W, DY, A, DX, dt, r * d, d, rms, eps, &mean, &rstd);
        if (w.leader()) {
            ST[2 * r] = mean;
            ST[2 * r + 1] = rstd;
        }
    });
    const double *CST = ST;
    rt_launch(ctx, d, [=] RT_HD(int64_t j) {
        rt_tree_sum sw = {}, sb = {};
        for (int64_t r = 0; r < rows; r++) {
            double g = rt_ld(DY, dt, r * d + j);
            if (GW)
                sw.add(g * ((rt_ld(X, dt, r * d + j) - CST[2 * r]) * CST[2 * r + 1]));
            if (GB)
                sb.add(g);
        }
        if (GW)
            rt_st(GW, dt, j, sw.total());
        if (GB)
            rt_st(GB, dt, j, sb.total());
    });
    rt_free(ctx, st);
}

void rt_layer_norm_bwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                       const rt_tensor *dy, rt_tensor **dx, rt_tensor **dw, rt_tensor **db)
{
    norm_bwd(ctx, x, w, eps, dy, NULL, dx, dw, db, false, "layer_norm_bwd");
}

void rt_layer_norm_bwd_add(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                           const rt_tensor *dy, const rt_tensor *addend, rt_tensor **dx, rt_tensor **dw,
                           rt_tensor **db)
{
    norm_bwd(ctx, x, w, eps, dy, addend, dx, dw, db, false, "layer_norm_bwd");
}

void rt_rms_norm_bwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                     const rt_tensor *dy, rt_tensor **dx, rt_tensor **dw)
{
    norm_bwd(ctx, x, w, eps, dy, NULL, dx, dw, NULL, true, "rms_norm_bwd");
}

/* ---- ids and targets, checked on the device */

/* Each of ids' n values must be in [0, limit) (targets: or IGNORE_INDEX).
 * One warp scans them: the first bad position (each lane's first, then the
 * minimum) goes into the device error record (dev.h, rt_dev_errors) with
 * the op's kind and the .spmd line, reported at the next synchronisation;
 * kept (if not NULL, a device double) gets the number of values other than
 * IGNORE_INDEX. Kernels reading ids after this one guard every access. */
static RT_HD void ids_warp(const rt_warp &w, const int32_t *ID, int64_t n, int64_t limit, int kind,
                           int64_t *REC, int64_t loc, double *kept)
{
    bool targets = kind == RT_DEVERR_TARGET;
    int64_t bad = w.reduce(n, (int64_t)INT64_MAX, [&](int64_t j) {
        int32_t v = ID[j];
        bool ok = (v >= 0 && v < limit) || (targets && v == IGNORE_INDEX);
        return ok ? (int64_t)INT64_MAX : j;
    }, rt_op_min());
    double k = kept ? w.sum(n, [&](int64_t j) { return ID[j] != IGNORE_INDEX ? 1.0 : 0.0; }) : 0.0;
    if (w.leader()) {
        if (kept)
            *kept = k;
        if (bad != INT64_MAX && REC[0] == RT_DEVERR_NONE) {
            REC[1] = bad;
            REC[2] = ID[bad];
            REC[3] = limit;
            REC[4] = loc;
            REC[0] = kind;
        }
    }
}

static void check_ids(rt_ctx *ctx, const rt_tensor *ids, int64_t limit, int kind, double *kept)
{
    int64_t *REC = rt_dev_errors(ctx);
    const int32_t *ID = (const int32_t *)ids->data;
    int64_t n = ids->numel, loc = (int64_t)(uintptr_t)ctx->at_loc;
    rt_launch_rows(ctx, 1, [=] RT_HD(const rt_warp &w, int64_t) {
        ids_warp(w, ID, n, limit, kind, REC, loc, kept);
    });
}

/* ---- cross entropy */

/* the row's target: in range, ignored, or bad (reported by check_ids) */
RT_DEV_INLINE bool target_ok(int32_t t, int64_t c)
{
    return t == IGNORE_INDEX || (t >= 0 && t < c);
}

rt_tensor *rt_cross_entropy_reduce(rt_ctx *ctx, const rt_tensor *logits,
                                   const rt_tensor *targets, rt_ce_reduction red)
{
    rt_cross_entropy_check(ctx, logits, targets);
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy");
    ctx->tgt->op = "cross_entropy";
    int64_t n = targets->numel, c = logits->shape[logits->ndim - 1];
    rt_tensor *kept = red == RT_CE_MEAN ? rt_empty(ctx, RT_F64, 0, NULL) : NULL;
    double *K = kept ? (double *)kept->data : NULL;
    check_ids(ctx, targets, c, RT_DEVERR_TARGET, K);
    rt_tensor *loss = rt_empty(ctx, RT_F64, targets->ndim, targets->shape);
    const void *L = logits->data;
    const int32_t *T = (const int32_t *)targets->data;
    double *LS = (double *)loss->data;
    rt_dtype dt = logits->dtype;
    /* each row's -log_softmax(logits[r])[t] (0 where ignored, NaN where bad) */
    rt_launch_rows(ctx, n, [=] RT_HD(const rt_warp &w, int64_t r) {
        int32_t t = T[r];
        int64_t off = r * c;
        double m = w.max(c, [&](int64_t j) { return rt_ld(L, dt, off + j); });
        double s = w.sum(c, [&](int64_t j) { return exp(rt_ld(L, dt, off + j) - m); });
        if (w.leader())
            LS[r] = t == IGNORE_INDEX ? 0.0
                  : target_ok(t, c) ? -(rt_ld(L, dt, off + t) - (m + log(s)))
                                    : NAN;
    });
    rt_tensor *y;
    if (red == RT_CE_NONE) {
        y = rt_astype(ctx, loss, logits->dtype);
    } else { /* the kept rows' losses added on one warp */
        y = rt_empty(ctx, logits->dtype, 0, NULL);
        void *Y = y->data;
        const double *CK = K;
        rt_launch_rows(ctx, 1, [=] RT_HD(const rt_warp &w, int64_t) {
            double total = w.sum(n, [&](int64_t r) { return T[r] != IGNORE_INDEX ? LS[r] : 0.0; });
            if (w.leader())
                rt_st(Y, dt, 0, red == RT_CE_SUM ? total : CK[0] != 0 ? total / CK[0] : NAN);
        });
    }
    rt_free(ctx, loss);
    rt_free(ctx, kept);
    return y;
}

rt_tensor *rt_cross_entropy_reduce_bwd(rt_ctx *ctx, const rt_tensor *logits,
                                       const rt_tensor *targets, const rt_tensor *dy,
                                       rt_ce_reduction red)
{
    rt_cross_entropy_check(ctx, logits, targets);
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy_bwd");
    rt_cross_entropy_bwd_check(ctx, targets, dy, red);
    int64_t n = targets->numel, c = logits->shape[logits->ndim - 1];
    ctx->tgt->op = "cross_entropy_bwd";
    rt_tensor *kept = red == RT_CE_MEAN ? rt_empty(ctx, RT_F64, 0, NULL) : NULL;
    double *K = kept ? (double *)kept->data : NULL;
    check_ids(ctx, targets, c, RT_DEVERR_TARGET, K);
    rt_tensor *dx = rt_empty(ctx, logits->dtype, logits->ndim, logits->shape);
    const void *L = logits->data, *DY = dy->data;
    const int32_t *T = (const int32_t *)targets->data;
    const double *CK = K;
    void *DX = dx->data;
    rt_dtype dt = logits->dtype, ddt = dy->dtype;
    /* d logits[r] = dy_r * (softmax(logits[r]) - onehot(t[r])), dy_r being
     * dy[r] (none), dy (sum) or dy / kept (mean, 0 when nothing is kept) */
    rt_launch_rows(ctx, n, [=] RT_HD(const rt_warp &w, int64_t r) {
        int32_t t = T[r];
        double sr = red == RT_CE_NONE ? rt_ld(DY, ddt, r)
                  : red == RT_CE_SUM  ? rt_ld(DY, ddt, 0)
                  : CK[0] != 0        ? rt_ld(DY, ddt, 0) / CK[0]
                                      : 0.0;
        int64_t off = r * c;
        double m = w.max(c, [&](int64_t j) { return rt_ld(L, dt, off + j); });
        double s = w.sum(c, [&](int64_t j) { return exp(rt_ld(L, dt, off + j) - m); });
        w.each(c, [&](int64_t j) {
            double p = exp(rt_ld(L, dt, off + j) - m) / s;
            rt_st(DX, dt, off + j, t == IGNORE_INDEX ? 0.0 : sr * (p - (double)(j == t)));
        });
    });
    rt_free(ctx, kept);
    return dx;
}

/* ---- the vocabulary-parallel cross-entropy's kernels (composite.c's
 * rt_cross_entropy_vp runs them around its all-reduces): a warp per row,
 * nothing logits-sized made but the gradient; the targets are checked on
 * the device against the global number of classes (check_ids) */

rt_tensor *rt_ce_vp_rowmax(rt_ctx *ctx, const rt_tensor *logits)
{
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy");
    ctx->tgt->op = "cross_entropy";
    int64_t c = logits->shape[logits->ndim - 1], n = 1;
    for (int d = 0; d < logits->ndim - 1; d++)
        n *= logits->shape[d];
    rt_tensor *m = rt_empty(ctx, RT_F64, 1, &n);
    const void *L = logits->data;
    double *M = (double *)m->data;
    rt_dtype dt = logits->dtype;
    rt_launch_rows(ctx, n, [=] RT_HD(const rt_warp &w, int64_t r) {
        double v = w.max(c, [&](int64_t j) { return rt_ld(L, dt, r * c + j); });
        if (w.leader())
            M[r] = v;
    });
    return m;
}

rt_tensor *rt_ce_vp_rowsums(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                            const rt_tensor *m, int64_t first)
{
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy");
    ctx->tgt->op = "cross_entropy";
    int64_t c = logits->shape[logits->ndim - 1], n = targets->numel;
    int64_t shape[2] = {n, 2};
    rt_tensor *s = rt_empty(ctx, RT_F64, 2, shape);
    const void *L = logits->data;
    const double *M = (const double *)m->data;
    const int32_t *T = (const int32_t *)targets->data;
    double *S = (double *)s->data;
    rt_dtype dt = logits->dtype;
    rt_launch_rows(ctx, n, [=] RT_HD(const rt_warp &w, int64_t r) {
        int64_t off = r * c, j = (int64_t)T[r] - first; /* the target's column here */
        double mr = M[r];
        double sum = w.sum(c, [&](int64_t k) { return exp(rt_ld(L, dt, off + k) - mr); });
        if (w.leader()) {
            S[2 * r] = sum;
            S[2 * r + 1] = j >= 0 && j < c ? rt_ld(L, dt, off + j) : 0.0;
        }
    });
    return s;
}

/* rowmax and rowsums in one launch (issue 26): the row's maximum, then
 * its sums from it, each as the two kernels above compute it */
void rt_ce_vp_rowstats(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets, rt_tensor **m,
                       rt_tensor **sums)
{
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy");
    ctx->tgt->op = "cross_entropy";
    int64_t c = logits->shape[logits->ndim - 1], n = targets->numel;
    int64_t shape[2] = {n, 2};
    *m = rt_empty(ctx, RT_F64, 1, &n);
    *sums = rt_empty(ctx, RT_F64, 2, shape);
    const void *L = logits->data;
    const int32_t *T = (const int32_t *)targets->data;
    double *M = (double *)(*m)->data, *S = (double *)(*sums)->data;
    rt_dtype dt = logits->dtype;
    rt_launch_rows(ctx, n, [=] RT_HD(const rt_warp &w, int64_t r) {
        int64_t off = r * c, j = (int64_t)T[r];
        double mr = w.max(c, [&](int64_t k) { return rt_ld(L, dt, off + k); });
        double sum = w.sum(c, [&](int64_t k) { return exp(rt_ld(L, dt, off + k) - mr); });
        if (w.leader()) {
            M[r] = mr;
            S[2 * r] = sum;
            S[2 * r + 1] = j >= 0 && j < c ? rt_ld(L, dt, off + j) : 0.0;
        }
    });
}

rt_tensor *rt_ce_vp_finish(rt_ctx *ctx, const rt_tensor *targets, const rt_tensor *m,
                           const rt_tensor *sums, int64_t classes, rt_ce_reduction red,
                           rt_dtype dt, rt_tensor **lse)
{
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy");
    ctx->tgt->op = "cross_entropy";
    int64_t n = targets->numel;
    double *LZ = NULL;
    if (lse) {
        *lse = rt_empty(ctx, RT_F64, 1, &n);
        LZ = (double *)(*lse)->data;
    }
    const double *M = (const double *)m->data, *S = (const double *)sums->data;
    const int32_t *T = (const int32_t *)targets->data;
    if (red != RT_CE_NONE) {
        /* one launch, one warp (issue 26): check_ids's check and count of
         * the kept rows, each row's lse, and the kept rows' losses added in
         * the order (and with the values) of the row kernel and the sum
         * below */
        rt_tensor *y = rt_empty(ctx, dt, 0, NULL);
        void *Y = y->data;
        int64_t *REC = rt_dev_errors(ctx), loc = (int64_t)(uintptr_t)ctx->at_loc;
        rt_launch_rows(ctx, 1, [=] RT_HD(const rt_warp &w, int64_t) {
            int64_t bad = w.reduce(n, (int64_t)INT64_MAX, [&](int64_t j) {
                int32_t v = T[j];
                return (v >= 0 && v < classes) || v == IGNORE_INDEX ? (int64_t)INT64_MAX : j;
            }, rt_op_min());
            double k = red == RT_CE_MEAN ? w.sum(n, [&](int64_t j) { return T[j] != IGNORE_INDEX ? 1.0 : 0.0; })
                                         : 0.0;
            if (LZ)
                w.each(n, [&](int64_t r) { LZ[r] = M[r] + log(S[2 * r]); });
            double total = w.sum(n, [&](int64_t r) {
                int32_t t = T[r];
                double z = M[r] + log(S[2 * r]);
                return t == IGNORE_INDEX ? 0.0 : target_ok(t, classes) ? z - S[2 * r + 1] : NAN;
            });
            if (w.leader()) {
                if (bad != INT64_MAX && REC[0] == RT_DEVERR_NONE) {
                    REC[1] = bad;
                    REC[2] = T[bad];
                    REC[3] = classes;
                    REC[4] = loc;
                    REC[0] = RT_DEVERR_TARGET;
                }
                rt_st(Y, dt, 0, red == RT_CE_SUM ? total : k != 0 ? total / k : NAN);
            }
        });
        return y;
    }
    check_ids(ctx, targets, classes, RT_DEVERR_TARGET, NULL);
    /* each row's loss stored in dt as rt_astype of the f64 losses stores
     * it (rt_st), in the same launch (issue 26) */
    rt_tensor *y = rt_empty(ctx, dt, targets->ndim, targets->shape);
    void *Y = y->data;
    rt_launch(ctx, n, [=] RT_HD(int64_t r) {
        double z = M[r] + log(S[2 * r]);
        if (LZ)
            LZ[r] = z;
        int32_t t = T[r];
        rt_st(Y, dt, r, t == IGNORE_INDEX ? 0.0 : target_ok(t, classes) ? z - S[2 * r + 1] : NAN);
    });
    return y;
}

void rt_ce_vp_grad(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                   const rt_tensor *lse, const rt_tensor *dy, rt_ce_reduction red, int64_t first,
                   int64_t classes, rt_tensor *dx)
{
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy_bwd");
    ctx->tgt->op = "cross_entropy_bwd";
    int64_t n = targets->numel, c = logits->shape[logits->ndim - 1];
    rt_tensor *kept = red == RT_CE_MEAN ? rt_empty(ctx, RT_F64, 0, NULL) : NULL;
    double *K = kept ? (double *)kept->data : NULL;
    check_ids(ctx, targets, classes, RT_DEVERR_TARGET, K);
    const void *L = logits->data, *DY = dy->data;
    const double *LZ = (const double *)lse->data, *CK = K;
    const int32_t *T = (const int32_t *)targets->data;
    void *DX = dx->data;
    rt_dtype dt = logits->dtype, ddt = dy->dtype;
    /* d logits[r] = dy_r * (exp(logits[r] - lse[r]) - onehot(t[r] - first)) */
    rt_launch_rows(ctx, n, [=] RT_HD(const rt_warp &w, int64_t r) {
        int32_t t = T[r];
        double sr = red == RT_CE_NONE ? rt_ld(DY, ddt, r)
                  : red == RT_CE_SUM  ? rt_ld(DY, ddt, 0)
                  : CK[0] != 0        ? rt_ld(DY, ddt, 0) / CK[0]
                                      : 0.0;
        int64_t off = r * c, j = (int64_t)t - first;
        double z = LZ[r];
        w.each(c, [&](int64_t k) {
            double p = exp(rt_ld(L, dt, off + k) - z);
            rt_st(DX, dt, off + k, t == IGNORE_INDEX ? 0.0 : sr * (p - (double)(k == j)));
        });
    });
    rt_free(ctx, kept);
}

/* ---- embedding */

/* One launch: a warp per position copies its row (zeros for a bad id), and
 * one more warp checks the ids as check_ids does */
rt_tensor *rt_embedding(rt_ctx *ctx, const rt_tensor *table, const rt_tensor *ids)
{
    rt_embedding_check(ctx, table, ids);
    RT_KERNEL(ctx, RT_K_NN, "embedding");
    ctx->tgt->op = "embedding";
    int64_t shape[RT_MAX_DIMS], d = table->shape[1], vocab = table->shape[0], n = ids->numel;
    memcpy(shape, ids->shape, (size_t)ids->ndim * sizeof *shape);
    shape[ids->ndim] = d;
    rt_tensor *y = rt_empty(ctx, table->dtype, ids->ndim + 1, shape);
    int64_t *REC = rt_dev_errors(ctx), loc = (int64_t)(uintptr_t)ctx->at_loc;
    size_t esz = rt_dtype_size(table->dtype);
    const char *TB = (const char *)table->data;
    const int32_t *ID = (const int32_t *)ids->data;
    char *Y = (char *)y->data;
    rt_launch_rows(ctx, n + 1, [=] RT_HD(const rt_warp &w, int64_t i) {
        if (i == n) { /* the ids' check (the error record's first bad position) */
            ids_warp(w, ID, n, vocab, RT_DEVERR_ID, REC, loc, NULL);
            return;
        }
        int32_t v = ID[i];
        bool ok = v >= 0 && v < vocab;
        w.each(d, [&](int64_t j) {
            char *dst = Y + ((size_t)i * (size_t)d + (size_t)j) * esz;
            const char *src = TB + ((size_t)(ok ? v : 0) * (size_t)d + (size_t)j) * esz;
            for (size_t b = 0; b < esz; b++)
                dst[b] = ok ? src[b] : 0;
        });
    });
    return y;
}

/* The gradient of the table: row v adds, in increasing position order, the
 * rows of dy at the positions whose id is v (the CPU's order), on the
 * device with no atomics. A small table (RT_EMB_ONE_WAVE elements) is one
 * launch; otherwise the positions are grouped by id in one of two
 * ways: for a small vocabulary (at most RT_EMB_SCAN_VOCAB rows) one thread
 * per table row counts the ids below it and lists its positions (each row
 * reads the n ids twice: vocab * n, small next to the step there); for a
 * larger one the positions are sorted by (id, position) -- each position's
 * rank within a block of 32, then merges of sorted runs, each element
 * placed by a binary search in the other run (log2(n / 32) launches, n log n
 * work) -- and each table row finds its positions by binary search. Ids
 * out of range add nowhere; the first is reported, as check_ids would, by
 * one more thread of the scan's first launch (a serial walk: as long as a
 * row's) or of the sort's last (the bad ids sort last, by position), so
 * that the check costs no launch of its own. */
#define RT_EMB_SCAN_VOCAB 1024
/* A table of at most this many elements (one wave of threads on a large
 * GPU) takes one launch: a thread per element walks all n ids in order
 * (n reads each, half the scan's serial walk; no grouping launch) */
#define RT_EMB_ONE_WAVE (1 << 18)

/* a position's sort key: (id, position), the bad ids after every good one */
RT_DEV_INLINE int64_t emb_key(const int32_t *ID, int64_t p, int64_t n, int64_t vocab)
{
    int32_t v = ID[p];
    return (v >= 0 && v < vocab ? (int64_t)v : vocab) * n + p;
}

/* the bad id ID[i] at position i into the device error record, unless one
 * is there already */
RT_DEV_INLINE void emb_record_bad(int64_t *REC, int64_t i, int32_t id, int64_t vocab, int64_t loc)
{
    if (REC[0] != RT_DEVERR_NONE)
        return;
    REC[1] = i;
    REC[2] = id;
    REC[3] = vocab;
    REC[4] = loc;
    REC[0] = RT_DEVERR_ID;
}

/* one thread's check of the ids in order: the first bad one recorded */
RT_DEV_INLINE void emb_check_seq(const int32_t *ID, int64_t n, int64_t vocab, int64_t *REC, int64_t loc)
{
    for (int64_t i = 0; i < n; i++)
        if (ID[i] < 0 || ID[i] >= vocab) {
            emb_record_bad(REC, i, ID[i], vocab, loc);
            return;
        }
}

/* how many of the sorted positions P[lo, hi) have a key below k */
RT_DEV_INLINE int64_t emb_below(const int64_t *P, int64_t lo, int64_t hi, int64_t k,
                                const int32_t *ID, int64_t n, int64_t vocab)
{
    int64_t a = lo, b = hi;
    while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (emb_key(ID, P[m], n, vocab) < k)
            a = m + 1;
        else
            b = m;
    }
    return a - lo;
}

rt_tensor *rt_embedding_bwd(rt_ctx *ctx, const rt_tensor *ids, const rt_tensor *dy,
                            int64_t vocab)
{
    rt_embedding_bwd_check(ctx, ids, dy);
    RT_KERNEL(ctx, RT_K_NN, "embedding_bwd");
    ctx->tgt->op = "embedding_bwd";
    int64_t d = dy->shape[dy->ndim - 1], n = ids->numel;
    int64_t *REC = rt_dev_errors(ctx), loc = (int64_t)(uintptr_t)ctx->at_loc;
    const int32_t *ID = (const int32_t *)ids->data;
    int64_t shape[2] = {vocab, d};
    rt_tensor *g = rt_empty(ctx, dy->dtype, 2, shape);
    const void *DY = dy->data;
    void *G = g->data;
    rt_dtype dt = dy->dtype;
    size_t cap;
    if (vocab * d <= RT_EMB_ONE_WAVE) { /* one launch: each (row, column) walks the ids itself */
        rt_launch(ctx, vocab * d + 1, [=] RT_HD(int64_t k) {
            if (k == vocab * d) { /* the ids' check: the first bad position into the error record */
                emb_check_seq(ID, n, vocab, REC, loc);
                return;
            }
            int64_t v = k / d, j = k % d;
            double s = 0;
            for (int64_t i = 0; i < n; i++)
                if (ID[i] == v)
                    s += rt_ld(DY, dt, i * d + j);
            rt_st(G, dt, k, s);
        });
        return g;
    }
    if (vocab <= RT_EMB_SCAN_VOCAB) {
        int64_t *dev = (int64_t *)rt_pool_alloc(ctx, (size_t)(2 * vocab + n) * sizeof(int64_t), &cap);
        int64_t *S = dev, *CNT = dev + vocab, *P = dev + 2 * vocab;
        rt_launch(ctx, vocab + 1, [=] RT_HD(int64_t v) {
            if (v == vocab) { /* the ids' check: the first bad position into the error record */
                emb_check_seq(ID, n, vocab, REC, loc);
                return;
            }
            int64_t start = 0, cnt = 0;
            for (int64_t i = 0; i < n; i++) {
                int32_t x = ID[i];
                start += x >= 0 && x < v;
            }
            for (int64_t i = 0; i < n; i++)
                if (ID[i] == v)
                    P[start + cnt++] = i;
            S[v] = start;
            CNT[v] = cnt;
        });
        rt_launch(ctx, vocab * d, [=] RT_HD(int64_t k) {
            int64_t v = k / d, j = k % d;
            double s = 0;
            for (int64_t q = S[v]; q < S[v] + CNT[v]; q++)
                s += rt_ld(DY, dt, P[q] * d + j);
            rt_st(G, dt, k, s);
        });
        rt_pool_release(ctx, dev, cap);
        return g;
    }
    int64_t *dev = (int64_t *)rt_pool_alloc(ctx, (size_t)(2 * (n ? n : 1)) * sizeof(int64_t), &cap);
    int64_t *A = dev, *B = dev + n;
    const int64_t blk = 32;
    rt_launch(ctx, n, [=] RT_HD(int64_t t) { /* sorted blocks of 32 */
        int64_t b0 = t / blk * blk, b1 = b0 + blk < n ? b0 + blk : n, k = emb_key(ID, t, n, vocab);
        int64_t r = 0;
        for (int64_t u = b0; u < b1; u++)
            r += emb_key(ID, u, n, vocab) < k;
        A[b0 + r] = t;
    });
    for (int64_t w = blk; w < n; w *= 2) { /* merge runs of w into runs of 2w */
        const int64_t *SRC = A;
        int64_t *DST = B;
        rt_launch(ctx, n, [=] RT_HD(int64_t t) {
            int64_t base = t / (2 * w) * (2 * w), mid = base + w < n ? base + w : n;
            int64_t end = base + 2 * w < n ? base + 2 * w : n, p = SRC[t];
            int64_t k = emb_key(ID, p, n, vocab);
            int64_t at = t < mid ? t - base + emb_below(SRC, mid, end, k, ID, n, vocab)
                                 : t - mid + emb_below(SRC, base, mid, k, ID, n, vocab);
            DST[base + at] = p;
        });
        int64_t *tmp = A;
        A = B;
        B = tmp;
    }
    const int64_t *P = A;
    rt_launch(ctx, vocab * d + 1, [=] RT_HD(int64_t k) {
        if (k == vocab * d) { /* the bad ids sort last, by position: the first is the first bad */
            int64_t q = emb_below(P, 0, n, vocab * n, ID, n, vocab);
            if (q < n)
                emb_record_bad(REC, P[q], ID[P[q]], vocab, loc);
            return;
        }
        int64_t v = k / d, j = k % d;
        int64_t q0 = emb_below(P, 0, n, v * n, ID, n, vocab);
        int64_t q1 = emb_below(P, 0, n, (v + 1) * n, ID, n, vocab);
        double s = 0;
        for (int64_t q = q0; q < q1; q++)
            s += rt_ld(DY, dt, P[q] * d + j);
        rt_st(G, dt, k, s);
    });
    rt_pool_release(ctx, dev, cap);
    return g;
}

} /* extern "C" */
