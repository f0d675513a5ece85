/* bf16 tile products on tensor cores (mma.sync m16n8k16, f32 accumulation)
 * for the CUDA target's kernels, with the simulation's emulation of them.
 *
 * rt_mma_tiles(blk, M, N, K, a, b, cin, cout) is one phase of a tiled block
 * (dev.h, rt_launch_tiles): for every r < M, c < N
 *     cout(r, c, cin(r, c) + sum over k < K of a(r, k) b(k, c))
 * with a and b rounded to bf16 (to nearest even: operands that already are
 * bf16 values are exact), the products and the sums in f32. The output is
 * cut into tiles of 16 x 8 and K into chunks of 16 (zero-padded past M, N,
 * K); a warp takes a tile and adds its chunks in increasing k, one
 * mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 each, to accumulators
 * that start at cin. Each output element is one lane's, written once by
 * cout; then the block's barrier.
 *
 * Everything but the MMA is the same code in both builds: the fragments are
 * built by rt_mma_load_a/b and rt_mma_load_c, the results handed back by
 * rt_mma_store (the documented per-lane layout, below). The real build runs
 * the instruction (inline PTX: mma.sync's fragment layout is documented,
 * nvcuda::wmma's is opaque and has no m16n8k16 bf16 shape, so with wmma
 * neither the elementwise epilogue nor the simulation could know which lane
 * holds which element). The simulation (RT_SIM) builds the same 32 lanes'
 * fragments and runs rt_mma_emulate, which decodes them by the PTX ISA's
 * formulas ("Matrix Fragments for mma.m16n8k16 with floating point type")
 * and computes each element of D as C + (the chunk's 16 products summed by
 * an fmaf chain in increasing k). The tensor core's own summation of a
 * chunk is not IEEE's step by step (it keeps more bits), so the GPU and the
 * simulation agree to the last bits of f32 sums, not bit for bit.
 * tests/gpu/mma_frag.cpp checks the fragment code and the emulation against
 * a plain product. */
#ifndef RT_CUDA_MMA_H
#define RT_CUDA_MMA_H

#include "dev.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "runtime/cuda/mma.h: bf16 mma.sync needs sm_80 or newer (CMAKE_CUDA_ARCHITECTURES)"
#endif

#define RT_MMA_M 16
#define RT_MMA_N 8
#define RT_MMA_K 16

/* One lane's fragments: A, 16 x 16 bf16 in four registers of two (a0..a7,
 * low half first); B, 16 x 8 bf16 in two (b0..b3); C/D, 16 x 8 f32 (c0..c3).
 * With g = lane / 4 and t = lane % 4 (the ISA's groupID and
 * threadID_in_group), lane holds
 *   A  register j (j = 0..3): row g + 8 (j % 2), columns 2t + 8 (j / 2) and
 *      the next (low half, high half):
 *        j = 0: (g, 2t..2t+1)       j = 1: (g+8, 2t..2t+1)
 *        j = 2: (g, 2t+8..2t+9)     j = 3: (g+8, 2t+8..2t+9)
 *   B  register j (j = 0..1): rows (k) 2t + 8j and the next, column g
 *   C  element i (i = 0..3): row g + 8 (i / 2), column 2t + i % 2 */
struct rt_mma_a {
    uint32_t x[4];
};
struct rt_mma_b {
    uint32_t x[2];
};
struct rt_mma_c {
    float x[4];
};

RT_DEV_INLINE uint32_t rt_mma_pack(float lo, float hi)
{
    return (uint32_t)rt_dev_f32_to_bf16(lo) | (uint32_t)rt_dev_f32_to_bf16(hi) << 16;
}
RT_DEV_INLINE float rt_mma_bf16(uint32_t reg, int half)
{
    union { uint32_t u; float f; } b;
    b.u = (half ? reg >> 16 : reg & 0xffffu) << 16;
    return b.f;
}

/* lane's A fragment of the 16 x 16 block at (r0, k0) of the M x K matrix
 * a(r, k); 0 outside it (a is not called there) */
template <class LA>
static RT_HD inline rt_mma_a rt_mma_load_a(int lane, int64_t r0, int64_t k0, int64_t M, int64_t K, LA a)
{
    int g = lane >> 2, t = lane & 3;
    rt_mma_a f;
    for (int j = 0; j < 4; j++) {
        int64_t r = r0 + g + 8 * (j & 1), k = k0 + 2 * t + 8 * (j >> 1);
        float lo = r < M && k < K ? (float)a(r, k) : 0.0f;
        float hi = r < M && k + 1 < K ? (float)a(r, k + 1) : 0.0f;
        f.x[j] = rt_mma_pack(lo, hi);
    }
    return f;
}
/* lane's B fragment of the 16 x 8 block at (k0, c0) of the K x N matrix
 * b(k, c) */
template <class LB>
static RT_HD inline rt_mma_b rt_mma_load_b(int lane, int64_t k0, int64_t c0, int64_t K, int64_t N, LB b)
{
    int g = lane >> 2, t = lane & 3;
    int64_t c = c0 + g;
    rt_mma_b f;
    for (int j = 0; j < 2; j++) {
        int64_t k = k0 + 2 * t + 8 * j;
        float lo = c < N && k < K ? (float)b(k, c) : 0.0f;
        float hi = c < N && k + 1 < K ? (float)b(k + 1, c) : 0.0f;
        f.x[j] = rt_mma_pack(lo, hi);
    }
    return f;
}
/* lane's accumulators of the 16 x 8 block at (r0, c0): cin(r, c), 0
 * outside M x N */
