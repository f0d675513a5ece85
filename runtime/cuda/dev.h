/* The CUDA target's thin launch layer, shared by every file of runtime/cuda.
 *
 * Device code is written as per-element and per-row bodies (lambdas marked
 * RT_HD) launched through rt_launch: compiled by nvcc, a grid-stride kernel
 * on the ctx's stream; compiled by the host C++ compiler with RT_SIM (the
 * simulation build, libspmdrt_cudasim), a plain loop on the host. Device
 * memory is reached only through the functions below, so in the simulation
 * every device allocation is its own mapping, kept PROT_NONE except during a
 * simulated launch or a runtime copy: a host read of device memory crashes
 * there as it would fault on a GPU (sim.cpp).
 *
 * No kernel uses floating-point atomics: an output element is written by
 * one thread, which reduces its inputs in a fixed order (the CPU kernels'
 * order, so a row gives the same value however many rows a rank holds).
 * Long reductions (rt_lanes_f64, below) add fixed chunks in order, then the
 * chunks' sums in order: a tree that depends only on the length. */
#ifndef RT_CUDA_DEV_H
#define RT_CUDA_DEV_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "rt_internal.h"

#ifdef RT_SIM
#define RT_HD
#define RT_DEV_INLINE static inline
#else
#include <cuda_runtime.h>
#define RT_HD __host__ __device__
#define RT_DEV_INLINE static __host__ __device__ inline
#endif

/* ---- the target's state (ctx->tgt) */
struct rt_cuda_comm; /* collectives.cu */
struct rt_gemm_plans; /* gemm.cu */
struct rt_target {
    int device;            /* the GPU this rank uses */
    void *stream;          /* cudaStream_t: every kernel and copy of this rank */
    void *pinned;          /* a pinned host staging buffer, grown on demand */
    size_t pinned_cap;
    const char *op;        /* the op being launched and its .spmd line (rt_at) */
    const char *loc;
    struct rt_cuda_comm *comm;
    struct rt_gemm_plans *gemm;
    size_t bytes_in_use;   /* device bytes allocated (pool included) */
};

extern "C" {
/* A failure of a CUDA/cuBLAS/NCCL call (code != 0): stops every rank with
 * "OP (FILE.spmd:LINE): what: MESSAGE", the op and line recorded at launch. */
__attribute__((noreturn)) void rt_dev_fail(rt_ctx *ctx, const char *what, const char *msg);
void rt_cu_check_(rt_ctx *ctx, int err, const char *call, const char *file, int line);
#define RT_CU(ctx, call) rt_cu_check_((ctx), (int)(call), #call, __FILE__, __LINE__)

/* ---- memory: device buffers, copies (synchronous for the host side) */
void *rt_dev_alloc(rt_ctx *ctx, size_t bytes);
void rt_dev_free(rt_ctx *ctx, void *p, size_t bytes);
void rt_dev_h2d(rt_ctx *ctx, void *dst, const void *src, size_t bytes);
void rt_dev_d2h(rt_ctx *ctx, void *dst, const void *src, size_t bytes); /* waits */
void rt_dev_d2d(rt_ctx *ctx, void *dst, const void *src, size_t bytes);
void rt_dev_memset0(rt_ctx *ctx, void *dst, size_t bytes);
void rt_dev_sync(rt_ctx *ctx); /* waits for everything launched; reports its errors */
/* the pinned staging buffer (at least bytes), valid until the next call */
void *rt_dev_staging(rt_ctx *ctx, size_t bytes);

/* spmdrt_kernels.h's ABI (target.cu): after a generated kernel's launch;
 * in the simulation build only its name is kept */
void rt_kernel_launched(rt_ctx *ctx, const char *what);
#ifdef RT_SIM
/* sim.cpp: device mappings readable and writable (a launch, a copy) or not;
 * also spmdrt_kernels.h's ABI (exported with C linkage: a simulated
 * generated kernel opens them around its loop) */
void rt_sim_open(void);
void rt_sim_close(void);
#else
void rt_launch_check_(rt_ctx *ctx); /* the launch's error; SPMD_CUDA_SYNC=1 waits */
#endif

/* tensor_data.cu: copies shared by the kernels */
rt_tensor *rt_cuda_strided_copy(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape,
                                const int64_t *src_strides, int64_t src_off);
void rt_cuda_contiguous_strides(int ndim, const int64_t *shape, int64_t *str);
} /* extern "C" */

/* ---- launches: f(i) for i in [0, n), each i independent */
#ifdef RT_SIM
template <class F> static void rt_launch(rt_ctx *ctx, int64_t n, F f)
{
    (void)ctx;
    if (n <= 0)
        return;
    rt_sim_open();
    for (int64_t i = 0; i < n; i++)
        f(i);
    rt_sim_close();
}
#else
template <class F> __global__ void rt_grid_stride_(int64_t n, F f)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        f(i);
}
template <class F> static void rt_launch(rt_ctx *ctx, int64_t n, F f)
{
    if (n <= 0)
        return;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65535 * 16)
        blocks = 65535 * 16;
    rt_grid_stride_<<<(unsigned)blocks, 256, 0, (cudaStream_t)ctx->tgt->stream>>>(n, f);
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
