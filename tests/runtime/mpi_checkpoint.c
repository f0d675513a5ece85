/* mpirun test of checkpoint directories (rt_ckpt_*), rt_save_npy/rt_load_npy
 * and rt_exists on a 2-axis mesh (x, y). Every tensor's element at global
 * flat index g holds value(seed, g), so any rank can check any block, and a
 * checkpoint saved on one mesh can be checked on another.
 *
 *   mpi_checkpoint save DIR SEED [--mesh x=..,y=..]   save, load back, check
 *   mpi_checkpoint load DIR SEED                        load with other shardings, check
 *   mpi_checkpoint crash_field DIR SEED                 the last rank dies after one field
 *   mpi_checkpoint crash_commit DIR SEED                rank 0 dies just before the commit
 *   mpi_checkpoint fail_KIND DIR                        an error every rank must report
 *
 * The tensors cover every kind of layout: dims sharded over x, y, (x, y)
 * and (y, x), replicated on one or both axes, a 0-d scalar, an empty
 * tensor, f32, f64 and i32. */
#define _GNU_SOURCE /* truncate */
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spmdrt.h"

#define X 0
#define Y 1

typedef struct field {
    const char *name;
    rt_dtype dt;
    int ndim;
    int64_t shape[4];
    rt_axes save_spec[4]; /* how it is sharded when saved */
    rt_axes load_spec[4]; /* and when loaded back in `load` mode */
} field;

#define N RT_NO_AXES
static const field fields[] = {
    {"emb", RT_F32, 2, {8, 12}, {RT_AXES(X), N}, {N, RT_AXES(Y)}},
    {"attn.wqkv", RT_F32, 4, {4, 3, 8, 2}, {N, N, RT_AXES(X, Y), N}, {RT_AXES(Y), N, RT_AXES(X), N}},
    {"attn.wo", RT_F64, 2, {8, 4}, {RT_AXES(Y, X), N}, {RT_AXES(X, Y), N}},
    {"ln", RT_F32, 1, {6}, {N}, {N}},
    {"w2", RT_F32, 2, {4, 8}, {RT_AXES(Y), RT_AXES(X)}, {RT_AXES(X), RT_AXES(Y)}},
    {"step", RT_I32, 0, {0}, {N}, {N}},
    {"empty", RT_F32, 2, {0, 4}, {N, RT_AXES(Y)}, {N, N}},
    {"ids", RT_I32, 2, {8, 2}, {RT_AXES(X), N}, {RT_AXES(Y, X), N}},
};
#undef N
#define NFIELDS ((int)(sizeof fields / sizeof *fields))

static int failures;

static double value(int seed, int64_t g, rt_dtype dt)
{
    return dt == RT_I32 ? (double)(seed * 1000 + g) : seed * 100.0 + (double)g * 0.25 - 3.0;
}

/* this rank's block of the field, filled with value(seed, global index) */
static rt_tensor *make_block(rt_ctx *ctx, const field *f, const rt_layout *l, int seed)
{
    rt_tensor *t = rt_empty(ctx, f->dt, l->ndim, l->local);
    for (int64_t i = 0; i < t->numel; i++) {
        int64_t rem = i, g = 0, mul = 1, idx[RT_MAX_DIMS];
        for (int d = l->ndim - 1; d >= 0; d--) {
            idx[d] = rem % l->local[d];
            rem /= l->local[d];
        }
        for (int d = l->ndim - 1; d >= 0; d--) {
            g += (idx[d] + l->offset[d]) * mul;
            mul *= l->global[d];
        }
        rt_set(t, i, value(seed, g, f->dt));
    }
    return t;
}

