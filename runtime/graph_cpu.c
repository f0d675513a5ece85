/* The CPU target's side of graph regions (rt_graph.h): it has no graphs, so
 * every region runs eagerly (graph.c never captures here). */
#include <string.h>

#include "rt_graph.h"

const char *rt_target_graph_unsupported(rt_ctx *ctx)
{
    (void)ctx;
    return "the CPU target";
}

static void not_here(rt_ctx *ctx)
{
    rt_fail(ctx, "internal error: a graph operation on the CPU target");
}

void rt_target_capture_begin(rt_ctx *ctx) { not_here(ctx); }
void *rt_target_capture_end(rt_ctx *ctx)
{
    not_here(ctx);
    return NULL;
}
void rt_target_graph_launch(rt_ctx *ctx, void *graph)
{
    (void)graph;
    not_here(ctx);
}
void rt_target_graph_free(rt_ctx *ctx, void *graph)
{
    (void)ctx;
    (void)graph;
}
void rt_target_graph_copy(rt_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    memmove(dst, src, bytes);
}
long rt_target_graph_nodes(void *graph)
{
    (void)graph;
    return -1;
}

/* The operations that read a slot of a region's table on the CUDA target
 * (spmdrt.h rt_hf): here there is no capture, so no slot (d is NULL) and
 * the number is v. The simulation of the CUDA target's kernels links this
 * runtime too. */
rt_tensor *rt_binary_scalar_h(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, rt_hf s, bool scalar_left)
{
    return rt_binary_scalar(ctx, op, a, s.v, scalar_left);
}

rt_tensor *rt_randn_h(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, rt_hi seed, double std)
{
    return rt_randn(ctx, dt, l, (uint64_t)seed.v, std);
}

rt_tensor *rt_uniform_h(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, rt_hi seed, double lo, double hi)
{
    return rt_uniform(ctx, dt, l, (uint64_t)seed.v, lo, hi);
}

rt_tensor *rt_dropout_h(rt_ctx *ctx, const rt_tensor *x, double p, rt_hi seed, const rt_layout *l, rt_axes stack)
{
    return rt_dropout(ctx, x, p, seed.v, l, stack);
}

void *rt_target_slots_new(rt_ctx *ctx, size_t bytes, void **pinned, void **ev)
{
    (void)bytes;
    (void)pinned;
    (void)ev;
    not_here(ctx);
    return NULL;
}
void rt_target_slots_free(rt_ctx *ctx, void *dev, void *pinned, void *ev, size_t bytes)
{
    (void)ctx;
    (void)dev;
    (void)pinned;
    (void)ev;
    (void)bytes;
}
void rt_target_slots_upload(rt_ctx *ctx, void *dev, const void *pinned, void *ev, size_t bytes)
{
    (void)dev;
    (void)pinned;
    (void)ev;
    (void)bytes;
    not_here(ctx);
}
void rt_target_slots_refresh(rt_ctx *ctx, void *graph, void *dev, void *pinned, void *ev, const void *vals,
                             size_t bytes)
{
    (void)graph;
    (void)dev;
    (void)pinned;
    (void)ev;
    (void)vals;
    (void)bytes;
    not_here(ctx);
}
