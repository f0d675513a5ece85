/* The CUDA target's counter-based random numbers: Philox4x32-10 keyed by
 * the seed with the global element index as the counter (philox.h, the
 * CPU's generator, instantiated for the device): uniform samples and dropout
 * masks are the CPU's bits; normal samples use Box-Muller with the
 * device's log and cos (the CPU's are SLEEF's, both within 1 ulp in double:
 * an f32 sample almost always rounds to the same bits). */
#include "dev.h"

#define RT_PHILOX_QUAL RT_DEV_INLINE
#include "philox.h"

/* the global row-major index of local element k of layout l */
RT_DEV_INLINE uint64_t global_index(const rt_layout &l, int64_t k)
{
    uint64_t g = 0, str = 1;
    for (int d = l.ndim - 1; d >= 0; d--) {
        int64_t c = k % l.local[d];
        k /= l.local[d];
        g += (uint64_t)(l.offset[d] + c) * str;
        str *= (uint64_t)l.global[d];
    }
    return g;
}

extern "C" {

void rt_philox4x32(uint64_t seed, uint64_t counter, uint32_t stream, uint32_t out[4])
{
    rt_philox_(seed, counter, stream, out);
}

static rt_tensor *fill(rt_ctx *ctx, rt_dtype dt, const rt_layout *lp, rt_hi seed,
                       uint32_t stream, double p0, double p1)
{
    rt_random_check(ctx, dt, lp);
    RT_KERNEL(ctx, RT_K_RANDOM, stream ? "uniform" : "randn");
    ctx->tgt->op = stream ? "uniform" : "randn";
    rt_tensor *t = rt_empty(ctx, dt, lp->ndim, lp->local);
    rt_layout l = *lp;
    void *T = t->data;
    rt_launch(ctx, t->numel, [=] RT_HD(int64_t k) {
        uint32_t r[4];
        rt_philox_((uint64_t)rt_dev_hi(seed), global_index(l, k), stream, r);
        double v = stream ? p0 + (p1 - p0) * rt_philox_unit_(r[0], r[1])
                          : p0 * sqrt(-2.0 * log(1.0 - rt_philox_unit_(r[0], r[1]))) *
                                cos(6.283185307179586 * rt_philox_unit_(r[2], r[3]));
        rt_st(T, dt, k, v);
    });
    return t;
}

/* the seed by value, or from a graph region's slot (rt_slot_i) */
rt_tensor *rt_randn_h(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, rt_hi seed, double std)
{
    return fill(ctx, dt, l, seed, 0, std, 0);
}

rt_tensor *rt_uniform_h(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, rt_hi seed, double lo, double hi)
{
    return fill(ctx, dt, l, seed, 1, lo, hi);
}

rt_tensor *rt_randn(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, uint64_t seed, double std)
{
    return fill(ctx, dt, l, rt_hi{(int64_t)seed, NULL}, 0, std, 0);
}

rt_tensor *rt_uniform(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, uint64_t seed,
                      double lo, double hi)
{
    return fill(ctx, dt, l, rt_hi{(int64_t)seed, NULL}, 1, lo, hi);
}

rt_tensor *rt_dropout(rt_ctx *ctx, const rt_tensor *x, double p, int64_t seed,
                      const rt_layout *l, rt_axes stack)
{
    return rt_dropout_h(ctx, x, p, rt_hi{seed, NULL}, l, stack);
}

rt_tensor *rt_dropout_h(rt_ctx *ctx, const rt_tensor *x, double p, rt_hi seed, const rt_layout *l,
                        rt_axes stack)
{
    rt_dropout_check(ctx, x, p, l);
    if (p == 0)
        return rt_retain((rt_tensor *)x);
    RT_KERNEL(ctx, RT_K_RANDOM, "dropout");
    ctx->tgt->op = "dropout";
    uint64_t s = (uint64_t)rt_numel_of(l->ndim, l->global);
    /* varying ranks without a layout: a leading stack dim of the group size */
    uint64_t base = stack.n ? (uint64_t)rt_group_rank(ctx, stack) * s : 0;
    double scale = 1.0 / (1.0 - p);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    rt_layout lc = *l;
    const void *X = x->data;
    void *Y = y->data;
    rt_dtype dt = x->dtype;
    rt_launch(ctx, x->numel, [=] RT_HD(int64_t k) {
        uint32_t r[4];
        rt_philox_((uint64_t)rt_dev_hi(seed), base + global_index(lc, k), 2, r);
        rt_st(Y, dt, k, rt_philox_unit_(r[0], r[1]) < p ? 0.0 : rt_ld(X, dt, k) * scale);
    });
    return y;
}

} /* extern "C" */
