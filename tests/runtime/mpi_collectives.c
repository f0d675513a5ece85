/* mpirun test of every collective and cast: on every ordered axis tuple of
 * the mesh (single axes and flattened tuples in every order), on dims 0, 1
 * and 2 of 3-D tensors and in the V (stack) form, for f32, f64, i32 and bf16
 * (whose sums, maxima and minima go through the runtime's MPI_Ops).
 * Each rank's input is a deterministic function of (world rank, element);
 * the expected block is computed from that function with index arithmetic
 * written independently of the runtime (including the rank layout).
 * all_reduce also in its in-place (_reuse) and non-blocking forms; ppermute
 * with shifts -3..3. The torch.chunk layouts of dims the group does not
 * divide (uneven shards) against an independent nested split.
 * Usage: mpirun -np N mpi_collectives a=2,b=4 [--mesh ...] */
#include <malloc.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmdrt.h"

typedef struct tcase {
    rt_ctx *ctx;
    int naxes, sizes[RT_MAX_AXES], coords[RT_MAX_AXES];
    rt_axes axes;
    int n, g;                 /* group size, this rank's block index */
    int members[64];          /* world rank of block k */
    int failures, checks;
    char what[160];
} tcase;

static double val(int rank, int64_t i)
{
    return (double)((rank * 131 + i * 7) % 23) - 11.0;
}

static int64_t numel(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= s[d];
    return n;
}

static void unravel(int64_t i, int nd, const int64_t *s, int64_t *idx)
{
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = i % s[d];
        i /= s[d];
    }
}

static int64_t ravel(const int64_t *idx, int nd, const int64_t *s)
{
    int64_t i = 0;
    for (int d = 0; d < nd; d++)
        i = i * s[d] + idx[d];
    return i;
}

static rt_tensor *input(tcase *t, rt_dtype dt, int nd, const int64_t *s, int rank)
{
    rt_tensor *x = rt_empty(t->ctx, dt, nd, s);
    for (int64_t i = 0; i < x->numel; i++)
        rt_set(x, i, val(rank, i));
    return x;
}

/* --- the group, computed without the runtime: row-major, last axis fastest */
static void setup_group(tcase *t, rt_axes axes)
{
    t->axes = axes;
    t->n = 1;
    t->g = 0;
    for (int i = 0; i < axes.n; i++) {
        t->n *= t->sizes[axes.idx[i]];
        t->g = t->g * t->sizes[axes.idx[i]] + t->coords[axes.idx[i]];
    }
    for (int k = 0; k < t->n; k++) {
        int c[RT_MAX_AXES], kk = k, r = 0;
        memcpy(c, t->coords, sizeof c);
        for (int i = axes.n - 1; i >= 0; i--) {
            c[axes.idx[i]] = kk % t->sizes[axes.idx[i]];
            kk /= t->sizes[axes.idx[i]];
        }
        for (int a = 0; a < t->naxes; a++)
            r = r * t->sizes[a] + c[a];
        t->members[k] = r;
    }
}

static void check_shape(tcase *t, const rt_tensor *y, int nd, const int64_t *s)
{
    t->checks++;
    if (y->ndim == nd && numel(nd, s) == y->numel && memcmp(y->shape, s, (size_t)nd * 8) == 0)
        return;
    t->failures++;
    fprintf(stderr, "[rank %d] FAIL %s: wrong shape\n", rt_rank(t->ctx), t->what);
}

static void check_val(tcase *t, const rt_tensor *y, int64_t i, double want)
{
    double got = rt_get(y, i);
    t->checks++;
    if (y->dtype == RT_BF16) /* values and sums are small integers, exact in bf16; avg rounds */
        want = rt_bf16_round((float)want);
    if (got == want || (got - want < 1e-5 && want - got < 1e-5))
        return;
    if (t->failures++ < 20)
        fprintf(stderr, "[rank %d] FAIL %s: element %lld is %g, expected %g\n", rt_rank(t->ctx),
                t->what, (long long)i, got, want);
}

static const char *dtn(rt_dtype dt) { return rt_dtype_name(dt); }

/* --- all_reduce, blocking and started, out of place and in place (the
 * _reuse forms: in x's buffer when the caller holds x's only reference,
 * else out of place with x untouched) */
