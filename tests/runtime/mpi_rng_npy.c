/* mpirun test of the counter-based RNG and of .npy save/load on a mesh:
 * for several shardings of a global [8, 8, 4] tensor, each rank's randn /
 * uniform block must equal bit for bit the matching block of the unsharded
 * tensor (computed in-process), the atomically saved file must hold the
 * unsharded tensor, and loading it back sharded must give each rank's block.
 * Usage: mpirun -np N mpi_rng_npy PREFIX --mesh x=N[,y=M] */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "spmdrt.h"

static int failures;

static void fail(rt_ctx *ctx, const char *what, const char *how)
{
    failures++;
    fprintf(stderr, "[rank %d] FAIL %s: %s\n", rt_rank(ctx), what, how);
}

/* the block of full described by l, as a new tensor */
static rt_tensor *block_of(rt_ctx *ctx, const rt_tensor *full, const rt_layout *l)
{
    rt_tensor *b = rt_empty(ctx, full->dtype, l->ndim, l->local);
    for (int64_t i = 0; i < b->numel; i++) {
        int64_t rem = i, g = 0, mul = 1, idx[RT_MAX_DIMS];
        for (int d = l->ndim - 1; d >= 0; d--) {
            idx[d] = rem % l->local[d];
            rem /= l->local[d];
        }
        for (int d = l->ndim - 1; d >= 0; d--) {
            g += (idx[d] + l->offset[d]) * mul;
            mul *= l->global[d];
        }
        rt_set(b, i, rt_get(full, g));
    }
    return b;
}

static bool same_bits(const rt_tensor *a, const rt_tensor *b)
{
    return a->numel == b->numel && a->dtype == b->dtype &&
           memcmp(a->data, b->data, (size_t)a->numel * rt_dtype_size(a->dtype)) == 0;
}

typedef struct shard {
    const char *name;
    rt_axes dims[3];
} shard;

static void run_case(rt_ctx *ctx, const char *prefix, const shard *s, rt_dtype dt, int kind)
{
    int64_t g[3] = {8, 8, 4};
    char what[128], path[512];
    snprintf(what, sizeof what, "%s %s %s", s->name, rt_dtype_name(dt),
             kind == 0 ? "randn" : kind == 1 ? "uniform" : "iota");
    rt_layout full = rt_layout_full(3, g), l = rt_layout_of(ctx, "x", 3, g, s->dims);
    rt_tensor *ref, *mine;
    if (kind == 0) {
        ref = rt_randn(ctx, dt, &full, 1234, 0.5);
        mine = rt_randn(ctx, dt, &l, 1234, 0.5);
    } else if (kind == 1) {
        ref = rt_uniform(ctx, dt, &full, 99, -2.0, 3.0);
        mine = rt_uniform(ctx, dt, &l, 99, -2.0, 3.0);
    } else { /* i32: an index pattern, for the npy round trip */
        ref = rt_empty(ctx, dt, 3, g);
        for (int64_t i = 0; i < ref->numel; i++)
            rt_set(ref, i, (double)(i * 3 - 100));
        mine = block_of(ctx, ref, &l);
    }
    rt_tensor *want = block_of(ctx, ref, &l);
    if (!same_bits(mine, want))
        fail(ctx, what, "sharded block differs from the unsharded tensor's block");
    snprintf(path, sizeof path, "%s_%s_%s_%d.npy", prefix, s->name, rt_dtype_name(dt), kind);
    rt_save_npy(ctx, path, mine, &l);
    rt_tensor *back = rt_load_npy(ctx, path, dt, &full);
    if (!same_bits(back, ref))
        fail(ctx, what, "saved file differs from the unsharded tensor");
    rt_tensor *part = rt_load_npy(ctx, path, dt, &l);
    if (!same_bits(part, mine))
        fail(ctx, what, "sharded load differs from the block");
    rt_free(ctx, ref); rt_free(ctx, mine); rt_free(ctx, want);
    rt_free(ctx, back); rt_free(ctx, part);
}

int main(int argc, char **argv)
{
    const char *names[] = {"x", "y"};
    int sizes[] = {-1, 1};
    rt_ctx *ctx = rt_init(&argc, &argv, 2, names, sizes);
    const char *prefix = argc > 1 ? argv[1] : "rng";
    shard cases[] = {
        {"none", {RT_NO_AXES, RT_NO_AXES, RT_NO_AXES}},
        {"d0x", {RT_AXES(0), RT_NO_AXES, RT_NO_AXES}},
        {"d1x", {RT_NO_AXES, RT_AXES(0), RT_NO_AXES}},
        {"d2y", {RT_NO_AXES, RT_NO_AXES, RT_AXES(1)}},
        {"d0x_d2y", {RT_AXES(0), RT_NO_AXES, RT_AXES(1)}},
        {"d1xy", {RT_NO_AXES, RT_AXES(0, 1), RT_NO_AXES}},
        {"d1yx", {RT_NO_AXES, RT_AXES(1, 0), RT_NO_AXES}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        run_case(ctx, prefix, &cases[c], RT_F32, 0);
        run_case(ctx, prefix, &cases[c], RT_F64, 0);
        run_case(ctx, prefix, &cases[c], RT_F32, 1);
        run_case(ctx, prefix, &cases[c], RT_I32, 2);
    }
    /* a fixed checksum of the unsharded f64 randn: the same on every mesh run */
    int64_t g[3] = {8, 8, 4};
    rt_layout full = rt_layout_full(3, g);
    rt_tensor *r = rt_randn(ctx, RT_F64, &full, 1234, 0.5);
    double sum = 0;
    for (int64_t i = 0; i < r->numel; i++)
        sum += rt_get(r, i) * (double)(i % 7 + 1);
    rt_free(ctx, r);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rt_rank(ctx) == 0)
        printf("rng/npy on %d ranks (x=%d, y=%d): checksum %.17g, %d failures\n",
               rt_world_size(ctx), rt_axis_size(ctx, 0), rt_axis_size(ctx, 1), sum, total);
    rt_finalize(ctx);
    return total ? 1 : 0;
}
