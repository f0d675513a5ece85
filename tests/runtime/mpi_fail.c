/* Programs that fail on purpose, run by expect_fail.sh: the failing rank
 * must print "spmd: error: [rank N] ..." and every rank must stop with a
 * non-zero status, even the ones already waiting in a collective.
 * Usage: mpirun -np N mpi_fail MODE [DIR] [--mesh ...] */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "spmdrt.h"

static void missing_npy(rt_ctx *ctx, const char *dir)
{
    char ok[512], nope[512];
    snprintf(ok, sizeof ok, "%s/fail_ok.npy", dir);
    snprintf(nope, sizeof nope, "%s/nope.npy", dir);
    int64_t shape[1] = {4};
    rt_layout l = rt_layout_full(1, shape);
    rt_tensor *x = rt_full(ctx, RT_F32, 1, shape, 1.0);
    rt_save_npy(ctx, ok, x, &l);
    /* only rank 1 reads a file that does not exist */
    rt_tensor *y = rt_load_npy(ctx, rt_rank(ctx) == 1 ? nope : ok, RT_F32, &l);
    rt_tensor *z = rt_all_reduce(ctx, y, RT_AXES(0), RT_RED_SUM); /* others wait here */
    rt_free(ctx, x); rt_free(ctx, y); rt_free(ctx, z);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *names2[] = {"dp", "tp"}, *names1[] = {"dp"};
    int sizes2[] = {-1, 2}, sizes1[] = {-1};
    bool two = strcmp(mode, "mesh") == 0 || strcmp(mode, "divisible_tuple") == 0;
    rt_ctx *ctx = two ? rt_init(&argc, &argv, 2, names2, sizes2)
                      : rt_init(&argc, &argv, 1, names1, sizes1);
    if (strcmp(mode, "missing_npy") == 0) {
        missing_npy(ctx, argc > 2 ? argv[2] : ".");
    } else if (strcmp(mode, "check") == 0) {
        RT_CHECK(ctx, rt_rank(ctx) != 2, "boom on rank %d only", rt_rank(ctx));
        rt_barrier(ctx);
    } else if (strcmp(mode, "divisible") == 0) {
        /* what needs equal blocks (uneven ones are legal: rt_layout_of) */
        rt_check_divisible(ctx, "x", 0, 10, RT_AXES(0));
    } else if (strcmp(mode, "divisible_tuple") == 0) {
        rt_check_divisible(ctx, "w", 1, 6, RT_AXES(1, 0));
    } else if (strcmp(mode, "mpi_error") == 0) {
        float a = 0, b = 0;
        if (rt_rank(ctx) == 0)
            RT_CALL_MPI(ctx, MPI_Allreduce(&a, &b, -1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        rt_barrier(ctx);
    }
    rt_barrier(ctx);
    return rt_finalize(ctx);
}