enum { AR_PLAIN, AR_REUSE, AR_REUSE_SHARED, AR_START, AR_START_REUSE, AR_START_REUSE_SHARED,
       AR_FORMS };

static void t_all_reduce(tcase *t, rt_dtype dt, rt_reduce_op op)
{
    static const char *ops[] = {"sum", "avg", "max", "min"};
    static const char *forms[] = {"", " reuse", " reuse (shared)", " start", " start_reuse",
                                  " start_reuse (shared)"};
    int64_t s[3] = {2, 3, 2};
    int rank = rt_rank(t->ctx);
    for (int f = 0; f < AR_FORMS; f++) {
        snprintf(t->what, sizeof t->what, "all_reduce%s %s %s", forms[f], ops[op], dtn(dt));
        rt_tensor *x = input(t, dt, 3, s, rank), *other = NULL, *y;
        if (f == AR_REUSE_SHARED || f == AR_START_REUSE_SHARED)
            other = rt_retain(x); /* someone else holds x: never written */
        switch (f) {
        case AR_PLAIN: y = rt_all_reduce(t->ctx, x, t->axes, op); break;
        case AR_REUSE: case AR_REUSE_SHARED: y = rt_all_reduce_reuse(t->ctx, x, t->axes, op); break;
        case AR_START: y = rt_all_reduce_start(t->ctx, x, t->axes, op); break;
        default: y = rt_all_reduce_start_reuse(t->ctx, x, t->axes, op); break;
        }
        rt_wait(t->ctx, y);
        check_shape(t, y, 3, s);
        for (int64_t i = 0; i < y->numel; i++) {
            double acc = op == RT_RED_MAX ? -1e300 : op == RT_RED_MIN ? 1e300 : 0;
            for (int k = 0; k < t->n; k++) {
                double v = val(t->members[k], i);
                acc = op == RT_RED_MAX ? (v > acc ? v : acc) : op == RT_RED_MIN ? (v < acc ? v : acc)
                                                                                  : acc + v;
            }
            check_val(t, y, i, op == RT_RED_AVG ? acc / t->n : acc);
        }
        bool in_place = f == AR_REUSE || f == AR_START_REUSE;
        t->checks++;
        if ((y == x) != (in_place || t->n == 1)) { /* a group of one shares x */
            t->failures++;
            fprintf(stderr, "[rank %d] FAIL %s: the result is %sx\n", rank, t->what,
                    y == x ? "" : "not ");
        }
        if (!in_place && t->n > 1)
            for (int64_t i = 0; i < x->numel; i++)
                check_val(t, x, i, val(rank, i));
        rt_free(t->ctx, other);
        rt_free(t->ctx, x);
        rt_free(t->ctx, y);
    }
}

/* --- a non-blocking all_reduce of 1000 elements: with SPMD_PIECE_KB=1 its
 * first 1 KiB started, the rest reduced at the wait, in place or not */
static void t_all_reduce_pieces(tcase *t, rt_dtype dt)
{
    int64_t n = 1000;
    int rank = rt_rank(t->ctx);
    for (int reuse = 0; reuse < 2; reuse++) {
        snprintf(t->what, sizeof t->what, "all_reduce%s of %lld %s", reuse ? " start_reuse" : " start",
                 (long long)n, dtn(dt));
        rt_tensor *x = input(t, dt, 1, &n, rank);
        rt_tensor *y = reuse ? rt_all_reduce_start_reuse(t->ctx, x, t->axes, RT_RED_SUM)
                             : rt_all_reduce_start(t->ctx, x, t->axes, RT_RED_SUM);
        rt_tensor *z = rt_empty(t->ctx, RT_F32, 1, &n); /* an allocation tests the requests */
        rt_wait(t->ctx, y);
        check_shape(t, y, 1, &n);
        for (int64_t i = 0; i < n; i++) {
            double acc = 0;
            for (int k = 0; k < t->n; k++)
                acc += val(t->members[k], i);
            check_val(t, y, i, acc);
        }
        rt_free(t->ctx, z);
        rt_free(t->ctx, x);
        rt_free(t->ctx, y);
    }
}

