/* The buffer pool: freed tensor buffers are kept on per-size-class free
 * lists (four classes per power of two, 64-byte aligned) and handed out
 * again, so generated code that allocates the same shapes every step stops
 * paying malloc and first-touch page faults after the first step. */
#include <stdlib.h>
#include <string.h>

#include "rt_graph.h"

/* class of a request and its capacity: 64,128,192,256, then 2^e*{5,6,7,8}/4 */
static int size_class(size_t n, size_t *cap)
{
    if (n <= 256) {
        int c = n == 0 ? 0 : (int)((n - 1) / 64);
        *cap = (size_t)(c + 1) * 64;
        return c;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^e < n <= 2^(e+1) */
    size_t base = (size_t)1 << e, step = base / 4;
    size_t q = (n - base + step - 1) / step; /* 1..4 */
    *cap = base + q * step;
    return 4 * (e - 8) + (int)q + 3;
}

void *rt_pool_alloc(rt_ctx *ctx, size_t bytes, size_t *cap)
{
    double t0 = rt_measuring(ctx) ? rt_now() : 0;
    int c = size_class(bytes, cap);
    void *p;
    if (ctx->graphs && rt_graph_pool_take(ctx, *cap, &p)) /* a graph's capture: its own buffers first */
        return p;
    bool fresh = !(c < RT_NCLASS && ctx->pool[c].n > 0);
    if (!fresh) {
        ctx->pool_cached -= *cap;
        p = ctx->pool[c].items[--ctx->pool[c].n];
    } else {
        p = rt_mem_alloc(ctx, *cap);
    }
    if (t0 > 0)
        rt_alloc_record(ctx, t0, fresh, *cap);
    return p;
}

static void keep(rt_ctx *ctx, rt_freelist *fl, void *p, size_t cap)
{
    if (fl->n == fl->cap) {
        int ncap = fl->cap ? 2 * fl->cap : 8;
        void **items = realloc(fl->items, (size_t)ncap * sizeof *items);
        if (!items) {
            rt_mem_free(ctx, p, cap);
            return;
        }
        fl->items = items;
        fl->cap = ncap;
    }
    fl->items[fl->n++] = p;
    ctx->pool_cached += cap;
}

void rt_pool_release(rt_ctx *ctx, void *p, size_t cap)
{
    if (!p)
        return;
    if (ctx->graphs && rt_graph_pool_keep(ctx, p, cap)) /* a graph's capture: the graph keeps it */
        return;
    size_t check;
    int c = size_class(cap, &check);
    if (c >= RT_NCLASS || check != cap || ctx->pool_cached + cap > ctx->pool_limit) {
        rt_mem_free(ctx, p, cap);
        return;
    }
    keep(ctx, &ctx->pool[c], p, cap);
}

/* the capacity of class c (size_class's inverse) */
static size_t class_cap(int c)
{
    if (c < 4)
        return (size_t)(c + 1) * 64;
    size_t base = (size_t)1 << (8 + (c - 4) / 4);
    return base + (size_t)((c - 4) % 4 + 1) * (base / 4);
}

void rt_pool_free_all(rt_ctx *ctx)
{
    for (int c = 0; c < RT_NCLASS; c++) {
        for (int i = 0; i < ctx->pool[c].n; i++)
            rt_mem_free(ctx, ctx->pool[c].items[i], class_cap(c));
        free(ctx->pool[c].items);
        memset(&ctx->pool[c], 0, sizeof ctx->pool[c]);
    }
    ctx->pool_cached = 0;
}
