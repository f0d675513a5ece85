/* The CPU target's tensor data: fills, host copies, element access and
 * printing, the row helpers its kernels share, and the shape kernels
 * (reshape, permute, concat, slice, expand, astype, index) with their
 * backwards. tensor.c (the core) owns the handles. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cpu.h"

rt_tensor *rt_zeros(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape)
{
    RT_KERNEL(ctx, RT_K_COPY, "zeros");
    rt_tensor *t = rt_empty(ctx, dt, ndim, shape);
    memset(t->data, 0, (size_t)t->numel * rt_dtype_size(dt));
    return t;
}

void rt_zero_multi(rt_ctx *ctx, int n, rt_tensor *const *xs)
{
    RT_KERNEL(ctx, RT_K_COPY, "zero_multi");
    rt_zero_multi_check(ctx, n, xs);
    for (int k = 0; k < n; k++)
        memset(xs[k]->data, 0, (size_t)xs[k]->numel * rt_dtype_size(xs[k]->dtype));
}

rt_tensor *rt_full(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape, double v)
{
    RT_KERNEL(ctx, RT_K_COPY, "full");
    rt_tensor *t = rt_empty(ctx, dt, ndim, shape);
    if (v == 0.0 && !signbit(v)) {
        memset(t->data, 0, (size_t)t->numel * rt_dtype_size(dt));
    } else if (dt == RT_F32) {
        float *p = t->data;
        for (int64_t i = 0; i < t->numel; i++)
            p[i] = (float)v;
    } else if (dt == RT_F64) {
        double *p = t->data;
        for (int64_t i = 0; i < t->numel; i++)
            p[i] = v;
    } else if (dt == RT_BF16) {
        uint16_t *p = t->data, h = rt_f32_to_bf16((float)v);
        for (int64_t i = 0; i < t->numel; i++)
            p[i] = h;
    } else {
        for (int64_t i = 0; i < t->numel; i++)
            rt_set(t, i, v);
    }
    return t;
}

rt_tensor *rt_from_data(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape,
                        const void *data)
{
    RT_KERNEL(ctx, RT_K_COPY, "copy");
    rt_tensor *t = rt_empty(ctx, dt, ndim, shape);
    memcpy(t->data, data, (size_t)t->numel * rt_dtype_size(dt));
    return t;
}

rt_tensor *rt_copy(rt_ctx *ctx, const rt_tensor *x)
{
    return rt_from_data(ctx, x->dtype, x->ndim, x->shape, x->data);
}

void *rt_take_data(rt_ctx *ctx, rt_tensor *x)
{
    RT_CHECK(ctx, rt_writable(x), "rt_take_data: the tensor has %d references, not 1", x->st->refs);
    if (x->view || x->data != x->st->base) { /* a view: its elements in a buffer of their own */
        size_t bytes = (size_t)x->numel * rt_dtype_size(x->dtype);
        void *p = aligned_alloc(64, bytes ? (bytes + 63) / 64 * 64 : 64);
        RT_CHECK(ctx, p != NULL, "out of memory allocating %zu bytes", bytes);
        rt_wait(ctx, x);
        memcpy(p, x->data, bytes);
        rt_free(ctx, x);
        return p;
    }
    return rt_release_buffer(ctx, x);
}

double rt_get(const rt_tensor *x, int64_t i)
{
    switch (x->dtype) {
    case RT_F32: return ((const float *)x->data)[i];
    case RT_F64: return ((const double *)x->data)[i];
    case RT_I32: return ((const int32_t *)x->data)[i];
    case RT_BF16: return rt_bf16_to_f32(((const uint16_t *)x->data)[i]);
    }
    return 0;
}

void rt_set(rt_tensor *x, int64_t i, double v)
{
    switch (x->dtype) {
    case RT_F32: ((float *)x->data)[i] = (float)v; break;
    case RT_F64: ((double *)x->data)[i] = v; break;
    case RT_I32: ((int32_t *)x->data)[i] = (int32_t)v; break;
    case RT_BF16: ((uint16_t *)x->data)[i] = rt_f32_to_bf16((float)v); break;
    }
}

double rt_item(rt_ctx *ctx, const rt_tensor *x)
{
    RT_CHECK(ctx, x->numel == 1, "item: tensor has %lld elements, expected 1",
             (long long)x->numel);
    return rt_get(x, 0);
}

void rt_print_values(const rt_tensor *x)
{
    char shape[256];
    rt_shape_str(shape, sizeof shape, x->ndim, x->shape);
    printf("%s %s [", rt_dtype_name(x->dtype), shape);
    int64_t n = x->numel < 64 ? x->numel : 64;
    for (int64_t i = 0; i < n; i++)
        printf(x->dtype == RT_I32 ? "%s%.0f" : "%s%.6g", i ? ", " : "", rt_get(x, i));
    printf("%s]", n < x->numel ? ", ..." : "");
}