/* --- all_gather: S(d) concatenates, V stacks a new dim 0 */
static void t_all_gather(tcase *t, rt_dtype dt, int dim)
{
    int64_t s[3] = {2, 3, 2}, o[4], idx[4];
    snprintf(t->what, sizeof t->what, "all_gather dim %d %s", dim, dtn(dt));
    rt_tensor *x = input(t, dt, 3, s, rt_rank(t->ctx));
    rt_tensor *y = rt_all_gather(t->ctx, x, t->axes, dim);
    int nd = dim == RT_STACK ? 4 : 3;
    if (dim == RT_STACK) {
        o[0] = t->n;
        memcpy(o + 1, s, sizeof s);
    } else {
        memcpy(o, s, sizeof s);
        o[dim] *= t->n;
    }
    check_shape(t, y, nd, o);
    for (int64_t i = 0; i < y->numel && y->numel == numel(nd, o); i++) {
        unravel(i, nd, o, idx);
        int k;
        int64_t *src = idx;
        if (dim == RT_STACK) {
            k = (int)idx[0];
            src = idx + 1;
        } else {
            k = (int)(idx[dim] / s[dim]);
            idx[dim] %= s[dim];
        }
        check_val(t, y, i, val(t->members[k], ravel(src, 3, s)));
    }
    rt_free(t->ctx, x);
    rt_free(t->ctx, y);
}

/* --- reduce_scatter: S(d) keeps block g of dim d of the sum (avg: over n);
 * V drops dim 0 */
static void t_reduce_scatter(tcase *t, rt_dtype dt, int dim, rt_reduce_op op)
{
    int64_t s[4] = {2, 3, 2, 0}, o[4], idx[4];
    int nd = 3;
    snprintf(t->what, sizeof t->what, "reduce_scatter%s dim %d %s", op == RT_RED_AVG ? " avg" : "",
             dim, dtn(dt));
    if (dim == RT_STACK) {
        int64_t v[4] = {t->n, 2, 3, 2};
        memcpy(s, v, sizeof v);
        nd = 4;
    } else {
        s[dim] *= t->n;
    }
    rt_tensor *x = input(t, dt, nd, s, rt_rank(t->ctx));
    rt_tensor *y = rt_reduce_scatter(t->ctx, x, t->axes, dim, op);
    int ond = dim == RT_STACK ? 3 : 3;
    if (dim == RT_STACK) {
        memcpy(o, s + 1, 3 * sizeof *o);
    } else {
        memcpy(o, s, 3 * sizeof *o);
        o[dim] /= t->n;
    }
    check_shape(t, y, ond, o);
    for (int64_t i = 0; i < y->numel && y->numel == numel(ond, o); i++) {
        int64_t src;
        if (dim == RT_STACK) {
            src = t->g * y->numel + i;
        } else {
            unravel(i, 3, o, idx);
            idx[dim] += t->g * o[dim];
            src = ravel(idx, 3, s);
        }
        double acc = 0;
        for (int k = 0; k < t->n; k++)
            acc += val(t->members[k], src);
        check_val(t, y, i, op == RT_RED_AVG ? acc / t->n : acc);
    }
    rt_free(t->ctx, x);
    rt_free(t->ctx, y);
}

/* --- all_to_all: S(i)->S(j) gathers dim i, splits dim j; V: out[k] = x_k[g] */
static void t_all_to_all(tcase *t, rt_dtype dt, int si, int dj)
{
    int64_t s[4] = {2, 3, 2, 0}, c[4], o[4], idx[4];
    int nd = 3;
    snprintf(t->what, sizeof t->what, "all_to_all %d->%d %s", si, dj, dtn(dt));
    if (si == RT_STACK) {
        int64_t v[4] = {t->n, 2, 3, 1};
        memcpy(s, v, sizeof v);
        nd = 4;
    } else {
        s[dj] *= t->n;
    }
    rt_tensor *x = input(t, dt, nd, s, rt_rank(t->ctx));
    rt_tensor *y = rt_all_to_all(t->ctx, x, t->axes, si, dj);
    if (si == RT_STACK) {
        check_shape(t, y, nd, s);
        int64_t blk = x->numel / t->n;
        for (int64_t i = 0; i < y->numel; i++)
            check_val(t, y, i, val(t->members[i / blk], t->g * blk + i % blk));
    } else {
        memcpy(c, s, sizeof c);
        c[dj] /= t->n;
        memcpy(o, c, sizeof o);
        o[si] *= t->n;
        check_shape(t, y, 3, o);
        for (int64_t i = 0; i < y->numel && y->numel == numel(3, o); i++) {
            unravel(i, 3, o, idx);
            int k = (int)(idx[si] / c[si]);
            idx[si] %= c[si];
            idx[dj] += t->g * c[dj];
            check_val(t, y, i, val(t->members[k], ravel(idx, 3, s)));
        }
    }
    rt_free(t->ctx, x);
    rt_free(t->ctx, y);
}

