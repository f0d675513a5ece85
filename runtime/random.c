/* Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11) keyed
 * by the seed, with the *global* element index as the counter, so every
 * element's value depends only on (seed, index): a sharded tensor is
 * bit-identical to the matching block of the unsharded one on any mesh. */
#include <math.h>

#include "rt_cpu.h"
#include "vmath.h"

static void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

void rt_philox4x32(uint64_t seed, uint64_t counter, uint32_t stream, uint32_t out[4])
{
    uint32_t c[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), stream, 0};
    uint32_t k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(0xD2511F53u, c[0], &hi0, &lo0);
        mulhilo(0xCD9E8D57u, c[2], &hi1, &lo1);
        uint32_t n[4] = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
        c[0] = n[0]; c[1] = n[1]; c[2] = n[2]; c[3] = n[3];
        k[0] += 0x9E3779B9u;
        k[1] += 0xBB67AE85u;
    }
    for (int i = 0; i < 4; i++)
        out[i] = c[i];
}

/* 53 random bits as a double in [0, 1) */
static double unit(uint32_t a, uint32_t b)
{
    return ((double)(a >> 5) * 67108864.0 + (double)(b >> 6)) * (1.0 / 9007199254740992.0);
}

typedef double (*sample_fn)(const uint32_t r[4], double p0, double p1);
typedef void (*sample_run_fn)(uint64_t seed, uint32_t stream, uint64_t g0, int64_t n, double p0,
                              double p1, double *out);

static double sample_normal(const uint32_t r[4], double std, double unused)
{
    (void)unused;
    double u1 = 1.0 - unit(r[0], r[1]); /* (0, 1] */
    double u2 = unit(r[2], r[3]);
    return std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static double sample_uniform(const uint32_t r[4], double lo, double hi)
{
    return lo + (hi - lo) * unit(r[0], r[1]);
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
    rt_check_float(ctx, &(rt_tensor){.dtype = dt}, "random");
    RT_KERNEL(ctx, RT_K_RANDOM, stream ? "uniform" : "randn");
    int64_t gstr[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0}, s = 1, g = 0;
    for (int d = l->ndim - 1; d >= 0; d--) {
        RT_CHECK(ctx, l->offset[d] + l->local[d] <= l->global[d],
                 "random: block exceeds the global shape in dim %d", d);
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
    RT_CHECK(ctx, p >= 0 && p < 1, "dropout: p=%g is not in [0, 1)", p);
    RT_CHECK(ctx, l->ndim == x->ndim, "dropout: the layout does not describe the tensor");
    for (int d = 0; d < x->ndim; d++)
        RT_CHECK(ctx, l->local[d] == x->shape[d] && l->offset[d] + l->local[d] <= l->global[d],
                 "dropout: the layout does not describe the tensor (dim %d)", d);
    rt_check_float(ctx, x, "dropout");
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
        row[i] = unit(r[0], r[1]) < p ? 0.0 : row[i] * scale;
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
