/* The CUDA target's side of graph regions (rt_graph.h, runtime/graph.c):
 * a region's capture is cudaStreamBeginCapture .. cudaStreamEndCapture on
 * the rank's stream (relaxed mode: a buffer the pool lacks is allocated with
 * cudaMalloc during it, outside stream order, and stays the program's),
 * instantiated once and launched with cudaGraphLaunch. The simulation build
 * records and replays the launches instead (sim.cpp). Collectives through
 * host memory (ranks sharing a GPU, SPMD_COLL=host, the simulation with
 * several ranks) wait for the device: their regions stay eager, and rank 0
 * says so once (graph.c). */
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "rt_graph.h"

extern "C" {

/* a replay may run argument checks (cross_entropy's targets, embedding's
 * ids): the error record is read at the next synchronisation, as after
 * their eager launches */
static void checks_pending(rt_ctx *ctx)
{
    if (ctx->tgt->err)
        ctx->tgt->err_pending = true;
}

const char *rt_target_graph_unsupported(rt_ctx *ctx)
{
    (void)ctx;
    return NULL;
}

#ifdef RT_SIM
void rt_target_capture_begin(rt_ctx *ctx)
{
    (void)ctx;
    rt_sim_capture_begin();
}

void *rt_target_capture_end(rt_ctx *ctx)
{
    (void)ctx;
    return rt_sim_capture_end();
}

/* a replay may run argument checks (cross_entropy's targets, embedding's
 * ids): the error record is read at the next synchronisation, as after
 * their eager launches */
void rt_target_graph_launch(rt_ctx *ctx, void *graph)
{
    rt_sim_graph_launch(graph);
    checks_pending(ctx);
}

void rt_target_graph_free(rt_ctx *ctx, void *graph)
{
    (void)ctx;
    rt_sim_graph_free(graph);
}

long rt_target_graph_nodes(void *graph) { return rt_sim_graph_nodes(graph); }
#else
typedef struct cuda_graph {
    cudaGraph_t graph; /* kept: its slot node names the node to set in exec */
    cudaGraphExec_t exec;
    long nodes;
    cudaGraphNode_t slot_node; /* the slot table's kernel (NULL: none, or a copy) */
} cuda_graph;

/* the slot table's values as a kernel's parameters (RT_SLOT_PARAM_BYTES,
 * with the pointer and the count within the 4 KiB every architecture
 * takes): one block copies them into the table */
struct rt_slot_params {
    unsigned char v[RT_SLOT_PARAM_BYTES];
};
static __global__ void rt_slot_fill(unsigned char *dev, unsigned int bytes, rt_slot_params p)
{
    for (unsigned int i = threadIdx.x; i < bytes; i += blockDim.x)
        dev[i] = p.v[i];
}

/* buffers cudaMalloc'd during a capture (rt_cuda_capture_alloc): freed with cudaFree */
static void **captured;
static size_t ncaptured, capcaptured;

cudaError_t rt_cuda_capture_alloc(void **p, size_t bytes)
{
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess)
        return e;
    if (ncaptured == capcaptured) {
        size_t nc = capcaptured ? 2 * capcaptured : 64;
        void **n = (void **)realloc(captured, nc * sizeof *n);
        if (!n) {
            cudaFree(*p);
            return cudaErrorMemoryAllocation;
        }
        captured = n;
        capcaptured = nc;
    }
    captured[ncaptured++] = *p;
    return cudaSuccess;
}

bool rt_cuda_capture_free(void *p)
{
    for (size_t i = 0; i < ncaptured; i++)
        if (captured[i] == p) {
            captured[i] = captured[--ncaptured];
            cudaFree(p);
            return true;
        }
    return false;
}

void rt_target_capture_begin(rt_ctx *ctx)
{
    RT_CU(ctx, cudaStreamBeginCapture((cudaStream_t)ctx->tgt->stream, cudaStreamCaptureModeRelaxed));
}

void *rt_target_capture_end(rt_ctx *ctx)
{
    cudaGraph_t g;
    RT_CU(ctx, cudaStreamEndCapture((cudaStream_t)ctx->tgt->stream, &g));
    cuda_graph *cg = (cuda_graph *)calloc(1, sizeof *cg);
    RT_CHECK(ctx, cg != NULL, "out of memory");
    size_t n = 0;
    RT_CU(ctx, cudaGraphGetNodes(g, NULL, &n));
    cg->nodes = (long)n;
    if (n) { /* the slot table's kernel, if the capture launched one */
        cudaGraphNode_t *nodes = (cudaGraphNode_t *)malloc(n * sizeof *nodes);
        RT_CHECK(ctx, nodes != NULL, "out of memory");
        RT_CU(ctx, cudaGraphGetNodes(g, nodes, &n));
        for (size_t i = 0; i < n && !cg->slot_node; i++) {
            cudaGraphNodeType t;
            RT_CU(ctx, cudaGraphNodeGetType(nodes[i], &t));
            if (t != cudaGraphNodeTypeKernel)
                continue;
            cudaKernelNodeParams kp;
            RT_CU(ctx, cudaGraphKernelNodeGetParams(nodes[i], &kp));
            if (kp.func == (void *)rt_slot_fill)
                cg->slot_node = nodes[i];
        }
        free(nodes);
    }
    RT_CU(ctx, cudaGraphInstantiateWithFlags(&cg->exec, g, 0));
    cg->graph = g;
    return cg;
}