/* --- ppermute: block g goes to block (g + shift) mod n: y = x of member (g - shift) mod n */
static void t_ppermute(tcase *t, rt_dtype dt, int64_t shift)
{
    int64_t s[3] = {2, 3, 2};
    snprintf(t->what, sizeof t->what, "ppermute shift=%lld %s", (long long)shift, dtn(dt));
    rt_tensor *x = input(t, dt, 3, s, rt_rank(t->ctx));
    rt_tensor *y = rt_ppermute(t->ctx, x, t->axes, shift);
    check_shape(t, y, 3, s);
    int from = (int)(((t->g - shift) % t->n + t->n) % t->n);
    for (int64_t i = 0; i < y->numel; i++)
        check_val(t, y, i, val(t->members[from], i));
    rt_free(t->ctx, x);
    rt_free(t->ctx, y);
}

/* --- convert: R->V/S(d) own block, R->P block 0 keeps, V/S(d)->P placed in zeros */
static void t_convert(tcase *t, rt_dtype dt, int dim)
{
    int64_t s[4] = {2, 3, 2, 0}, idx[4], o[4];
    snprintf(t->what, sizeof t->what, "convert R->V dim %d %s", dim, dtn(dt));
    int nd = 3;
    if (dim == RT_STACK) {
        int64_t v[4] = {t->n, 2, 3, 2};
        memcpy(s, v, sizeof v);
        nd = 4;
    } else {
        s[dim] *= t->n;
    }
    rt_tensor *x = input(t, dt, nd, s, 0); /* replicated: the same on every rank */
    rt_tensor *y = rt_convert(t->ctx, x, t->axes, RT_R, RT_V, dim);
    for (int64_t i = 0; i < y->numel; i++) {
        int64_t src;
        if (dim == RT_STACK) {
            src = t->g * y->numel + i;
        } else {
            unravel(i, 3, y->shape, idx);
            idx[dim] += t->g * y->shape[dim];
            src = ravel(idx, 3, s);
        }
        check_val(t, y, i, val(0, src));
    }
    /* a group of one: the whole of x, shared (not copied), but for the
     * stacked form */
    t->checks++;
    if ((y == x) != (t->n == 1 && dim != RT_STACK)) {
        t->failures++;
        fprintf(stderr, "[rank %d] FAIL %s: the result is %sx\n", rt_rank(t->ctx), t->what, y == x ? "" : "not ");
    }
    /* V/S(d) -> P: the block back in zeros; summing over the group gives x */
    snprintf(t->what, sizeof t->what, "convert V->P dim %d %s", dim, dtn(dt));
    rt_tensor *p = rt_convert(t->ctx, y, t->axes, RT_V, RT_P, dim);
    check_shape(t, p, nd, s);
    t->checks++;
    if ((p == y) != (t->n == 1 && dim != RT_STACK)) {
        t->failures++;
        fprintf(stderr, "[rank %d] FAIL %s: the result is %sy\n", rt_rank(t->ctx), t->what, p == y ? "" : "not ");
    }
    for (int64_t i = 0; i < p->numel && p->numel == x->numel; i++) {
        unravel(i, nd, s, idx);
        int owner = (int)(dim == RT_STACK ? idx[0] : idx[dim] / (s[dim] / t->n));
        check_val(t, p, i, owner == t->g ? val(0, i) : 0.0);
    }
    rt_tensor *sum = rt_all_reduce(t->ctx, p, t->axes, RT_RED_SUM);
    snprintf(t->what, sizeof t->what, "convert R->V->P->all_reduce dim %d %s", dim, dtn(dt));
    for (int64_t i = 0; i < sum->numel; i++)
        check_val(t, sum, i, val(0, i));
    /* R -> P */
    snprintf(t->what, sizeof t->what, "convert R->P %s", dtn(dt));
    rt_tensor *rp = rt_convert(t->ctx, x, t->axes, RT_R, RT_P, 0);
    for (int64_t i = 0; i < rp->numel; i++)
        check_val(t, rp, i, t->g == 0 ? val(0, i) : 0.0);
    (void)o;
    rt_free(t->ctx, x); rt_free(t->ctx, y); rt_free(t->ctx, p); rt_free(t->ctx, sum);
    rt_free(t->ctx, rp);
}

