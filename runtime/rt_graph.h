/* rt_graph.h: graph regions (graph.c) and what a target provides for them.
 * Only the runtime includes it. */
#ifndef RT_GRAPH_H
#define RT_GRAPH_H

#include "rt_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- graph.c, for the targets */
/* The target is about to wait for the device or the host is about to touch
 * device memory (a synchronisation, a copy to or from the host, a collective
 * through host memory): `what` says which ("a device-to-host copy") and the
 * runtime names the op and its line. In a region's warm-up it keeps the
 * region eager (rank 0 says why, once); during a capture it is an error
 * (the warm-up would have seen it). */
void rt_graph_host_sync(rt_ctx *ctx, const char *what);
bool rt_graph_capturing(const rt_ctx *ctx);
/* rt_reuse during a capture: whether x may be written over although the
 * region being captured holds it as an input (its only other reference is
 * the program's); the input is then noted as one the graph writes */
bool rt_graph_capture_writable(rt_ctx *ctx, const rt_tensor *x);
/* pool.c: during a capture the buffers of the pool belong to the graph:
 * take one of cap bytes from those it freed (false: none) and keep what
 * it frees (never handed to anyone else) */
bool rt_graph_pool_take(rt_ctx *ctx, size_t cap, void **p);
bool rt_graph_pool_keep(rt_ctx *ctx, void *p, size_t cap);
/* rt_finalize: the regions' graphs and buffers */
void rt_graphs_free(rt_ctx *ctx);

/* ---- the target's (graph_cpu.c: none; cuda/graph.cu) */
/* whether this rank can capture at all (NULL) or why not */
const char *rt_target_graph_unsupported(rt_ctx *ctx);
void rt_target_capture_begin(rt_ctx *ctx);
void *rt_target_capture_end(rt_ctx *ctx); /* the graph, ready to launch */
void rt_target_graph_launch(rt_ctx *ctx, void *graph);
void rt_target_graph_free(rt_ctx *ctx, void *graph);
/* bytes from src to dst, device memory of this rank, in stream order */
void rt_target_graph_copy(rt_ctx *ctx, void *dst, const void *src, size_t bytes);
/* a region's slot table (spmdrt.h rt_hf): bytes of device memory, a pinned
 * host buffer of as many bytes (*pinned) and an event (*ev); upload, during
 * a capture: the graph's first node, which writes the table; refresh,
 * before each launch of the graph (the first included): the next launch's
 * values vals (bytes of them) into pinned and that node.  Up to
 * RT_SLOT_PARAM_BYTES the node is a kernel whose parameters are the values
 * (set on the instantiated graph, copied by the launch: the host never
 * waits); a larger table is a copy from pinned, then ev recorded, and a
 * refresh waits for the last launch's copy (a host synchronisation). */
#define RT_SLOT_PARAM_BYTES 3840
void *rt_target_slots_new(rt_ctx *ctx, size_t bytes, void **pinned, void **ev);
void rt_target_slots_free(rt_ctx *ctx, void *dev, void *pinned, void *ev, size_t bytes);
void rt_target_slots_upload(rt_ctx *ctx, void *dev, const void *pinned, void *ev, size_t bytes);
void rt_target_slots_refresh(rt_ctx *ctx, void *graph, void *dev, void *pinned, void *ev, const void *vals,
                             size_t bytes);
/* how many launches, GEMMs, copies, collectives the graph holds (-1: unknown) */
long rt_target_graph_nodes(void *graph);

#ifdef __cplusplus
}
#endif

#endif
