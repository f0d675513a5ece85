/* Tensors (the core, shared by every target): dtypes, shape helpers,
 * creation, reference counting and printing. Every tensor is dense and
 * row-major; buffers come from the ctx's pool, in the target's memory. What
 * reads or writes the data is the target's (tensor_data.c on the CPU). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rt_graph.h"
#include "rt_internal.h"

size_t rt_dtype_size(rt_dtype dt)
{
    return dt == RT_F64 ? 8 : dt == RT_BF16 ? 2 : 4;
}

const char *rt_dtype_name(rt_dtype dt)
{
    switch (dt) {
    case RT_F32: return "f32";
    case RT_F64: return "f64";
    case RT_I32: return "i32";
    case RT_BF16: return "bf16";
    }
    return "?";
}

int64_t rt_numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

void rt_shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < n)
        snprintf(buf + k, n - k, ndim == 1 ? ",)" : ")");
}

int rt_norm_dim(rt_ctx *ctx, int dim, int ndim, const char *what)
{
    int d = dim < 0 ? dim + ndim : dim;
    RT_CHECK(ctx, d >= 0 && d < ndim, "%s: dim %d out of range for a %d-d tensor", what, dim,
             ndim);
    return d;
}

bool rt_same_shape(const rt_tensor *a, const rt_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

void rt_split_dims(const rt_tensor *x, int dim, int64_t *outer, int64_t *d, int64_t *inner)
{
    *outer = rt_numel_of(dim, x->shape);
    *d = x->shape[dim];
    *inner = rt_numel_of(x->ndim - dim - 1, x->shape + dim + 1);
}

void rt_check_dtype(rt_ctx *ctx, const rt_tensor *x, rt_dtype dt, const char *what)
{
    RT_CHECK(ctx, x->dtype == dt, "%s: expected %s, got %s", what, rt_dtype_name(dt),
             rt_dtype_name(x->dtype));
}

void rt_check_float(rt_ctx *ctx, const rt_tensor *x, const char *what)
{
    RT_CHECK(ctx, x->dtype != RT_I32, "%s: needs a float dtype (f32, f64, bf16), got i32", what);
}

/* ---- creation and ownership
 * A tensor made by rt_empty is allocated with its storage (one block,
 * struct owned); a view (rt_view) is a header alone over its base's
 * storage. The storage's refs is the sum of the refs of every tensor over
 * it: a header dies when its own refs reach 0, the buffer (and the block
 * holding the storage, which outlives its own header while views remain)
 * when the storage's do. */

typedef struct owned {
    rt_tensor t;
    rt_storage s;
} owned;

static owned *owner_of(rt_storage *st)
{
    return (owned *)((char *)st - offsetof(owned, s));
}

static void set_shape(rt_ctx *ctx, rt_tensor *t, rt_dtype dt, int ndim, const int64_t *shape)
{
    RT_CHECK(ctx, ndim >= 0 && ndim <= RT_MAX_DIMS, "tensor rank %d exceeds %d", ndim,
             RT_MAX_DIMS);
    t->dtype = dt;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        RT_CHECK(ctx, shape[d] >= 0, "negative size %lld in dim %d", (long long)shape[d], d);
        t->shape[d] = shape[d];
    }
    t->numel = rt_numel_of(ndim, shape);
}

rt_tensor *rt_empty(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape)
{
    owned *o = calloc(1, sizeof *o);
    RT_CHECK(ctx, o != NULL, "out of memory");
    rt_tensor *t = &o->t;
    set_shape(ctx, t, dt, ndim, shape);
    if (ctx->async) /* collectives in flight advance between kernels */
        ctx->async(ctx, RT_ASYNC_ALLOC, NULL);
    t->st = &o->s;
    t->st->base = rt_pool_alloc(ctx, (size_t)t->numel * rt_dtype_size(dt), &t->st->cap);
    t->data = t->st->base;
    t->refs = 1;
    t->st->refs = 1;
    rt_mem_born(ctx, t->st, (size_t)t->numel * rt_dtype_size(dt));
    return t;
}