static void t_reinterpret(tcase *t)
{
    int64_t s[1] = {4};
    rt_tensor *x = input(t, RT_F32, 1, s, 0);
    rt_tensor *y = rt_reinterpret(t->ctx, x, t->axes, RT_V, RT_P);
    snprintf(t->what, sizeof t->what, "reinterpret");
    t->checks++;
    if (y != x || x->refs != 2)
        t->failures++;
    rt_free(t->ctx, y);
    rt_free(t->ctx, x);
}

/* --- all-reduces and reduce-scatters of 5 MiB and more: from 4 MiB the
 * runtime's ring (runtime/ring.c), in several 1 MiB pieces, with blocks of
 * unequal size (the element count is not divisible by most group sizes).
 * Exact sums of integers in every form; then values that round: on a
 * group of 2 bit for bit a + b (what every MPI algorithm computes), on
 * larger ones within 1e-6 and the same bits when repeated. */
static float fval(int rank, int64_t i)
{
    return (float)((rank * 7919 + i * 31) % 10007) * 1.37e-3f + 0.1f * (float)rank;
}

static void t_large(tcase *t, rt_axes axes)
{
    setup_group(t, axes);
    int rank = rt_rank(t->ctx);
    int64_t n = ((int64_t)5 << 20) / 4 + 7 * t->n + 1;
    for (int f = 0; f < AR_FORMS; f++) {
        if (f == AR_REUSE_SHARED || f == AR_START_REUSE_SHARED)
            continue;
        snprintf(t->what, sizeof t->what, "large all_reduce form %d of %lld f32", f, (long long)n);
        rt_tensor *x = input(t, RT_F32, 1, &n, rank), *y;
        switch (f) {
        case AR_PLAIN: y = rt_all_reduce(t->ctx, x, t->axes, RT_RED_SUM); break;
        case AR_REUSE: y = rt_all_reduce_reuse(t->ctx, x, t->axes, RT_RED_SUM); break;
        case AR_START: y = rt_all_reduce_start(t->ctx, x, t->axes, RT_RED_SUM); break;
        default: y = rt_all_reduce_start_reuse(t->ctx, x, t->axes, RT_RED_SUM); break;
        }
        rt_wait(t->ctx, y);
        check_shape(t, y, 1, &n);
        for (int64_t i = 0; i < n; i++) {
            double acc = 0;
            for (int k = 0; k < t->n; k++)
                acc += val(t->members[k], i);
            check_val(t, y, i, acc);
        }
        rt_free(t->ctx, x);
        rt_free(t->ctx, y);
    }
    /* reduce_scatter on dim 0 (contiguous blocks) and dim 1 (packed) */
    for (int dim = 0; dim < 2; dim++) {
        int64_t s[2] = {dim == 0 ? t->n * (((int64_t)5 << 20) / 4 / t->n) : 4,
                        dim == 0 ? 1 : t->n * (((int64_t)5 << 20) / 16 / t->n)};
        int64_t o[2] = {dim == 0 ? s[0] / t->n : s[0], dim == 1 ? s[1] / t->n : s[1]};
        snprintf(t->what, sizeof t->what, "large reduce_scatter dim %d f32", dim);
        rt_tensor *x = input(t, RT_F32, 2, s, rank);
        rt_tensor *y = rt_reduce_scatter(t->ctx, x, t->axes, dim, RT_RED_SUM);
        check_shape(t, y, 2, o);
        for (int64_t i = 0; i < y->numel && y->numel == o[0] * o[1]; i++) {
            int64_t r = i / o[1], c = i % o[1];
            int64_t src = dim == 0 ? (t->g * o[0] + r) * s[1] + c : r * s[1] + t->g * o[1] + c;
            double acc = 0;
            for (int k = 0; k < t->n; k++)
                acc += val(t->members[k], src);
            check_val(t, y, i, acc);
        }
        rt_free(t->ctx, x);
        rt_free(t->ctx, y);
    }
    /* values that round */
    snprintf(t->what, sizeof t->what, "large all_reduce of rounding f32 (group of %d)", t->n);
    rt_tensor *x = rt_empty(t->ctx, RT_F32, 1, &n);
    float *xv = x->data;
    for (int64_t i = 0; i < n; i++)
        xv[i] = fval(rank, i);
    rt_tensor *y1 = rt_all_reduce(t->ctx, x, t->axes, RT_RED_SUM);
    rt_tensor *y2 = rt_all_reduce(t->ctx, x, t->axes, RT_RED_SUM);
    const float *a = y1->data, *b = y2->data;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double acc = 0;
        for (int k = 0; k < t->n; k++)
            acc += fval(t->members[k], i);
        float two = fval(t->members[0], i) + fval(t->members[t->n > 1], i);
        bool ok = memcmp(&a[i], &b[i], sizeof a[i]) == 0 &&
                  (t->n == 2 ? memcmp(&a[i], &two, sizeof two) == 0
                             : a[i] - acc < 1e-6 * acc + 1e-6 && acc - a[i] < 1e-6 * acc + 1e-6);
        t->checks++;
        if (!ok && bad++ < 5) {
            t->failures++;
            fprintf(stderr, "[rank %d] FAIL %s: element %lld is %.9g then %.9g, expected %.9g\n",
                    rank, t->what, (long long)i, (double)a[i], (double)b[i],
                    t->n == 2 ? (double)two : acc);
        }
    }
    rt_free(t->ctx, x);
    rt_free(t->ctx, y1);
    rt_free(t->ctx, y2);
}

