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
