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

void rt_cuda_contiguous_strides(int ndim, const int64_t *shape, int64_t *str)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        str[d] = s;
        s *= shape[d];
    }
}

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
    rt_cuda_contiguous_strides(ndim, shape, str);
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
    RT_CHECK(ctx, x->refs == 1, "rt_take_data: the tensor has %d references, not 1", x->refs);
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
    int64_t sh[RT_MAX_DIMS] = {0}, known = 1;
    int infer = -1;
    for (int d = 0; d < ndim; d++) {
        sh[d] = shape[d];
        if (sh[d] == -1) {
            RT_CHECK(ctx, infer < 0, "reshape: more than one -1 size");
            infer = d;
        } else {
            known *= sh[d];
        }
    }
    if (infer >= 0 && known > 0)
        sh[infer] = x->numel / known;
    char a[256], b[256];
    rt_shape_str(a, sizeof a, x->ndim, x->shape);
    rt_shape_str(b, sizeof b, ndim, sh);
    RT_CHECK(ctx, rt_numel_of(ndim, sh) == x->numel, "reshape: cannot view %s as %s", a, b);
    return dev_copy(ctx, x->dtype, ndim, sh, x->data);
}

rt_tensor *rt_permute(rt_ctx *ctx, const rt_tensor *x, const int *perm)
{
    RT_KERNEL(ctx, RT_K_COPY, "permute");
    int64_t str[RT_MAX_DIMS], sstr[RT_MAX_DIMS], shape[RT_MAX_DIMS];
    int seen = 0;
    rt_cuda_contiguous_strides(x->ndim, x->shape, str);
    for (int d = 0; d < x->ndim; d++) {
        int p = rt_norm_dim(ctx, perm[d], x->ndim, "permute");
        RT_CHECK(ctx, !(seen & (1 << p)), "permute: dim %d repeated", p);
        seen |= 1 << p;
        shape[d] = x->shape[p];
        sstr[d] = str[p];
    }
    return rt_cuda_strided_copy(ctx, x, x->ndim, shape, sstr, 0);
}