static void run_tuple(tcase *t, rt_axes axes)
{
    static const rt_dtype dts[] = {RT_F32, RT_F64, RT_I32, RT_BF16};
    static const int dims[] = {RT_STACK, 0, 1, 2};
    setup_group(t, axes);
    if (rt_group_size(t->ctx, axes) != t->n || rt_group_rank(t->ctx, axes) != t->g) {
        t->failures++;
        fprintf(stderr, "[rank %d] FAIL group size/rank\n", rt_rank(t->ctx));
    }
    for (int k = 0; k < t->n; k++)
        if (rt_group_member(t->ctx, axes, k) != t->members[k])
            t->failures++;
    for (int di = 0; di < 4; di++) {
        rt_dtype dt = dts[di];
        t_all_reduce(t, dt, RT_RED_SUM);
        if (dt != RT_I32)
            t_all_reduce(t, dt, RT_RED_AVG);
        t_all_reduce(t, dt, RT_RED_MAX);
        t_all_reduce(t, dt, RT_RED_MIN);
        t_all_reduce_pieces(t, dt);
        for (int a = 0; a < 4; a++) {
            t_all_gather(t, dt, dims[a]);
            t_reduce_scatter(t, dt, dims[a], RT_RED_SUM);
            if (dt != RT_I32)
                t_reduce_scatter(t, dt, dims[a], RT_RED_AVG);
            t_convert(t, dt, dims[a]);
        }
        t_all_to_all(t, dt, RT_STACK, RT_STACK);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                t_all_to_all(t, dt, i, j);
        for (int64_t k = -3; k <= 3; k++)
            t_ppermute(t, dt, k);
    }
    t_reinterpret(t);
}

