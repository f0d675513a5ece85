/* Saving and loading one sharded tensor: rt_save_npy / rt_load_npy
 * (collective MPI-IO, each rank writes only its block) against what the
 * runtime did before (the blocks gathered on rank 0 with MPI_Gatherv, which
 * writes, fsyncs and renames; each rank preads its block back). Both sync
 * to storage and rename. Interleaved (old, new, old, new, ...); each time is
 * the slowest rank's; medians with min-max. The global tensor is
 * f32[MiB * 2^18] sharded on dim 0 over every rank.
 * Usage: mpirun -np 4 bench_checkpoint DIR [reps] [MiB,MiB,...] */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "spmdrt.h"

static double slowest(double t)
{
    double m = t;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* the old save: gather on rank 0, write a temporary file, fsync, rename */
static void old_save(const char *path, const rt_tensor *x, int64_t global_bytes)
{
    int world, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *all = rank == 0 ? malloc((size_t)global_bytes) : NULL;
    int mine = (int)(x->numel * 4);
    MPI_Gather(x->data, mine, MPI_BYTE, all, mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        char head[128], tmp[700];
        int hl = 10 + snprintf(head + 10, sizeof head - 10,
                               "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld,), }",
                               (long long)(global_bytes / 4));
        memcpy(head, "\x93NUMPY\x01\x00\x76\x00", 10); /* version 1.0, 118 header bytes */
        memset(head + hl, ' ', (size_t)(128 - hl));
        head[127] = '\n';
        snprintf(tmp, sizeof tmp, "%s.old", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, head, 128) != 128 || write(fd, all, (size_t)global_bytes) != global_bytes ||
            fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
            perror("old save");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    free(all);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void old_load(const char *path, rt_tensor *x, int64_t offset_bytes)
{
    int fd = open(path, O_RDONLY);
    size_t n = (size_t)x->numel * 4;
    if (fd < 0 || pread(fd, x->data, n, 128 + offset_bytes) != (ssize_t)n) {
        perror("old load");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    close(fd);
}

int main(int argc, char **argv)
{
    const char *names[] = {"x"};
    rt_ctx *ctx = rt_init(&argc, &argv, 1, names, NULL);
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    const char *sizes = argc > 3 ? argv[3] : "16,64";
    int rank = rt_rank(ctx), world = rt_world_size(ctx);
    if (rank == 0)
        printf("%d ranks; times in ms (slowest rank), median [min-max] of %d; f32 tensor sharded on dim 0\n"
               "%8s %24s %24s %7s %24s %24s %7s\n", world, reps, "MiB", "save: gather+write", "save: MPI-IO",
               "ratio", "load: pread", "load: MPI-IO", "ratio");
    char path[600];
    snprintf(path, sizeof path, "%s/bench_ckpt.npy", dir);
    for (const char *p = sizes; *p;) {
        int mib = atoi(p);
        int64_t n = (int64_t)mib << 18; /* f32 elements */
        rt_axes ax[1] = {RT_AXES(0)};
        rt_layout l = rt_layout_of(ctx, "x", 1, &n, ax);
        rt_tensor *x = rt_uniform(ctx, RT_F32, &l, 7, -1, 1);
        rt_tensor *y = rt_empty(ctx, RT_F32, 1, l.local);
        double t[4][64];
        for (int r = 0; r < reps && r < 64; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now_s();
            old_save(path, x, n * 4);
            t[0][r] = slowest(now_s() - t0);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = now_s();
            rt_save_npy(ctx, path, x, &l);
            t[1][r] = slowest(now_s() - t0);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = now_s();
            old_load(path, y, l.offset[0] * 4);
            t[2][r] = slowest(now_s() - t0);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = now_s();
            rt_tensor *z = rt_load_npy(ctx, path, RT_F32, &l);
            t[3][r] = slowest(now_s() - t0);
            if (memcmp(z->data, x->data, (size_t)x->numel * 4) != 0 || memcmp(y->data, x->data, (size_t)x->numel * 4))
                rt_fail(ctx, "loaded data differs");
            rt_free(ctx, z);
        }
        if (rank == 0) {
            double med[4], lo[4], hi[4];
            for (int k = 0; k < 4; k++) {
                med[k] = median(t[k], reps) * 1e3;
                lo[k] = t[k][0] * 1e3; /* sorted by median() */
                hi[k] = t[k][reps - 1] * 1e3;
            }
            printf("%8d %9.1f [%5.1f-%6.1f] %9.1f [%5.1f-%6.1f] %7.2f %9.1f [%5.1f-%6.1f] %9.1f [%5.1f-%6.1f] %7.2f\n",
                   mib, med[0], lo[0], hi[0], med[1], lo[1], hi[1], med[1] / med[0], med[2], lo[2], hi[2], med[3],
                   lo[3], hi[3], med[3] / med[2]);
            fflush(stdout);
        }
        rt_free(ctx, x);
        rt_free(ctx, y);
        p += strcspn(p, ",");
        p += *p == ',';
    }
    if (rank == 0)
        unlink(path);
    return rt_finalize(ctx);
}
