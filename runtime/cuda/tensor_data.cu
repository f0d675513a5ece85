/* The CUDA target's tensor data: fills, copies between host and device,
 * element access (synchronising), printing, and the shape kernels
 * (reshape, permute, concat, slice, expand, astype, index) with their
 * backwards, all through one strided-copy kernel. The same bits as the CPU
 * target (data movement and exact conversions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"

/* rt_get, rt_set and rt_print_values take no ctx: they use the last one
 * created (one per process) */
static rt_ctx *g_ctx;

extern "C" {

void rt_cuda_set_current(rt_ctx *ctx) { g_ctx = ctx; }

/* dst[dst_off + sum idx*dstr] = src[src_off + sum idx*sstr] over shape */
static void strided_into(rt_ctx *ctx, void *dst, int64_t dst_off, const int64_t *dst_str,
                         const void *src, int64_t src_off, const int64_t *src_str, int ndim,
                         const int64_t *shape, size_t esz)
{
    rt_dshape sh = rt_dshape_of(ndim, shape), ds = rt_dshape_of(ndim, dst_str),
              ss = rt_dshape_of(ndim, src_str);
    int64_t n = rt_numel_of(ndim, shape);
    char *D = (char *)dst;
    const char *S = (const char *)src;
    rt_launch(ctx, n, [=] RT_HD(int64_t i) {
        int64_t r = i, so = src_off, dof = dst_off;
        for (int d = sh.ndim - 1; d >= 0; d--) {
            int64_t k = r % sh.s[d];
            r /= sh.s[d];
            so += k * ss.s[d];
            dof += k * ds.s[d];
        }
        if (esz == 4)
            ((uint32_t *)D)[dof] = ((const uint32_t *)S)[so];
        else if (esz == 8)
            ((uint64_t *)D)[dof] = ((const uint64_t *)S)[so];
        else
            ((uint16_t *)D)[dof] = ((const uint16_t *)S)[so];
    });
}

rt_tensor *rt_cuda_strided_copy(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape,
                                const int64_t *src_strides, int64_t src_off)
{
    rt_tensor *y = rt_empty(ctx, x->dtype, ndim, shape);
    int64_t str[RT_MAX_DIMS];
    rt_contiguous_strides(ndim, shape, str);
    strided_into(ctx, y->data, 0, str, x->data, src_off, src_strides, ndim, shape,
                 rt_dtype_size(x->dtype));
    return y;
}

/* ---- creation */

rt_tensor *rt_zeros(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape)
{
    RT_KERNEL(ctx, RT_K_COPY, "zeros");
    rt_tensor *t = rt_empty(ctx, dt, ndim, shape);
    rt_dev_memset0(ctx, t->data, (size_t)t->numel * rt_dtype_size(dt));
    return t;
}

/* one launch for up to RT_ZM_MT tensors, their pointers in the kernel's
 * parameters */
#define RT_ZM_MT 32
struct rt_zm_group {
    int n;
    void *p[RT_ZM_MT];
    int esz[RT_ZM_MT];
    int64_t off[RT_ZM_MT + 1]; /* the first byte of each, from the group's */
};

void rt_zero_multi(rt_ctx *ctx, int n, rt_tensor *const *xs)
{
    RT_KERNEL(ctx, RT_K_COPY, "zero_multi");
    rt_zero_multi_check(ctx, n, xs);
    for (int j0 = 0; j0 < n; j0 += RT_ZM_MT) {
        rt_zm_group g = {};
        g.n = n - j0 < RT_ZM_MT ? n - j0 : RT_ZM_MT;
        for (int k = 0; k < g.n; k++) {
            g.p[k] = xs[j0 + k]->data;
            g.esz[k] = (int)rt_dtype_size(xs[j0 + k]->dtype);
            g.off[k + 1] = g.off[k] + xs[j0 + k]->numel;
        }
        rt_launch(ctx, g.off[g.n], [=] RT_HD(int64_t t) { /* element t of the group's */
            int lo = rt_dev_multi_find(g.off, g.n, t);
            int64_t e = t - g.off[lo];
            if (g.esz[lo] == 8)
                ((uint64_t *)g.p[lo])[e] = 0;
            else if (g.esz[lo] == 4)
                ((uint32_t *)g.p[lo])[e] = 0;
            else
                ((uint16_t *)g.p[lo])[e] = 0;
        });
    }
}

rt_tensor *rt_full(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape, double v)
{
    RT_KERNEL(ctx, RT_K_COPY, "full");
    rt_tensor *t = rt_empty(ctx, dt, ndim, shape);
    void *p = t->data;
    rt_launch(ctx, t->numel, [=] RT_HD(int64_t i) { rt_st(p, dt, i, v); });
    return t;
}

rt_tensor *rt_from_data(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape,
                        const void *data)
{
    RT_KERNEL(ctx, RT_K_COPY, "copy");
    rt_tensor *t = rt_empty(ctx, dt, ndim, shape);
    rt_dev_h2d(ctx, t->data, data, (size_t)t->numel * rt_dtype_size(dt));
    return t;
}

static rt_tensor *dev_copy(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape,
                           const void *dev)
{
    RT_KERNEL(ctx, RT_K_COPY, "copy");
    rt_tensor *t = rt_empty(ctx, dt, ndim, shape);
    rt_dev_d2d(ctx, t->data, dev, (size_t)t->numel * rt_dtype_size(dt));
    return t;
}

rt_tensor *rt_copy(rt_ctx *ctx, const rt_tensor *x)
{
    return dev_copy(ctx, x->dtype, x->ndim, x->shape, x->data);
}

void *rt_take_data(rt_ctx *ctx, rt_tensor *x)
{
    RT_CHECK(ctx, rt_writable(x), "rt_take_data: the tensor has %d references, not 1", x->st->refs);
    size_t bytes = (size_t)x->numel * rt_dtype_size(x->dtype);
    void *p = aligned_alloc(64, bytes ? (bytes + 63) / 64 * 64 : 64);
    RT_CHECK(ctx, p != NULL, "out of memory allocating %zu bytes", bytes);
    rt_dev_d2h(ctx, p, x->data, bytes);
    rt_free(ctx, x);
    return p;
}

/* ---- element access: one element through the staging buffer */

static double get_with(rt_ctx *ctx, const rt_tensor *x, int64_t i)
{
    size_t esz = rt_dtype_size(x->dtype);
    unsigned char buf[8];
    rt_dev_d2h(ctx, buf, (const char *)x->data + (size_t)i * esz, esz);
    return rt_ld(buf, x->dtype, 0);
}

double rt_get(const rt_tensor *x, int64_t i) { return get_with(g_ctx, x, i); }

void rt_set(rt_tensor *x, int64_t i, double v)
{
    size_t esz = rt_dtype_size(x->dtype);
    unsigned char buf[8];
    rt_st(buf, x->dtype, 0, v);
    rt_dev_h2d(g_ctx, (char *)x->data + (size_t)i * esz, buf, esz);
}

double rt_item(rt_ctx *ctx, const rt_tensor *x)
{
    RT_CHECK(ctx, x->numel == 1, "item: tensor has %lld elements, expected 1",
             (long long)x->numel);
    return get_with(ctx, x, 0);
}

void rt_print_values(const rt_tensor *x)
{
    char shape[256];
    rt_shape_str(shape, sizeof shape, x->ndim, x->shape);
    printf("%s %s [", rt_dtype_name(x->dtype), shape);
    int64_t n = x->numel < 64 ? x->numel : 64;
    size_t esz = rt_dtype_size(x->dtype);
    unsigned char *h = (unsigned char *)rt_dev_staging(g_ctx, (size_t)n * esz);
    rt_dev_d2h(g_ctx, h, x->data, (size_t)n * esz);
    for (int64_t i = 0; i < n; i++)
        printf(x->dtype == RT_I32 ? "%s%.0f" : "%s%.6g", i ? ", " : "", rt_ld(h, x->dtype, i));
    printf("%s]", n < x->numel ? ", ..." : "");
}

/* ---- shape kernels */

rt_tensor *rt_reshape(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape)
{
    int64_t sh[RT_MAX_DIMS] = {0};
    rt_reshape_check(ctx, x, ndim, shape, sh);
    return rt_view(ctx, x, ndim, sh, 0);
}

/* a block of x from element off viewed (rt_view) where it starts 256-byte
 * aligned from x's: cuBLASLt's heuristic assumes its operands are (its
 * default CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), as every buffer of
 * the pool is; NULL otherwise (the caller copies) */
static rt_tensor *aligned_view(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape, int64_t off)
{
    size_t at = (size_t)((const char *)x->data - (const char *)x->st->base) + (size_t)off * rt_dtype_size(x->dtype);
    return at % 256 == 0 ? rt_view(ctx, x, ndim, shape, off) : NULL;
}

rt_tensor *rt_permute(rt_ctx *ctx, const rt_tensor *x, const int *perm)
{
    RT_KERNEL(ctx, RT_K_COPY, "permute");
    int64_t sstr[RT_MAX_DIMS], shape[RT_MAX_DIMS];
    rt_permute_check(ctx, x, perm, shape, sstr);
    return rt_cuda_strided_copy(ctx, x, x->ndim, shape, sstr, 0);
}

/* x copied into the block of y that starts at `start` along dim */
static void place(rt_ctx *ctx, rt_tensor *y, const rt_tensor *x, int dim, int64_t start)
{
    int64_t ystr[RT_MAX_DIMS], xstr[RT_MAX_DIMS];
    rt_contiguous_strides(y->ndim, y->shape, ystr);
    rt_contiguous_strides(x->ndim, x->shape, xstr);
    strided_into(ctx, y->data, start * ystr[dim], ystr, x->data, 0, xstr, x->ndim, x->shape,
                 rt_dtype_size(x->dtype));
}

rt_tensor *rt_concat(rt_ctx *ctx, int n, const rt_tensor *const *xs, int dim)
{
    RT_KERNEL(ctx, RT_K_COPY, "concat");
    int64_t shape[RT_MAX_DIMS];
    rt_concat_check(ctx, n, xs, &dim, shape);
    rt_tensor *y = rt_empty(ctx, xs[0]->dtype, xs[0]->ndim, shape);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        place(ctx, y, xs[i], dim, at);
        at += xs[i]->shape[dim];
    }
    return y;
}

