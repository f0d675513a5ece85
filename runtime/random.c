/* Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11) keyed
 * by the seed, with the *global* element index as the counter, so every
 * element's value depends only on (seed, index): a sharded tensor is
 * bit-identical to the matching block of the unsharded one on any mesh.
 * The generator and the unit double are philox.h's (the CUDA target's too). */
#include <math.h>

#include "philox.h"
#include "rt_cpu.h"
#include "vmath.h"

void rt_philox4x32(uint64_t seed, uint64_t counter, uint32_t stream, uint32_t out[4])
{
    rt_philox_(seed, counter, stream, out);
}

typedef double (*sample_fn)(const uint32_t r[4], double p0, double p1);
typedef void (*sample_run_fn)(uint64_t seed, uint32_t stream, uint64_t g0, int64_t n, double p0,
                              double p1, double *out);

static double sample_normal(const uint32_t r[4], double std, double unused)
{
    (void)unused;
    double u1 = 1.0 - rt_philox_unit_(r[0], r[1]); /* (0, 1] */
    double u2 = rt_philox_unit_(r[2], r[3]);
    return std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static double sample_uniform(const uint32_t r[4], double lo, double hi)
{
    return lo + (hi - lo) * rt_philox_unit_(r[0], r[1]);
}

/* The local block row by row (the last dim's elements have consecutive
 * global indices) through the vector kernels, 256 samples at a time. */
static void fill_runs(rt_tensor *t, const rt_layout *l, const int64_t *gstr, int64_t g,
                      uint64_t seed, uint32_t stream, sample_run_fn run, double p0, double p1)
{
    enum { CHUNK = 256 };
    double buf[CHUNK];
    int last = l->ndim - 1;
    int64_t len = l->ndim ? l->local[last] : 1, idx[RT_MAX_DIMS] = {0};
    for (int64_t i = 0; i < t->numel; i += len) {
        for (int64_t k = 0; k < len; k += CHUNK) {
            int64_t m = len - k < CHUNK ? len - k : CHUNK;
            run(seed, stream, (uint64_t)(g + k), m, p0, p1, buf);
            rt_store_f64(t, i + k, m, buf);
        }
        for (int d = last - 1; d >= 0; d--) { /* odometer over the outer dims */
            g += gstr[d];
            if (++idx[d] < l->local[d])
                break;
            g -= gstr[d] * l->local[d];
            idx[d] = 0;
        }
    }
}

/* walks the local block, computing each element's global row-major index */
static rt_tensor *fill(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, uint64_t seed,
                       uint32_t stream, sample_fn f, double p0, double p1)
{
    rt_random_check(ctx, dt, l);
    RT_KERNEL(ctx, RT_K_RANDOM, stream ? "uniform" : "randn");
    int64_t gstr[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0}, s = 1, g = 0;
    for (int d = l->ndim - 1; d >= 0; d--) {
        gstr[d] = s;
        s *= l->global[d];
        g += l->offset[d] * gstr[d];
    }
    rt_tensor *t = rt_empty(ctx, dt, l->ndim, l->local);
    if (ctx->tgt->vm && t->numel > 0) {
        fill_runs(t, l, gstr, g, seed, stream, stream ? ctx->tgt->vm->uniform : ctx->tgt->vm->normal, p0, p1);
        return t;
    }
    for (int64_t i = 0; i < t->numel; i++) {
        uint32_t r[4];
        rt_philox4x32(seed, (uint64_t)g, stream, r);
        rt_set(t, i, f(r, p0, p1));
        for (int d = l->ndim - 1; d >= 0; d--) { /* odometer */
            g += gstr[d];
            if (++idx[d] < l->local[d])
                break;
            g -= gstr[d] * l->local[d];
            idx[d] = 0;
        }
    }
    return t;
}

rt_tensor *rt_randn(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, uint64_t seed, double std)
{
    return fill(ctx, dt, l, seed, 0, sample_normal, std, 0);
}

rt_tensor *rt_uniform(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, uint64_t seed,
                      double lo, double hi)
{
    return fill(ctx, dt, l, seed, 1, sample_uniform, lo, hi);
}

/* ---- dropout: a counter-based mask (stream 2), see spmdrt.h */

rt_tensor *rt_dropout(rt_ctx *ctx, const rt_tensor *x, double p, int64_t seed,
                      const rt_layout *l, rt_axes stack)
{
    rt_dropout_check(ctx, x, p, l);
    if (p == 0)
        return rt_retain((rt_tensor *)x);
    RT_KERNEL(ctx, RT_K_RANDOM, "dropout");
    int64_t gstr[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0}, s = 1, g = 0;
    for (int d = l->ndim - 1; d >= 0; d--) {
        gstr[d] = s;
        s *= l->global[d];
        g += l->offset[d] * gstr[d];
    }
    /* varying ranks without a layout: a leading stack dim of the group size */
    uint64_t base = stack.n ? (uint64_t)rt_group_rank(ctx, stack) * (uint64_t)s : 0;
    double scale = 1.0 / (1.0 - p);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    size_t cap;
    double *row = rt_scratch(ctx, x->numel, &cap);
    rt_load_f64(x, 0, x->numel, row);
    for (int64_t i = 0; i < x->numel; i++) {
        uint32_t r[4];
        rt_philox4x32((uint64_t)seed, base + (uint64_t)g, 2, r);
        row[i] = rt_philox_unit_(r[0], r[1]) < p ? 0.0 : row[i] * scale;
        for (int d = l->ndim - 1; d >= 0; d--) { /* odometer */
            g += gstr[d];
            if (++idx[d] < l->local[d])
                break;
            g -= gstr[d] * l->local[d];
            idx[d] = 0;
        }
    }
    rt_store_f64(y, 0, y->numel, row);
    rt_pool_release(ctx, row, cap);
    return y;
}