static void expect_block(rt_ctx *ctx, const field *f, const rt_layout *l, const rt_tensor *t,
                         int seed, const char *how)
{
    rt_tensor *want = make_block(ctx, f, l, seed);
    bool same = t->numel == want->numel && t->dtype == want->dtype && t->ndim == want->ndim;
    for (int64_t i = 0; same && i < t->numel; i++)
        same = rt_get(t, i) == rt_get(want, i);
    if (!same) {
        failures++;
        fprintf(stderr, "[rank %d] FAIL %s: field '%s' differs from seed %d\n", rt_rank(ctx),
                how, f->name, seed);
    }
    rt_free(ctx, want);
}

static rt_layout layout(rt_ctx *ctx, const field *f, bool for_load)
{
    return rt_layout_of(ctx, f->name, f->ndim, f->shape, for_load ? f->load_spec : f->save_spec);
}

/* save every field; die_rank/die_after: that rank is killed after writing
 * that many fields (die_after == NFIELDS: just before the commit) */
static void save_all(rt_ctx *ctx, const char *dir, int seed, int die_rank, int die_after)
{
    rt_ckpt *ck = rt_ckpt_begin(ctx, dir);
    for (int i = 0; i < NFIELDS; i++) {
        if (rt_rank(ctx) == die_rank && i == die_after)
            raise(SIGKILL);
        rt_layout l = layout(ctx, &fields[i], false);
        rt_tensor *t = make_block(ctx, &fields[i], &l, seed);
        rt_ckpt_write(ctx, ck, fields[i].name, t, &l);
        rt_free(ctx, t);
    }
    if (rt_rank(ctx) == die_rank && die_after == NFIELDS)
        raise(SIGKILL);
    rt_ckpt_commit(ctx, ck);
}

static void load_all(rt_ctx *ctx, const char *dir, int seed, bool other_layouts, const char *how)
{
    for (int i = 0; i < NFIELDS; i++) {
        rt_layout l = layout(ctx, &fields[i], other_layouts);
        rt_tensor *t = rt_ckpt_read(ctx, dir, fields[i].name, fields[i].dt, &l);
        expect_block(ctx, &fields[i], &l, t, seed, how);
        rt_free(ctx, t);
    }
}

static void save_mode(rt_ctx *ctx, const char *dir, int seed)
{
    char path[600];
    snprintf(path, sizeof path, "%s.nothing", dir);
    if (rt_exists(ctx, path)) {
        failures++;
        fprintf(stderr, "FAIL exists('%s')\n", path);
    }
    save_all(ctx, dir, seed, -1, 0);
    if (!rt_exists(ctx, dir)) {
        failures++;
        fprintf(stderr, "FAIL !exists('%s') after the save\n", dir);
    }
    load_all(ctx, dir, seed, false, "load on the saving layouts");
    load_all(ctx, dir, seed, true, "load on other layouts");
    /* saving again replaces the checkpoint */
    save_all(ctx, dir, seed + 1, -1, 0);
    load_all(ctx, dir, seed + 1, true, "load after a replacing save");
    save_all(ctx, dir, seed, -1, 0);
    /* the single-file forms: a plain .npy holding the global tensor */
    const field *f = &fields[1];
    rt_layout l = layout(ctx, f, false), l2 = layout(ctx, f, true);
    rt_tensor *t = make_block(ctx, f, &l, seed);
    snprintf(path, sizeof path, "%s.single.npy", dir);
    rt_save_npy(ctx, path, t, &l);
    rt_tensor *back = rt_load_npy(ctx, path, f->dt, &l2);
    expect_block(ctx, f, &l2, back, seed, "rt_save_npy / rt_load_npy");
    rt_free(ctx, t);
    rt_free(ctx, back);
}

/* ---- errors every rank must report (run by expect_fail.sh) */

static void touch(rt_ctx *ctx, const char *path)
{
    if (rt_rank(ctx) == 0) {
        FILE *p = fopen(path, "w");
        if (p)
            fclose(p);
    }
    rt_barrier(ctx);
}

