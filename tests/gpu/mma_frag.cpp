/* The bf16 tensor-core tile product of the CUDA target (runtime/cuda/mma.h,
 * rt_mma_tiles) as the simulation build runs it: the 32 lanes' fragments
 * built by the code the GPU runs (rt_mma_load_a/b/c, rt_mma_store), one
 * warp's mma.sync emulated from them by the PTX ISA's fragment layout
 * (rt_mma_emulate). A mistake in the fragment index mapping puts elements in
 * the wrong rows or columns of the emulated MMA, so the products below come
 * out wrong: without a GPU, this is what checks the mapping. Each result
 * must equal, bit for bit, a plain description of the same arithmetic:
 *   out(r, c) = cin(r, c) + s_0 + s_1 + ... (in order), s_j = the fmaf chain
 *               over k in [16 j, 16 j + 16) of bf16(a(r, k)) bf16(b(k, c))
 * (bf16: rounded to nearest even), be within f32 rounding of the product in
 * double, be written exactly once, and no operand outside M x K, K x N be
 * read. Shapes: one MMA, tiles with ragged edges in M, N and K, 1 x 1 x 1,
 * a 64 x 64 x 64 attention tile. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mma.h"

static uint64_t lcg = 4242;
static double next_u(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) * (1.0 / 9007199254740992.0);
}
static float bf16(float x) /* to nearest even, as rt_dev_f32_to_bf16 */
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int fails;

static void check(int64_t M, int64_t N, int64_t K)
{
    /* a and b are not bf16 values: the product must round them */
    float *A = new float[M * K], *B = new float[K * N], *C = new float[M * N], *D = new float[M * N];
    int *writes = new int[M * N];
    for (int64_t i = 0; i < M * K; i++)
        A[i] = (float)(2 * next_u() - 1);
    for (int64_t i = 0; i < K * N; i++)
        B[i] = (float)(2 * next_u() - 1);
    for (int64_t i = 0; i < M * N; i++) {
        C[i] = (float)(2 * next_u() - 1);
        D[i] = NAN;
        writes[i] = 0;
    }
    rt_block blk;
    blk.smem = NULL;
    int bad_reads = 0;
    rt_mma_tiles(
        blk, M, N, K,
        [&](int64_t r, int64_t k) {
            bad_reads += !(r >= 0 && r < M && k >= 0 && k < K);
            return A[r * K + k];
        },
        [&](int64_t k, int64_t c) {
            bad_reads += !(k >= 0 && k < K && c >= 0 && c < N);
            return B[k * N + c];
        },
        [&](int64_t r, int64_t c) { return C[r * N + c]; },
        [&](int64_t r, int64_t c, float v) {
            D[r * N + c] = v;
            writes[r * N + c]++;
        });
    int wrong = 0, far = 0, twice = 0;
    for (int64_t r = 0; r < M; r++)
        for (int64_t c = 0; c < N; c++) {
            float acc = C[r * N + c];
            double exact = C[r * N + c], mag = fabs(C[r * N + c]);
            for (int64_t k0 = 0; k0 < K; k0 += 16) {
                float s = 0;
                for (int64_t k = k0; k < k0 + 16 && k < K; k++) {
                    s = fmaf(bf16(A[r * K + k]), bf16(B[k * N + c]), s);
                    exact += (double)bf16(A[r * K + k]) * bf16(B[k * N + c]);
                    mag += fabs((double)bf16(A[r * K + k]) * bf16(B[k * N + c]));
                }
                acc = acc + s;
            }
            float got = D[r * N + c];
            wrong += memcmp(&got, &acc, 4) != 0;
            far += !(fabs(got - exact) <= 1e-6 * (mag + 1) * (K / 16 + 2));
            twice += writes[r * N + c] != 1;
        }
    if (wrong || far || twice || bad_reads) {
        printf("FAIL %lldx%lldx%lld: %d of %lld differ from the chunked fmaf sums, %d from the exact product, "
               "%d not written once, %d reads outside the operands\n",
               (long long)M, (long long)N, (long long)K, wrong, (long long)(M * N), far, twice, bad_reads);
        fails++;
    } else {
        printf("ok %lldx%lldx%lld\n", (long long)M, (long long)N, (long long)K);
    }
    delete[] A;
    delete[] B;
    delete[] C;
    delete[] D;
    delete[] writes;
}

int main(void)
{
    static const int64_t shapes[][3] = {{16, 8, 16}, {16, 8, 48}, {37, 21, 45}, {1, 1, 1},
                                        {5, 70, 3},  {64, 64, 64}, {33, 16, 70}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check(shapes[i][0], shapes[i][1], shapes[i][2]);
    printf("%s\n", fails ? "FAILED" : "all passed");
    return fails != 0;
}