rt_tensor *rt_transpose(rt_ctx *ctx, const rt_tensor *x, int d0, int d1)
{
    int perm[RT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        perm[d] = d;
    d0 = rt_norm_dim(ctx, d0, x->ndim, "transpose");
    d1 = rt_norm_dim(ctx, d1, x->ndim, "transpose");
    perm[d0] = d1;
    perm[d1] = d0;
    return rt_permute(ctx, x, perm);
}

/* x copied into the block of y that starts at `start` along dim */
static void place(rt_ctx *ctx, rt_tensor *y, const rt_tensor *x, int dim, int64_t start)
{
    int64_t ystr[RT_MAX_DIMS], xstr[RT_MAX_DIMS];
    rt_cuda_contiguous_strides(y->ndim, y->shape, ystr);
    rt_cuda_contiguous_strides(x->ndim, x->shape, xstr);
    strided_into(ctx, y->data, start * ystr[dim], ystr, x->data, 0, xstr, x->ndim, x->shape,
                 rt_dtype_size(x->dtype));
}

rt_tensor *rt_concat(rt_ctx *ctx, int n, const rt_tensor *const *xs, int dim)
{
    RT_KERNEL(ctx, RT_K_COPY, "concat");
    RT_CHECK(ctx, n > 0, "concat: no tensors");
    const rt_tensor *x0 = xs[0];
    dim = rt_norm_dim(ctx, dim, x0->ndim, "concat");
    int64_t shape[RT_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    shape[dim] = 0;
    for (int i = 0; i < n; i++) {
        RT_CHECK(ctx, xs[i]->ndim == x0->ndim && xs[i]->dtype == x0->dtype,
                 "concat: tensor %d differs in rank or dtype", i);
        for (int d = 0; d < x0->ndim; d++)
            RT_CHECK(ctx, d == dim || xs[i]->shape[d] == x0->shape[d],
                     "concat: tensor %d has size %lld in dim %d, expected %lld", i,
                     (long long)xs[i]->shape[d], d, (long long)x0->shape[d]);
        shape[dim] += xs[i]->shape[dim];
    }
    rt_tensor *y = rt_empty(ctx, x0->dtype, x0->ndim, shape);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        place(ctx, y, xs[i], dim, at);
        at += xs[i]->shape[dim];
    }
    return y;
}

rt_tensor *rt_slice(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t start, int64_t end)
{
    RT_KERNEL(ctx, RT_K_COPY, "slice");
    dim = rt_norm_dim(ctx, dim, x->ndim, "slice");
    int64_t n = x->shape[dim];
    RT_CHECK(ctx, 0 <= start && start <= end && end <= n,
             "slice: [%lld:%lld] out of range for dim %d of size %lld", (long long)start,
             (long long)end, dim, (long long)n);
    int64_t shape[RT_MAX_DIMS], str[RT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = end - start;
    rt_cuda_contiguous_strides(x->ndim, x->shape, str);
    return rt_cuda_strided_copy(ctx, x, x->ndim, shape, str, start * str[dim]);
}

rt_tensor *rt_slice_bwd(rt_ctx *ctx, const rt_tensor *dy, int ndim, const int64_t *in_shape,
                        int dim, int64_t start)
{
    RT_KERNEL(ctx, RT_K_COPY, "slice_bwd");
    rt_tensor *dx = rt_zeros(ctx, dy->dtype, ndim, in_shape);
    dim = rt_norm_dim(ctx, dim, ndim, "slice_bwd");
    RT_CHECK(ctx, start + dy->shape[dim] <= in_shape[dim], "slice_bwd: block does not fit");
    place(ctx, dx, dy, dim, start);
    return dx;
}

rt_tensor *rt_expand(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape)
{
    RT_KERNEL(ctx, RT_K_COPY, "expand");
    RT_CHECK(ctx, ndim >= x->ndim, "expand: cannot expand a %d-d tensor to %d dims", x->ndim,
             ndim);
    int64_t str[RT_MAX_DIMS], sstr[RT_MAX_DIMS] = {0};
    rt_cuda_contiguous_strides(x->ndim, x->shape, str);
    int lead = ndim - x->ndim;
    for (int d = 0; d < x->ndim; d++) {
        int64_t s = x->shape[d], t = shape[lead + d];
        RT_CHECK(ctx, s == t || s == 1, "expand: dim %d of size %lld cannot become %lld", d,
                 (long long)s, (long long)t);
        sstr[lead + d] = s == t ? str[d] : 0;
    }
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
    RT_CHECK(ctx, x->ndim >= 1, "index: a 0-d tensor has no leading dim");
    RT_CHECK(ctx, i >= 0 && i < x->shape[0], "index %lld out of range for dim 0 of size %lld",
             (long long)i, (long long)x->shape[0]);
    int64_t inner = rt_numel_of(x->ndim - 1, x->shape + 1);
    size_t esz = rt_dtype_size(x->dtype);
    return dev_copy(ctx, x->dtype, x->ndim - 1, x->shape + 1,
                    (const char *)x->data + (size_t)(i * inner) * esz);
}

rt_tensor *rt_index_bwd(rt_ctx *ctx, const rt_tensor *dy, int ndim, const int64_t *in_shape,
                        int64_t i)
{
    RT_KERNEL(ctx, RT_K_COPY, "index_bwd");
    rt_tensor *dx = rt_zeros(ctx, dy->dtype, ndim, in_shape);
    rt_index_add_(ctx, dx, i, dy);
    return dx;
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
    RT_CHECK(ctx, acc->refs == 1, "add_: accumulator is shared (%d references)", acc->refs);
    RT_CHECK(ctx, rt_same_shape(acc, x) && acc->dtype == x->dtype,
             "add_: shapes or dtypes differ");
    add_into(ctx, acc, x, 0);
}

rt_tensor *rt_index_add(rt_ctx *ctx, rt_tensor *acc, int64_t i, const rt_tensor *x)
{
    if (acc->refs != 1) { /* copy on write */
        rt_tensor *own = rt_copy(ctx, acc);
        rt_free(ctx, acc);
        acc = own;
    }
    rt_index_add_(ctx, acc, i, x);
    return acc;
}

void rt_index_add_(rt_ctx *ctx, rt_tensor *acc, int64_t i, const rt_tensor *x)
{
    RT_KERNEL(ctx, RT_K_COPY, "index_add_");
    RT_CHECK(ctx, acc->refs == 1, "index_add_: accumulator is shared");
    RT_CHECK(ctx, acc->ndim == x->ndim + 1 && acc->dtype == x->dtype,
             "index_add_: rank or dtype mismatch");
    RT_CHECK(ctx, i >= 0 && i < acc->shape[0], "index_add_: index %lld out of range",
             (long long)i);
    for (int d = 0; d < x->ndim; d++)
        RT_CHECK(ctx, acc->shape[d + 1] == x->shape[d], "index_add_: shape mismatch in dim %d",
                 d);
    add_into(ctx, acc, x, i * x->numel);
}

} /* extern "C" */
