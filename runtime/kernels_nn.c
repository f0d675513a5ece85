/* Neural-network kernels and their backwards: softmax, log_softmax,
 * layer_norm (biased variance), rms_norm, cross_entropy (logits [..., C];
 * mean, sum or none; ignore_index -100, like PyTorch) and embedding. Each
 * works lane by lane (one lane = the values along the normalised dim) in
 * double precision. Their argument checks are checks.c's, the CUDA
 * target's too. */
#include <math.h>
#include <string.h>

#include "rt_cpu.h"
#include "vmath.h"

/* ---- lanes along a dim: x viewed as [outer, d, inner], lane (o, i) */

typedef struct lanes {
    int64_t outer, d, inner;
} lanes;

static lanes lanes_of(const rt_tensor *x, int dim)
{
    lanes l;
    rt_split_dims(x, dim, &l.outer, &l.d, &l.inner);
    return l;
}

static void lane_load(const rt_tensor *x, const lanes *l, int64_t o, int64_t i, double *buf)
{
    int64_t base = o * l->d * l->inner + i;
    if (l->inner == 1) {
        rt_load_f64(x, base, l->d, buf);
        return;
    }
    for (int64_t j = 0; j < l->d; j++)
        buf[j] = rt_get(x, base + j * l->inner);
}

static void lane_store(rt_tensor *x, const lanes *l, int64_t o, int64_t i, const double *buf)
{
    int64_t base = o * l->d * l->inner + i;
    if (l->inner == 1) {
        rt_store_f64(x, base, l->d, buf);
        return;
    }
    for (int64_t j = 0; j < l->d; j++)
        rt_set(x, base + j * l->inner, buf[j]);
}

static double lane_max(const double *v, int64_t n)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        m = v[j] > m ? v[j] : m;
    return m;
}

/* y[j] = exp(x[j]) (in place allowed): vectorised when the CPU allows (vmath.h) */
static void lane_exp(const rt_vm_table *vm, const double *x, double *y, int64_t n)
{
    if (vm) {
        vm->exp_f64(x, y, n);
        return;
    }
    for (int64_t j = 0; j < n; j++)
        y[j] = exp(x[j]);
}

typedef void (*lane_fn)(const rt_vm_table *vm, double *y, const double *a, const double *b,
                        int64_t n);

/* The same on RT_LANES contiguous lanes side by side (rt_load_rows_t's
 * transposed layout: element j of lane r at [j * RT_LANES + r]); each lane
 * computes what lane_fn computes, operation by operation, in the same order */
typedef void (*group_fn)(const rt_vm_table *vm, double *y, const double *a, const double *b,
                         int64_t n);

/* y = f(a[, b]) lane by lane, with a and b of the same shape; contiguous
 * lanes (dim is the last) RT_LANES at a time with g */
static rt_tensor *map_lanes(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, int dim,
                            lane_fn f, group_fn g, const char *what)
{
    rt_softmax_check(ctx, a, b, &dim, what);
    RT_KERNEL(ctx, RT_K_NN, what);
    lanes l = lanes_of(a, dim);
    size_t c1, c2, c3;
    if (l.inner == 1 && l.d > 0) {
        double *ga = rt_scratch(ctx, RT_LANES * l.d, &c1), *gb = rt_scratch(ctx, RT_LANES * l.d, &c2),
               *gy = rt_scratch(ctx, RT_LANES * l.d, &c3);
        rt_tensor *y = rt_empty(ctx, a->dtype, a->ndim, a->shape);
        for (int64_t o0 = 0; o0 < l.outer; o0 += RT_LANES) {
            int64_t n = l.outer - o0 < RT_LANES ? l.outer - o0 : RT_LANES;
            rt_load_rows_t(a, o0, n, l.d, ga);
            if (b)
                rt_load_rows_t(b, o0, n, l.d, gb);
            g(ctx->tgt->vm, gy, ga, gb, l.d);
            rt_store_rows_t(y, o0, n, l.d, gy);
        }
        rt_pool_release(ctx, ga, c1);
        rt_pool_release(ctx, gb, c2);
        rt_pool_release(ctx, gy, c3);
        return y;
    }
    double *va = rt_scratch(ctx, l.d, &c1), *vb = rt_scratch(ctx, l.d, &c2),
           *vy = rt_scratch(ctx, l.d, &c3);
    rt_tensor *y = rt_empty(ctx, a->dtype, a->ndim, a->shape);
    for (int64_t o = 0; o < l.outer; o++)
        for (int64_t i = 0; i < l.inner; i++) {
            lane_load(a, &l, o, i, va);
            if (b)
                lane_load(b, &l, o, i, vb);
            f(ctx->tgt->vm, vy, va, vb, l.d);
            lane_store(y, &l, o, i, vy);
        }
    rt_pool_release(ctx, va, c1);
    rt_pool_release(ctx, vb, c2);
    rt_pool_release(ctx, vy, c3);
    return y;
}

