/* Shared pieces of the hand-written baselines (flagship_hand.c, block_hand.c):
 * command-line flags from a table, the (dp, tp) mesh with our own
 * communicators, and buffers / initial values drawn with libspmdrt's
 * counter-based RNG so they are bit-identical to the generated programs'.
 * The training steps themselves are plain C + MPI + CBLAS in each program. */
#ifndef HAND_COMMON_H
#define HAND_COMMON_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "spmdrt.h"

/* ------------------------------------------------------------------ flags */

typedef enum { HAND_LONG, HAND_INT, HAND_DOUBLE, HAND_FLAG } hand_kind;

typedef struct hand_opt {
    const char *name; /* --name VALUE or --name=VALUE (a flag: --name) */
    hand_kind kind;
    long min;         /* HAND_LONG / HAND_INT: the smallest accepted value */
    void *dst;        /* long *, int *, double *, int * (flag: set to 1) */
} hand_opt;

static const char *hand_prog_, *hand_usage_;

/* usage errors happen before MPI starts: print once (rank 0 of mpirun) */
static inline void hand_usage_error(const char *fmt, const char *arg)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = getenv("PMI_RANK");
    if (!r || strcmp(r, "0") == 0) {
        fprintf(stderr, "%s: error: ", hand_prog_);
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\n%s", hand_usage_);
    }
    exit(2);
}

static inline long hand_parse_long(const char *name, const char *s, long min)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min)
        hand_usage_error(min > 0 ? "--%s needs a positive integer" : "--%s needs an integer",
                         name);
    return v;
}

/* opts ends with {NULL}; --help / -h prints usage and exits 0 */
static inline void hand_parse_args(int argc, char **argv, const char *prog, const char *usage,
                            const hand_opt *opts)
{
    hand_prog_ = prog;
    hand_usage_ = usage;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0)
            hand_usage_error("unexpected argument '%s'", a);
        char name[32];
        const char *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n >= sizeof name)
            hand_usage_error("unknown option '%s'", a);
        memcpy(name, a + 2, n);
        name[n] = '\0';
        const hand_opt *o = opts;
        while (o->name && strcmp(o->name, name) != 0)
            o++;
        if (!o->name)
            hand_usage_error("unknown option '%s'", a);
        if (o->kind == HAND_FLAG) {
            if (eq)
                hand_usage_error("option '%s' takes no value", a);
            *(int *)o->dst = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val) {
            if (i + 1 >= argc)
                hand_usage_error("option '%s' needs a value", a);
            val = argv[++i];
        }
        if (o->kind == HAND_LONG) {
            *(long *)o->dst = hand_parse_long(name, val, o->min);
        } else if (o->kind == HAND_INT) {
            *(int *)o->dst = (int)hand_parse_long(name, val, o->min);
        } else {
            char *end;
            *(double *)o->dst = strtod(val, &end);
            if (*val == '\0' || *end != '\0')
                hand_usage_error("--%s needs a number", name);
        }
    }
}

/* ------------------------------------------------------------------- mesh */

/* mesh (dp, tp: 2), ranks row-major (rank = i_dp * n_tp + i_tp), with our own
 * communicators: the dp group shares i_tp, the tp group shares i_dp. */
typedef struct hand_mesh {
    rt_ctx *ctx;
    int rank, n_dp, n_tp, i_dp, i_tp;
    MPI_Comm dp_comm, tp_comm;
} hand_mesh;

/* dp, tp: the flags' values, 0 when not given (like the .spmd's
 * `mesh (dp, tp: 2)`: tp defaults to 2, an omitted size is inferred) */
static inline hand_mesh hand_mesh_init(int *argc, char ***argv, int dp, int tp)
{
    static const char *const axis_names[] = {"dp", "tp"};
    int sizes[2] = {dp ? dp : -1, tp ? tp : (dp ? -1 : 2)};
    /* glibc's malloc defaults, not the runtime's policy (docs/runtime.md
     * "Page faults"): the baseline is what a C+MPI programmer gets without
     * tuning the allocator */
    rt_set_malloc_policy(false);
    hand_mesh m = {.ctx = rt_init(argc, argv, 2, axis_names, sizes)};
    rt_ctx *ctx = m.ctx;
    m.rank = rt_rank(ctx);
    m.n_dp = rt_axis_size(ctx, 0);
    m.n_tp = rt_axis_size(ctx, 1);
    m.i_dp = m.rank / m.n_tp;
    m.i_tp = m.rank % m.n_tp;
    RT_CHECK(ctx, m.i_dp == rt_axis_index(ctx, 0) && m.i_tp == rt_axis_index(ctx, 1),
             "rank layout differs from the runtime's");
    RT_CALL_MPI(ctx, MPI_Comm_split(MPI_COMM_WORLD, m.i_tp, m.i_dp, &m.dp_comm));
    RT_CALL_MPI(ctx, MPI_Comm_split(MPI_COMM_WORLD, m.i_dp, m.i_tp, &m.tp_comm));
    return m;
}

/* frees the communicators, then rt_finalize (MPI_Finalize); returns its status */
static inline int hand_mesh_finalize(hand_mesh *m)
{
    MPI_Comm_free(&m->dp_comm);
    MPI_Comm_free(&m->tp_comm);
    return rt_finalize(m->ctx);
}

/* ---------------------------------------------------------------- buffers */

/* 64-byte aligned, zeroed (so pre-faulted) */
static inline void *hand_alloc(rt_ctx *ctx, size_t bytes)
{
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes ? bytes : 64);
    RT_CHECK(ctx, p != NULL, "out of memory (%zu bytes)", bytes);
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

static inline float *hand_alloc_f32(rt_ctx *ctx, long n)
{
    return hand_alloc(ctx, (size_t)n * sizeof(float));
}

/* This rank's block of randn(f32[global], seed, std) sharded per dim over
 * axis[d] (0 = dp, 1 = tp, -1 = not sharded), in the buffer the runtime drew
 * it into (taken over: no copy; free() it). *numel (if not NULL) receives
 * the block's size. */
static inline float *hand_randn(rt_ctx *ctx, const char *name, int ndim, const int64_t *global,
                         const int *axis, uint64_t seed, double std, long *numel)
{
    rt_axes spec[RT_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        spec[d] = axis[d] >= 0 ? RT_AXES(axis[d]) : RT_NO_AXES;
    rt_layout l = rt_layout_of(ctx, name, ndim, global, spec);
    rt_tensor *t = rt_randn(ctx, RT_F32, &l, seed, std);
    if (numel)
        *numel = (long)t->numel;
    return rt_take_data(ctx, t);
}

#endif
