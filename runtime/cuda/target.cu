/* The CUDA target's state, device memory and error checks. Compiled by
 * nvcc for libspmdrt_cuda and, with RT_SIM, by the host C++ compiler for
 * the simulation build (the device is then host memory in guarded
 * mappings, see sim.cpp). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "rt_graph.h"

#ifndef RT_SIM
#include <cublasLt.h>

#include "spmdrt_kernels.h" /* the ABI of spmdc's generated kernels (checked here) */
#endif

extern "C" {

void rt_dev_fail(rt_ctx *ctx, const char *what, const char *msg)
{
    /* rt_fail puts the .spmd line being run (rt_at) and its calls before it */
    const char *op = ctx && ctx->tgt && ctx->tgt->op ? ctx->tgt->op : NULL;
    if (op)
        rt_fail(ctx, "%s: %s: %s", op, what, msg);
    rt_fail(ctx, "%s: %s", what, msg);
}

void rt_cu_check_(rt_ctx *ctx, int err, const char *call, const char *file, int line)
{
    if (err == 0)
        return;
    char what[512];
    snprintf(what, sizeof what, "%s (%s:%d)", call, file, line);
#ifdef RT_SIM
    rt_dev_fail(ctx, what, "failed");
#else
    rt_dev_fail(ctx, what, cudaGetErrorString((cudaError_t)err));
#endif
}

/* ---- the device this rank uses: (rank on its node) mod (GPUs on the node) */

static int local_rank(const rt_ctx *ctx)
{
    const char *e = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!e)
        e = getenv("MPI_LOCALRANKID");
    if (!e)
        e = getenv("SLURM_LOCALID");
    return e ? atoi(e) : ctx->rank;
}

#ifdef RT_SIM
void *rt_sim_map(size_t bytes);       /* sim.cpp */
void rt_sim_unmap(void *p, size_t bytes);
#endif