/* ---- softmax family */

/* y may be x */
static void softmax_lane(const rt_vm_table *vm, double *y, const double *x, const double *unused,
                         int64_t n)
{
    (void)unused;
    double m = lane_max(x, n), s = 0;
    for (int64_t j = 0; j < n; j++)
        y[j] = x[j] - m;
    lane_exp(vm, y, y, n);
    for (int64_t j = 0; j < n; j++)
        s += y[j];
    for (int64_t j = 0; j < n; j++)
        y[j] /= s;
}

/* y is not x */
static void log_softmax_lane(const rt_vm_table *vm, double *y, const double *x,
                             const double *unused, int64_t n)
{
    (void)unused;
    double m = lane_max(x, n), s = 0;
    for (int64_t j = 0; j < n; j++)
        y[j] = x[j] - m;
    lane_exp(vm, y, y, n);
    for (int64_t j = 0; j < n; j++)
        s += y[j];
    double lse = m + log(s);
    for (int64_t j = 0; j < n; j++)
        y[j] = x[j] - lse;
}

/* dx = y * (dy - sum(dy * y)) */
static void softmax_bwd_lane(const rt_vm_table *vm, double *dx, const double *y, const double *dy,
                             int64_t n)
{
    (void)vm;
    double s = 0;
    for (int64_t j = 0; j < n; j++)
        s += dy[j] * y[j];
    for (int64_t j = 0; j < n; j++)
        dx[j] = y[j] * (dy[j] - s);
}

/* dx = dy - exp(y) * sum(dy) */
static void log_softmax_bwd_lane(const rt_vm_table *vm, double *dx, const double *y,
                                 const double *dy, int64_t n)
{
    double s = 0;
    for (int64_t j = 0; j < n; j++)
        s += dy[j];
    lane_exp(vm, y, dx, n);
    for (int64_t j = 0; j < n; j++)
        dx[j] = dy[j] - dx[j] * s;
}

/* ---- the same, RT_LANES lanes side by side (group_fn) */

#define L_ RT_LANES
#define AT_(p, j, r) (p)[(j) * L_ + (r)]

/* each lane's max m, y = exp(x - m) and its sum s: the first steps of both */
RT_WIDEST static void shifted_exp_group(const rt_vm_table *vm, double *y, const double *x, int64_t n,
                                        double *m, double *s)
{
    for (int r = 0; r < L_; r++) {
        m[r] = -INFINITY;
        s[r] = 0;
    }
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < L_; r++)
            m[r] = AT_(x, j, r) > m[r] ? AT_(x, j, r) : m[r];
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < L_; r++)
            AT_(y, j, r) = AT_(x, j, r) - m[r];
    lane_exp(vm, y, y, L_ * n);
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < L_; r++)
            s[r] += AT_(y, j, r);
}

