/* mpirun test of the f32 GEMM library choice (runtime/gemm.c): every rank
 * uses rank 0's choice (timed, or SPMD_GEMM), and a replicated f32 matmul
 * and its backward (the same operands on every rank) give the same bytes
 * on every rank. Rank 0 prints "f32 GEMM: LIB on N ranks".
 * Usage: mpirun -np N mpi_gemm [openblas|dnnl] (the library expected) */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "spmdrt.h"

static int failures;

static uint64_t fnv(const rt_tensor *t, uint64_t h)
{
    const unsigned char *p = t->data;
    for (size_t i = 0; i < (size_t)t->numel * rt_dtype_size(t->dtype); i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv)
{
    const char *names[] = {"x"};
    int sizes[] = {-1};
    rt_ctx *ctx = rt_init(&argc, &argv, 1, names, sizes);
    int rank = rt_rank(ctx), world = rt_world_size(ctx);
    int lib = (int)rt_gemm_f32_lib(ctx), lo = 0, hi = 0;
    RT_CALL_MPI(ctx, MPI_Allreduce(&lib, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    RT_CALL_MPI(ctx, MPI_Allreduce(&lib, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (lo != hi) {
        failures++;
        fprintf(stderr, "[rank %d] FAIL: ranks use different f32 GEMM libraries (%d..%d)\n", rank,
                lo, hi);
    }
    if (argc > 1) {
        rt_gemm_lib want = strcmp(argv[1], "dnnl") == 0 ? RT_GEMM_DNNL : RT_GEMM_OPENBLAS;
        if (lib != (int)want) {
            failures++;
            fprintf(stderr, "[rank %d] FAIL: f32 GEMM on %s, expected %s\n", rank,
                    rt_gemm_lib_name((rt_gemm_lib)lib), rt_gemm_lib_name(want));
        }
    }
    /* replicated operands (the same seed everywhere), odd sizes */
    int64_t sa[3] = {3, 37, 53}, sb[2] = {53, 29};
    rt_layout la = rt_layout_full(3, sa), lb = rt_layout_full(2, sb);
    rt_tensor *a = rt_randn(ctx, RT_F32, &la, 5, 1.0), *b = rt_randn(ctx, RT_F32, &lb, 6, 1.0);
    rt_tensor *y = rt_matmul(ctx, a, b), *da, *db;
    rt_matmul_bwd(ctx, a, b, y, &da, &db);
    uint64_t h = fnv(db, fnv(da, fnv(y, 14695981039346656037ull)));
    unsigned long long mine = h, hlo = 0, hhi = 0;
    RT_CALL_MPI(ctx, MPI_Allreduce(&mine, &hlo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD));
    RT_CALL_MPI(ctx, MPI_Allreduce(&mine, &hhi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD));
    if (hlo != hhi) {
        failures++;
        fprintf(stderr, "[rank %d] FAIL: a replicated matmul differs between ranks\n", rank);
    }
    rt_free(ctx, a); rt_free(ctx, b); rt_free(ctx, y); rt_free(ctx, da); rt_free(ctx, db);
    int all = 0;
    RT_CALL_MPI(ctx, MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank == 0)
        printf("f32 GEMM: %s on %d ranks%s\n", rt_gemm_lib_name((rt_gemm_lib)lib), world,
               all ? "; FAILED" : ", the same on each");
    rt_finalize(ctx);
    return all ? 1 : 0;
}
