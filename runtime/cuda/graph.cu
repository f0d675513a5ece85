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
    cudaGraphExec_t exec;
    long nodes;
} cuda_graph;

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
    RT_CU(ctx, cudaGraphInstantiateWithFlags(&cg->exec, g, 0));
    RT_CU(ctx, cudaGraphDestroy(g));
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

/* during a capture: the copy of the pinned values to the table, the graph's
 * first node (a replay's refresh), then the event the next replay waits
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
    RT_CU(ctx, cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, s));
    RT_CU(ctx, cudaEventRecord((cudaEvent_t)ev, s));
#endif
}

/* a host synchronisation (--profile counts it in both builds): the host
 * waits until the last replay's first node has read the pinned values */
void rt_target_slots_wait(rt_ctx *ctx, void *ev)
{
    rt_count_sync(ctx);
#ifdef RT_SIM
    (void)ev; /* a replay ran to its end */
#else
    RT_CU(ctx, cudaEventSynchronize((cudaEvent_t)ev));
#endif
}

void rt_target_graph_copy(rt_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    rt_dev_d2d(ctx, dst, src, bytes);
}

} /* extern "C" */