/* every ordered tuple of distinct axes */
static void each_tuple(tcase *t, rt_axes cur, int used)
{
    if (cur.n > 0)
        run_tuple(t, cur);
    for (int a = 0; a < t->naxes; a++) {
        if (used & (1 << a))
            continue;
        rt_axes next = cur;
        next.idx[next.n++] = a;
        each_tuple(t, next, used | (1 << a));
    }
}

/* and its trim threshold (8 MiB): 3 MiB freed at the top of the heap stay
 * in the heap (glibc's trim threshold, frozen at 128 KiB by fixing the mmap
 * threshold, gave them back, and the next step faulted them in again) */
static void t_trim_threshold(tcase *t)
{
    struct mallinfo2 m0 = mallinfo2();
    if (m0.arena == 0 && m0.hblkhd == 0) /* not glibc's malloc (a sanitizer's) */
        return;
    size_t mid = (size_t)3 << 20;
    char *a = malloc(mid);
    if (a)
        memset(a, 1, mid);
    struct mallinfo2 m1 = mallinfo2();
    free(a);
    struct mallinfo2 m2 = mallinfo2();
    t->checks++;
    if (!a || m1.arena < m0.arena || m2.arena < m1.arena) {
        t->failures++;
        fprintf(stderr, "[rank %d] FAIL: freeing 3 MiB at the top of the heap shrank it (heap "
                        "%zu bytes, then %zu)\n", rt_rank(t->ctx), m1.arena, m2.arena);
    }
}

/* rt_init fixes glibc's mmap threshold (mesh.c): a freed 8 MiB mapping does
 * not send the next 8 MiB buffer into the heap, where it would stay */
static void t_mmap_threshold(tcase *t)
{
    size_t big = (size_t)8 << 20;
    struct mallinfo2 m0 = mallinfo2();
    if (m0.arena == 0 && m0.hblkhd == 0) /* not glibc's malloc (a sanitizer's): nothing to check */
        return;
    void *a = malloc(big);
    free(a);
    void *b = malloc(big);
    struct mallinfo2 m1 = mallinfo2();
    t->checks++;
    if (!a || !b || m1.hblkhd < m0.hblkhd + big) {
        t->failures++;
        fprintf(stderr, "[rank %d] FAIL: a second 8 MiB malloc came from the heap (mapped bytes "
                        "%zu, then %zu)\n", rt_rank(t->ctx), m0.hblkhd, m1.hblkhd);
    }
    free(b);
}

/* torch.chunk's split (SPEC 4, uneven shards), written independently of
 * the runtime: the blocks of [lo, lo + n) over sizes[0..na) nested, major
 * to minor, appended to off/ext in block order */
static void chunks(int64_t lo, int64_t n, const int *sizes, int na, int64_t *off, int64_t *ext, int *k)
{
    if (na == 0) {
        off[*k] = lo;
        ext[*k] = n;
        (*k)++;
        return;
    }
    int64_t c = (n + sizes[0] - 1) / sizes[0];
    for (int r = 0; r < sizes[0]; r++) {
        int64_t a = r * c < n ? r * c : n, b = (r + 1) * c < n ? (r + 1) * c : n;
        chunks(lo + a, b - a, sizes + 1, na - 1, off, ext, k);
    }
}

/* rt_shard_block, rt_shard_extent/offset and rt_layout_of on sizes that the
 * group does not divide, on the tuple of every axis in mesh order and its
 * reverse; 5 rows on (2, 2) are 2, 1, 1, 1 */
