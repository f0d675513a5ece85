/* Each collective of libspmdrt against the raw MPI call it wraps, on the
 * same communicator and sizes, interleaved (raw, ours, raw, ours, ...): each
 * timing is the slowest rank's, the table shows medians and ours/raw ratios.
 * Size = bytes of the largest buffer (all_reduce: the buffer; all_gather:
 * the gathered result; reduce_scatter: the input; all_to_all: the buffer).
 * Also times MPI_Reduce_scatter_block against MPI_Allreduce + copy, the
 * choice behind rt_reduce_scatter's default.
 * Usage: mpirun -np 4 bench_collectives [reps] [KiB,KiB,...] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "spmdrt.h"

typedef enum { AR, AG, RS, A2A, AG1, RS1, RS_VIA_AR, NOPS } op_kind;
static const char *op_names[NOPS] = {"all_reduce",   "all_gather",   "reduce_scatter",
                                     "all_to_all",   "all_gather S(1)", "reduce_scatter S(1)",
                                     "rs: MPI_RSB vs AR+copy"};

typedef struct bufs {
    int p;
    int64_t n;        /* floats in the largest buffer */
    float *in, *out;
    rt_tensor *x;     /* input of the runtime call */
} bufs;

/* the raw call reads the same input tensor as the runtime call */
static void raw(op_kind op, bufs *b)
{
    int n = (int)b->n, blk = (int)(b->n / b->p);
    const void *in = op == RS_VIA_AR ? b->in : b->x->data;
    switch (op) {
    case AR:
        MPI_Allreduce(in, b->out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case AG:
    case AG1:
        MPI_Allgather(in, blk, MPI_FLOAT, b->out, blk, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case RS:
    case RS1:
    case RS_VIA_AR:
        MPI_Reduce_scatter_block(in, b->out, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case A2A:
        MPI_Alltoall(in, blk, MPI_FLOAT, b->out, blk, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case NOPS: break;
    }
}

static void ours(rt_ctx *ctx, op_kind op, bufs *b)
{
    rt_axes ax = RT_AXES(0);
    rt_tensor *y = NULL;
    switch (op) {
    case AR: y = rt_all_reduce(ctx, b->x, ax, RT_RED_SUM); break;
    case AG: y = rt_all_gather(ctx, b->x, ax, 0); break;
    case AG1: y = rt_all_gather(ctx, b->x, ax, 1); break;
    case RS: y = rt_reduce_scatter(ctx, b->x, ax, 0, RT_RED_SUM); break;
    case RS1: y = rt_reduce_scatter(ctx, b->x, ax, 1, RT_RED_SUM); break;
    case A2A: y = rt_all_to_all(ctx, b->x, ax, RT_STACK, RT_STACK); break;
    case RS_VIA_AR:
        MPI_Allreduce(b->in, b->x->data, (int)b->n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        memcpy(b->out, (float *)b->x->data + (b->n / b->p) * rt_rank(ctx),
               (size_t)(b->n / b->p) * sizeof(float));
        break;
    case NOPS: break;
    }
    rt_free(ctx, y);
}

/* the runtime's input for op: shape chosen so the op is legal */
static rt_tensor *input_for(rt_ctx *ctx, op_kind op, bufs *b)
{
    int64_t n = b->n, p = b->p;
    switch (op) {
    case AG: return rt_full(ctx, RT_F32, 1, (int64_t[]){n / p}, 1.0);
    case AG1: return rt_full(ctx, RT_F32, 2, (int64_t[]){64, n / p / 64}, 1.0);
    case RS1: return rt_full(ctx, RT_F32, 2, (int64_t[]){64, n / 64}, 1.0);
    case A2A: return rt_full(ctx, RT_F32, 2, (int64_t[]){p, n / p}, 1.0);
    default: return rt_full(ctx, RT_F32, 1, (int64_t[]){n}, 1.0);
    }
}

static double timed(rt_ctx *ctx, op_kind op, bufs *b, bool use_rt)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    if (use_rt)
        ours(ctx, op, b);
    else
        raw(op, b);
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    const char *names[] = {"x"};
    int sizes[] = {-1};
    rt_ctx *ctx = rt_init(&argc, &argv, 1, names, sizes);
    int reps = argc > 1 ? atoi(argv[1]) : 40, p = rt_world_size(ctx), me = rt_rank(ctx);
    int64_t bytes[16] = {4 << 10, 1 << 20, 16 << 20};
    size_t nsizes = 3;
    if (argc > 2) { /* sizes in KiB: bench_collectives REPS 4,64,1024 */
        nsizes = 0;
        for (char *p = argv[2]; *p && nsizes < 16; p += *p == ',') {
            bytes[nsizes++] = strtoll(p, &p, 10) << 10;
        }
    }
    if (me == 0)
        printf("%d ranks, %d interleaved repetitions, medians of the slowest rank\n"
               "%-24s %8s %12s %12s %8s\n", p, reps, "collective", "size", "MPI ms",
               "rt ms", "rt/MPI");
    for (op_kind op = 0; op < NOPS; op++)
        for (size_t s = 0; s < nsizes; s++) {
            bufs b = {.p = p, .n = bytes[s] / 4};
            b.in = malloc((size_t)b.n * sizeof(float));
            b.out = malloc((size_t)b.n * sizeof(float));
            for (int64_t i = 0; i < b.n; i++) /* touch every page before timing */
                b.in[i] = b.out[i] = 1.0f;
            b.x = input_for(ctx, op, &b);
            double *tr = malloc((size_t)reps * sizeof *tr), *to = malloc((size_t)reps * sizeof *to);
            for (int r = -3; r < reps; r++) { /* alternate which goes first */
                double a, c;
                if (r % 2) {
                    c = timed(ctx, op, &b, true);
                    a = timed(ctx, op, &b, false);
                } else {
                    a = timed(ctx, op, &b, false);
                    c = timed(ctx, op, &b, true);
                }
                if (r >= 0) {
                    tr[r] = a;
                    to[r] = c;
                }
            }
            MPI_Allreduce(MPI_IN_PLACE, tr, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            MPI_Allreduce(MPI_IN_PLACE, to, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            double mr = median(tr, reps), mo = median(to, reps);
            if (me == 0)
                printf("%-24s %7lldK %12.4f %12.4f %8.3f\n", op_names[op],
                       (long long)(bytes[s] >> 10), mr * 1e3, mo * 1e3, mo / mr);
            free(tr); free(to); free(b.in); free(b.out);
            rt_free(ctx, b.x);
        }
    return rt_finalize(ctx);
}
