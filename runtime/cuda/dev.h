/* The CUDA target's thin launch layer, shared by every file of runtime/cuda.
 *
 * Device code is written as per-element bodies (lambdas marked RT_HD)
 * launched through rt_launch, per-row bodies run by a warp of 32 lanes
 * through rt_launch_rows, and per-block bodies of phases over shared-memory
 * tiles through rt_launch_tiles: compiled by nvcc, grid-stride kernels on
 * the ctx's stream; compiled by the host C++ compiler with RT_SIM (the
 * simulation build, libspmdrt_cudasim), plain loops on the host (a row's
 * lanes emulated step by step, a block's phases in order, the same
 * arithmetic in the same order). Device
 * memory is reached only through the functions below, so in the simulation
 * every device allocation is its own mapping, kept PROT_NONE except during a
 * simulated launch or a runtime copy: a host read of device memory crashes
 * there as it would fault on a GPU (sim.cpp).
 *
 * No kernel uses floating-point atomics: an output element is written by
 * one thread, which reduces its inputs in a fixed order (the CPU kernels'
 * order, so a row gives the same value however many rows a rank holds).
 * Long reductions (rt_lanes_f64, below) add fixed chunks in order, then the
 * chunks' sums in order; a warp's row reductions (rt_launch_rows) add each
 * lane's strided terms in order, then the lanes' partials by a fixed tree:
 * both trees depend only on the length.
 *
 * Arguments only the device can check (token ids, targets) are checked by
 * kernels that write the first failure into a device error record
 * (rt_dev_errors); the host reads it at the next synchronisation
 * (rt_dev_sync, rt_dev_d2h) and stops with the CPU target's message, the
 * op and the .spmd line recorded at that check's launch. */
#ifndef RT_CUDA_DEV_H
#define RT_CUDA_DEV_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "rt_internal.h"

#ifdef RT_SIM
#define RT_HD
#define RT_DEV_INLINE static inline
#else
#include <cuda_runtime.h>
#define RT_HD __host__ __device__
#define RT_DEV_INLINE static __host__ __device__ inline
#endif

/* a host number a kernel reads (spmdrt.h rt_hf, rt_hi): its slot in a graph
 * region's table when it has one (read when the kernel runs: a replay's
 * refreshed value), else the value passed */
RT_DEV_INLINE double rt_dev_hf(rt_hf h) { return h.d ? *h.d : h.v; }
RT_DEV_INLINE int64_t rt_dev_hi(rt_hi h) { return h.d ? *h.d : h.v; }

/* a multi-tensor launch's element t (a group's tensors laid end to end,
 * tensor k's first element at off[k], off[0] = 0, n >= 1): the tensor
 * whose range holds t, by binary search */