RT_WIDEST static void softmax_group(const rt_vm_table *vm, double *y, const double *x, const double *unused,
                          int64_t n)
{
    (void)unused;
    double m[L_], s[L_];
    shifted_exp_group(vm, y, x, n, m, s);
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < L_; r++)
            AT_(y, j, r) /= s[r];
}

RT_WIDEST static void log_softmax_group(const rt_vm_table *vm, double *y, const double *x,
                              const double *unused, int64_t n)
{
    (void)unused;
    double m[L_], s[L_], lse[L_];
    shifted_exp_group(vm, y, x, n, m, s);
    for (int r = 0; r < L_; r++)
        lse[r] = m[r] + log(s[r]);
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < L_; r++)
            AT_(y, j, r) = AT_(x, j, r) - lse[r];
}

RT_WIDEST static void softmax_bwd_group(const rt_vm_table *vm, double *dx, const double *y,
                              const double *dy, int64_t n)
{
    (void)vm;
    double s[L_] = {0};
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < L_; r++)
            s[r] += AT_(dy, j, r) * AT_(y, j, r);
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < L_; r++)
            AT_(dx, j, r) = AT_(y, j, r) * (AT_(dy, j, r) - s[r]);
}

RT_WIDEST static void log_softmax_bwd_group(const rt_vm_table *vm, double *dx, const double *y,
                                  const double *dy, int64_t n)
{
    double s[L_] = {0};
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < L_; r++)
            s[r] += AT_(dy, j, r);
    lane_exp(vm, y, dx, L_ * n);
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < L_; r++)
            AT_(dx, j, r) = AT_(dy, j, r) - AT_(dx, j, r) * s[r];
}

#undef AT_
#undef L_

rt_tensor *rt_softmax(rt_ctx *ctx, const rt_tensor *x, int dim)
{
    return map_lanes(ctx, x, NULL, dim, softmax_lane, softmax_group, "softmax");
}

rt_tensor *rt_log_softmax(rt_ctx *ctx, const rt_tensor *x, int dim)
{
    return map_lanes(ctx, x, NULL, dim, log_softmax_lane, log_softmax_group, "log_softmax");
}

rt_tensor *rt_softmax_bwd(rt_ctx *ctx, const rt_tensor *y, const rt_tensor *dy, int dim)
{
    return map_lanes(ctx, y, dy, dim, softmax_bwd_lane, softmax_bwd_group, "softmax_bwd");
}

rt_tensor *rt_log_softmax_bwd(rt_ctx *ctx, const rt_tensor *y, const rt_tensor *dy, int dim)
{
    return map_lanes(ctx, y, dy, dim, log_softmax_bwd_lane, log_softmax_bwd_group, "log_softmax_bwd");
}

/* ---- norms over the last dim */

typedef struct norm_args {
    const rt_tensor *x, *w, *b, *dy;
    double eps;
    bool rms;
    int64_t rows, d;
} norm_args;

static void norm_setup(rt_ctx *ctx, norm_args *a, const char *what)
{
    rt_norm_check(ctx, a->x, a->w, a->b, a->dy, what, &a->rows, &a->d);
}

/* Per row of a group of RT_LANES rows (transposed, rt_load_rows_t): the
 * mean (0 for rms) and 1/sqrt(var + eps) (or 1/sqrt(mean(x^2) + eps)),
 * each row summed in order (the same bits as one row at a time) */
static inline __attribute__((always_inline)) void row_stats_t(const double *x, int64_t d, bool rms, double eps, double *mean,
                        double *rstd)
{
    double m[RT_LANES] = {0}, v[RT_LANES] = {0};
    if (!rms) {
        for (int64_t j = 0; j < d; j++)
            for (int r = 0; r < RT_LANES; r++)
                m[r] += x[j * RT_LANES + r];
        for (int r = 0; r < RT_LANES; r++)
            m[r] /= (double)d;
    }
    for (int64_t j = 0; j < d; j++)
        for (int r = 0; r < RT_LANES; r++) {
            double c = x[j * RT_LANES + r] - m[r];
            v[r] += c * c;
        }
    for (int r = 0; r < RT_LANES; r++) {
        mean[r] = m[r];
        rstd[r] = 1.0 / sqrt(v[r] / (double)d + eps);
    }
}

