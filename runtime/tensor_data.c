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
    RT_CHECK(ctx, x->refs == 1, "rt_take_data: the tensor has %d references, not 1", x->refs);
    if (ctx->async) /* a collective may still write it */
        ctx->async(ctx, RT_ASYNC_SETTLE, x);
    void *p = x->data;
    rt_mem_dies(ctx, x);
    free(x);
    return p;
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

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *str)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        str[d] = s;
        s *= shape[d];
    }
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
    return rt_from_data(ctx, x->dtype, ndim, sh, x->data);
}

rt_tensor *rt_permute(rt_ctx *ctx, const rt_tensor *x, const int *perm)
{
    RT_KERNEL(ctx, RT_K_COPY, "permute");
    int64_t str[RT_MAX_DIMS], sstr[RT_MAX_DIMS], shape[RT_MAX_DIMS];
    int seen = 0;
    contiguous_strides(x->ndim, x->shape, str);
    for (int d = 0; d < x->ndim; d++) {
        int p = rt_norm_dim(ctx, perm[d], x->ndim, "permute");
        RT_CHECK(ctx, !(seen & (1 << p)), "permute: dim %d repeated", p);
        seen |= 1 << p;
        shape[d] = x->shape[p];
        sstr[d] = str[p];
    }
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, shape);
    strided_copy(y->data, x->data, rt_dtype_size(x->dtype), x->ndim, shape, sstr);
    return y;
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

rt_tensor *rt_slice(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t start, int64_t end)
{
    RT_KERNEL(ctx, RT_K_COPY, "slice");
    dim = rt_norm_dim(ctx, dim, x->ndim, "slice");
    int64_t n = x->shape[dim];
    RT_CHECK(ctx, 0 <= start && start <= end && end <= n,
             "slice: [%lld:%lld] out of range for dim %d of size %lld", (long long)start,
             (long long)end, dim, (long long)n);
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
    rt_tensor *dx = rt_zeros(ctx, dy->dtype, ndim, in_shape);
    dim = rt_norm_dim(ctx, dim, ndim, "slice_bwd");
    int64_t outer, d, inner, len = dy->shape[dim];
    rt_split_dims(dx, dim, &outer, &d, &inner);
    size_t esz = rt_dtype_size(dy->dtype);
    RT_CHECK(ctx, start + len <= d, "slice_bwd: block does not fit");
    rt_copy_block((char *)dx->data + (size_t)(start * inner) * esz, dy->data, esz, outer,
                  d * inner, len * inner, len * inner);
    return dx;
}

rt_tensor *rt_expand(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape)
{
    RT_KERNEL(ctx, RT_K_COPY, "expand");
    RT_CHECK(ctx, ndim >= x->ndim, "expand: cannot expand a %d-d tensor to %d dims", x->ndim,
             ndim);
    int64_t str[RT_MAX_DIMS], sstr[RT_MAX_DIMS] = {0};
    contiguous_strides(x->ndim, x->shape, str);
    int lead = ndim - x->ndim;
    for (int d = 0; d < x->ndim; d++) {
        int64_t s = x->shape[d], t = shape[lead + d];
        RT_CHECK(ctx, s == t || s == 1, "expand: dim %d of size %lld cannot become %lld", d,
                 (long long)s, (long long)t);
        sstr[lead + d] = s == t ? str[d] : 0;
    }
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
    RT_CHECK(ctx, x->ndim >= 1, "index: a 0-d tensor has no leading dim");
    RT_CHECK(ctx, i >= 0 && i < x->shape[0], "index %lld out of range for dim 0 of size %lld",
             (long long)i, (long long)x->shape[0]);
    int64_t inner = rt_numel_of(x->ndim - 1, x->shape + 1);
    size_t esz = rt_dtype_size(x->dtype);
    return rt_from_data(ctx, x->dtype, x->ndim - 1, x->shape + 1,
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
    RT_CHECK(ctx, acc->refs == 1, "add_: accumulator is shared (%d references)", acc->refs);
    RT_CHECK(ctx, rt_same_shape(acc, x) && acc->dtype == x->dtype,
             "add_: shapes or dtypes differ");
    add_into(acc, x, 0);
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
    add_into(acc, x, i * x->numel);
}