RT_DEV_INLINE int rt_dev_multi_find(const int64_t *off, int n, int64_t t)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (off[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* ---- the target's state (ctx->tgt) */
struct rt_cuda_comm; /* collectives.cu */
struct rt_gemm_plans; /* gemm.cu */
struct rt_target {
    int device;            /* the GPU this rank uses */
    void *stream;          /* cudaStream_t: every kernel and copy of this rank */
    void *pinned;          /* a pinned host staging buffer, grown on demand */
    size_t pinned_cap;
    bool staging_busy;     /* a copy to the device may still read it (rt_dev_h2d) */
    char *up;              /* the pinned upload ring: two halves of up_half bytes */
    size_t up_half, up_off;
    int up_cur;            /* the half being filled */
    bool up_used[2];       /* a half has copies issued from it */
    void *up_ev[2];        /* cudaEvent_t: a half's copies done (after it was left) */
    bool nccl_pending;     /* NCCL work since the last synchronisation (collectives.cu) */
    const char *op;        /* the op being launched and its .spmd line (rt_at) */
    const char *loc;
    struct rt_cuda_comm *comm;
    struct rt_gemm_plans *gemm;
    size_t bytes_in_use;   /* device bytes allocated (pool included) */
    int64_t *err;          /* the device error record (rt_dev_errors), or NULL */
    unsigned *ticket;      /* rt_launch_last's block counter: 0 between launches */
    int64_t *err_host;     /* its pinned host copy, read at a synchronisation */
    bool err_pending;      /* a check was launched since the last read */
    /* --profile's device timer (target.cu): the open span's start event,
     * the queue of ended spans, the events free for reuse */
    void *tm_open;
    struct rt_dev_span *tm_q;
    int tm_n, tm_cap;
    void **tm_free;
    int tm_nfree, tm_capfree;
};

extern "C" {
/* A failure of a CUDA/cuBLAS/NCCL call (code != 0): stops every rank with
 * "OP (FILE.spmd:LINE): what: MESSAGE", the op and line recorded at launch. */
__attribute__((noreturn)) void rt_dev_fail(rt_ctx *ctx, const char *what, const char *msg);
void rt_cu_check_(rt_ctx *ctx, int err, const char *call, const char *file, int line);
#define RT_CU(ctx, call) rt_cu_check_((ctx), (int)(call), #call, __FILE__, __LINE__)

/* ---- memory: device buffers, copies. rt_dev_h2d does not wait: a source
 * in the staging buffer is read before the buffer is handed out again
 * (rt_dev_staging waits then), a small one is first copied to the pinned
 * upload ring, a large one is waited for (its memory may change when this
 * returns). rt_dev_d2h waits. */
void *rt_dev_alloc(rt_ctx *ctx, size_t bytes);
void rt_dev_free(rt_ctx *ctx, void *p, size_t bytes);
void rt_dev_h2d(rt_ctx *ctx, void *dst, const void *src, size_t bytes);
void rt_dev_d2h(rt_ctx *ctx, void *dst, const void *src, size_t bytes); /* waits */
void rt_dev_d2d(rt_ctx *ctx, void *dst, const void *src, size_t bytes);
void rt_dev_memset0(rt_ctx *ctx, void *dst, size_t bytes);
void rt_dev_sync(rt_ctx *ctx); /* waits for everything launched; reports its errors */
/* collectives.cu: waits for the stream while polling NCCL's asynchronous
 * errors (a failure aborts the communicators and stops the rank, so none
 * hangs); rt_dev_sync calls it when NCCL work was issued since the last */
void rt_cuda_comm_wait(rt_ctx *ctx);
/* the pinned staging buffer (at least bytes), valid until the next call */
void *rt_dev_staging(rt_ctx *ctx, size_t bytes);

/* Argument errors found on the device. The record is RT_DEVERR_WORDS
 * int64s: [0] the kind (0: no error), [1] the row or position, [2] the bad
 * value, [3] the limit (classes, rows), [4] the .spmd line (rt_at's static
 * string, as an integer; 0 if none). A check kernel writes it only while
 * [0] is 0, so the first failing launch of the stream is the one reported.
 * rt_dev_errors returns the record (allocated zeroed on first use) and
 * marks it to be read at the next rt_dev_sync, which stops every rank with
 * "cross_entropy (FILE.spmd:LINE): target 7 at row 2 is out of range for 5
 * classes" (the CPU target's message, the line added when rt_at gave one). */
enum { RT_DEVERR_NONE, RT_DEVERR_TARGET, RT_DEVERR_ID, RT_DEVERR_TAKE };
/* (RT_DEVERR_TAKE, take_along_dim's index: [1] is the dim, [3] its size) */
#define RT_DEVERR_WORDS 5
int64_t *rt_dev_errors(rt_ctx *ctx);

/* spmdrt_kernels.h's ABI (target.cu): after a generated kernel's launch;
 * in the simulation build only its name is kept */
void rt_kernel_launched(rt_ctx *ctx, const char *what);
#ifdef RT_SIM
/* sim.cpp: device mappings readable and writable (a launch, a copy) or not;
 * also spmdrt_kernels.h's ABI (exported with C linkage: a simulated
 * generated kernel opens them around its loop) */
void rt_sim_open(void);
void rt_sim_close(void);
/* sim.cpp: a graph's capture records each launch, GEMM, copy and collective
 * instead of running it (rt_sim_record); the replay runs the recording */
bool rt_sim_capturing(void);
void rt_sim_capture_begin(void);
void *rt_sim_capture_end(void);
void rt_sim_graph_launch(void *g);
void rt_sim_graph_free(void *g);
long rt_sim_graph_nodes(void *g);
#else
void rt_launch_check_(rt_ctx *ctx); /* the launch's error; SPMD_CUDA_SYNC=1 waits */
/* graph.cu: a buffer allocated during a capture (cudaMalloc), and its free
 * (false: not one of them) */
cudaError_t rt_cuda_capture_alloc(void **p, size_t bytes);
bool rt_cuda_capture_free(void *p);
#endif
/* target.cu: the target waits for the device (rt_graph_host_sync, named
 * with the op being run) */
void rt_dev_host_sync(rt_ctx *ctx, const char *what);

/* tensor_data.cu: copies shared by the kernels */
rt_tensor *rt_cuda_strided_copy(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape,
                                const int64_t *src_strides, int64_t src_off);
} /* extern "C" */

#ifdef RT_SIM
#include <functional>
void rt_sim_record(std::function<void()> op); /* sim.cpp: during a capture */
#endif

/* ---- launches: f(i) for i in [0, n), each i independent */
/* Every launch, GEMM, copy and collective counts as one device operation
 * and every wait of the host for the device as one host synchronisation
 * (--profile, rt_count_op and rt_count_sync), at the same points in both
 * builds: the simulation counts what the GPU build does. */
#ifdef RT_SIM
/* a simulated launch: run() now, or recorded for the replays while a graph
 * is captured */
template <class R> static void rt_sim_launch(R run)
{
    if (rt_sim_capturing())
        rt_sim_record(run);
    else
        run();
}
template <class F> static void rt_launch_as(rt_ctx *ctx, rt_op_kind kind, int64_t n, F f)
{
    if (n <= 0)
        return;
    rt_count_op(ctx, kind);
    rt_sim_launch([=]() {
        rt_sim_open();
        for (int64_t i = 0; i < n; i++)
            f(i);
        rt_sim_close();
    });
}
#else
template <class F> __global__ void rt_grid_stride_(int64_t n, F f)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        f(i);
}
template <class F> static void rt_launch_as(rt_ctx *ctx, rt_op_kind kind, int64_t n, F f)
{
    if (n <= 0)
        return;
    rt_count_op(ctx, kind);
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65535 * 16)
        blocks = 65535 * 16;
    rt_grid_stride_<<<(unsigned)blocks, 256, 0, (cudaStream_t)ctx->tgt->stream>>>(n, f);
    rt_launch_check_(ctx);
}
#endif
template <class F> static void rt_launch(rt_ctx *ctx, int64_t n, F f)
{
    rt_launch_as(ctx, RT_OP_KERNEL, n, f);
}