/* the weight (1 when absent) and bias (0 when absent) as double: x * 1 and
 * x + 0 are what the formulas compute without them */
static double *param_or(rt_ctx *ctx, const rt_tensor *p, int64_t d, double dflt, size_t *cap)
{
    double *v = rt_scratch(ctx, d, cap);
    if (p)
        rt_load_f64(p, 0, d, v);
    else
        for (int64_t j = 0; j < d; j++)
            v[j] = dflt;
    return v;
}

/* y = (x - mean) * rstd * w + b, RT_LANES rows at a time */
RT_WIDEST static rt_tensor *norm_fwd(rt_ctx *ctx, norm_args *a, const char *what)
{
    norm_setup(ctx, a, what);
    RT_KERNEL(ctx, RT_K_NN, what);
    size_t cw, cb, cr;
    int64_t d = a->d;
    double *w = param_or(ctx, a->w, d, 1.0, &cw), *b = param_or(ctx, a->b, d, 0.0, &cb);
    double *x = rt_scratch(ctx, RT_LANES * d, &cr), mean[RT_LANES], rstd[RT_LANES];
    rt_tensor *y = rt_empty(ctx, a->x->dtype, a->x->ndim, a->x->shape);
    for (int64_t r0 = 0; r0 < a->rows; r0 += RT_LANES) {
        int64_t n = a->rows - r0 < RT_LANES ? a->rows - r0 : RT_LANES;
        rt_load_rows_t(a->x, r0, n, d, x);
        row_stats_t(x, d, a->rms, a->eps, mean, rstd);
        for (int64_t j = 0; j < d; j++)
            for (int r = 0; r < RT_LANES; r++)
                x[j * RT_LANES + r] = (x[j * RT_LANES + r] - mean[r]) * rstd[r] * w[j] + b[j];
        rt_store_rows_t(y, r0, n, d, x);
    }
    rt_pool_release(ctx, w, cw);
    rt_pool_release(ctx, b, cb);
    rt_pool_release(ctx, x, cr);
    return y;
}

rt_tensor *rt_layer_norm(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w,
                         const rt_tensor *b, double eps)
{
    norm_args a = {.x = x, .w = w, .b = b, .eps = eps, .rms = false};
    return norm_fwd(ctx, &a, "layer_norm");
}

rt_tensor *rt_rms_norm(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps)
{
    norm_args a = {.x = x, .w = w, .eps = eps, .rms = true};
    return norm_fwd(ctx, &a, "rms_norm");
}

/* Per row: xhat = (x - mean) * rstd, g = dy * w;
 * layer_norm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
 * rms_norm:   dx = rstd * (g - xhat * mean(g * xhat))
 * RT_LANES rows at a time, each row's sums in order; dw and db add the
 * rows' terms in row order. */
static rt_tensor *param_grad(rt_ctx *ctx, rt_dtype dt, int64_t d, double *v, size_t cap)
{
    rt_tensor *t = rt_empty(ctx, dt, 1, &d);
    rt_store_f64(t, 0, d, v);
    rt_pool_release(ctx, v, cap);
    return t;
}

