/* spmdrt_kernels.h's ABI against the CUDA target's runtime: a launcher
 * written as spmdc --target=cuda writes them (compiler/emit_cuda.c) runs a
 * fused body over rt_device_data pointers, on rt_kernel_stream with
 * rt_kernel_launched after it (nvcc, libspmdrt_cuda), or as a host loop
 * between rt_sim_open and rt_sim_close (SPMD_CUDA_SIM, libspmdrt_cudasim:
 * the strong definitions replace the header's weak references, so the loop
 * may touch the guarded device mappings). The result is read back through
 * the runtime (rt_get) and compared bit for bit with the host's value. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "spmdrt_kernels.h"

static RT_HD inline void abi_fused_0_body(int64_t i_, float *out, const float *a, const float *b,
                                          double s)
{
    typedef float T_;
    out[i_] = (T_)(a[i_] * b[i_] + (T_)s);
}

#ifdef SPMD_CUDA_DEVICE
__global__ void abi_fused_0_kernel(int64_t n_, float *out, const float *a, const float *b, double s)
{
    for (int64_t i_ = RT_GRID_FIRST; i_ < n_; i_ += RT_GRID_STRIDE)
        abi_fused_0_body(i_, out, a, b, s);
}
#endif

SPMD_EXTERN_C void abi_fused_0(rt_ctx *ctx, int64_t n_, float *out, const float *a,
                               const float *b, double s)
{
#ifdef SPMD_CUDA_DEVICE
    if (n_ <= 0)
        return;
    abi_fused_0_kernel<<<rt_grid_blocks(n_), RT_BLOCK_THREADS, 0, rt_kernel_stream(ctx)>>>(n_, out, a, b, s);
    rt_kernel_launched(ctx, "fused (kernel_abi.cu:1)");
#else
    rt_sim_launch_begin(ctx);
    for (int64_t i_ = 0; i_ < n_; i_++)
        abi_fused_0_body(i_, out, a, b, s);
    rt_sim_launch_end(ctx);
#endif
}

int main(void)
{
#ifndef SPMD_CUDA_DEVICE
    if (!rt_sim_open || !rt_sim_close) {
        fprintf(stderr, "FAIL: the simulation library does not export rt_sim_open/rt_sim_close\n");
        return 1;
    }
#endif
    rt_ctx *ctx = rt_ctx_serial();
    enum { N = 1000 };
    float av[N], bv[N], got[N];
    for (int i = 0; i < N; i++) {
        av[i] = 0.25f * (float)i - 3.0f;
        bv[i] = 1.0f / (float)(i + 1);
    }
    int64_t shape[1] = {N};
    rt_tensor *a = rt_from_data(ctx, RT_F32, 1, shape, av);
    rt_tensor *b = rt_from_data(ctx, RT_F32, 1, shape, bv);
    rt_tensor *y = rt_empty(ctx, RT_F32, 1, shape);
    abi_fused_0(ctx, N, (float *)rt_device_data(y), (const float *)rt_device_data(a),
                (const float *)rt_device_data(b), 0.5);
    for (int i = 0; i < N; i++)
        got[i] = (float)rt_get(y, i); /* the runtime's copy (f32 -> double -> f32: exact) */
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want = av[i] * bv[i] + 0.5f;
        if (memcmp(&want, &got[i], sizeof want) != 0 && bad++ < 5)
            fprintf(stderr, "FAIL: y[%d] = %.9g, want %.9g\n", i, got[i], want);
    }
    rt_free(ctx, y);
    rt_free(ctx, b);
    rt_free(ctx, a);
    rt_ctx_free_serial(ctx);
    if (bad)
        return 1;
    printf("ok: %d elements through spmdrt_kernels.h's launcher\n", N);
    return 0;
}