/* Each mode makes what it needs under dir, then does what must fail. */
static void fail_mode(rt_ctx *ctx, const char *kind, const char *dir)
{
    char path[600];
    const field *f = &fields[0];
    rt_layout l = layout(ctx, f, false);
    if (strcmp(kind, "fail_unwritable") == 0) {
        /* a parent that is a regular file: even root cannot create it */
        snprintf(path, sizeof path, "%s.plain", dir);
        touch(ctx, path);
        snprintf(path, sizeof path, "%s.plain/ckpt", dir);
        rt_ckpt *ck = rt_ckpt_begin(ctx, path);
        rt_ckpt_commit(ctx, ck);
        return;
    }
    if (strcmp(kind, "fail_missing_dir") == 0) {
        snprintf(path, sizeof path, "%s.nothing", dir);
        rt_ckpt_read(ctx, path, f->name, f->dt, &l);
        return;
    }
    snprintf(path, sizeof path, "%s/notes.txt", dir); /* from an earlier run */
    if (rt_rank(ctx) == 0)
        unlink(path);
    save_all(ctx, dir, 1, -1, 0);
    if (strcmp(kind, "fail_missing_field") == 0) {
        rt_ckpt_read(ctx, dir, "nope", f->dt, &l);
    } else if (strcmp(kind, "fail_wrong_dtype") == 0) {
        rt_ckpt_read(ctx, dir, f->name, RT_F64, &l);
    } else if (strcmp(kind, "fail_wrong_shape") == 0) {
        int64_t g[2] = {6, 8}; /* saved as (8, 12) */
        rt_layout l2 = rt_layout_of(ctx, "emb", 2, g, NULL);
        rt_ckpt_read(ctx, dir, f->name, f->dt, &l2);
    } else if (strcmp(kind, "fail_truncated") == 0) {
        snprintf(path, sizeof path, "%s/attn.wo.npy", dir);
        if (rt_rank(ctx) == 0 && truncate(path, 200) != 0)
            perror("truncate");
        rt_barrier(ctx);
        int64_t g[2] = {8, 4};
        rt_layout l2 = rt_layout_of(ctx, "attn.wo", 2, g, NULL);
        rt_ckpt_read(ctx, dir, "attn.wo", RT_F64, &l2);
    } else if (strcmp(kind, "fail_not_a_checkpoint") == 0) {
        /* a file that is not ours in the target: it must not be replaced */
        snprintf(path, sizeof path, "%s/notes.txt", dir);
        touch(ctx, path);
        save_all(ctx, dir, 2, -1, 0);
    } else {
        fprintf(stderr, "unknown mode %s\n", kind);
        failures++;
    }
}

int main(int argc, char **argv)
{
    const char *names[] = {"x", "y"};
    int sizes[] = {-1, 1};
    rt_ctx *ctx = rt_init(&argc, &argv, 2, names, sizes);
    if (argc < 3) {
        fprintf(stderr, "usage: mpi_checkpoint MODE DIR [SEED] [--mesh x=N,y=M]\n");
        return 2;
    }
    const char *mode = argv[1], *dir = argv[2];
    int seed = argc > 3 ? atoi(argv[3]) : 1;
    if (strcmp(mode, "save") == 0)
        save_mode(ctx, dir, seed);
    else if (strcmp(mode, "load") == 0)
        load_all(ctx, dir, seed, true, "load on another mesh");
    else if (strcmp(mode, "crash_field") == 0)
        save_all(ctx, dir, seed, rt_world_size(ctx) - 1, 1);
    else if (strcmp(mode, "crash_commit") == 0)
        save_all(ctx, dir, seed, 0, NFIELDS);
    else
        fail_mode(ctx, mode, dir);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rt_rank(ctx) == 0)
        printf("checkpoint %s on %d ranks (x=%d, y=%d): %d failures\n", mode,
               rt_world_size(ctx), rt_axis_size(ctx, 0), rt_axis_size(ctx, 1), total);
    rt_finalize(ctx);
    return total ? 1 : 0;
}