RT_WIDEST static void norm_bwd(rt_ctx *ctx, norm_args *a, const rt_tensor *addend, rt_tensor **dx,
                                rt_tensor **dw, rt_tensor **db, const char *what)
{
    norm_setup(ctx, a, what);
    if (addend)
        RT_CHECK(ctx, rt_same_shape(a->x, addend) && a->x->dtype == addend->dtype,
                 "%s backward: the addend's shape or dtype differs from the input", what);
    RT_KERNEL(ctx, RT_K_NN, what);
    int64_t d = a->d;
    size_t cw, cdw = 0, cdb = 0, c1, c2;
    double *w = param_or(ctx, a->w, d, 1.0, &cw);
    double *gw = dw && a->w ? rt_scratch(ctx, d, &cdw) : NULL;
    double *gb = db ? rt_scratch(ctx, d, &cdb) : NULL;
    if (gw) memset(gw, 0, (size_t)d * sizeof(double));
    if (gb) memset(gb, 0, (size_t)d * sizeof(double));
    double *x = rt_scratch(ctx, RT_LANES * d, &c1), *g = rt_scratch(ctx, RT_LANES * d, &c2);
    double mean[RT_LANES], rstd[RT_LANES];
    rt_tensor *out = rt_empty(ctx, a->x->dtype, a->x->ndim, a->x->shape);
    for (int64_t r0 = 0; r0 < a->rows; r0 += RT_LANES) {
        int64_t n = a->rows - r0 < RT_LANES ? a->rows - r0 : RT_LANES;
        rt_load_rows_t(a->x, r0, n, d, x);
        rt_load_rows_t(a->dy, r0, n, d, g); /* dy, then g, then dx */
        row_stats_t(x, d, a->rms, a->eps, mean, rstd);
        double mg[RT_LANES] = {0}, mgx[RT_LANES] = {0};
        for (int64_t j = 0; j < d; j++)
            for (int r = 0; r < RT_LANES; r++)
                x[j * RT_LANES + r] = (x[j * RT_LANES + r] - mean[r]) * rstd[r]; /* xhat */
        /* dw and db: each column adds its rows' terms in row order */
        for (int64_t j = 0; j < d; j++) {
            double sw = gw ? gw[j] : 0.0, sb = gb ? gb[j] : 0.0;
            for (int64_t r = 0; r < n; r++) {
                sw += g[j * RT_LANES + r] * x[j * RT_LANES + r];
                sb += g[j * RT_LANES + r];
            }
            if (gw) gw[j] = sw;
            if (gb) gb[j] = sb;
        }
        for (int64_t j = 0; j < d; j++)
            for (int r = 0; r < RT_LANES; r++) {
                double gj = g[j * RT_LANES + r] * w[j];
                g[j * RT_LANES + r] = gj;
                mg[r] += gj;
                mgx[r] += gj * x[j * RT_LANES + r];
            }
        for (int r = 0; r < RT_LANES; r++) {
            mg[r] = a->rms ? 0.0 : mg[r] / (double)d;
            mgx[r] /= (double)d;
        }
        for (int64_t j = 0; j < d; j++)
            for (int r = 0; r < RT_LANES; r++)
                g[j * RT_LANES + r] =
                    rstd[r] * (g[j * RT_LANES + r] - mg[r] - x[j * RT_LANES + r] * mgx[r]);
        rt_store_rows_t(out, r0, n, d, g);
        if (addend) { /* dx = addend + dx as stored: rt_binary's RT_ADD, the same bits */
            rt_load_f64(out, r0 * d, n * d, g);
            rt_load_f64(addend, r0 * d, n * d, x);
            for (int64_t i = 0; i < n * d; i++)
                g[i] = x[i] + g[i];
            rt_store_f64(out, r0 * d, n * d, g);
        }
    }
    if (dx) *dx = out; else rt_free(ctx, out);
    if (dw) *dw = gw ? param_grad(ctx, a->x->dtype, d, gw, cdw) : NULL;
    if (db) *db = param_grad(ctx, a->x->dtype, d, gb, cdb);
    rt_pool_release(ctx, w, cw);
    rt_pool_release(ctx, x, c1);
    rt_pool_release(ctx, g, c2);
}

void rt_layer_norm_bwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                       const rt_tensor *dy, rt_tensor **dx, rt_tensor **dw, rt_tensor **db)
{
    rt_layer_norm_bwd_add(ctx, x, w, eps, dy, NULL, dx, dw, db);
}