void rt_load_f64(const rt_tensor *x, int64_t off, int64_t n, double *out)
{
    switch (x->dtype) {
    case RT_F32: for (int64_t i = 0; i < n; i++) out[i] = ((const float *)x->data)[off + i]; break;
    case RT_F64: memcpy(out, (const double *)x->data + off, (size_t)n * sizeof *out); break;
    case RT_I32: for (int64_t i = 0; i < n; i++) out[i] = ((const int32_t *)x->data)[off + i]; break;
    case RT_BF16:
        for (int64_t i = 0; i < n; i++) out[i] = rt_bf16_to_f32(((const uint16_t *)x->data)[off + i]);
        break;
    }
}

void rt_store_f64(rt_tensor *x, int64_t off, int64_t n, const double *in)
{
    switch (x->dtype) {
    case RT_F32: for (int64_t i = 0; i < n; i++) ((float *)x->data)[off + i] = (float)in[i]; break;
    case RT_F64: memcpy((double *)x->data + off, in, (size_t)n * sizeof *in); break;
    case RT_I32: for (int64_t i = 0; i < n; i++) ((int32_t *)x->data)[off + i] = (int32_t)in[i]; break;
    case RT_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)x->data)[off + i] = rt_f32_to_bf16((float)in[i]);
        break;
    }
}

RT_WIDEST_EXTERN void rt_load_rows_t(const rt_tensor *x, int64_t row0, int64_t n, int64_t d, double *out)
{
    if (x->dtype == RT_F32 && n == RT_LANES) { /* a whole group: column by column */
        const float *p = (const float *)x->data + row0 * d;
        for (int64_t j = 0; j < d; j++)
            for (int r = 0; r < RT_LANES; r++)
                out[j * RT_LANES + r] = p[r * d + j];
        return;
    }
    for (int64_t r = 0; r < RT_LANES; r++) {
        if (r >= n) {
            for (int64_t j = 0; j < d; j++)
                out[j * RT_LANES + r] = 0.0;
            continue;
        }
        int64_t off = (row0 + r) * d;
        switch (x->dtype) {
        case RT_F32: {
            const float *p = (const float *)x->data + off;
            for (int64_t j = 0; j < d; j++)
                out[j * RT_LANES + r] = p[j];
            break;
        }
        case RT_F64: {
            const double *p = (const double *)x->data + off;
            for (int64_t j = 0; j < d; j++)
                out[j * RT_LANES + r] = p[j];
            break;
        }
        case RT_I32: {
            const int32_t *p = (const int32_t *)x->data + off;
            for (int64_t j = 0; j < d; j++)
                out[j * RT_LANES + r] = p[j];
            break;
        }
        case RT_BF16: {
            const uint16_t *p = (const uint16_t *)x->data + off;
            for (int64_t j = 0; j < d; j++)
                out[j * RT_LANES + r] = rt_bf16_to_f32(p[j]);
            break;
        }
        }
    }
}

RT_WIDEST_EXTERN void rt_store_rows_t(rt_tensor *x, int64_t row0, int64_t n, int64_t d, const double *in)
{
    if (x->dtype == RT_F32 && n == RT_LANES) {
        float *p = (float *)x->data + row0 * d;
        for (int64_t j = 0; j < d; j++)
            for (int r = 0; r < RT_LANES; r++)
                p[r * d + j] = (float)in[j * RT_LANES + r];
        return;
    }
    for (int64_t r = 0; r < n; r++) {
        int64_t off = (row0 + r) * d;
        switch (x->dtype) {
        case RT_F32: {
            float *p = (float *)x->data + off;
            for (int64_t j = 0; j < d; j++)
                p[j] = (float)in[j * RT_LANES + r];
            break;
        }
        case RT_F64: {
            double *p = (double *)x->data + off;
            for (int64_t j = 0; j < d; j++)
                p[j] = in[j * RT_LANES + r];
            break;
        }
        case RT_I32: {
            int32_t *p = (int32_t *)x->data + off;
            for (int64_t j = 0; j < d; j++)
                p[j] = (int32_t)in[j * RT_LANES + r];
            break;
        }
        case RT_BF16: {
            uint16_t *p = (uint16_t *)x->data + off;
            for (int64_t j = 0; j < d; j++)
                p[j] = rt_f32_to_bf16((float)in[j * RT_LANES + r]);
            break;
        }
        }
    }
}

double *rt_scratch(rt_ctx *ctx, int64_t n, size_t *cap)
{
    return rt_pool_alloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof(double), cap);
}