static void t_uneven_layouts(tcase *t)
{
    if (t->naxes == 0)
        return;
    for (int rev = 0; rev < 2; rev++) {
        rt_axes ax = RT_NO_AXES;
        int sz[RT_MAX_AXES];
        for (int i = 0; i < t->naxes; i++) {
            ax.idx[ax.n] = rev ? t->naxes - 1 - i : i;
            sz[ax.n] = t->sizes[ax.idx[ax.n]];
            ax.n++;
        }
        int g = rt_group_size(t->ctx, ax), me = rt_group_rank(t->ctx, ax);
        int64_t *off = malloc(2 * (size_t)g * sizeof *off), *ext = off + g;
        for (int64_t n = 0; n <= 3 * g + 1; n++) {
            int k = 0;
            chunks(0, n, sz, ax.n, off, ext, &k);
            for (int b = 0; b < g; b++) {
                int64_t o = -1, e = rt_shard_block(t->ctx, n, ax, b, &o);
                t->checks++;
                if (o != off[b] || e != ext[b]) {
                    t->failures++;
                    fprintf(stderr, "[rank %d] FAIL uneven: n=%lld block %d is [%lld, +%lld), not [%lld, +%lld)\n",
                            rt_rank(t->ctx), (long long)n, b, (long long)o, (long long)e, (long long)off[b],
                            (long long)ext[b]);
                }
            }
            int64_t gl[2] = {n, 3};
            rt_axes dims[2] = {ax, RT_NO_AXES};
            rt_layout l = rt_layout_of(t->ctx, "x", 2, gl, dims);
            t->checks++;
            if (l.offset[0] != off[me] || l.local[0] != ext[me] || l.local[1] != 3 ||
                rt_shard_extent(t->ctx, n, ax) != ext[me] || rt_shard_offset(t->ctx, n, ax) != off[me]) {
                t->failures++;
                fprintf(stderr, "[rank %d] FAIL uneven layout: n=%lld\n", rt_rank(t->ctx), (long long)n);
            }
        }
        if (g == 4 && ax.n == 2) { /* SPEC 4's example */
            int64_t want[4] = {2, 1, 1, 1};
            for (int b = 0; b < 4; b++) {
                t->checks++;
                if (rt_shard_block(t->ctx, 5, ax, b, NULL) != want[b]) {
                    t->failures++;
                    fprintf(stderr, "[rank %d] FAIL uneven: 5 on (2, 2) block %d\n", rt_rank(t->ctx), b);
                }
            }
        }
        free(off);
    }
}

static int parse_decl(const char *spec, char names[][16], const char **pnames, int *sizes)
{
    int n = 0;
    const char *p = spec;
    while (*p && n < RT_MAX_AXES) {
        const char *eq = strchr(p, '=');
        size_t len = (size_t)(eq - p);
        memcpy(names[n], p, len);
        names[n][len] = 0;
        pnames[n] = names[n];
        sizes[n] = atoi(eq + 1);
        p = strchr(eq, ',');
        n++;
        if (!p)
            break;
        p++;
    }
    return n;
}

int main(int argc, char **argv)
{
    char names[RT_MAX_AXES][16];
    const char *pnames[RT_MAX_AXES] = {0};
    int sizes[RT_MAX_AXES] = {0};
    if (argc < 2) {
        fprintf(stderr, "usage: mpi_collectives a=2,b=4 [--mesh ...]\n");
        return 2;
    }
    int naxes = parse_decl(argv[1], names, pnames, sizes);
    rt_ctx *ctx = rt_init(&argc, &argv, naxes, pnames, sizes);
    tcase t = {.ctx = ctx, .naxes = naxes};
    for (int a = 0; a < naxes; a++) {
        t.sizes[a] = rt_axis_size(ctx, a);
        t.coords[a] = rt_axis_index(ctx, a);
    }
    /* the layout itself: rank = row-major over coords, last axis fastest */
    int r = 0;
    for (int a = 0; a < naxes; a++)
        r = r * t.sizes[a] + t.coords[a];
    if (r != rt_rank(ctx)) {
        t.failures++;
        fprintf(stderr, "[rank %d] FAIL coordinates give rank %d\n", rt_rank(ctx), r);
    }
    t_mmap_threshold(&t);
    t_trim_threshold(&t);
    t_uneven_layouts(&t);
    each_tuple(&t, RT_NO_AXES, 0);
    rt_axes all = RT_NO_AXES;
    for (int a = 0; a < naxes; a++)
        all.idx[all.n++] = a;
    if (naxes > 0)
        t_large(&t, all);
    int fails = 0, checks = 0;
    MPI_Allreduce(&t.failures, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&t.checks, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rt_rank(ctx) == 0) {
        printf("mesh");
        for (int a = 0; a < naxes; a++)
            printf(" %s=%d", rt_axis_name(ctx, a), rt_axis_size(ctx, a));
        printf(": %d checks, %d failures\n", checks, fails);
    }
    rt_finalize(ctx);
    return fails ? 1 : 0;
}