rt_tensor *rt_view(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape, int64_t off)
{
    rt_tensor *v = calloc(1, sizeof *v);
    RT_CHECK(ctx, v != NULL, "out of memory");
    set_shape(ctx, v, x->dtype, ndim, shape);
    RT_CHECK(ctx, off >= 0 && off + v->numel <= x->numel,
             "internal error: a view of elements %lld..%lld of a tensor of %lld", (long long)off,
             (long long)(off + v->numel), (long long)x->numel);
    v->data = (char *)x->data + (size_t)off * rt_dtype_size(x->dtype);
    if (ctx->async) /* collectives in flight advance here too, as at the copy a view replaces */
        ctx->async(ctx, RT_ASYNC_ALLOC, NULL);
    v->refs = 1;
    v->view = true;
    v->st = x->st;
    v->st->refs++;
    ctx->prof.views += 1;
    return v;
}

rt_tensor *rt_scalar(rt_ctx *ctx, rt_dtype dt, double v)
{
    return rt_full(ctx, dt, 0, NULL, v);
}

/* host memory in and out, through the target's staging (files' way) */
rt_tensor *rt_from_host(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape, const void *data)
{
    rt_tensor *t = rt_empty(ctx, dt, ndim, shape);
    void *buf = rt_host_buffer(ctx, t);
    if (t->numel)
        memcpy(buf, data, (size_t)t->numel * rt_dtype_size(dt));
    rt_host_commit(ctx, t, buf);
    return t;
}

void rt_to_host(rt_ctx *ctx, const rt_tensor *x, void *data)
{
    rt_wait(ctx, x);
    const void *src = rt_host_view(ctx, x);
    if (x->numel)
        memcpy(data, src, (size_t)x->numel * rt_dtype_size(x->dtype));
}

rt_tensor *rt_retain(rt_tensor *x)
{
    x->refs++;
    x->st->refs++;
    return x;
}

rt_tensor *rt_reuse(rt_ctx *ctx, rt_tensor *x)
{
    ctx->prof.reuse_calls += 1;
    if (rt_writable(x) || rt_graph_capture_writable(ctx, x)) {
        ctx->prof.reuse_hits += 1;
        return rt_retain(x);
    }
    return rt_empty(ctx, x->dtype, x->ndim, x->shape);
}

/* the storage's last reference is gone: its buffer back to the pool, the
 * block holding it freed (x: the header released last, freed too) */
static void storage_dies(rt_ctx *ctx, rt_tensor *x, bool release)
{
    rt_storage *st = x->st;
    rt_mem_dies(ctx, st);
    if (release)
        rt_pool_release(ctx, st->base, st->cap);
    if (x->view)
        free(x);
    free(owner_of(st));
}

void rt_free(rt_ctx *ctx, rt_tensor *x)
{
    if (!x)
        return;
    rt_storage *st = x->st;
    st->refs--;
    if (--x->refs > 0)
        return;
    if (ctx->async) /* a collective may still write it */
        ctx->async(ctx, RT_ASYNC_SETTLE, x);
    if (st->refs > 0) { /* views of its storage (or their base) live on */
        if (x->view)
            free(x);
        return;
    }
    storage_dies(ctx, x, true);
}

void *rt_release_buffer(rt_ctx *ctx, rt_tensor *x)
{
    RT_CHECK(ctx, rt_writable(x) && !x->view && x->data == x->st->base,
             "internal error: rt_release_buffer of a shared tensor or a view");
    if (ctx->async) /* a collective may still write it */
        ctx->async(ctx, RT_ASYNC_SETTLE, x);
    void *p = x->st->base;
    storage_dies(ctx, x, false);
    return p;
}

void rt_print(rt_ctx *ctx, const char *label, const rt_tensor *x)
{
    if (ctx->rank != 0)
        return;
    if (label)
        printf("%s: ", label);
    rt_print_values(x);
    printf("\n");
    fflush(stdout);
}