/* ---- copy engines */

void rt_copy_block(void *dst, const void *src, size_t esz, int64_t outer, int64_t dst_stride,
                   int64_t src_stride, int64_t run)
{
    char *d = dst;
    const char *s = src;
    for (int64_t o = 0; o < outer; o++)
        memcpy(d + (size_t)(o * dst_stride) * esz, s + (size_t)(o * src_stride) * esz,
               (size_t)run * esz);
}

/* dst (contiguous, shape) <- src at element strides sstr (0 = broadcast) */
static void strided_copy(void *dst, const void *src, size_t esz, int ndim,
                         const int64_t *shape, const int64_t *sstr)
{
    int64_t n = rt_numel_of(ndim, shape);
    if (n == 0)
        return;
    if (ndim == 0) {
        memcpy(dst, src, esz);
        return;
    }
    int64_t idx[RT_MAX_DIMS] = {0}, last = shape[ndim - 1], ls = sstr[ndim - 1];
    int64_t soff = 0;
    char *d = dst;
    const char *s = src;
    for (int64_t o = 0; o < n; o += last) {
        if (ls == 1)
            memcpy(d + (size_t)o * esz, s + (size_t)soff * esz, (size_t)last * esz);
        else if (esz == 4)
            for (int64_t j = 0; j < last; j++)
                ((uint32_t *)d)[o + j] = ((const uint32_t *)s)[soff + j * ls];
        else if (esz == 2)
            for (int64_t j = 0; j < last; j++)
                ((uint16_t *)d)[o + j] = ((const uint16_t *)s)[soff + j * ls];
        else
            for (int64_t j = 0; j < last; j++)
                ((uint64_t *)d)[o + j] = ((const uint64_t *)s)[soff + j * ls];
        for (int k = ndim - 2; k >= 0; k--) { /* odometer over the outer dims */
            soff += sstr[k];
            if (++idx[k] < shape[k])
                break;
            soff -= sstr[k] * shape[k];
            idx[k] = 0;
        }
    }
}

/* ---- shape kernels */

rt_tensor *rt_reshape(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape)
{
    int64_t sh[RT_MAX_DIMS] = {0};
    rt_reshape_check(ctx, x, ndim, shape, sh);
    return rt_view(ctx, x, ndim, sh, 0);
}

rt_tensor *rt_permute(rt_ctx *ctx, const rt_tensor *x, const int *perm)
{
    RT_KERNEL(ctx, RT_K_COPY, "permute");
    int64_t sstr[RT_MAX_DIMS], shape[RT_MAX_DIMS];
    rt_permute_check(ctx, x, perm, shape, sstr);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, shape);
    strided_copy(y->data, x->data, rt_dtype_size(x->dtype), x->ndim, shape, sstr);
    return y;
}

rt_tensor *rt_concat(rt_ctx *ctx, int n, const rt_tensor *const *xs, int dim)
{
    RT_KERNEL(ctx, RT_K_COPY, "concat");
    int64_t shape[RT_MAX_DIMS];
    rt_concat_check(ctx, n, xs, &dim, shape);
    rt_tensor *y = rt_empty(ctx, xs[0]->dtype, xs[0]->ndim, shape);
    int64_t outer, total, inner, at = 0;
    rt_split_dims(y, dim, &outer, &total, &inner);
    size_t esz = rt_dtype_size(y->dtype);
    for (int i = 0; i < n; i++) {
        int64_t run = xs[i]->shape[dim] * inner;
        rt_copy_block((char *)y->data + (size_t)at * esz, xs[i]->data, esz, outer,
                      total * inner, run, run);
        at += run;
    }
    return y;
}

/* a slice of a contiguous block (every dim before dim of size 1): a view */
rt_tensor *rt_slice(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t start, int64_t end)
{
    rt_slice_check(ctx, x, &dim, start, end);
    int64_t shape[RT_MAX_DIMS], outer, d, inner;
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = end - start;
    rt_split_dims(x, dim, &outer, &d, &inner);
    if (outer == 1)
        return rt_view(ctx, x, x->ndim, shape, start * inner);
    return rt_slice_copy(ctx, x, dim, start, end);
}

rt_tensor *rt_slice_copy(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t start, int64_t end)
{
    RT_KERNEL(ctx, RT_K_COPY, "slice");
    rt_slice_check(ctx, x, &dim, start, end);
    int64_t shape[RT_MAX_DIMS], outer, d, inner;
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = end - start;
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, shape);
    rt_split_dims(x, dim, &outer, &d, &inner);
    size_t esz = rt_dtype_size(x->dtype);
    rt_copy_block(y->data, (const char *)x->data + (size_t)(start * inner) * esz, esz, outer,
                  (end - start) * inner, d * inner, (end - start) * inner);
    return y;
}