/* ---- a warp per row: rt_launch_rows(ctx, nrows, body) runs body(w, r) for
 * each row r on one warp w of 32 lanes. The body is a sequence of
 * collective steps, each over the row's n elements (lane l takes elements
 * l, l+32, l+64, ... in increasing order):
 *   w.sum(n, g)               sum of g(j) for j < n, in double
 *   w.max(n, g)               maximum of g(j), -INFINITY for n == 0 (the CPU
 *                             kernels' max: a NaN term is skipped)
 *   w.reduce(n, id, g, op)    the general form: each lane folds its terms
 *                             in order from id, then the 32 partials are
 *                             combined by a butterfly tree
 *   w.each(n, g)              g(j) for every j < n (stores)
 *   w.leader()                true on exactly one lane: a row's single write
 * The tree: offsets 16, 8, 4, 2, 1; at each step the lanes l and l^k both
 * compute op(value of the lower lane, value of the upper lane), so every
 * lane ends with the same bits, equal to the serial halving
 *   for (h = 16; h >= 1; h /= 2) for (l = 0; l < h; l++) v[l] = op(v[l], v[l + h]);
 * A step's result is therefore uniform across the warp, and the order of
 * every addition depends only on n (not on the grid, the rank or the run).
 * A body keeps no per-lane state from one step to the next: only what the
 * steps return (and the row index).
 * nvcc: blocks of 256 threads, 8 rows per block in a grid-stride loop over
 * rows; the tree on __shfl_xor_sync. RT_SIM: the rows one after another;
 * each step computes the 32 lanes' partials lane by lane, then runs the same
 * tree on an array (rt_warp_tree), so the simulation does the same
 * arithmetic in the same order as the GPU (-fmad=false there, no
 * contraction here): the same bits, except where the two math libraries'
 * exp and log round differently. */
#define RT_WARP 32
struct rt_op_add {
    template <class T> RT_HD T operator()(T a, T b) const { return a + b; }
};
struct rt_op_max { /* the CPU kernels' max (lane_max): NaN terms skipped */
    RT_HD double operator()(double a, double b) const { return b > a ? b : a; }
};
struct rt_op_min {
    template <class T> RT_HD T operator()(T a, T b) const { return b < a ? b : a; }
};

/* the tree on the 32 lanes' partials v[] (overwritten), as the GPU's
 * butterfly computes it lane by lane; returns lane 0's (every lane's) value */
template <class T, class Op> static inline T rt_warp_tree(T *v, Op op)
{
    for (int k = RT_WARP / 2; k >= 1; k /= 2) {
        T nv[RT_WARP];
        for (int l = 0; l < RT_WARP; l++)
            nv[l] = op(v[l & ~k], v[l | k]);
        for (int l = 0; l < RT_WARP; l++)
            v[l] = nv[l];
    }
    return v[0];
}

