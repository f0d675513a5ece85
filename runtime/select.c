/* Masks and selection: iota (global indices along a dim), where (an
 * elementwise select with NumPy broadcasting of three operands) and
 * take_along_dim (PyTorch's gather along one dim), with their backwards.
 * Selection only moves elements, so where and take_along_dim copy bytes and
 * work for every dtype; only the conditions and indices are read as values.
 * The checks (and where's broadcast shape) are checks.c's, the CUDA
 * target's too; where's backward is composite.c's. */
#include <string.h>

#include "rt_cpu.h"

/* ---- iota */

rt_tensor *rt_iota(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, int dim)
{
    dim = rt_norm_dim(ctx, dim, l->ndim, "iota");
    RT_KERNEL(ctx, RT_K_COPY, "iota");
    rt_tensor *t = rt_empty(ctx, dt, l->ndim, l->local);
    int64_t outer, n, inner;
    rt_split_dims(t, dim, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < inner; i++)
                rt_set(t, (o * n + j) * inner + i, (double)(l->offset[dim] + j));
    return t;
}

/* ---- where */

/* m[i] = (c[i * sc] != 0) for a run of n <= WHERE_CHUNK elements; NaN is true */
static void where_mask(const rt_tensor *c, int64_t off, int64_t sc, int64_t n, unsigned char *m)
{
    switch (c->dtype) {
    case RT_F32: {
        const float *p = (const float *)c->data + off;
        for (int64_t i = 0; i < n; i++)
            m[i] = p[i * sc] != 0.0f;
        break;
    }
    case RT_F64: {
        const double *p = (const double *)c->data + off;
        for (int64_t i = 0; i < n; i++)
            m[i] = p[i * sc] != 0.0;
        break;
    }
    case RT_I32: {
        const int32_t *p = (const int32_t *)c->data + off;
        for (int64_t i = 0; i < n; i++)
            m[i] = p[i * sc] != 0;
        break;
    }
    case RT_BF16: {
        const uint16_t *p = (const uint16_t *)c->data + off;
        for (int64_t i = 0; i < n; i++)
            m[i] = rt_bf16_to_f32(p[i * sc]) != 0.0f;
        break;
    }
    }
}

/* y[i] = m[i] ? a[i * sa] : b[i * sb] for elements of type T (the strides
 * of a broadcast run are 0 or 1: the common pairs get loops that vectorise;
 * the choice is a bit mask, not a branch, which a causal mask's changing
 * prefix would mispredict) */
#define SEL_(T, m, x, y) ((T)((x) & (T)-(T)(m)) | (T)((y) & (T)~(T)-(T)(m)))
#define WHERE_RUN(T)                                                                       \
    static void where_run_##T(const unsigned char *m, const T *a, int64_t sa, const T *b,  \
                              int64_t sb, T *y, int64_t n)                                 \
    {                                                                                      \
        if (sa == 1 && sb == 1) {                                                          \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = SEL_(T, m[i], a[i], b[i]);                                          \
        } else if (sa == 1 && sb == 0) {                                                   \
            const T bv = b[0];                                                             \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = SEL_(T, m[i], a[i], bv);                                            \
        } else if (sa == 0 && sb == 1) {                                                   \
            const T av = a[0];                                                             \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = SEL_(T, m[i], av, b[i]);                                            \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = SEL_(T, m[i], a[i * sa], b[i * sb]);                                \
        }                                                                                  \
    }
WHERE_RUN(uint16_t)
WHERE_RUN(uint32_t)
WHERE_RUN(uint64_t)

#define WHERE_CHUNK 1024

