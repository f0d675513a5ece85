/* Internal to libspmdrt: the rt_ctx layout and helpers shared between the
 * runtime's files. Generated code never includes this header.
 * The ctx owns everything reachable from it (groups, pool lists, events). */
#ifndef RT_INTERNAL_H
#define RT_INTERNAL_H

#include <mpi.h>
#include <stdio.h>

#include "spmdrt.h"

#define RT_NCLASS 176   /* pool size classes */
#define RT_NAME_MAX 32

/* A communicator for an axis tuple (flattened, in the tuple's order). */
typedef struct rt_group {
    rt_axes axes;
    MPI_Comm comm;
    int size;
    int rank;
} rt_group;

typedef struct rt_freelist {
    void **items;
    int n, cap;
} rt_freelist;

typedef enum {
    RT_COLL_ALL_REDUCE,
    RT_COLL_ALL_GATHER,
    RT_COLL_REDUCE_SCATTER,
    RT_COLL_ALL_TO_ALL,
    RT_COLL_GATHER_SAVE,
    RT_NCOLL
} rt_coll_kind;

typedef struct rt_coll_stat {
    double count, bytes, seconds;
} rt_coll_stat;

typedef struct rt_event {
    const char *name;   /* static string */
    const char *cat;    /* "compute" "comm" "user" */
    double t0, dur;     /* microseconds since the ctx's start */
    double bytes;
} rt_event;

/* reduce_scatter: MPI_Reduce_scatter_block, MPI_Allreduce + local slice, or
 * chosen by input size (allreduce from RT_RS_ALLREDUCE_MIN bytes; measured
 * with bench/bench_collectives, see docs/runtime.md) */
typedef enum { RT_RS_AUTO, RT_RS_ALLREDUCE, RT_RS_MPI } rt_rs_algo;
#define RT_RS_ALLREDUCE_MIN ((size_t)4 << 20)

struct rt_ctx {
    bool mpi;           /* false for rt_ctx_serial */
    int rank, world;
    int naxes;
    char names[RT_MAX_AXES][RT_NAME_MAX];
    int sizes[RT_MAX_AXES];
    int coords[RT_MAX_AXES];
    rt_group *groups;
    int ngroups, groups_cap;

    rt_freelist pool[RT_NCLASS];
    size_t pool_cached, pool_limit;

    rt_error_hook hook;
    void *hook_user;

    double t_start;      /* seconds, monotonic clock */
    char *trace_path;
    rt_event *events;
    int nevents, events_cap;
    const char *open_names[64]; /* rt_trace_begin stack */
    double open_t0[64];
    int nopen;
    bool profile;
    rt_coll_stat stats[RT_NCOLL];
    rt_rs_algo rs_algo;
    size_t rs_allreduce_min;
};

/* trace.c */
double rt_now(void); /* seconds */
void rt_trace_record(rt_ctx *ctx, const char *name, const char *cat, double t0,
                     double bytes);
void rt_coll_record(rt_ctx *ctx, rt_coll_kind kind, double t0, double bytes);
void rt_trace_finish(rt_ctx *ctx);
void rt_trace_free(rt_ctx *ctx);
/* time a compute kernel: RT_TIMED_BEGIN(ctx); ...; RT_TIMED_END(ctx, "matmul"); */
#define RT_TIMED_BEGIN(ctx) double rt_t0_ = rt_tracing(ctx) ? rt_now() : 0.0
#define RT_TIMED_END(ctx, name) \
    do { if (rt_tracing(ctx)) rt_trace_record((ctx), (name), "compute", rt_t0_, 0); } while (0)

/* mesh.c */
rt_group *rt_group_get(rt_ctx *ctx, rt_axes axes);
void rt_mesh_free(rt_ctx *ctx);
void rt_mesh_setup(rt_ctx *ctx, int naxes, const char *const *names, const int *sizes,
                   const char *mesh_arg);

/* pool.c */
void rt_pool_free_all(rt_ctx *ctx);

/* tensor.c: shape helpers */
int64_t rt_numel_of(int ndim, const int64_t *shape);
int rt_norm_dim(rt_ctx *ctx, int dim, int ndim, const char *what);
bool rt_same_shape(const rt_tensor *a, const rt_tensor *b);
void rt_shape_str(char *buf, size_t n, int ndim, const int64_t *shape);
/* view a dim as [outer, d, inner] */
void rt_split_dims(const rt_tensor *x, int dim, int64_t *outer, int64_t *d, int64_t *inner);
void rt_check_dtype(rt_ctx *ctx, const rt_tensor *x, rt_dtype dt, const char *what);
void rt_check_float(rt_ctx *ctx, const rt_tensor *x, const char *what);
/* strided block copy: rows of `inner` elements, used by packers */
void rt_copy_block(void *dst, const void *src, size_t esz, int64_t outer, int64_t dst_stride,
                   int64_t src_stride, int64_t run);
/* row <-> double conversions */
void rt_load_f64(const rt_tensor *x, int64_t off, int64_t n, double *out);
void rt_store_f64(rt_tensor *x, int64_t off, int64_t n, const double *in);
double *rt_scratch(rt_ctx *ctx, int64_t n, size_t *cap);

#endif /* RT_INTERNAL_H */