#ifdef RT_SIM
struct rt_warp {
    template <class T, class G, class Op> T reduce(int64_t n, T id, G g, Op op) const
    {
        T v[RT_WARP];
        for (int l = 0; l < RT_WARP; l++) {
            T a = id;
            for (int64_t j = l; j < n; j += RT_WARP)
                a = op(a, g(j));
            v[l] = a;
        }
        return rt_warp_tree(v, op);
    }
    template <class G> void each(int64_t n, G g) const
    {
        for (int64_t j = 0; j < n; j++)
            g(j);
    }
    bool leader() const { return true; }
    template <class G> double sum(int64_t n, G g) const { return reduce(n, 0.0, g, rt_op_add()); }
    template <class G> double max(int64_t n, G g) const { return reduce(n, (double)-INFINITY, g, rt_op_max()); }
};
template <class F> static void rt_launch_rows(rt_ctx *ctx, int64_t nrows, F f)
{
    if (nrows <= 0)
        return;
    rt_count_op(ctx, RT_OP_KERNEL);
    rt_sim_launch([=]() {
        rt_sim_open();
        rt_warp w;
        for (int64_t r = 0; r < nrows; r++)
            f(w, r);
        rt_sim_close();
    });
}
#else
struct rt_warp {
    int lane;
    template <class T, class G, class Op> RT_HD T reduce(int64_t n, T id, G g, Op op) const
    {
        T a = id;
        for (int64_t j = lane; j < n; j += RT_WARP)
            a = op(a, g(j));
#ifdef __CUDA_ARCH__
        for (int k = RT_WARP / 2; k >= 1; k /= 2) {
            T o = __shfl_xor_sync(0xffffffffu, a, k);
            a = (lane & k) ? op(o, a) : op(a, o);
        }
#endif
        return a;
    }
    template <class G> RT_HD void each(int64_t n, G g) const
    {
        for (int64_t j = lane; j < n; j += RT_WARP)
            g(j);
    }
    RT_HD bool leader() const { return lane == 0; }
    template <class G> RT_HD double sum(int64_t n, G g) const { return reduce(n, 0.0, g, rt_op_add()); }
    template <class G> RT_HD double max(int64_t n, G g) const
    {
        return reduce(n, (double)-INFINITY, g, rt_op_max());
    }
};
#define RT_ROWS_PER_BLOCK 8
template <class F> __global__ void rt_rows_(int64_t nrows, F f)
{
    rt_warp w;
    w.lane = (int)(threadIdx.x % RT_WARP);
    int64_t step = (int64_t)gridDim.x * RT_ROWS_PER_BLOCK;
    for (int64_t r = (int64_t)blockIdx.x * RT_ROWS_PER_BLOCK + threadIdx.x / RT_WARP; r < nrows;
         r += step)
        f(w, r);
}
template <class F> static void rt_launch_rows(rt_ctx *ctx, int64_t nrows, F f)
{
    if (nrows <= 0)
        return;
    rt_count_op(ctx, RT_OP_KERNEL);
    int64_t blocks = (nrows + RT_ROWS_PER_BLOCK - 1) / RT_ROWS_PER_BLOCK;
    if (blocks > 65535 * 16)
        blocks = 65535 * 16;
    rt_rows_<<<(unsigned)blocks, RT_ROWS_PER_BLOCK * RT_WARP, 0, (cudaStream_t)ctx->tgt->stream>>>(
        nrows, f);
    rt_launch_check_(ctx);
}
#endif

/* ---- a block per tile: rt_launch_tiles(ctx, nblocks, smem, body) runs
 * body(blk, b) for each block b in [0, nblocks) with blk.smem, smem bytes of
 * the block's shared memory (8-byte aligned). The body is a sequence of
 * phases blk.par(n, g): g(i) for every i < n, each i independent (thread t
 * of the block takes i = t, t + RT_TILE_THREADS, ...), then a barrier. A
 * phase reads what earlier phases wrote to shared memory; an element is
 * written by one g(i) only, which adds its terms in a fixed order, so the
 * result does not depend on how the i are spread over threads. The body's
 * control flow must depend only on b and its arguments (every thread of a
 * block reaches every barrier); per-thread state lives in shared memory.
 * nvcc: blocks of RT_TILE_THREADS threads in a grid-stride loop over b,
 * dynamic shared memory (opted in above 48 KiB), __syncthreads() after each
 * phase. RT_SIM: the blocks one after another, each phase's i in order on
 * one host buffer: the same arithmetic in the same order as the GPU. The
 * budget a kernel sizes its tiles to: RT_TILE_SMEM bytes (two blocks on an
 * H100/H200 multiprocessor). */