void rt_target_graph_launch(rt_ctx *ctx, void *graph)
{
    RT_CU(ctx, cudaGraphLaunch(((cuda_graph *)graph)->exec, (cudaStream_t)ctx->tgt->stream));
    checks_pending(ctx);
}

void rt_target_graph_free(rt_ctx *ctx, void *graph)
{
    cuda_graph *cg = (cuda_graph *)graph;
    RT_CU(ctx, cudaGraphExecDestroy(cg->exec));
    RT_CU(ctx, cudaGraphDestroy(cg->graph));
    free(cg);
}

long rt_target_graph_nodes(void *graph) { return ((cuda_graph *)graph)->nodes; }
#endif

/* a region's slot table: device memory, its pinned host copy (the
 * simulation: host memory) and the upload's event */
void *rt_target_slots_new(rt_ctx *ctx, size_t bytes, void **pinned, void **ev)
{
    void *dev = rt_dev_alloc(ctx, bytes);
#ifdef RT_SIM
    *pinned = calloc(1, bytes);
    RT_CHECK(ctx, *pinned != NULL, "out of memory");
    *ev = NULL;
#else
    RT_CU(ctx, cudaMallocHost(pinned, bytes));
    memset(*pinned, 0, bytes);
    cudaEvent_t e;
    RT_CU(ctx, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    *ev = (void *)e;
#endif
    return dev;
}

void rt_target_slots_free(rt_ctx *ctx, void *dev, void *pinned, void *ev, size_t bytes)
{
    rt_dev_free(ctx, dev, bytes);
#ifdef RT_SIM
    (void)ev;
    free(pinned);
#else
    RT_CU(ctx, cudaEventDestroy((cudaEvent_t)ev));
    RT_CU(ctx, cudaFreeHost(pinned));
#endif
}

/* during a capture: the graph's first node, which writes the table: in the
 * simulation the copy of the pinned values, read when the replay runs; on
 * the GPU a kernel whose parameters are the values (set before each
 * launch, rt_target_slots_refresh) or, for a table larger than they take,
 * the copy of the pinned values and then the event the next refresh waits
 * for before it writes the pinned buffer again */
void rt_target_slots_upload(rt_ctx *ctx, void *dev, const void *pinned, void *ev, size_t bytes)
{
    rt_count_op(ctx, RT_OP_COPY);
#ifdef RT_SIM
    (void)ev;
    rt_sim_record([=]() { /* read at the replay, not now */
        rt_sim_open();
        memcpy(dev, pinned, bytes);
        rt_sim_close();
    });
#else
    cudaStream_t s = (cudaStream_t)ctx->tgt->stream;
    if (bytes <= RT_SLOT_PARAM_BYTES) {
        rt_slot_params p = {};
        memcpy(p.v, pinned, bytes); /* the capture's values: each launch's are set before it */
        rt_slot_fill<<<1, 128, 0, s>>>((unsigned char *)dev, (unsigned int)bytes, p);
        RT_CU(ctx, cudaGetLastError());
        return;
    }
    RT_CU(ctx, cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, s));
    RT_CU(ctx, cudaEventRecord((cudaEvent_t)ev, s));
#endif
}

/* before a launch of the graph: its values vals into the pinned buffer and
 * the graph's first node. A table of up to RT_SLOT_PARAM_BYTES is the slot
 * kernel's parameters, set on the instantiated graph (the launch copies
 * them: a launch in flight keeps its own), so the host never waits; a
 * larger one waits for the last launch's copy out of the pinned buffer, a
 * host synchronisation (--profile counts it in both builds). The
 * simulation's replay runs to its end when launched: nothing to wait for. */
void rt_target_slots_refresh(rt_ctx *ctx, void *graph, void *dev, void *pinned, void *ev, const void *vals,
                             size_t bytes)
{
    if (bytes > RT_SLOT_PARAM_BYTES) {
        rt_count_sync(ctx);
#ifndef RT_SIM
        RT_CU(ctx, cudaEventSynchronize((cudaEvent_t)ev));
#endif
    }
    if (pinned != vals)
        memcpy(pinned, vals, bytes);
#ifdef RT_SIM
    (void)graph;
    (void)dev;
    (void)ev;
#else
    cuda_graph *cg = (cuda_graph *)graph;
    if (bytes > RT_SLOT_PARAM_BYTES)
        return;
    RT_CHECK(ctx, cg->slot_node != NULL, "internal error: a graph region's slot table has no kernel in its graph");
    rt_slot_params p = {};
    memcpy(p.v, vals, bytes);
    unsigned char *d = (unsigned char *)dev;
    unsigned int nb = (unsigned int)bytes;
    void *args[] = {&d, &nb, &p};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)rt_slot_fill;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(128);
    kp.sharedMemBytes = 0;
    kp.kernelParams = args;
    kp.extra = NULL;
    RT_CU(ctx, cudaGraphExecKernelNodeSetParams(cg->exec, cg->slot_node, &kp));
#endif
}

void rt_target_graph_copy(rt_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    rt_dev_d2d(ctx, dst, src, bytes);
}

} /* extern "C" */
