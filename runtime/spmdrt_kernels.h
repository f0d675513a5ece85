/* spmdrt_kernels.h: the ABI between the kernels spmdc --target=cuda
 * generates (FILE.cu, one per program) and the runtime that launches them.
 *
 * Each fused elementwise region of a program is, in FILE.cu, a per-element
 * body (RT_HD: __host__ __device__), a grid-stride kernel calling it, and an
 * extern "C" launcher
 *     void spmd_<stem>_fused_<N>(rt_ctx *ctx, int64_t n_, ARGS...);
 * whose ARGS are the tensors' device pointers (float or double, const when
 * read) and host numbers (rt_hf for double, rt_hi for int64_t and bool: a
 * value or a graph region's slot, read by the kernel with rt_hf_get).  The host program (FILE.c)
 * declares the launchers, takes each pointer with rt_device_data and never
 * reads through it.
 *
 * Built three ways:
 *   - nvcc (SPMD_CUDA_DEVICE): the launcher starts the kernel on
 *     rt_kernel_stream(ctx) and calls rt_kernel_launched(ctx, what) after it;
 *     the CUDA runtime (libspmdrt_cuda) provides both.  Flags: -fmad=false,
 *     no fast math, so each operation rounds as the CPU target's
 *     (-ffp-contract=off).
 *   - the host C++ compiler with SPMD_CUDA_SIM (the simulation build): the
 *     launcher is a plain loop over the same body between
 *     rt_sim_launch_begin/end.  Those call rt_sim_open/rt_sim_close when the
 *     runtime linked in has them (the CUDA runtime's simulation library
 *     opens its guarded device mappings for the launch); against the CPU
 *     runtime they do nothing.
 *   - included by the host program (plain C): declarations only. */
#ifndef SPMDRT_KERNELS_H
#define SPMDRT_KERNELS_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "spmdrt.h"
#ifdef __cplusplus
}
#define SPMD_EXTERN_C extern "C"
#else
#define SPMD_EXTERN_C
#endif

/* A tensor's data as the kernels see it: a device pointer on the GPU. */
static inline void *rt_device_data(const rt_tensor *x) { return x->data; }

#if defined(__CUDACC__) && !defined(SPMD_CUDA_SIM)
#define SPMD_CUDA_DEVICE 1
#include <cuda_runtime.h>
#define RT_HD __host__ __device__
#define RT_BLOCK_THREADS 256
#define RT_GRID_FIRST ((int64_t)blockIdx.x * blockDim.x + threadIdx.x)
#define RT_GRID_STRIDE ((int64_t)gridDim.x * blockDim.x)
/* enough blocks for one element per thread, at most 65535 * 16 (the rest by
 * the grid-stride loop) */
static inline unsigned rt_grid_blocks(int64_t n) {
  int64_t b = (n + RT_BLOCK_THREADS - 1) / RT_BLOCK_THREADS;
  return (unsigned)(b > 65535 * 16 ? 65535 * 16 : b);
}
extern "C" {
/* The stream every kernel of this rank runs on (the CUDA runtime's). */
cudaStream_t rt_kernel_stream(rt_ctx *ctx);
/* After each launch: checks it (cudaGetLastError) and records what was
 * launched and its .spmd line, named if an error surfaces later. */
void rt_kernel_launched(rt_ctx *ctx, const char *what);
}
#else
#define RT_HD
#ifdef __cplusplus
extern "C" {
#endif
void rt_sim_open(void) __attribute__((weak));
void rt_sim_close(void) __attribute__((weak));
#ifdef __cplusplus
}
#endif
static inline void rt_sim_launch_begin(rt_ctx *ctx) {
  (void)ctx;
  if (rt_sim_open)
    rt_sim_open();
}
static inline void rt_sim_launch_end(rt_ctx *ctx) {
  (void)ctx;
  if (rt_sim_close)
    rt_sim_close();
}
#ifdef __cplusplus
/* A launch of the simulation: run (a closure over the body's loop) now, or,
 * during a graph's capture (the CUDA runtime's simulation library), record
 * it for the graph's replays. */
extern "C" int rt_sim_record_c(void (*run)(void *), void *arg, void (*del)(void *)) __attribute__((weak));
/* --profile's count of the launch (the CUDA runtime's simulation library:
 * one kernel, as the GPU build's rt_kernel_launched counts it; the CPU
 * runtime counts its own kernel spans instead and has none) */
extern "C" void rt_sim_kernel_count(rt_ctx *ctx) __attribute__((weak));
template <class F> static void rt_sim_run_(void *f) { (*static_cast<F *>(f))(); }
template <class F> static void rt_sim_del_(void *f) { delete static_cast<F *>(f); }
template <class F> static inline void rt_sim_kernel(rt_ctx *ctx, F f) {
  if (rt_sim_kernel_count)
    rt_sim_kernel_count(ctx);
  if (rt_sim_record_c) {
    F *copy = new F(f);
    if (rt_sim_record_c(&rt_sim_run_<F>, copy, &rt_sim_del_<F>))
      return;
    delete copy;
  }
  f();
}
#endif
#endif

/* A host number of a launch (spmdrt.h rt_hf, rt_hi): a launcher passes it
 * on as it is, and the kernel (the simulation: the recorded closure) reads
 * it when it runs, from its slot of a graph region's table when it has one
 * (rt_slot_f: refreshed before each replay), else the value passed. */
static RT_HD inline double rt_hf_get(rt_hf h) { return h.d ? *h.d : h.v; }
static RT_HD inline int64_t rt_hi_get(rt_hi h) { return h.d ? *h.d : h.v; }

/* bf16 <-> f32 in a kernel, bit for bit spmdrt.h's rt_bf16_to_f32,
 * rt_f32_to_bf16 and rt_bf16_round (nearest even, NaN to 0x7fc0): a bf16
 * region computes in f32 and rounds each member's value to bf16, as each
 * kernel stores it */
static RT_HD inline float rt_k_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static RT_HD inline uint16_t rt_k_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)r;
}
static RT_HD inline float rt_k_bf16_round(float f) { return rt_k_bf16_to_f32(rt_k_f32_to_bf16(f)); }

/* A unary op of the X-list RT_UNARY_OPS on one element x of a fused loop
 * (only the ops whose CPU kernels are vectorised: spmdc's schedule.c fuses
 * the others everywhere, spelled out): on the GPU, the formula in x's
 * precision (formula, of x), as runtime/cuda/elementwise.cu's kernel
 * computes it; in the simulation, the kernel of the runtime linked in, on
 * that one element (rt_unary_elem_f32/f64: the CPU runtime's vector kernel,
 * whose masked tail computes an element as its whole vectors do, or the
 * CUDA runtime's simulated formula), so that the simulation prints what the
 * CPU target prints. */
#ifdef SPMD_CUDA_DEVICE
#define RT_FUSED_UNARY(op, T, x, formula) ((T)(formula))
#else
#define RT_FUSED_UNARY(op, T, x, formula) (sizeof(T) == sizeof(float) ? (T)rt_unary_elem_f32((op), (float)(x)) \
                                                                    : (T)rt_unary_elem_f64((op), (double)(x)))
#endif

#endif /* SPMDRT_KERNELS_H */