#define RT_TILE_THREADS 128
#define RT_TILE_SMEM (100 * 1024)
struct rt_block {
    void *smem;
    template <class G> RT_HD void par(int64_t n, G g) const
    {
#ifdef __CUDA_ARCH__
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            g(i);
        __syncthreads();
#else
        for (int64_t i = 0; i < n; i++)
            g(i);
#endif
    }
    /* a phase of rows, a warp each (rt_launch_rows's body g(w, r) for each
     * r < n: warp k of the block takes rows k, k + warps, ...), then a
     * barrier */
    template <class G> RT_HD void rows(int64_t n, G g) const
    {
        rt_warp w = {};
#ifdef __CUDA_ARCH__
        w.lane = (int)(threadIdx.x % RT_WARP);
        for (int64_t r = threadIdx.x / RT_WARP; r < n; r += blockDim.x / RT_WARP)
            g(w, r);
        __syncthreads();
#else
        for (int64_t r = 0; r < n; r++)
            g(w, r);
#endif
    }
};
#ifdef RT_SIM
template <class F> static void rt_launch_tiles(rt_ctx *ctx, int64_t nblocks, size_t smem, F f)
{
    if (nblocks <= 0)
        return;
    rt_count_op(ctx, RT_OP_KERNEL);
    auto run = [=]() {
        /* host memory: the block's shared memory is no device mapping */
        double *sh = (double *)malloc(smem ? smem : 8);
        if (!sh)
            rt_dev_fail(ctx, "rt_launch_tiles", "out of host memory for a block's shared memory");
        rt_block blk;
        blk.smem = sh;
        rt_sim_open();
        for (int64_t b = 0; b < nblocks; b++)
            f(blk, b);
        rt_sim_close();
        free(sh);
    };
    rt_sim_launch(run);
}
#else
template <class F> __global__ void rt_tiles_(int64_t nblocks, F f)
{
    extern __shared__ double rt_smem_[];
    rt_block blk;
    blk.smem = rt_smem_;
    for (int64_t b = blockIdx.x; b < nblocks; b += gridDim.x)
        f(blk, b);
}
template <class F> static void rt_launch_tiles(rt_ctx *ctx, int64_t nblocks, size_t smem, F f)
{
    if (nblocks <= 0)
        return;
    rt_count_op(ctx, RT_OP_KERNEL);
    static size_t opted = 48 * 1024; /* this kernel's limit so far (once per size: not in a capture's way) */
    if (smem > opted) {
        RT_CU(ctx, cudaFuncSetAttribute(rt_tiles_<F>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        opted = smem;
    }
    int64_t blocks = nblocks > 65535 * 16 ? 65535 * 16 : nblocks;
    rt_tiles_<<<(unsigned)blocks, RT_TILE_THREADS, smem, (cudaStream_t)ctx->tgt->stream>>>(nblocks, f);
    rt_launch_check_(ctx);
}
#endif

/* ---- a reduction's last step in the same launch: rt_launch_last(ctx,
 * nblocks, smem, body, fin) runs body(blk, b) for each block b in [0,
 * nblocks) as rt_launch_tiles does (RT_LAST_THREADS threads a block), then
 * fin(blk) on the one block that finishes last, which sees every block's
 * global writes: each thread fences its writes (__threadfence), the block
 * takes a ticket (an integer atomicAdd on ctx->tgt->ticket, no
 * floating-point atomics), and the block that draws the grid's last ticket
 * runs fin, then sets the counter back to 0 for the next launch (the
 * stream runs one kernel at a time, a graph's replay too: one counter per
 * rank, allocated zeroed with the stream, nothing allocated at a launch).
 * fin reads what other blocks wrote through rt_ldv (volatile: not a stale
 * cached line); it runs in phases (blk.par) like a body, and must not use
 * what its block's body left in shared memory. The simulation runs the
 * blocks in order, each taking its ticket from the same counter, so the
 * last one runs fin and a counter not set back shows (no result). */
#define RT_LAST_THREADS 256
#define RT_MAX_GRID ((int64_t)65535 * 16)
RT_DEV_INLINE double rt_ldv(const double *p, int64_t i) { return ((const volatile double *)p)[i]; }
#ifdef RT_SIM
template <class F, class G> static void rt_launch_last(rt_ctx *ctx, int64_t nblocks, size_t smem, F f, G fin)
{
    if (nblocks <= 0)
        return;
    rt_count_op(ctx, RT_OP_KERNEL);
    unsigned *T = ctx->tgt->ticket;
    auto run = [=]() {
        double *sh = (double *)malloc(smem ? smem : 8);
        if (!sh)
            rt_dev_fail(ctx, "rt_launch_last", "out of host memory for a block's shared memory");
        rt_block blk;
        blk.smem = sh;
        int64_t grid = nblocks > RT_MAX_GRID ? RT_MAX_GRID : nblocks;
        rt_sim_open();
        for (int64_t g = 0; g < grid; g++) {
            for (int64_t b = g; b < nblocks; b += grid)
                f(blk, b);
            if ((*T)++ == (unsigned)(grid - 1)) {
                fin(blk);
                *T = 0;
            }
        }
        rt_sim_close();
        free(sh);
    };
    rt_sim_launch(run);
}
#else
template <class F, class G> __global__ void rt_last_(int64_t nblocks, unsigned *ticket, F f, G fin)
{
    extern __shared__ double rt_smem_[];
    __shared__ bool last;
    rt_block blk;
    blk.smem = rt_smem_;
    for (int64_t b = blockIdx.x; b < nblocks; b += gridDim.x)
        f(blk, b);
    __threadfence(); /* this thread's writes seen by every block before the ticket */
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    fin(blk);
    if (threadIdx.x == 0)
        *ticket = 0;
}
template <class F, class G> static void rt_launch_last(rt_ctx *ctx, int64_t nblocks, size_t smem, F f, G fin)
{
    if (nblocks <= 0)
        return;
    rt_count_op(ctx, RT_OP_KERNEL);
    static size_t opted = 48 * 1024; /* as rt_launch_tiles */
    if (smem > opted) {
        RT_CU(ctx, cudaFuncSetAttribute(rt_last_<F, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        opted = smem;
    }
    int64_t blocks = nblocks > RT_MAX_GRID ? RT_MAX_GRID : nblocks;
    rt_last_<<<(unsigned)blocks, RT_LAST_THREADS, smem, (cudaStream_t)ctx->tgt->stream>>>(nblocks, ctx->tgt->ticket,
                                                                                         f, fin);
    rt_launch_check_(ctx);
}
#endif

/* ---- long reductions. x viewed as [outer, d, inner]: each lane (o, i) is
 * reduced over d in double, ld(o, j, i) reading its term j. The lane is cut
 * into chunks of RT_CHUNK terms, each reduced in order by one thread, then
 * the chunks' results in order (rt_lanes_combine, again in chunks): the same
 * tree for every grid, rank and run, so the same bits. A lane of at most
 * RT_CHUNK terms is reduced in order, as the CPU kernels do; a longer one
 * differs from the CPU's only in how its double sum rounds (the result,
 * rounded to f32, almost always has the same bits). Returns the F64 tensor
 * [outer * inner] of the lanes' sums (max: maxima, NaN propagating). */
#define RT_CHUNK 64
extern "C" rt_tensor *rt_lanes_combine(rt_ctx *ctx, rt_tensor *p, int64_t outer, int64_t nc,
                                       int64_t inner, bool max); /* reduce.cu; consumes p */
/* the same, down to `to` chunks a lane (a level of the tree at a time) */
extern "C" rt_tensor *rt_lanes_combine_to(rt_ctx *ctx, rt_tensor *p, int64_t outer, int64_t nc,
                                          int64_t inner, bool max, int64_t to);
RT_DEV_INLINE double rt_red_step(double a, double v, bool max)
{
    return max ? (v > a || isnan(v) ? v : a) : a + v;
}
template <class F>
static rt_tensor *rt_lanes_f64(rt_ctx *ctx, int64_t outer, int64_t d, int64_t inner, bool max, F ld)
{
    int64_t nc = d > RT_CHUNK ? (d + RT_CHUNK - 1) / RT_CHUNK : 1;
    int64_t n = outer * nc * inner;
    rt_tensor *p = rt_empty(ctx, RT_F64, 1, &n);
    double *P = (double *)p->data;
    rt_launch(ctx, n, [=] RT_HD(int64_t t) {
        int64_t i = t % inner, c = t / inner % nc, o = t / inner / nc;
        int64_t j0 = nc == 1 ? 0 : c * RT_CHUNK;
        int64_t j1 = nc == 1 ? d : (j0 + RT_CHUNK < d ? j0 + RT_CHUNK : d);
        double a = max ? -INFINITY : 0.0;
        for (int64_t j = j0; j < j1; j++)
            a = rt_red_step(a, ld(o, j, i), max);
        P[t] = a;
    });
    return nc == 1 ? p : rt_lanes_combine(ctx, p, outer, nc, inner, max);
}

/* rt_lanes_f64's sum of a lane's n terms (dev.h: chunks of RT_CHUNK in
 * order, then the chunks' sums in chunks, in order, up to one) in one
 * thread: a node of each level of that tree accumulates in turn, so the
 * same additions in the same order (a level with one node adds it to 0.0,
 * which changes no value: no accumulator from 0.0 is ever -0.0) */
struct rt_tree_sum {
    double acc[12]; /* RT_CHUNK^11 terms at most */
    int64_t cnt[12];
    bool max;       /* the max tree (rt_red_step's, NaN propagating): rt_tree_max() */
    RT_HD void add(double v)
    {
        acc[0] = rt_red_step(acc[0], v, max);
        cnt[0]++;
        for (int k = 0; k + 1 < 12 && cnt[k] == RT_CHUNK; k++) {
            acc[k + 1] = rt_red_step(acc[k + 1], acc[k], max);
            cnt[k + 1]++;
            acc[k] = max ? -INFINITY : 0.0;
            cnt[k] = 0;
        }
    }
    RT_HD double total()
    {
        for (int k = 0; k + 1 < 12; k++)
            if (cnt[k] > 0) {
                acc[k + 1] = rt_red_step(acc[k + 1], acc[k], max);
                cnt[k + 1]++;
            }
        return acc[11];
    }
};
RT_DEV_INLINE rt_tree_sum rt_tree_max(void)
{
    rt_tree_sum t = {};
    t.max = true;
    for (int k = 0; k < 12; k++)
        t.acc[k] = -INFINITY;
    return t;
}

/* The tree above the chunks on rt_launch_last's last block (fin): lane
 * t = o * inner + i's nc chunk results at P[(o * nc + c) * inner + i]
 * (written by the launch's blocks), then each level of rt_lanes_combine
 * (RT_CHUNK nodes of the level below in order, a phase each, written after
 * the level below in P: rt_tree_ws doubles in all) while a lane has more
 * than RT_CHUNK nodes, then each lane's rest in one thread (rt_tree_sum),
 * stored by st(t, v): the additions of rt_lanes_f64 in its order, so the
 * same bits as the chunks' launch followed by rt_lanes_reduce's second. */
static inline int64_t rt_tree_ws(int64_t lanes, int64_t nc)
{
    int64_t ws = lanes * nc, m = nc;
    while (m > RT_CHUNK) {
        m = (m + RT_CHUNK - 1) / RT_CHUNK;
        ws += lanes * m;
    }
    return ws;
}
template <class S>
RT_DEV_INLINE void rt_tree_finish(const rt_block &blk, double *P, int64_t outer, int64_t nc, int64_t inner,
                                  bool max, S st)
{
    double *cur = P;
    int64_t len = nc;
    while (len > RT_CHUNK) {
        int64_t m = (len + RT_CHUNK - 1) / RT_CHUNK, l = len;
        double *nxt = cur + outer * len * inner;
        const double *src = cur;
        blk.par(outer * m * inner, [&](int64_t t) {
            int64_t i = t % inner, c = t / inner % m, o = t / inner / m;
            int64_t j1 = c * RT_CHUNK + RT_CHUNK < l ? c * RT_CHUNK + RT_CHUNK : l;
            double a = max ? -INFINITY : 0.0;
            for (int64_t j = c * RT_CHUNK; j < j1; j++)
                a = rt_red_step(a, rt_ldv(src, (o * l + j) * inner + i), max);
            nxt[t] = a;
        });
        cur = nxt;
        len = m;
    }
    const double *top = cur;
    blk.par(outer * inner, [&](int64_t t) {
        int64_t o = t / inner, i = t % inner;
        rt_tree_sum tr = max ? rt_tree_max() : rt_tree_sum{};
        for (int64_t c = 0; c < len; c++)
            tr.add(rt_ldv(top, (o * len + c) * inner + i));
        st(t, tr.total());
    });
}

/* the most chunk results a reduction leaves to rt_launch_last's last
 * block (one block reads them all; more: the two launches below, whose
 * second has a thread per lane) */
#define RT_LAST_MAX ((int64_t)1 << 17)

/* rt_lanes_f64's reduction of each lane, its result v stored by st(t, v)
 * for lane t = o * inner + i in the same launch that finishes the tree: a
 * lane of at most RT_CHUNK terms in one launch (a thread a lane, in
 * order); a longer one in one launch too while the lanes have at most
 * RT_LAST_MAX chunks in all (a thread a chunk, then the last block's tree
 * over them, rt_launch_last and rt_tree_finish); else in two (the chunks,
 * then each lane's tree over its chunks in one thread, rt_tree_sum) while
 * a lane has at most RT_CHUNK^2 chunks (more: rt_lanes_combine's levels
 * first). The same additions in the same order as rt_lanes_f64 each way. */
template <class F, class S>
static void rt_lanes_reduce(rt_ctx *ctx, int64_t outer, int64_t d, int64_t inner, bool max, F ld,
                            S st)
{
    int64_t lanes = outer * inner;
    if (d <= RT_CHUNK) {
        rt_launch(ctx, lanes, [=] RT_HD(int64_t t) {
            int64_t o = t / inner, i = t % inner;
            double a = max ? -INFINITY : 0.0;
            for (int64_t j = 0; j < d; j++)
                a = rt_red_step(a, ld(o, j, i), max);
            st(t, a);
        });
        return;
    }
    int64_t nc = (d + RT_CHUNK - 1) / RT_CHUNK, n = outer * nc * inner;
    if (n <= RT_LAST_MAX) {
        int64_t ws = rt_tree_ws(lanes, nc);
        rt_tensor *p = rt_empty(ctx, RT_F64, 1, &ws);
        double *P = (double *)p->data;
        rt_launch_last(ctx, (n + RT_LAST_THREADS - 1) / RT_LAST_THREADS, 0,
                       [=] RT_HD(const rt_block &blk, int64_t b) {
                           int64_t t0 = b * RT_LAST_THREADS;
                           blk.par(n - t0 < RT_LAST_THREADS ? n - t0 : RT_LAST_THREADS, [&](int64_t k) {
                               int64_t t = t0 + k;
                               int64_t i = t % inner, c = t / inner % nc, o = t / inner / nc;
                               int64_t j0 = c * RT_CHUNK, j1 = j0 + RT_CHUNK < d ? j0 + RT_CHUNK : d;
                               double a = max ? -INFINITY : 0.0;
                               for (int64_t j = j0; j < j1; j++)
                                   a = rt_red_step(a, ld(o, j, i), max);
                               P[t] = a;
                           });
                       },
                       [=] RT_HD(const rt_block &blk) { rt_tree_finish(blk, P, outer, nc, inner, max, st); });
        rt_free(ctx, p);
        return;
    }
    rt_tensor *p = rt_empty(ctx, RT_F64, 1, &n);
    double *P = (double *)p->data;
    rt_launch(ctx, n, [=] RT_HD(int64_t t) {
        int64_t i = t % inner, c = t / inner % nc, o = t / inner / nc;
        int64_t j0 = c * RT_CHUNK, j1 = j0 + RT_CHUNK < d ? j0 + RT_CHUNK : d;
        double a = max ? -INFINITY : 0.0;
        for (int64_t j = j0; j < j1; j++)
            a = rt_red_step(a, ld(o, j, i), max);
        P[t] = a;
    });
    if (nc > RT_CHUNK * RT_CHUNK) { /* levels of RT_CHUNK until a lane's rest is one thread's */
        int64_t m = nc;
        while (m > RT_CHUNK * RT_CHUNK)
            m = (m + RT_CHUNK - 1) / RT_CHUNK;
        /* rt_lanes_combine down to m chunks: its levels are the tree's lower levels */
        p = rt_lanes_combine_to(ctx, p, outer, nc, inner, max, m);
        nc = m;
    }
    const double *Q = (const double *)p->data;
    int64_t ncf = nc;
    rt_launch(ctx, lanes, [=] RT_HD(int64_t t) {
        int64_t o = t / inner, i = t % inner;
        rt_tree_sum tr = max ? rt_tree_max() : rt_tree_sum{};
        for (int64_t c = 0; c < ncf; c++)
            tr.add(Q[(o * ncf + c) * inner + i]);
        st(t, tr.total());
    });
    rt_free(ctx, p);
}

/* ---- typed element access in device code: every dtype read as double and
 * written rounded (bf16 to nearest even, as the CPU's rt_store_f64) */
RT_DEV_INLINE double rt_ld(const void *p, rt_dtype dt, int64_t i)
{
    switch (dt) {
    case RT_F32: return ((const float *)p)[i];
    case RT_F64: return ((const double *)p)[i];
    case RT_I32: return ((const int32_t *)p)[i];
    case RT_BF16: {
        union { uint32_t u; float f; } b;
        b.u = (uint32_t)((const uint16_t *)p)[i] << 16;
        return b.f;
    }
    }
    return 0;
}
RT_DEV_INLINE uint16_t rt_dev_f32_to_bf16(float f)
{
    union { float f; uint32_t u; } b;
    b.f = f;
    uint32_t r = (b.u + 0x7fffu + ((b.u >> 16) & 1u)) >> 16;
    return (b.u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)r;
}
RT_DEV_INLINE void rt_st(void *p, rt_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case RT_F32: ((float *)p)[i] = (float)v; break;
    case RT_F64: ((double *)p)[i] = v; break;
    case RT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case RT_BF16: ((uint16_t *)p)[i] = rt_dev_f32_to_bf16((float)v); break;
    }
}

/* shapes passed to device code by value */
typedef struct rt_dshape {
    int ndim;
    int64_t s[RT_MAX_DIMS];
} rt_dshape;
static inline rt_dshape rt_dshape_of(int ndim, const int64_t *shape)
{
    rt_dshape d;
    d.ndim = ndim;
    for (int k = 0; k < RT_MAX_DIMS; k++)
        d.s[k] = k < ndim ? shape[k] : 1;
    return d;
}

#endif /* RT_CUDA_DEV_H */