rt_tensor *rt_where(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *a, const rt_tensor *b)
{
    rt_bshape bs = rt_where_check(ctx, c, a, b);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, "where");
    rt_tensor *y = rt_empty(ctx, a->dtype, bs.ndim, bs.shape);
    if (y->numel == 0)
        return y;
    int64_t sc[RT_MAX_DIMS], sa[RT_MAX_DIMS], sb[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
    rt_broadcast_strides(c, bs.ndim, bs.shape, sc);
    rt_broadcast_strides(a, bs.ndim, bs.shape, sa);
    rt_broadcast_strides(b, bs.ndim, bs.shape, sb);
    /* runs along the last dim (the whole tensor for 0-d), chunked for the mask */
    int last = bs.ndim - 1;
    int64_t run = bs.ndim ? bs.shape[last] : 1;
    int64_t rc = bs.ndim ? sc[last] : 0, ra = bs.ndim ? sa[last] : 0, rb = bs.ndim ? sb[last] : 0;
    size_t esz = rt_dtype_size(a->dtype);
    unsigned char m[WHERE_CHUNK];
    int64_t oc = 0, oa = 0, ob = 0;
    for (int64_t o = 0; o < y->numel; o += run) {
        for (int64_t s = 0; s < run; s += WHERE_CHUNK) {
            int64_t n = run - s < WHERE_CHUNK ? run - s : WHERE_CHUNK;
            where_mask(c, oc + s * rc, rc, n, m);
            const char *pa = (const char *)a->data + (size_t)(oa + s * ra) * esz;
            const char *pb = (const char *)b->data + (size_t)(ob + s * rb) * esz;
            char *py = (char *)y->data + (size_t)(o + s) * esz;
            if (esz == 4)
                where_run_uint32_t(m, (const uint32_t *)pa, ra, (const uint32_t *)pb, rb, (uint32_t *)py, n);
            else if (esz == 8)
                where_run_uint64_t(m, (const uint64_t *)pa, ra, (const uint64_t *)pb, rb, (uint64_t *)py, n);
            else
                where_run_uint16_t(m, (const uint16_t *)pa, ra, (const uint16_t *)pb, rb, (uint16_t *)py, n);
        }
        for (int d = last - 1; d >= 0; d--) { /* odometer over the outer dims */
            oc += sc[d];
            oa += sa[d];
            ob += sb[d];
            if (++idx[d] < bs.shape[d])
                break;
            oc -= sc[d] * bs.shape[d];
            oa -= sa[d] * bs.shape[d];
            ob -= sb[d] * bs.shape[d];
            idx[d] = 0;
        }
    }
    return y;
}

rt_tensor *rt_where_zero(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *x, bool first)
{
    rt_tensor *zero = rt_scalar(ctx, x->dtype, 0.0);
    rt_tensor *y = first ? rt_where(ctx, c, x, zero) : rt_where(ctx, c, zero, x);
    rt_free(ctx, zero);
    return y;
}

/* ---- take_along_dim: its checks and the walk over its result, which reads
 * and checks the indices, are checks.c's (both targets' own) */

typedef struct gather_copy {
    const char *x;
    char *y;
    size_t esz;
} gather_copy;

static void copy_one(void *user, int64_t i, int64_t xoff)
{
    gather_copy *g = user;
    memcpy(g->y + (size_t)i * g->esz, g->x + (size_t)xoff * g->esz, g->esz);
}

rt_tensor *rt_take_along_dim(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *idx, int dim)
{
    rt_bshape bs = rt_take_along_dim_check(ctx, x->ndim, x->shape, idx, &dim, "take_along_dim");
    RT_KERNEL(ctx, RT_K_COPY, "take_along_dim");
    rt_tensor *y = rt_empty(ctx, x->dtype, bs.ndim, bs.shape);
    gather_copy g = {x->data, y->data, rt_dtype_size(x->dtype)};
    rt_take_along_dim_walk(ctx, x->ndim, x->shape, idx, dim, &bs, copy_one, &g);
    return y;
}

typedef struct scatter_add {
    const double *dy;
    double *dx;
} scatter_add;

static void add_one(void *user, int64_t i, int64_t xoff)
{
    scatter_add *s = user;
    s->dx[xoff] += s->dy[i];
}

rt_tensor *rt_take_along_dim_bwd(rt_ctx *ctx, const rt_tensor *idx, const rt_tensor *dy,
                                 int ndim, const int64_t *x_shape, int dim)
{
    rt_bshape bs = rt_take_along_dim_bwd_check(ctx, idx, dy, ndim, x_shape, &dim);
    RT_KERNEL(ctx, RT_K_COPY, "take_along_dim_bwd");
    int64_t nx = rt_numel_of(ndim, x_shape);
    size_t cx, cy;
    double *dx = rt_scratch(ctx, nx, &cx), *dyv = rt_scratch(ctx, dy->numel, &cy);
    memset(dx, 0, (size_t)nx * sizeof *dx);
    rt_load_f64(dy, 0, dy->numel, dyv);
    scatter_add s = {dyv, dx};
    rt_take_along_dim_walk(ctx, ndim, x_shape, idx, dim, &bs, add_one, &s);
    rt_tensor *g = rt_empty(ctx, dy->dtype, ndim, x_shape);
    rt_store_f64(g, 0, nx, dx);
    rt_pool_release(ctx, dx, cx);
    rt_pool_release(ctx, dyv, cy);
    return g;
}