void rt_layer_norm_bwd_add(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                           const rt_tensor *dy, const rt_tensor *addend, rt_tensor **dx, rt_tensor **dw,
                           rt_tensor **db)
{
    norm_args a = {.x = x, .w = w, .dy = dy, .eps = eps, .rms = false};
    norm_bwd(ctx, &a, addend, dx, dw, db, "layer_norm_bwd");
}

void rt_rms_norm_bwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                     const rt_tensor *dy, rt_tensor **dx, rt_tensor **dw)
{
    norm_args a = {.x = x, .w = w, .dy = dy, .eps = eps, .rms = true};
    norm_bwd(ctx, &a, NULL, dx, dw, NULL, "rms_norm_bwd");
}

/* ---- cross entropy */

#define IGNORE_INDEX RT_IGNORE_INDEX

/* Each row's loss -log_softmax(logits[r])[t[r]] in double (0 where ignored),
 * then reduced. */
rt_tensor *rt_cross_entropy_reduce(rt_ctx *ctx, const rt_tensor *logits,
                                   const rt_tensor *targets, rt_ce_reduction red)
{
    rt_cross_entropy_check(ctx, logits, targets);
    int64_t kept = rt_cross_entropy_check_targets(ctx, logits, targets);
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy");
    int64_t n = targets->numel, c = logits->shape[logits->ndim - 1];
    size_t cap, lcap, pcap;
    double *row = rt_scratch(ctx, c, &cap), *loss = rt_scratch(ctx, n, &lcap), total = 0;
    double *lp = rt_scratch(ctx, c, &pcap);
    for (int64_t r = 0; r < n; r++) {
        int32_t t = ((const int32_t *)targets->data)[r];
        loss[r] = 0;
        if (t == IGNORE_INDEX)
            continue;
        rt_load_f64(logits, r * c, c, row);
        log_softmax_lane(ctx->tgt->vm, lp, row, NULL, c);
        loss[r] = -lp[t];
        total += loss[r];
    }
    rt_tensor *y;
    if (red == RT_CE_NONE) {
        y = rt_empty(ctx, logits->dtype, targets->ndim, targets->shape);
        rt_store_f64(y, 0, n, loss);
    } else {
        y = rt_scalar(ctx, logits->dtype,
                      red == RT_CE_SUM ? total : kept ? total / (double)kept : NAN);
    }
    rt_pool_release(ctx, row, cap);
    rt_pool_release(ctx, loss, lcap);
    rt_pool_release(ctx, lp, pcap);
    return y;
}

/* d logits[r] = dy_r * (softmax(logits[r]) - onehot(t[r])), where dy_r is
 * dy[r] (none), dy (sum) or dy / kept (mean); 0 for ignored rows. */
rt_tensor *rt_cross_entropy_reduce_bwd(rt_ctx *ctx, const rt_tensor *logits,
                                       const rt_tensor *targets, const rt_tensor *dy,
                                       rt_ce_reduction red)
{
    rt_cross_entropy_check(ctx, logits, targets);
    int64_t kept = rt_cross_entropy_check_targets(ctx, logits, targets);
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy_bwd");
    rt_cross_entropy_bwd_check(ctx, targets, dy, red);
    int64_t n = targets->numel, c = logits->shape[logits->ndim - 1];
    double scale = red == RT_CE_NONE ? 1.0
                 : red == RT_CE_SUM  ? rt_item(ctx, dy)
                 : kept              ? rt_item(ctx, dy) / (double)kept
                                     : 0.0;
    size_t cap;
    double *row = rt_scratch(ctx, c, &cap);
    rt_tensor *dx = rt_empty(ctx, logits->dtype, logits->ndim, logits->shape);
    for (int64_t r = 0; r < n; r++) {
        int32_t t = ((const int32_t *)targets->data)[r];
        double sr = red == RT_CE_NONE ? rt_get(dy, r) : scale;
        rt_load_f64(logits, r * c, c, row);
        softmax_lane(ctx->tgt->vm, row, row, NULL, c);
        for (int64_t j = 0; j < c; j++)
            row[j] = t == IGNORE_INDEX ? 0.0 : sr * (row[j] - (j == t));
        rt_store_f64(dx, r * c, c, row);
    }
    rt_pool_release(ctx, row, cap);
    return dx;
}