template <class CI>
static RT_HD inline rt_mma_c rt_mma_load_c(int lane, int64_t r0, int64_t c0, int64_t M, int64_t N, CI cin)
{
    int g = lane >> 2, t = lane & 3;
    rt_mma_c f;
    for (int i = 0; i < 4; i++) {
        int64_t r = r0 + g + 8 * (i >> 1), c = c0 + 2 * t + (i & 1);
        f.x[i] = r < M && c < N ? (float)cin(r, c) : 0.0f;
    }
    return f;
}
/* cout(r, c, value) for lane's accumulators inside M x N */
template <class CO>
static RT_HD inline void rt_mma_store(int lane, int64_t r0, int64_t c0, int64_t M, int64_t N, const rt_mma_c &f,
                                      CO cout)
{
    int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        int64_t r = r0 + g + 8 * (i >> 1), c = c0 + 2 * t + (i & 1);
        if (r < M && c < N)
            cout(r, c, f.x[i]);
    }
}

#ifdef __CUDA_ARCH__
/* d = a b + d on the tensor cores: the 32 lanes of the warp together */
static __device__ inline void rt_mma(const rt_mma_a &a, const rt_mma_b &b, rt_mma_c &d)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3])
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]));
}
#endif

/* The simulation's mma.sync: the 32 lanes' fragments decoded by the PTX
 * ISA's formulas as written there (element i of a lane's fragment, low half
 * of a register first: ai is register i / 2, half i % 2):
 *   A  row = groupID for 0 <= i < 2 || 4 <= i < 6, groupID + 8 otherwise;
 *      col = threadID_in_group * 2 + (i & 1), + 8 for i >= 4
 *   B  row = threadID_in_group * 2 + (i & 1), + 8 for i >= 2; col = groupID
 *   C  row = groupID for i < 2, groupID + 8 otherwise;
 *      col = threadID_in_group * 2 + (i & 1)
 * then d = c + (sum over k of A[row][k] B[k][col] by an fmaf chain in
 * increasing k from 0: the products of bf16 values are exact in f32) */
static inline void rt_mma_emulate(const rt_mma_a *a, const rt_mma_b *b, rt_mma_c *d)
{
    float A[16][16], B[16][8];
    for (int lane = 0; lane < 32; lane++) {
        int groupID = lane >> 2, tig = lane % 4;
        for (int i = 0; i < 8; i++) {
            int row = (i < 2 || (i >= 4 && i < 6)) ? groupID : groupID + 8;
            int col = tig * 2 + (i & 0x1) + (i >= 4 ? 8 : 0);
            A[row][col] = rt_mma_bf16(a[lane].x[i / 2], i % 2);
        }
        for (int i = 0; i < 4; i++) {
            int row = tig * 2 + (i & 0x1) + (i >= 2 ? 8 : 0);
            B[row][groupID] = rt_mma_bf16(b[lane].x[i / 2], i % 2);
        }
    }
    for (int lane = 0; lane < 32; lane++) {
        int groupID = lane >> 2, tig = lane % 4;
        for (int i = 0; i < 4; i++) {
            int row = i < 2 ? groupID : groupID + 8, col = tig * 2 + (i & 0x1);
            float s = 0.0f;
            for (int k = 0; k < 16; k++)
                s = fmaf(A[row][k], B[k][col], s);
            d[lane].x[i] = d[lane].x[i] + s;
        }
    }
}

/* the phase (see the top of this file) */
template <class LA, class LB, class CI, class CO>
static RT_HD inline void rt_mma_tiles(const rt_block &blk, int64_t M, int64_t N, int64_t K, LA a, LB b, CI cin,
                                      CO cout)
{
    int64_t tn = (N + RT_MMA_N - 1) / RT_MMA_N, nt = (M + RT_MMA_M - 1) / RT_MMA_M * tn;
    (void)blk;
#ifdef __CUDA_ARCH__
    /* a warp per tile: its lanes reach every mma.sync together */
    int lane = (int)(threadIdx.x % 32);
    for (int64_t tile = threadIdx.x / 32; tile < nt; tile += blockDim.x / 32) {
        int64_t r0 = tile / tn * RT_MMA_M, c0 = tile % tn * RT_MMA_N;
        rt_mma_c acc = rt_mma_load_c(lane, r0, c0, M, N, cin);
        for (int64_t k0 = 0; k0 < K; k0 += RT_MMA_K)
            rt_mma(rt_mma_load_a(lane, r0, k0, M, K, a), rt_mma_load_b(lane, k0, c0, K, N, b), acc);
        rt_mma_store(lane, r0, c0, M, N, acc, cout);
    }
    __syncthreads();
#else
    /* the tiles one after another, each with its 32 lanes' fragments */
    for (int64_t tile = 0; tile < nt; tile++) {
        int64_t r0 = tile / tn * RT_MMA_M, c0 = tile % tn * RT_MMA_N;
        rt_mma_a fa[32];
        rt_mma_b fb[32];
        rt_mma_c acc[32];
        for (int lane = 0; lane < 32; lane++)
            acc[lane] = rt_mma_load_c(lane, r0, c0, M, N, cin);
        for (int64_t k0 = 0; k0 < K; k0 += RT_MMA_K) {
            for (int lane = 0; lane < 32; lane++) {
                fa[lane] = rt_mma_load_a(lane, r0, k0, M, K, a);
                fb[lane] = rt_mma_load_b(lane, k0, c0, K, N, b);
            }
            rt_mma_emulate(fa, fb, acc);
        }
        for (int lane = 0; lane < 32; lane++)
            rt_mma_store(lane, r0, c0, M, N, acc[lane], cout);
    }
#endif
}

#endif /* RT_CUDA_MMA_H */