rt_tensor *rt_slice_bwd(rt_ctx *ctx, const rt_tensor *dy, int ndim, const int64_t *in_shape,
                        int dim, int64_t start)
{
    RT_KERNEL(ctx, RT_K_COPY, "slice_bwd");
    rt_slice_bwd_check(ctx, dy, ndim, in_shape, &dim, start);
    rt_tensor *dx = rt_zeros(ctx, dy->dtype, ndim, in_shape);
    int64_t outer, d, inner, len = dy->shape[dim];
    rt_split_dims(dx, dim, &outer, &d, &inner);
    size_t esz = rt_dtype_size(dy->dtype);
    rt_copy_block((char *)dx->data + (size_t)(start * inner) * esz, dy->data, esz, outer,
                  d * inner, len * inner, len * inner);
    return dx;
}

rt_tensor *rt_expand(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape)
{
    RT_KERNEL(ctx, RT_K_COPY, "expand");
    int64_t sstr[RT_MAX_DIMS];
    rt_expand_check(ctx, x, ndim, shape, sstr);
    rt_tensor *y = rt_empty(ctx, x->dtype, ndim, shape);
    strided_copy(y->data, x->data, rt_dtype_size(x->dtype), ndim, shape, sstr);
    return y;
}

rt_tensor *rt_astype(rt_ctx *ctx, const rt_tensor *x, rt_dtype dt)
{
    RT_KERNEL(ctx, RT_K_COPY, "astype");
    rt_tensor *y = rt_empty(ctx, dt, x->ndim, x->shape);
    if (dt == x->dtype) {
        memcpy(y->data, x->data, (size_t)x->numel * rt_dtype_size(dt));
        return y;
    }
    if (x->dtype == RT_F32 && dt == RT_BF16) {
        rt_bf16_from_f32_n(y->data, x->data, x->numel);
        return y;
    }
    if (x->dtype == RT_BF16 && dt == RT_F32) {
        rt_bf16_to_f32_n(y->data, x->data, x->numel);
        return y;
    }
    for (int64_t i = 0; i < x->numel; i++)
        rt_set(y, i, rt_get(x, i));
    return y;
}

rt_tensor *rt_index(rt_ctx *ctx, const rt_tensor *x, int64_t i)
{
    rt_index_check(ctx, x, i);
    int64_t inner = rt_numel_of(x->ndim - 1, x->shape + 1);
    return rt_view(ctx, x, x->ndim - 1, x->shape + 1, i * inner);
}

rt_tensor *rt_index_copy(rt_ctx *ctx, const rt_tensor *x, int64_t i)
{
    rt_index_check(ctx, x, i);
    int64_t inner = rt_numel_of(x->ndim - 1, x->shape + 1);
    size_t esz = rt_dtype_size(x->dtype);
    return rt_from_data(ctx, x->dtype, x->ndim - 1, x->shape + 1,
                        (const char *)x->data + (size_t)(i * inner) * esz);
}

#define ADD_INTO(T, acc, x, off, n)                          \
    for (int64_t k = 0; k < (n); k++)                        \
        ((T *)(acc)->data)[(off) + k] += ((const T *)(x)->data)[k]

static void add_into(rt_tensor *acc, const rt_tensor *x, int64_t off)
{
    switch (acc->dtype) {
    case RT_F32: ADD_INTO(float, acc, x, off, x->numel); break;
    case RT_F64: ADD_INTO(double, acc, x, off, x->numel); break;
    case RT_I32: ADD_INTO(int32_t, acc, x, off, x->numel); break;
    case RT_BF16: rt_bf16_add_n((uint16_t *)acc->data + off, x->data, x->numel); break;
    }
}

void rt_add_(rt_ctx *ctx, rt_tensor *acc, const rt_tensor *x)
{
    RT_KERNEL(ctx, RT_K_COPY, "add_");
    rt_add_check(ctx, acc, x);
    add_into(acc, x, 0);
}

void rt_index_add_(rt_ctx *ctx, rt_tensor *acc, int64_t i, const rt_tensor *x)
{
    RT_KERNEL(ctx, RT_K_COPY, "index_add_");
    rt_index_add_check(ctx, acc, i, x);
    add_into(acc, x, i * x->numel);
}

void rt_index_add_multi_(rt_ctx *ctx, int n, rt_tensor *const *accs, int64_t i,
                         const rt_tensor *const *xs)
{
    RT_KERNEL(ctx, RT_K_COPY, "index_add_multi_");
    rt_index_add_multi_check(ctx, n, accs, i, xs);
    for (int k = 0; k < n; k++)
        add_into(accs[k], xs[k], i * xs[k]->numel);
}