/* ---- the vocabulary-parallel cross-entropy's kernels (rt_cross_entropy_vp
 * in composite.c runs them around its all-reduces): row by row through one
 * row of scratch, so nothing logits-sized is made but the gradient */

rt_tensor *rt_ce_vp_rowmax(rt_ctx *ctx, const rt_tensor *logits)
{
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy");
    int64_t c = logits->shape[logits->ndim - 1], n = 1;
    for (int d = 0; d < logits->ndim - 1; d++) /* rows (also where this rank has no class) */
        n *= logits->shape[d];
    rt_tensor *m = rt_empty(ctx, RT_F64, 1, &n);
    double *M = (double *)m->data;
    size_t cap;
    double *row = rt_scratch(ctx, c, &cap);
    for (int64_t r = 0; r < n; r++) {
        rt_load_f64(logits, r * c, c, row);
        M[r] = lane_max(row, c);
    }
    rt_pool_release(ctx, row, cap);
    return m;
}

rt_tensor *rt_ce_vp_rowsums(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                            const rt_tensor *m, int64_t first)
{
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy");
    int64_t c = logits->shape[logits->ndim - 1], n = targets->numel;
    rt_tensor *s = rt_empty(ctx, RT_F64, 2, (int64_t[]){n, 2});
    double *S = (double *)s->data;
    const double *M = (const double *)m->data;
    const int32_t *T = (const int32_t *)targets->data;
    size_t cap;
    double *row = rt_scratch(ctx, c, &cap);
    for (int64_t r = 0; r < n; r++) {
        rt_load_f64(logits, r * c, c, row);
        int64_t j = (int64_t)T[r] - first; /* the target's column here */
        double picked = j >= 0 && j < c ? row[j] : 0.0, sum = 0;
        for (int64_t k = 0; k < c; k++)
            row[k] -= M[r];
        lane_exp(ctx->tgt->vm, row, row, c);
        for (int64_t k = 0; k < c; k++)
            sum += row[k];
        S[2 * r] = sum;
        S[2 * r + 1] = picked;
    }
    rt_pool_release(ctx, row, cap);
    return s;
}

void rt_ce_vp_rowstats(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets, rt_tensor **m,
                       rt_tensor **sums)
{
    *m = rt_ce_vp_rowmax(ctx, logits);
    *sums = rt_ce_vp_rowsums(ctx, logits, targets, *m, 0);
}

rt_tensor *rt_ce_vp_finish(rt_ctx *ctx, const rt_tensor *targets, const rt_tensor *m,
                           const rt_tensor *sums, int64_t classes, rt_ce_reduction red,
                           rt_dtype dt, rt_tensor **lse)
{
    int64_t kept = rt_cross_entropy_check_targets_n(ctx, targets, classes);
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy");
    int64_t n = targets->numel;
    const double *M = (const double *)m->data, *S = (const double *)sums->data;
    const int32_t *T = (const int32_t *)targets->data;
    size_t cap;
    double *loss = rt_scratch(ctx, n, &cap), total = 0;
    double *L = NULL;
    if (lse) {
        *lse = rt_empty(ctx, RT_F64, 1, &n);
        L = (double *)(*lse)->data;
    }
    for (int64_t r = 0; r < n; r++) {
        double z = M[r] + log(S[2 * r]);
        if (L)
            L[r] = z;
        loss[r] = T[r] == IGNORE_INDEX ? 0.0 : z - S[2 * r + 1];
        total += loss[r];
    }
    rt_tensor *y;
    if (red == RT_CE_NONE) {
        y = rt_empty(ctx, dt, targets->ndim, targets->shape);
        rt_store_f64(y, 0, n, loss);
    } else {
        y = rt_scalar(ctx, dt, red == RT_CE_SUM ? total : kept ? total / (double)kept : NAN);
    }
    rt_pool_release(ctx, loss, cap);
    return y;
}