static void dev_ready(rt_ctx *ctx)
{
    rt_target *t = ctx->tgt;
    if (t->stream)
        return;
#ifdef RT_SIM
    t->stream = (void *)t; /* the simulated device has one stream: the host */
    (void)local_rank;
#else
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        rt_fail(ctx, "no CUDA device%s%s%s", e != cudaSuccess ? " (" : "",
                e != cudaSuccess ? cudaGetErrorString(e) : "", e != cudaSuccess ? ")" : "");
    t->device = local_rank(ctx) % n;
    RT_CU(ctx, cudaSetDevice(t->device));
    cudaStream_t s;
    RT_CU(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    t->stream = (void *)s;
    /* cudaMallocAsync's pool keeps what is freed across synchronisations
     * (by default it gives memory back to the driver at each one, and the
     * next allocations map it again) */
    cudaMemPool_t pool;
    RT_CU(ctx, cudaDeviceGetDefaultMemPool(&pool, t->device));
    uint64_t keep = UINT64_MAX;
    RT_CU(ctx, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
#endif
    /* rt_launch_last's block counter (dev.h), zero between launches: with
     * the stream, so never during a graph's capture, and not a counted
     * operation */
#ifdef RT_SIM
    t->ticket = (unsigned *)rt_sim_map(sizeof(unsigned));
    if (!t->ticket)
        rt_dev_fail(ctx, "allocation", "out of device memory for the block counter");
    rt_sim_open();
    *t->ticket = 0;
    rt_sim_close();
#else
    RT_CU(ctx, cudaMalloc((void **)&t->ticket, sizeof(unsigned)));
    RT_CU(ctx, cudaMemsetAsync(t->ticket, 0, sizeof(unsigned), s));
#endif
}

/* ---- --profile's device timer (rt_prof's dev_begin, dev_end, dev_flush):
 * an event on the stream at the start and at the end of each outermost
 * kernel span (an op: its launches, GEMMs, copies), the pair queued with
 * its kind and region; at each rt_dev_sync (the events are then done), when
 * 4096 are queued, and before the profile prints, the queued pairs' times
 * go to the kinds and regions (rt_prof_device_time). The GPU build: CUDA
 * events (cudaEventElapsedTime), so a kind's time is the device's, not the
 * host's around asynchronous launches. The simulation keeps the host's
 * clock: its "event" is rt_now() less the allocation time so far (a
 * simulated launch runs when called, so the span's host time less its
 * allocations, as on the CPU target), through the same queue. During a
 * graph capture nothing is timed on the device (an event recorded into a
 * capture marks no time): the span keeps its host time. Collectives (the
 * time blocked) and file I/O keep the host's. */
struct rt_dev_span {
    void *e0, *e1;
    int kind, region;
};

static void *tm_event(rt_ctx *ctx)
{
    rt_target *t = ctx->tgt;
    if (t->tm_nfree)
        return t->tm_free[--t->tm_nfree];
#ifdef RT_SIM
    double *e = (double *)malloc(sizeof *e);
    RT_CHECK(ctx, e != NULL, "out of memory for the profile");
    return e;
#else
    cudaEvent_t e;
    RT_CU(ctx, cudaEventCreate(&e));
    return (void *)e;
#endif
}

static void tm_record(rt_ctx *ctx, void *e)
{
#ifdef RT_SIM
    *(double *)e = rt_now() - ctx->prof.alloc_s;
#else
    RT_CU(ctx, cudaEventRecord((cudaEvent_t)e, (cudaStream_t)ctx->tgt->stream));
#endif
}

static void tm_release(rt_ctx *ctx, void *e)
{
    rt_target *t = ctx->tgt;
    if (t->tm_nfree == t->tm_capfree) {
        int cap = t->tm_capfree ? 2 * t->tm_capfree : 64;
        void **n = (void **)realloc(t->tm_free, (size_t)cap * sizeof *n);
        RT_CHECK(ctx, n != NULL, "out of memory for the profile");
        t->tm_free = n;
        t->tm_capfree = cap;
    }
    t->tm_free[t->tm_nfree++] = e;
}

static void tm_flush(rt_ctx *ctx)
{
    rt_target *t = ctx->tgt;
    if (!t || t->tm_n == 0)
        return;
#ifndef RT_SIM
    /* the last span's end: every queued event is done after it (one stream) */
    RT_CU(ctx, cudaEventSynchronize((cudaEvent_t)t->tm_q[t->tm_n - 1].e1));
#endif
    for (int i = 0; i < t->tm_n; i++) {
        rt_dev_span *s = &t->tm_q[i];
#ifdef RT_SIM
        double sec = *(double *)s->e1 - *(double *)s->e0;
#else
        float ms = 0;
        RT_CU(ctx, cudaEventElapsedTime(&ms, (cudaEvent_t)s->e0, (cudaEvent_t)s->e1));
        double sec = ms / 1e3;
#endif
        rt_prof_device_time(ctx, s->kind, s->region, sec);
        tm_release(ctx, s->e0);
        tm_release(ctx, s->e1);
    }
    t->tm_n = 0;
}

static void tm_begin(rt_ctx *ctx)
{
    rt_target *t = ctx->tgt;
    if (t->tm_open) /* a span left open (an error's exit): drop it */
        tm_release(ctx, t->tm_open);
    t->tm_open = NULL;
    if (!t->stream || rt_graph_capturing(ctx))
        return;
    t->tm_open = tm_event(ctx);
    tm_record(ctx, t->tm_open);
}

static bool tm_end(rt_ctx *ctx, int kind, int region)
{
    rt_target *t = ctx->tgt;
    void *e0 = t->tm_open;
    t->tm_open = NULL;
    if (!e0)
        return false;
    if (kind < 0 || rt_graph_capturing(ctx)) {
        tm_release(ctx, e0);
        return false;
    }
    void *e1 = tm_event(ctx);
    tm_record(ctx, e1);
    if (t->tm_n == t->tm_cap) {
        int cap = t->tm_cap ? 2 * t->tm_cap : 256;
        rt_dev_span *n = (rt_dev_span *)realloc(t->tm_q, (size_t)cap * sizeof *n);
        RT_CHECK(ctx, n != NULL, "out of memory for the profile");
        t->tm_q = n;
        t->tm_cap = cap;
    }
    t->tm_q[t->tm_n++] = rt_dev_span{e0, e1, kind, region};
    if (t->tm_n >= 4096) /* the profiler's own wait (not counted as the program's) */
        tm_flush(ctx);
    return true;
}

static void tm_free_all(rt_ctx *ctx)
{
    rt_target *t = ctx->tgt;
    tm_flush(ctx);
    if (t->tm_open)
        tm_release(ctx, t->tm_open);
    t->tm_open = NULL;
    for (int i = 0; i < t->tm_nfree; i++) {
#ifdef RT_SIM
        free(t->tm_free[i]);
#else
        cudaEventDestroy((cudaEvent_t)t->tm_free[i]);
#endif
    }
    free(t->tm_free);
    free(t->tm_q);
    t->tm_free = NULL;
    t->tm_q = NULL;
    t->tm_nfree = t->tm_capfree = t->tm_n = t->tm_cap = 0;
}

void rt_cuda_set_current(rt_ctx *ctx); /* tensor_data.cu */

void rt_target_new(rt_ctx *ctx)
{
    ctx->tgt = (rt_target *)calloc(1, sizeof *ctx->tgt);
    if (!ctx->tgt) {
        fprintf(stderr, "spmd: error: out of memory\n");
        exit(1);
    }
    ctx->prof.counts_launches = true; /* rt_count_op at each launch, copy, GEMM */
    ctx->prof.dev_begin = tm_begin;   /* --profile: kernel spans timed on the device */
    ctx->prof.dev_end = tm_end;
    ctx->prof.dev_flush = tm_flush;
    rt_cuda_set_current(ctx);
}

void rt_cuda_comm_setup(rt_ctx *ctx); /* collectives.cu */
void rt_cuda_comm_free(rt_ctx *ctx);
void rt_cuda_gemm_free(rt_ctx *ctx);  /* gemm.cu */

void rt_target_setup(rt_ctx *ctx)
{
    dev_ready(ctx); /* a machine without a GPU stops here, on every rank */
    rt_cuda_comm_setup(ctx);
}

void rt_target_free(rt_ctx *ctx)
{
    rt_target *t = ctx->tgt;
    if (!t)
        return;
    if (t->stream)
        rt_dev_sync(ctx); /* NCCL's work done before its communicators go */
    rt_cuda_comm_free(ctx);
    rt_cuda_gemm_free(ctx);
    tm_free_all(ctx);
    ctx->prof.dev_begin = NULL;
    ctx->prof.dev_end = NULL;
    ctx->prof.dev_flush = NULL;
    if (t->stream) {
        if (t->err)
            rt_dev_free(ctx, t->err, RT_DEVERR_WORDS * sizeof(int64_t));
#ifdef RT_SIM
        rt_sim_unmap(t->ticket, sizeof(unsigned));
#else
        cudaFree(t->ticket);
#endif
#ifndef RT_SIM
        if (t->pinned)
            cudaFreeHost(t->pinned);
        if (t->up)
            cudaFreeHost(t->up);
        for (int h = 0; h < 2; h++)
            if (t->up_ev[h])
                cudaEventDestroy((cudaEvent_t)t->up_ev[h]);
        if (t->err_host)
            cudaFreeHost(t->err_host);
        cudaStreamDestroy((cudaStream_t)t->stream);
#endif
    }
#ifdef RT_SIM
    free(t->pinned);
    free(t->up);
    free(t->err_host);
#endif
    free(t);
    ctx->tgt = NULL;
}

const char *rt_target_label(const rt_ctx *ctx, char *buf, size_t n)
{
    snprintf(buf, n, "CUDA device %d", ctx->tgt->device);
    return buf;
}

/* ---- memory */

void *rt_mem_alloc(rt_ctx *ctx, size_t cap) { return rt_dev_alloc(ctx, cap); }
void rt_mem_free(rt_ctx *ctx, void *p, size_t cap) { rt_dev_free(ctx, p, cap); }

void *rt_dev_alloc(rt_ctx *ctx, size_t bytes)
{
    dev_ready(ctx);
    void *p = NULL;
#ifdef RT_SIM
    p = rt_sim_map(bytes);
    if (!p)
#else
    /* a graph's capture (graph.cu): not stream-ordered, so that the buffer
     * is the program's (relaxed capture allows it) */
    cudaError_t e = rt_graph_capturing(ctx) ? rt_cuda_capture_alloc(&p, bytes ? bytes : 1)
                                            : cudaMallocAsync(&p, bytes ? bytes : 1, (cudaStream_t)ctx->tgt->stream);
    if (e == cudaErrorMemoryAllocation)
#endif
    {
        char msg[160];
        snprintf(msg, sizeof msg, "out of device memory allocating %zu bytes (%zu bytes in use)",
                 bytes, ctx->tgt->bytes_in_use);
        rt_dev_fail(ctx, "allocation", msg);
    }
#ifndef RT_SIM
    RT_CU(ctx, e);
#endif
    ctx->tgt->bytes_in_use += bytes;
    return p;
}

void rt_dev_free(rt_ctx *ctx, void *p, size_t bytes)
{
    if (!p)
        return;
    ctx->tgt->bytes_in_use -= bytes;
#ifdef RT_SIM
    if (rt_graph_capturing(ctx)) /* not reached: the pool keeps what a capture frees */
        rt_fail(ctx, "internal error: a device buffer freed during a graph capture");
    rt_sim_unmap(p, bytes);
#else
    if (rt_graph_capturing(ctx))
        rt_fail(ctx, "internal error: a device buffer freed during a graph capture");
    if (!rt_cuda_capture_free(p))
        RT_CU(ctx, cudaFreeAsync(p, (cudaStream_t)ctx->tgt->stream));
#endif
}

/* a copy on the stream (the simulation: with the device mappings open);
 * d2h then waits (the host reads dst; a device error surfaces here), as
 * the GPU's does in the simulation also */
typedef enum { COPY_H2D, COPY_D2H, COPY_D2D } copy_kind;

/* a wait for the device (graph.c: keeps a region's warm-up eager, an error
 * in a capture), named with the op being run */
void rt_dev_host_sync(rt_ctx *ctx, const char *what)
{
    if (!ctx->graphs)
        return;
    char buf[200];
    snprintf(buf, sizeof buf, "%s: %s", ctx->tgt->op ? ctx->tgt->op : "the runtime", what);
    rt_graph_host_sync(ctx, buf);
}

static void dev_copy(rt_ctx *ctx, void *dst, const void *src, size_t bytes, copy_kind k)
{
    if (!bytes || (k == COPY_D2D && dst == src))
        return;
    if (k != COPY_D2D)
        rt_dev_host_sync(ctx, k == COPY_H2D ? "a host-to-device copy" : "a device-to-host copy");
    rt_count_op(ctx, RT_OP_COPY);
#ifdef RT_SIM
    if (rt_sim_capturing()) { /* recorded; a replay copies */
        rt_sim_record([=]() {
            rt_sim_open();
            memmove(dst, src, bytes);
            rt_sim_close();
        });
        return;
    }
    rt_sim_open();
    memmove(dst, src, bytes);
    rt_sim_close();
#else
    static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                           cudaMemcpyDeviceToDevice};
    RT_CU(ctx, cudaMemcpyAsync(dst, src, bytes, kinds[k], (cudaStream_t)ctx->tgt->stream));
#endif
    if (k == COPY_D2H)
        rt_dev_sync(ctx);
}

/* The upload ring: copies to the device of at most RT_UPLOAD_MAX bytes
 * from host memory the caller may change when rt_dev_h2d returns go
 * through pinned memory, two halves of RT_UPLOAD_HALF bytes filled in
 * turn; a half is filled again only after the copies issued from it are
 * done (an event recorded when it was left: a wait, counted as a host
 * synchronisation whether or not it blocks, so both builds count alike). */
#define RT_UPLOAD_HALF ((size_t)1 << 20)
#define RT_UPLOAD_MAX ((size_t)64 << 10)

static void *upload_slot(rt_ctx *ctx, size_t bytes)
{
    rt_target *t = ctx->tgt;
    if (!t->up) {
        t->up_half = RT_UPLOAD_HALF;
#ifdef RT_SIM
        t->up = (char *)malloc(2 * t->up_half);
        RT_CHECK(ctx, t->up != NULL, "out of memory");
#else
        RT_CU(ctx, cudaMallocHost((void **)&t->up, 2 * t->up_half));
        for (int h = 0; h < 2; h++) {
            cudaEvent_t e;
            RT_CU(ctx, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            t->up_ev[h] = (void *)e;
        }
#endif
    }
    if (t->up_off + bytes > t->up_half) { /* leave this half, take the other */
#ifndef RT_SIM
        RT_CU(ctx, cudaEventRecord((cudaEvent_t)t->up_ev[t->up_cur], (cudaStream_t)t->stream));
#endif
        t->up_cur ^= 1;
        t->up_off = 0;
        if (t->up_used[t->up_cur]) {
            rt_count_sync(ctx);
#ifndef RT_SIM
            RT_CU(ctx, cudaEventSynchronize((cudaEvent_t)t->up_ev[t->up_cur]));
#endif
        }
    }
    t->up_used[t->up_cur] = true;
    void *p = t->up + (size_t)t->up_cur * t->up_half + t->up_off;
    t->up_off += (bytes + 63) / 64 * 64;
    return p;
}

void rt_dev_h2d(rt_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return;
    rt_target *t = ctx->tgt;
    const char *s = (const char *)src, *pin = (const char *)t->pinned;
    if (pin && s >= pin && s + bytes <= pin + t->pinned_cap) {
        dev_copy(ctx, dst, src, bytes, COPY_H2D); /* read before the buffer is reused */
        t->staging_busy = true;
    } else if (bytes <= RT_UPLOAD_MAX) {
        void *p = upload_slot(ctx, bytes);
        memcpy(p, src, bytes);
        dev_copy(ctx, dst, p, bytes, COPY_H2D);
    } else { /* large: waited for (src may change when this returns) */
        dev_copy(ctx, dst, src, bytes, COPY_H2D);
        rt_dev_sync(ctx);
    }
}

void rt_dev_d2h(rt_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    dev_copy(ctx, dst, src, bytes, COPY_D2H);
}

void rt_dev_d2d(rt_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    dev_copy(ctx, dst, src, bytes, COPY_D2D);
}

void rt_dev_memset0(rt_ctx *ctx, void *dst, size_t bytes)
{
    if (!bytes)
        return;
    rt_count_op(ctx, RT_OP_COPY);
#ifdef RT_SIM
    if (rt_sim_capturing()) {
        rt_sim_record([=]() {
            rt_sim_open();
            memset(dst, 0, bytes);
            rt_sim_close();
        });
        return;
    }
    rt_sim_open();
    memset(dst, 0, bytes);
    rt_sim_close();
#else
    RT_CU(ctx, cudaMemsetAsync(dst, 0, bytes, (cudaStream_t)ctx->tgt->stream));
#endif
}

/* ---- argument errors found on the device (dev.h, rt_dev_errors) */

int64_t *rt_dev_errors(rt_ctx *ctx)
{
    rt_target *t = ctx->tgt;
    if (!t->err) {
        size_t bytes = RT_DEVERR_WORDS * sizeof(int64_t);
        t->err = (int64_t *)rt_dev_alloc(ctx, bytes);
        rt_dev_memset0(ctx, t->err, bytes);
#ifdef RT_SIM
        t->err_host = (int64_t *)malloc(bytes);
        RT_CHECK(ctx, t->err_host != NULL, "out of memory");
#else
        RT_CU(ctx, cudaMallocHost((void **)&t->err_host, bytes));
#endif
    }
    t->err_pending = true;
    return t->err;
}

/* after the stream has drained into err_host: the first failure, if any */
static void report_dev_errors(rt_ctx *ctx)
{
    rt_target *t = ctx->tgt;
    t->err_pending = false;
    int64_t e[RT_DEVERR_WORDS];
    memcpy(e, t->err_host, sizeof e);
    if (e[0] == RT_DEVERR_NONE)
        return;
    rt_dev_memset0(ctx, t->err, sizeof e); /* a test's error hook may go on */
    /* the line of the launch, which rt_fail names (the calls it was made
     * in are those being run now, or their callers) */
    const char *loc = (const char *)(uintptr_t)e[4];
    if (loc)
        ctx->at_loc = loc;
    if (e[0] == RT_DEVERR_TARGET)
        rt_cross_entropy_target_fail(ctx, "", e[2], e[1], e[3]);
    if (e[0] == RT_DEVERR_TAKE)
        rt_take_along_dim_index_fail(ctx, (int32_t)e[2], (int)e[1], e[3]);
    rt_embedding_id_fail(ctx, "", e[2], e[1], e[3]);
}

void rt_dev_sync(rt_ctx *ctx)
{
    rt_target *t = ctx->tgt;
    rt_dev_host_sync(ctx, "a synchronisation with the device");
    if (t->stream)
        rt_count_sync(ctx);
    t->staging_busy = false; /* every copy issued so far is done when this returns */
    t->up_used[0] = t->up_used[1] = false;
#ifdef RT_SIM
    if (t->err_pending) {
        rt_sim_open();
        memcpy(t->err_host, t->err, RT_DEVERR_WORDS * sizeof(int64_t));
        rt_sim_close();
        report_dev_errors(ctx);
    }
#else
    if (!t->stream)
        return;
    if (t->err_pending) /* the record comes back with the stream: no extra wait */
        RT_CU(ctx, cudaMemcpyAsync(t->err_host, t->err, RT_DEVERR_WORDS * sizeof(int64_t),
                                   cudaMemcpyDeviceToHost, (cudaStream_t)t->stream));
    if (t->nccl_pending) /* polls NCCL's errors while it waits: no rank hangs */
        rt_cuda_comm_wait(ctx);
    else
        RT_CU(ctx, cudaStreamSynchronize((cudaStream_t)t->stream));
    if (t->err_pending)
        report_dev_errors(ctx);
#endif
    tm_flush(ctx); /* --profile's queued spans: done now */
}

#ifndef RT_SIM
void rt_launch_check_(rt_ctx *ctx)
{
    RT_CU(ctx, cudaGetLastError());
    static int sync = -1; /* SPMD_CUDA_SYNC=1: every launch waited for (errors at their op) */
    if (sync < 0) {
        const char *e = getenv("SPMD_CUDA_SYNC");
        sync = e && strcmp(e, "1") == 0;
    }
    if (sync)
        rt_dev_sync(ctx);
}
#endif

/* ---- the kernels spmdc --target=cuda generates (spmdrt_kernels.h): they
 * run on this rank's stream, and each launch is checked like the runtime's
 * own and named (with the .spmd line of rt_at) in a later device error. The
 * simulation build runs them as host loops between rt_sim_open and
 * rt_sim_close (sim.cpp); rt_kernel_launched there only records the name. */
#ifndef RT_SIM
cudaStream_t rt_kernel_stream(rt_ctx *ctx)
{
    return (cudaStream_t)ctx->tgt->stream;
}
#endif

#ifdef RT_SIM
/* spmdrt_kernels.h's rt_sim_kernel: a simulated generated kernel's launch,
 * counted as the GPU build's rt_kernel_launched counts it */
void rt_sim_kernel_count(rt_ctx *ctx) { rt_count_op(ctx, RT_OP_KERNEL); }
#endif

void rt_kernel_launched(rt_ctx *ctx, const char *what)
{
    ctx->tgt->op = what; /* a string literal of the generated code */
    rt_count_op(ctx, RT_OP_KERNEL);
#ifndef RT_SIM
    rt_launch_check_(ctx);
#endif
}

void *rt_dev_staging(rt_ctx *ctx, size_t bytes)
{
    rt_target *t = ctx->tgt;
    if (t->staging_busy) /* a copy to the device may still read it */
        rt_dev_sync(ctx);
    if (bytes <= t->pinned_cap)
        return t->pinned;
    size_t cap = bytes < 4096 ? 4096 : bytes;
    rt_dev_host_sync(ctx, "a new pinned staging buffer");
    rt_dev_sync(ctx); /* the old buffer may still be read by a copy */
#ifdef RT_SIM
    free(t->pinned);
    t->pinned = malloc(cap);
    RT_CHECK(ctx, t->pinned != NULL, "out of memory allocating %zu bytes", cap);
#else
    if (t->pinned)
        RT_CU(ctx, cudaFreeHost(t->pinned));
    t->pinned = NULL;
    RT_CU(ctx, cudaMallocHost(&t->pinned, cap));
#endif
    t->pinned_cap = cap;
    return t->pinned;
}

/* ---- files: tensor data staged through the pinned buffer */

const void *rt_host_view(rt_ctx *ctx, const rt_tensor *x)
{
    size_t bytes = (size_t)x->numel * rt_dtype_size(x->dtype);
    void *h = rt_dev_staging(ctx, bytes);
    rt_dev_d2h(ctx, h, x->data, bytes);
    return h;
}

void *rt_host_buffer(rt_ctx *ctx, const rt_tensor *t)
{
    return rt_dev_staging(ctx, (size_t)t->numel * rt_dtype_size(t->dtype));
}

void rt_host_commit(rt_ctx *ctx, rt_tensor *t, void *buf)
{
    rt_dev_h2d(ctx, t->data, buf, (size_t)t->numel * rt_dtype_size(t->dtype));
}

} /* extern "C" */