/* a slice of a contiguous block (every dim before dim of size 1): a view */
rt_tensor *rt_slice(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t start, int64_t end)
{
    rt_slice_check(ctx, x, &dim, start, end);
    int64_t shape[RT_MAX_DIMS], str[RT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = end - start;
    rt_contiguous_strides(x->ndim, x->shape, str);
    if (rt_numel_of(dim, x->shape) == 1) {
        rt_tensor *v = aligned_view(ctx, x, x->ndim, shape, start * str[dim]);
        if (v)
            return v;
    }
    return rt_slice_copy(ctx, x, dim, start, end);
}

rt_tensor *rt_slice_copy(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t start, int64_t end)
{
    RT_KERNEL(ctx, RT_K_COPY, "slice");
    rt_slice_check(ctx, x, &dim, start, end);
    int64_t shape[RT_MAX_DIMS], str[RT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = end - start;
    rt_contiguous_strides(x->ndim, x->shape, str);
    return rt_cuda_strided_copy(ctx, x, x->ndim, shape, str, start * str[dim]);
}

rt_tensor *rt_slice_bwd(rt_ctx *ctx, const rt_tensor *dy, int ndim, const int64_t *in_shape,
                        int dim, int64_t start)
{
    RT_KERNEL(ctx, RT_K_COPY, "slice_bwd");
    rt_slice_bwd_check(ctx, dy, ndim, in_shape, &dim, start);
    rt_tensor *dx = rt_zeros(ctx, dy->dtype, ndim, in_shape);
    place(ctx, dx, dy, dim, start);
    return dx;
}

rt_tensor *rt_expand(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape)
{
    RT_KERNEL(ctx, RT_K_COPY, "expand");
    int64_t sstr[RT_MAX_DIMS];
    rt_expand_check(ctx, x, ndim, shape, sstr);
    return rt_cuda_strided_copy(ctx, x, ndim, shape, sstr, 0);
}

rt_tensor *rt_astype(rt_ctx *ctx, const rt_tensor *x, rt_dtype dt)
{
    RT_KERNEL(ctx, RT_K_COPY, "astype");
    if (dt == x->dtype)
        return dev_copy(ctx, dt, x->ndim, x->shape, x->data);
    rt_tensor *y = rt_empty(ctx, dt, x->ndim, x->shape);
    const void *X = x->data;
    void *Y = y->data;
    rt_dtype xt = x->dtype;
    rt_launch(ctx, x->numel, [=] RT_HD(int64_t i) { rt_st(Y, dt, i, rt_ld(X, xt, i)); });
    return y;
}

rt_tensor *rt_bf16_widen(rt_ctx *ctx, const rt_tensor *x)
{
    if (x->dtype != RT_BF16)
        return rt_retain((rt_tensor *)x);
    return rt_astype(ctx, x, RT_F32);
}

rt_tensor *rt_bf16_narrow(rt_ctx *ctx, rt_tensor *y)
{
    if (!y || y->dtype != RT_F32)
        return y;
    rt_tensor *h = rt_astype(ctx, y, RT_BF16);
    rt_free(ctx, y);
    return h;
}

rt_tensor *rt_index(rt_ctx *ctx, const rt_tensor *x, int64_t i)
{
    rt_index_check(ctx, x, i);
    int64_t inner = rt_numel_of(x->ndim - 1, x->shape + 1);
    rt_tensor *v = aligned_view(ctx, x, x->ndim - 1, x->shape + 1, i * inner);
    return v ? v : rt_index_copy(ctx, x, i);
}

rt_tensor *rt_index_copy(rt_ctx *ctx, const rt_tensor *x, int64_t i)
{
    rt_index_check(ctx, x, i);
    int64_t inner = rt_numel_of(x->ndim - 1, x->shape + 1);
    size_t esz = rt_dtype_size(x->dtype);
    return dev_copy(ctx, x->dtype, x->ndim - 1, x->shape + 1,
                    (const char *)x->data + (size_t)(i * inner) * esz);
}

/* acc[off + k] += x[k], in the dtype's arithmetic (bf16: in f32, rounded) */
static void add_into(rt_ctx *ctx, rt_tensor *acc, const rt_tensor *x, int64_t off)
{
    void *A = acc->data;
    const void *X = x->data;
    rt_dtype dt = acc->dtype;
    rt_launch(ctx, x->numel, [=] RT_HD(int64_t k) {
        if (dt == RT_F32)
            ((float *)A)[off + k] += ((const float *)X)[k];
        else if (dt == RT_F64)
            ((double *)A)[off + k] += ((const double *)X)[k];
        else if (dt == RT_I32)
            ((int32_t *)A)[off + k] += ((const int32_t *)X)[k];
        else
            rt_st(A, dt, off + k, (double)((float)rt_ld(A, dt, off + k) + (float)rt_ld(X, dt, k)));
    });
}

void rt_add_(rt_ctx *ctx, rt_tensor *acc, const rt_tensor *x)
{
    RT_KERNEL(ctx, RT_K_COPY, "add_");
    rt_add_check(ctx, acc, x);
    add_into(ctx, acc, x, 0);
}

void rt_index_add_(rt_ctx *ctx, rt_tensor *acc, int64_t i, const rt_tensor *x)
{
    RT_KERNEL(ctx, RT_K_COPY, "index_add_");
    rt_index_add_check(ctx, acc, i, x);
    add_into(ctx, acc, x, i * x->numel);
}

/* accs[k][i] += xs[k]: one launch for up to RT_IA_MT tensors, their
 * pointers in the kernel's parameters (the table a launch holds), each
 * element in its dtype's arithmetic as add_into */
#define RT_IA_MT 32
struct rt_ia_group {
    int n;
    void *a[RT_IA_MT];       /* accs[k]'s row i */
    const void *x[RT_IA_MT];
    rt_dtype dt[RT_IA_MT];
    int64_t off[RT_IA_MT + 1]; /* the first element of each, from the group's */
};

void rt_index_add_multi_(rt_ctx *ctx, int n, rt_tensor *const *accs, int64_t i,
                         const rt_tensor *const *xs)
{
    RT_KERNEL(ctx, RT_K_COPY, "index_add_multi_");
    rt_index_add_multi_check(ctx, n, accs, i, xs);
    ctx->tgt->op = "index_add_multi_";
    for (int j0 = 0; j0 < n; j0 += RT_IA_MT) {
        rt_ia_group g = {};
        g.n = n - j0 < RT_IA_MT ? n - j0 : RT_IA_MT;
        for (int k = 0; k < g.n; k++) {
            const rt_tensor *x = xs[j0 + k];
            g.dt[k] = x->dtype;
            g.a[k] = (char *)accs[j0 + k]->data + (size_t)(i * x->numel) * rt_dtype_size(x->dtype);
            g.x[k] = x->data;
            g.off[k + 1] = g.off[k] + x->numel;
        }
        rt_launch(ctx, g.off[g.n], [=] RT_HD(int64_t t) {
            int lo = rt_dev_multi_find(g.off, g.n, t); /* the tensor whose range holds t */
            int64_t e = t - g.off[lo];
            rt_dtype dt = g.dt[lo];
            void *A = g.a[lo];
            const void *X = g.x[lo];
            if (dt == RT_F32)
                ((float *)A)[e] += ((const float *)X)[e];
            else if (dt == RT_F64)
                ((double *)A)[e] += ((const double *)X)[e];
            else if (dt == RT_I32)
                ((int32_t *)A)[e] += ((const int32_t *)X)[e];
            else
                rt_st(A, dt, e, (double)((float)rt_ld(A, dt, e) + (float)rt_ld(X, dt, e)));
        });
    }
}

} /* extern "C" */