void rt_ce_vp_grad(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                   const rt_tensor *lse, const rt_tensor *dy, rt_ce_reduction red, int64_t first,
                   int64_t classes, rt_tensor *dx)
{
    int64_t kept = rt_cross_entropy_check_targets_n(ctx, targets, classes);
    RT_KERNEL(ctx, RT_K_NN, "cross_entropy_bwd");
    int64_t n = targets->numel, c = logits->shape[logits->ndim - 1];
    double scale = red == RT_CE_NONE ? 1.0
                 : red == RT_CE_SUM  ? rt_item(ctx, dy)
                 : kept              ? rt_item(ctx, dy) / (double)kept
                                     : 0.0;
    const double *L = (const double *)lse->data;
    const int32_t *T = (const int32_t *)targets->data;
    size_t cap;
    double *row = rt_scratch(ctx, c, &cap);
    for (int64_t r = 0; r < n; r++) {
        int64_t t = T[r], j = t - first;
        if (t == IGNORE_INDEX) {
            memset(row, 0, (size_t)c * sizeof *row);
        } else {
            double sr = red == RT_CE_NONE ? rt_get(dy, r) : scale;
            rt_load_f64(logits, r * c, c, row);
            for (int64_t k = 0; k < c; k++)
                row[k] -= L[r];
            lane_exp(ctx->tgt->vm, row, row, c);
            for (int64_t k = 0; k < c; k++)
                row[k] = sr * (row[k] - (k == j));
        }
        rt_store_f64(dx, r * c, c, row);
    }
    rt_pool_release(ctx, row, cap);
}

/* ---- embedding */

rt_tensor *rt_embedding(rt_ctx *ctx, const rt_tensor *table, const rt_tensor *ids)
{
    rt_embedding_check(ctx, table, ids);
    rt_embedding_check_ids(ctx, ids, table->shape[0]);
    RT_KERNEL(ctx, RT_K_NN, "embedding");
    int64_t shape[RT_MAX_DIMS], d = table->shape[1];
    memcpy(shape, ids->shape, (size_t)ids->ndim * sizeof *shape);
    shape[ids->ndim] = d;
    rt_tensor *y = rt_empty(ctx, table->dtype, ids->ndim + 1, shape);
    size_t row = (size_t)d * rt_dtype_size(table->dtype);
    for (int64_t i = 0; i < ids->numel; i++)
        memcpy((char *)y->data + (size_t)i * row,
               (const char *)table->data + (size_t)((const int32_t *)ids->data)[i] * row, row);
    return y;
}

rt_tensor *rt_embedding_bwd(rt_ctx *ctx, const rt_tensor *ids, const rt_tensor *dy,
                            int64_t vocab)
{
    rt_embedding_bwd_check(ctx, ids, dy);
    rt_embedding_check_ids(ctx, ids, vocab);
    RT_KERNEL(ctx, RT_K_NN, "embedding_bwd");
    int64_t d = dy->shape[dy->ndim - 1];
    size_t cap, rcap;
    double *acc = rt_scratch(ctx, vocab * d, &cap), *row = rt_scratch(ctx, d, &rcap);
    memset(acc, 0, (size_t)(vocab * d) * sizeof *acc);
    for (int64_t i = 0; i < ids->numel; i++) {
        rt_load_f64(dy, i * d, d, row);
        double *dst = acc + (int64_t)((const int32_t *)ids->data)[i] * d;
        for (int64_t j = 0; j < d; j++)
            dst[j] += row[j];
    }
    rt_tensor *g = rt_empty(ctx, dy->dtype, 2, (int64_t[]){vocab, d});
    rt_store_f64(g, 0, vocab * d, acc);
    rt_pool_release(ctx, acc, cap);
    rt_pool_release(ctx, row, rcap);
    return g;
}
