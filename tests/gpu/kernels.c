/* Every kernel of libspmdrt on fixed inputs, each result written as .npy
 * into DIR with a manifest (DIR/manifest.txt: "name class" per line) that
 * says how a target's result must agree with the CPU's (SPEC 14):
 *   bits  the same bytes (data movement, IEEE-exact arithmetic, Philox)
 *   f32   normwise relative difference <= 1e-5 (GEMMs, reductions, norms,
 *         transcendental functions, losses)
 *   bf16  normwise relative difference <= 1e-2
 * Built against each runtime (libspmdrt: the reference; libspmdrt_cudasim
 * in CI; libspmdrt_cuda on a GPU) and compared by compare.py.
 *   kernels DIR [SECTION,...]  (under mpirun: collectives on a 1-axis mesh;
 *                              sections: elementwise shapes reductions nn
 *                              selection random linalg collectives files
 *                              long sum_squares multi batched rows rowbits resume
 *                              onelaunch
 *                              attention attnbits, all by default, all but the
 *                              listed ones with a leading '-'; resume reads the
 *                              checkpoint in $KERNELS_RESUME_FROM, else the
 *                              one files wrote; KERNELS_ONE_LAYOUT set: each
 *                              attention case in one token-major layout, not two)
 * Inputs come from a fixed LCG on the host, so every build sees the same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rt_internal.h" /* ctx->prof: the launches a target counts (onelaunch) */
#include "spmdrt.h"

static rt_ctx *C;
static const char *dir;
static FILE *manifest;
static uint64_t lcg = 12345;

static double next_u(void) /* [0, 1) */
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) * (1.0 / 9007199254740992.0);
}

/* a tensor of dtype dt with values in [lo, hi) (i32: integers) */
static rt_tensor *input(rt_dtype dt, int ndim, const int64_t *shape, double lo, double hi)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * next_u();
    size_t esz = rt_dtype_size(dt);
    unsigned char *buf = malloc((size_t)(n ? n : 1) * esz);
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case RT_F32: ((float *)buf)[i] = (float)v[i]; break;
        case RT_F64: ((double *)buf)[i] = v[i]; break;
        case RT_I32: ((int32_t *)buf)[i] = (int32_t)floor(v[i]); break;
        case RT_BF16: ((uint16_t *)buf)[i] = rt_f32_to_bf16((float)v[i]); break;
        }
    }
    rt_tensor *t = rt_from_data(C, dt, ndim, shape, buf);
    free(v);
    free(buf);
    return t;
}
#define SH(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/* writes this rank's t (consumed) as NAME.npy: the ranks' results stacked
 * on a leading dim (they differ after some collectives) */
static void out(const char *name, const char *cls, rt_tensor *t)
{
    int64_t shape[RT_MAX_DIMS + 1];
    shape[0] = 1;
    memcpy(shape + 1, t->shape, (size_t)t->ndim * sizeof *shape);
    rt_tensor *s = rt_reshape(C, t, t->ndim + 1, shape);
    rt_layout l = rt_layout_full(t->ndim + 1, shape);
    l.global[0] = rt_world_size(C);
    l.offset[0] = rt_rank(C);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    rt_save_npy(C, path, s, &l);
    if (manifest)
        fprintf(manifest, "%s %s\n", name, cls);
    rt_free(C, s);
    rt_free(C, t);
}

static const char *fcls(rt_dtype dt) { return dt == RT_BF16 ? "bf16" : "f32"; }

static void elementwise(void)
{
    static const rt_dtype dts[] = {RT_F32, RT_F64, RT_BF16};
    for (int k = 0; k < 3; k++) {
        rt_dtype dt = dts[k];
        const char *dn = rt_dtype_name(dt);
        for (int op = 0; op < RT_NUNARY; op++) {
            /* inputs inside each function's domain */
            double lo = op == RT_LOG || op == RT_SQRT || op == RT_RSQRT ? 0.1 : -3.0;
            rt_tensor *x = input(dt, SH(5, 7), lo, 3.0), *dy = input(dt, SH(5, 7), -1, 1);
            char name[128];
            snprintf(name, sizeof name, "unary_%s_%s", rt_unary_name(op), dn);
            bool exact = op == RT_RELU || op == RT_NEG || op == RT_ABS || op == RT_SQUARE;
            out(name, exact ? "bits" : fcls(dt), rt_unary(C, op, x));
            snprintf(name, sizeof name, "unary_bwd_%s_%s", rt_unary_name(op), dn);
            out(name, fcls(dt), rt_unary_bwd(C, op, x, dy));
            rt_tensor *y, *g;
            rt_unary_with_grad(C, op, x, &y, &g);
            snprintf(name, sizeof name, "unary_grad_y_%s_%s", rt_unary_name(op), dn);
            out(name, exact ? "bits" : fcls(dt), y);
            snprintf(name, sizeof name, "unary_grad_d_%s_%s", rt_unary_name(op), dn);
            out(name, fcls(dt), g);
            rt_free(C, x);
            rt_free(C, dy);
        }
        for (int op = 0; op < RT_NBINARY; op++) {
            rt_tensor *a = input(dt, SH(4, 6), op == RT_POW ? 0.1 : -2.0, 2.0);
            rt_tensor *b = input(dt, SH(6), op == RT_POW ? -2.0 : 0.5, 2.0);
            rt_tensor *b2 = input(dt, SH(4, 6), 0.5, 2.0), *dy = input(dt, SH(4, 6), -1, 1);
            char name[128];
            const char *cls = op == RT_POW ? fcls(dt) : "bits";
            snprintf(name, sizeof name, "binary_%s_%s", rt_binary_name(op), dn);
            out(name, cls, rt_binary(C, op, a, b2));
            snprintf(name, sizeof name, "binary_bcast_%s_%s", rt_binary_name(op), dn);
            out(name, cls, rt_binary(C, op, a, b));
            snprintf(name, sizeof name, "binary_scalar_%s_%s", rt_binary_name(op), dn);
            out(name, cls, rt_binary_scalar(C, op, a, 1.5, true));
            if (op <= RT_MIN) {
                rt_tensor *da, *db;
                rt_binary_bwd(C, op, a, b, dy, &da, &db);
                snprintf(name, sizeof name, "binary_bwd_a_%s_%s", rt_binary_name(op), dn);
                out(name, fcls(dt), da);
                snprintf(name, sizeof name, "binary_bwd_b_%s_%s", rt_binary_name(op), dn);
                out(name, fcls(dt), db);
            }
            rt_free(C, a);
            rt_free(C, b);
            rt_free(C, b2);
            rt_free(C, dy);
        }
    }
    rt_tensor *i = input(RT_I32, SH(3, 5), -20, 20), *j = input(RT_I32, SH(5), 1, 9);
    out("unary_neg_i32", "bits", rt_unary(C, RT_NEG, i));
    out("unary_abs_i32", "bits", rt_unary(C, RT_ABS, i));
    out("binary_add_i32", "bits", rt_binary(C, RT_ADD, i, j));
    out("binary_mul_i32", "bits", rt_binary(C, RT_MUL, i, j));
    out("binary_max_i32", "bits", rt_binary(C, RT_MAX, i, j));
    rt_free(C, i);
    rt_free(C, j);
    rt_tensor *g = input(RT_F32, SH(3, 4, 5), -1, 1);
    out("sum_to_shape_45", "f32", rt_sum_to_shape(C, g, SH(4, 5)));
    out("sum_to_shape_415", "f32", rt_sum_to_shape(C, g, SH(4, 1)));
    out("sum_to_shape_1", "f32", rt_sum_to_shape(C, g, SH(1)));
    out("scale", "bits", rt_scale(C, g, 0.25));
    rt_free(C, g);
    /* only dims of size 1 reduced (a [4, 5] operand broadcast against a
     * [1, 4, 5] one): the simulation's general loop, which the runs above
     * do not reach (tests/mutate.sh's sim_sum_to_shape_off_by_one) */
    rt_tensor *g1 = input(RT_F32, SH(1, 4, 5), -1, 1), *g2 = input(RT_F64, SH(1, 1, 3, 2), -1, 1);
    out("sum_to_shape_size1_lead", "bits", rt_sum_to_shape(C, g1, SH(4, 5)));
    out("sum_to_shape_size1_two", "bits", rt_sum_to_shape(C, g2, SH(1, 3, 2)));
    rt_free(C, g1);
    rt_free(C, g2);
}

static void shapes(void)
{
    rt_tensor *x = input(RT_F32, SH(3, 4, 5), -1, 1), *y = input(RT_F32, SH(3, 2, 5), -1, 1);
    out("reshape", "bits", rt_reshape(C, x, SH(12, -1)));
    out("permute", "bits", rt_permute(C, x, (int[]){2, 0, 1}));
    out("transpose", "bits", rt_transpose(C, x, 0, 2));
    out("concat", "bits", rt_concat(C, 2, (const rt_tensor *const[]){x, y}, 1));
    out("slice", "bits", rt_slice(C, x, 1, 1, 3));
    out("slice_bwd", "bits", rt_slice_bwd(C, y, SH(3, 4, 5), 1, 2));
    rt_tensor *s = input(RT_F32, SH(4, 1), -1, 1);
    out("expand", "bits", rt_expand(C, s, SH(2, 4, 3)));
    out("astype_bf16", "bits", rt_astype(C, x, RT_BF16));
    rt_tensor *h = rt_astype(C, x, RT_BF16);
    out("astype_bf16_f32", "bits", rt_astype(C, h, RT_F32));
    out("astype_f64", "bits", rt_astype(C, x, RT_F64));
    rt_tensor *w = input(RT_F64, SH(7), -50, 50);
    out("astype_i32", "bits", rt_astype(C, w, RT_I32));
    out("index", "bits", rt_index(C, x, 2));
    rt_tensor *r = rt_index(C, x, 1);
    out("index_bwd", "bits", rt_index_bwd(C, r, SH(3, 4, 5), 1));
    rt_tensor *acc = rt_copy(C, x);
    acc = rt_index_add(C, acc, 0, r);
    rt_add_(C, acc, x);
    out("index_add_add_", "bits", acc);
    rt_tensor *hb = rt_astype(C, x, RT_BF16), *hacc = rt_copy(C, hb);
    rt_add_(C, hacc, hb);
    out("add_bf16", "bits", hacc);
    out("full", "bits", rt_full(C, RT_F32, SH(2, 3), -0.5));
    out("full_bf16", "bits", rt_full(C, RT_BF16, SH(2, 3), 0.1));
    out("zeros_i32", "bits", rt_zeros(C, RT_I32, SH(4)));
    out("scalar_f64", "bits", rt_scalar(C, RT_F64, 3.25));
    rt_free(C, x); rt_free(C, y); rt_free(C, s); rt_free(C, h); rt_free(C, w); rt_free(C, r);
    rt_free(C, hb);
}

static void reductions(void)
{
    rt_tensor *x = input(RT_F32, SH(4, 6, 5), -2, 2), *xb = rt_astype(C, x, RT_BF16);
    for (int d = -1; d < 3; d++) {
        char name[64];
        snprintf(name, sizeof name, "sum_d%d", d + 1);
        out(name, "f32", rt_sum(C, x, d, d == 1));
        snprintf(name, sizeof name, "mean_d%d", d + 1);
        out(name, "f32", rt_mean(C, x, d, false));
        snprintf(name, sizeof name, "amax_d%d", d + 1);
        out(name, "bits", rt_amax(C, x, d, true));
        snprintf(name, sizeof name, "cumsum_d%d", d + 1);
        out(name, "f32", rt_cumsum(C, x, d));
        snprintf(name, sizeof name, "cumsum_bwd_d%d", d + 1);
        out(name, "f32", rt_cumsum_bwd(C, x, d));
        rt_tensor *m = rt_amax(C, x, d, false), *dy = input(RT_F32, m->ndim, m->shape, -1, 1);
        snprintf(name, sizeof name, "amax_bwd_d%d", d + 1);
        out(name, "f32", rt_amax_bwd(C, x, d, dy));
        snprintf(name, sizeof name, "sum_bwd_d%d", d + 1);
        out(name, "bits", rt_sum_bwd(C, x, d, dy));
        snprintf(name, sizeof name, "mean_bwd_d%d", d + 1);
        out(name, "f32", rt_mean_bwd(C, x, d, dy));
        rt_free(C, m);
        rt_free(C, dy);
    }
    out("sum_all", "f32", rt_sum_all(C, x));
    out("mean_all", "f32", rt_mean_all(C, x));
    out("amax_all", "bits", rt_amax_all(C, x));
    out("sum_bf16", "bf16", rt_sum(C, xb, -1, false));
    rt_tensor *one = rt_scalar(C, RT_F32, 0.5);
    out("sum_all_bwd", "bits", rt_sum_bwd(C, x, RT_ALL, one));
    out("amax_all_bwd", "f32", rt_amax_bwd(C, x, RT_ALL, one));
    rt_free(C, one);
    rt_free(C, x);
    rt_free(C, xb);
}

/* global_norm's multi-tensor sum of squares (rt_sum_squares) over 40
 * tensors of many sizes (empty, one element, a chunk of the CUDA target and
 * one more, several levels of chunks; more than one group of 32 tensors on
 * the CUDA target), each dtype: its bits must be those of the ops it
 * replaces (each tensor's squares summed, the sums added in order) on every
 * target, and its backward 2 * x * dy those of the square's backward */
static void sum_squares(void)
{
    static const int64_t sizes[] = {0, 1, 64, 65, 4097, 300000, 7, 128, 129, 33};
    enum { N = 40 };
    for (int k = 0; k < 3; k++) {
        rt_dtype dt = k == 0 ? RT_F32 : k == 1 ? RT_F64 : RT_BF16;
        const rt_tensor *xs[N];
        rt_tensor *own[N], *total = NULL;
        for (int j = 0; j < N; j++) {
            int64_t n = sizes[j % 10] / (j >= 10 ? j / 10 + 1 : 1);
            rt_tensor *f = input(RT_F32, 1, &n, -2, 2);
            own[j] = dt == RT_F32 ? f : rt_astype(C, f, dt);
            if (dt != RT_F32)
                rt_free(C, f);
            xs[j] = own[j];
            rt_tensor *q = rt_unary(C, RT_SQUARE, own[j]), *s = rt_sum_all(C, q);
            rt_free(C, q);
            if (total) {
                rt_tensor *t = rt_binary(C, RT_ADD, total, s);
                rt_free(C, total);
                rt_free(C, s);
                s = t;
            }
            total = s;
        }
        rt_tensor *y = rt_sum_squares(C, N, xs);
        if (rt_item(C, y) != rt_item(C, total)) {
            fprintf(stderr, "sum_squares (%s): %.17g, the ops it replaces: %.17g\n", rt_dtype_name(dt),
                    rt_item(C, y), rt_item(C, total));
            exit(1);
        }
        char name[64];
        snprintf(name, sizeof name, "sum_squares_%s", rt_dtype_name(dt));
        out(name, fcls(dt), y);
        rt_free(C, total);
        rt_tensor *dy = rt_scalar(C, dt, -0.75), *dxs[N];
        bool want[N];
        for (int j = 0; j < N; j++)
            want[j] = j % 3 != 1;
        rt_sum_squares_bwd(C, N, xs, dy, want, dxs);
        for (int j = 0; j < N; j++) {
            if (!want[j]) {
                if (dxs[j]) {
                    fprintf(stderr, "sum_squares_bwd: a gradient not asked for\n");
                    exit(1);
                }
                continue;
            }
            /* the square's backward: f'(x) = 2x, times dy broadcast */
            rt_tensor *two = rt_binary_scalar(C, RT_MUL, own[j], 2.0, false);
            rt_tensor *e = rt_sum_bwd(C, own[j], RT_ALL, dy), *ref = rt_binary(C, RT_MUL, e, two);
            rt_tensor *d = rt_binary(C, RT_SUB, dxs[j], ref);
            rt_tensor *a = rt_unary(C, RT_ABS, d), *m = a->numel ? rt_amax_all(C, a) : rt_scalar(C, dt, 0);
            if (rt_item(C, m) != 0) {
                fprintf(stderr, "sum_squares_bwd (%s) of tensor %d differs from the square's backward\n",
                        rt_dtype_name(dt), j);
                exit(1);
            }
            if (j == 3 || j == 35) {
                snprintf(name, sizeof name, "sum_squares_bwd_%s_%d", rt_dtype_name(dt), j);
                out(name, dt == RT_BF16 ? "bf16" : "bits", dxs[j]);
            } else {
                rt_free(C, dxs[j]);
            }
            rt_free(C, two); rt_free(C, e); rt_free(C, ref); rt_free(C, d); rt_free(C, a); rt_free(C, m);
        }
        rt_free(C, dy);
        for (int j = 0; j < N; j++)
            rt_free(C, own[j]);
    }
}

/* the stacked layer gradients' multi-tensor ops (issue 26) over 40
 * accumulators (more than one launch's table of 32 on the CUDA target) of
 * many sizes (empty rows too) and every dtype: rt_index_add_multi must give
 * the bits of rt_index_add per accumulator, copy a shared one (and leave
 * the other reference as it was), and rt_zero_multi those of rt_full 0 */
static bool same_bits(const rt_tensor *a, const rt_tensor *b)
{
    rt_tensor *x = rt_astype(C, a, RT_F64), *y = rt_astype(C, b, RT_F64);
    bool same = a->dtype == b->dtype && a->numel == b->numel;
    if (same && a->numel) {
        rt_tensor *d = rt_binary(C, RT_SUB, x, y), *ab = rt_unary(C, RT_ABS, d), *m = rt_amax_all(C, ab);
        same = rt_item(C, m) == 0;
        rt_free(C, d); rt_free(C, ab); rt_free(C, m);
    }
    rt_free(C, x); rt_free(C, y);
    return same;
}

static void multi(void)
{
    static const int64_t rows[] = {0, 1, 5, 64, 257, 3000, 7, 33};
    enum { N = 40, L = 3 };
    rt_tensor *accs[N], *refs[N], *xs[L][N], *shared = NULL;
    for (int j = 0; j < N; j++) {
        rt_dtype dt = j % 4 == 0 ? RT_F32 : j % 4 == 1 ? RT_F64 : j % 4 == 2 ? RT_BF16 : RT_I32;
        rt_dtype in = dt == RT_BF16 ? RT_F32 : dt;
        int64_t sh[3] = {L, rows[j % 8], 1 + j % 3}, xsh[2] = {sh[1], sh[2]};
        rt_tensor *a = input(in, 3, sh, -2, 2);
        if (dt == RT_BF16) {
            rt_tensor *a2 = rt_astype(C, a, dt);
            rt_free(C, a);
            a = a2;
        }
        accs[j] = a;
        refs[j] = rt_copy(C, a);
        for (int l = 0; l < L; l++) {
            rt_tensor *x = input(in, 2, xsh, -2, 2);
            if (dt == RT_BF16) {
                rt_tensor *x2 = rt_astype(C, x, dt);
                rt_free(C, x);
                x = x2;
            }
            xs[l][j] = x;
            refs[j] = rt_index_add(C, refs[j], (l + 1) % L, x);
        }
    }
    shared = rt_retain(accs[7]); /* shared: copied on write, this reference unchanged */
    rt_tensor *before = rt_copy(C, shared);
    for (int l = 0; l < L; l++) /* all 40 at row (l + 1) % L: two launches' tables on the CUDA target */
        rt_index_add_multi(C, N, accs, (l + 1) % L, (const rt_tensor *const *)xs[l]);
    if (!same_bits(shared, before) || accs[7] == shared) {
        fprintf(stderr, "index_add_multi wrote a shared accumulator in place\n");
        exit(1);
    }
    for (int j = 0; j < N; j++) {
        if (!same_bits(accs[j], refs[j])) {
            fprintf(stderr, "index_add_multi: accumulator %d differs from rt_index_add's\n", j);
            exit(1);
        }
        if (j == 2 || j == 37) {
            char name[64];
            snprintf(name, sizeof name, "index_add_multi_%d", j);
            out(name, "bits", accs[j]);
        } else {
            rt_free(C, accs[j]);
        }
        rt_free(C, refs[j]);
        for (int l = 0; l < L; l++)
            rt_free(C, xs[l][j]);
    }
    rt_free(C, shared);
    rt_free(C, before);
    rt_tensor *zs[N];
    for (int j = 0; j < N; j++) {
        rt_dtype dt = j % 4 == 0 ? RT_F32 : j % 4 == 1 ? RT_F64 : j % 4 == 2 ? RT_BF16 : RT_I32;
        int64_t n = rows[j % 8] * (1 + j % 5);
        zs[j] = rt_full(C, dt, 1, &n, 1.5); /* not zero before */
    }
    rt_zero_multi(C, N, zs);
    for (int j = 0; j < N; j++) {
        rt_tensor *z = rt_full(C, zs[j]->dtype, 1, &zs[j]->numel, 0.0);
        if (!same_bits(zs[j], z)) {
            fprintf(stderr, "zero_multi: tensor %d is not rt_full 0's\n", j);
            exit(1);
        }
        rt_free(C, z);
        if (j == 4 || j == 38)
            out(j == 4 ? "zero_multi_4" : "zero_multi_38", "bits", zs[j]);
        else
            rt_free(C, zs[j]);
    }
}

/* reductions over lanes longer than a chunk of the CUDA target (64 terms:
 * runtime/cuda/dev.h's rt_lanes_f64), one and two levels of chunks */
static void long_lanes(void)
{
    rt_tensor *a = input(RT_F32, SH(300, 7), -2, 2), *b = input(RT_F32, SH(3, 5000), -2, 2);
    out("long_sum_rows", "f32", rt_sum(C, a, 0, false));
    out("long_mean_rows", "f32", rt_mean(C, a, 0, true));
    out("long_amax_rows", "bits", rt_amax(C, a, 0, false));
    out("long_sum_cols", "f32", rt_sum(C, b, 1, false));
    out("long_amax_cols", "bits", rt_amax(C, b, -1, false));
    out("long_sum_all", "f32", rt_sum_all(C, b));
    out("long_mean_all", "f32", rt_mean_all(C, b));
    out("long_amax_all", "bits", rt_amax_all(C, b));
    /* more than 64 * 64 chunks: a level of chunk sums before each lane's
     * tree in one thread (runtime/cuda's rt_lanes_reduce) */
    rt_tensor *big = input(RT_F32, SH(300000), -1, 1);
    out("long_sum_all_big", "f32", rt_sum_all(C, big));
    out("long_amax_all_big", "bits", rt_amax_all(C, big));
    rt_free(C, big);
    rt_tensor *g = input(RT_F32, SH(130, 3, 5), -1, 1), *h = input(RT_F32, SH(4, 200, 3), -1, 1);
    out("long_sum_to_shape_lead", "f32", rt_sum_to_shape(C, g, SH(3, 5)));
    out("long_sum_to_shape_mid", "f32", rt_sum_to_shape(C, h, SH(4, 1, 3)));
    out("long_sum_to_shape_two_runs", "f32", rt_sum_to_shape(C, g, SH(3, 1)));
    /* the parameters' gradients over 4200 rows: two levels of chunks */
    rt_tensor *x2 = input(RT_F32, SH(4200, 2), -3, 3), *dy2 = input(RT_F32, SH(4200, 2), -1, 1);
    rt_tensor *w2 = input(RT_F32, SH(2), 0.5, 1.5), *dx2, *dw2, *db2;
    rt_layer_norm_bwd(C, x2, w2, 1e-5, dy2, &dx2, &dw2, &db2);
    out("long_layer_norm_bwd_4200_dw", "f32", dw2);
    out("long_layer_norm_bwd_4200_db", "f32", db2);
    rt_free(C, x2); rt_free(C, dy2); rt_free(C, w2); rt_free(C, dx2);
    rt_tensor *x = input(RT_F32, SH(150, 9), -3, 3), *dy = input(RT_F32, SH(150, 9), -1, 1);
    rt_tensor *w = input(RT_F32, SH(9), 0.5, 1.5), *dx, *dw, *db;
    rt_layer_norm_bwd(C, x, w, 1e-5, dy, &dx, &dw, &db);
    out("long_layer_norm_bwd_dx", "f32", dx);
    out("long_layer_norm_bwd_dw", "f32", dw);
    out("long_layer_norm_bwd_db", "f32", db);
    rt_rms_norm_bwd(C, x, w, 1e-6, dy, &dx, &dw);
    out("long_rms_norm_bwd_dx", "f32", dx);
    out("long_rms_norm_bwd_dw", "f32", dw);
    rt_free(C, a); rt_free(C, b); rt_free(C, g); rt_free(C, h);
    rt_free(C, x); rt_free(C, dy); rt_free(C, w);
    /* take_along_dim's backward: a loss's pick (one index per row), along
     * dim 0, and 100 indices a row */
    int32_t pick[6] = {4, 0, 2, 2, 4, 1}, d0[6] = {3, 0, 3, 1, 1, 2};
    rt_tensor *ip = rt_from_data(C, RT_I32, SH(2, 3, 1), pick), *i0 = rt_from_data(C, RT_I32, SH(2, 3), d0);
    rt_tensor *gp = input(RT_F32, SH(2, 3, 1), -1, 1), *g0 = input(RT_F32, SH(2, 3), -1, 1);
    out("long_take_bwd_pick", "f32", rt_take_along_dim_bwd(C, ip, gp, SH(2, 3, 5), 2));
    out("long_take_bwd_dim0", "f32", rt_take_along_dim_bwd(C, i0, g0, SH(4, 3), 0));
    int32_t many[200];
    for (int q = 0; q < 200; q++)
        many[q] = (q * 7) % 5;
    rt_tensor *im = rt_from_data(C, RT_I32, SH(2, 100), many), *gm = input(RT_F32, SH(2, 100), -1, 1);
    out("long_take_bwd_many", "f32", rt_take_along_dim_bwd(C, im, gm, SH(2, 5), 1));
    rt_free(C, ip); rt_free(C, i0); rt_free(C, gp); rt_free(C, g0); rt_free(C, im); rt_free(C, gm);
    /* broadcasts: x [1, 5] picked by [3, 4] (each x element a candidate of
     * 12 results), idx [1, 2] picking from [3, 5]; more candidates than the
     * device path takes (grouped on the host) */
    int32_t bx[12] = {4, 0, 4, 1, 2, 2, 0, 3, 1, 4, 4, 0}, bi[2] = {3, 1};
    rt_tensor *ibx = rt_from_data(C, RT_I32, SH(3, 4), bx), *ibi = rt_from_data(C, RT_I32, SH(1, 2), bi);
    rt_tensor *xb = input(RT_F32, SH(1, 5), -1, 1), *xf = input(RT_F32, SH(3, 5), -1, 1);
    out("long_take_bcast_x", "bits", rt_take_along_dim(C, xb, ibx, 1));
    out("long_take_bcast_idx", "bits", rt_take_along_dim(C, xf, ibi, 1));
    rt_tensor *gbx = input(RT_F32, SH(3, 4), -1, 1), *gbi = input(RT_F32, SH(3, 2), -1, 1);
    out("long_take_bwd_bcast_x", "f32", rt_take_along_dim_bwd(C, ibx, gbx, SH(1, 5), 1));
    out("long_take_bwd_bcast_idx", "f32", rt_take_along_dim_bwd(C, ibi, gbi, SH(3, 5), 1));
    int32_t lots[1100];
    for (int q = 0; q < 1100; q++)
        lots[q] = (q * 3) % 5;
    rt_tensor *il = rt_from_data(C, RT_I32, SH(1, 1100), lots), *gl = input(RT_F32, SH(1, 1100), -1, 1);
    out("long_take_bwd_host", "f32", rt_take_along_dim_bwd(C, il, gl, SH(1, 5), 1));
    rt_free(C, ibx); rt_free(C, ibi); rt_free(C, xb); rt_free(C, xf); rt_free(C, gbx); rt_free(C, gbi);
    rt_free(C, il); rt_free(C, gl);
}

/* batched GEMMs: every entry its own operands, one operand shared, a
 * partial broadcast (entry by entry), attention's einsums and backwards */
static void batched(void)
{
    static const rt_dtype dts[] = {RT_F32, RT_BF16};
    for (int k = 0; k < 2; k++) {
        rt_dtype dt = dts[k];
        const char *dn = rt_dtype_name(dt), *cl = fcls(dt);
        char name[64];
        rt_tensor *q = input(dt, SH(2, 3, 6, 4), -1, 1), *kk = input(dt, SH(2, 3, 5, 4), -1, 1);
        rt_tensor *w = input(dt, SH(6, 5), -1, 1), *p = input(dt, SH(2, 1, 4, 5), -1, 1);
        rt_tensor *r = input(dt, SH(1, 3, 5, 2), -1, 1), *dy = input(dt, SH(2, 3, 6, 5), -1, 1);
        snprintf(name, sizeof name, "bmm4_%s", dn);
        out(name, cl, rt_einsum(C, "bhqd,bhkd->bhqk", 2, (const rt_tensor *const[]){q, kk}));
        snprintf(name, sizeof name, "bmm_shared_a_%s", dn);
        rt_tensor *x = input(dt, SH(2, 3, 5, 2), -1, 1);
        out(name, cl, rt_matmul(C, w, x));
        rt_free(C, x);
        snprintf(name, sizeof name, "bmm_partial_%s", dn);
        out(name, cl, rt_matmul(C, p, r));
        rt_tensor *dxs[2];
        rt_einsum_bwd(C, "bhqd,bhkd->bhqk", 2, (const rt_tensor *const[]){q, kk}, dy, dxs);
        snprintf(name, sizeof name, "bmm4_bwd_q_%s", dn);
        out(name, cl, dxs[0]);
        snprintf(name, sizeof name, "bmm4_bwd_k_%s", dn);
        out(name, cl, dxs[1]);
        rt_free(C, q); rt_free(C, kk); rt_free(C, w); rt_free(C, p); rt_free(C, r); rt_free(C, dy);
    }
}

/* the row kernels (a warp per row on the CUDA target: runtime/cuda/dev.h's
 * rt_launch_rows) on rows shorter than, equal to and longer than a warp,
 * and softmax over a dim that is not the last (one thread per lane) */
static void rows(void)
{
    static const rt_dtype dts[] = {RT_F32, RT_BF16};
    static const int64_t lens[] = {1, 31, 32, 33, 128, 1000};
    for (int k = 0; k < 2; k++) {
        rt_dtype dt = dts[k];
        const char *dn = rt_dtype_name(dt), *cl = fcls(dt);
        for (size_t q = 0; q < sizeof lens / sizeof lens[0]; q++) {
            int64_t d = lens[q];
            char name[96];
#define NAME(what) (snprintf(name, sizeof name, "rows_%s_%lld_%s", what, (long long)d, dn), name)
            rt_tensor *x = input(dt, SH(5, d), -3, 3), *dy = input(dt, SH(5, d), -1, 1);
            rt_tensor *w = input(dt, SH(d), 0.5, 1.5), *b = input(dt, SH(d), -0.5, 0.5);
            rt_tensor *y = rt_softmax(C, x, -1), *ly = rt_log_softmax(C, x, 1);
            out(NAME("softmax_bwd"), cl, rt_softmax_bwd(C, y, dy, 1));
            out(NAME("log_softmax_bwd"), cl, rt_log_softmax_bwd(C, ly, dy, -1));
            out(NAME("softmax"), cl, y);
            out(NAME("log_softmax"), cl, ly);
            out(NAME("layer_norm"), cl, rt_layer_norm(C, x, w, b, 1e-5));
            out(NAME("layer_norm_plain"), cl, rt_layer_norm(C, x, NULL, NULL, 1e-5));
            out(NAME("rms_norm"), cl, rt_rms_norm(C, x, w, 1e-6));
            rt_tensor *dx, *dw, *db;
            rt_layer_norm_bwd(C, x, w, 1e-5, dy, &dx, &dw, &db);
            out(NAME("layer_norm_bwd_dx"), cl, dx);
            out(NAME("layer_norm_bwd_dw"), cl, dw);
            out(NAME("layer_norm_bwd_db"), cl, db);
            rt_rms_norm_bwd(C, x, w, 1e-6, dy, &dx, &dw);
            out(NAME("rms_norm_bwd_dx"), cl, dx);
            out(NAME("rms_norm_bwd_dw"), cl, dw);
            /* targets in range, one ignored; row 3's is the last class */
            int32_t tv[5] = {0, (int32_t)(d / 2), -100, (int32_t)(d - 1), (int32_t)(d / 3)};
            rt_tensor *t = rt_from_data(C, RT_I32, SH(5), tv);
            rt_tensor *none_dy = input(dt, SH(5), -1, 1), *sdy = rt_scalar(C, dt, 0.75);
            static const char *reds[] = {"mean", "sum", "none"};
            for (int r = 0; r < 3; r++) {
                char what[32];
                snprintf(what, sizeof what, "cross_entropy_%s", reds[r]);
                out(NAME(what), cl, rt_cross_entropy_reduce(C, x, t, (rt_ce_reduction)r));
                snprintf(what, sizeof what, "cross_entropy_bwd_%s", reds[r]);
                out(NAME(what), cl,
                    rt_cross_entropy_reduce_bwd(C, x, t, r == 2 ? none_dy : sdy, (rt_ce_reduction)r));
            }
            /* the vocabulary-parallel loss: x this rank's block of d classes
             * of d * ranks (its layout's), the targets global ids; lse, the
             * backward, and the backward in the logits' buffer */
            int nr = rt_group_size(C, RT_AXES(0));
            rt_axes vax[2] = {RT_NO_AXES, RT_AXES(0)};
            rt_layout vl = rt_layout_of(C, "logits", 2, (int64_t[]){5, d * nr}, vax);
            for (int r = 0; r < 3; r++) {
                char what[40];
                rt_tensor *lse = NULL;
                snprintf(what, sizeof what, "cross_entropy_vp_%s", reds[r]);
                out(NAME(what), cl, rt_cross_entropy_vp(C, x, t, (rt_ce_reduction)r, &vl, RT_AXES(0), &lse));
                snprintf(what, sizeof what, "cross_entropy_vp_lse_%s", reds[r]);
                rt_tensor *lse2 = rt_retain(lse);
                out(NAME(what), "f32", lse);
                snprintf(what, sizeof what, "cross_entropy_vp_bwd_%s", reds[r]);
                out(NAME(what), cl, rt_cross_entropy_vp_bwd(C, x, t, lse2, r == 2 ? none_dy : sdy,
                                                            (rt_ce_reduction)r, &vl));
                snprintf(what, sizeof what, "cross_entropy_vp_bwd_reuse_%s", reds[r]);
                rt_tensor *xc = rt_copy(C, x);
                out(NAME(what), cl, rt_cross_entropy_vp_bwd_reuse(C, xc, t, lse2, r == 2 ? none_dy : sdy,
                                                                  (rt_ce_reduction)r, &vl));
                rt_free(C, xc);
                rt_free(C, lse2);
            }
            /* softmax over the middle dim: inner != 1 */
            rt_tensor *x3 = input(dt, SH(2, d, 3), -3, 3), *dy3 = input(dt, SH(2, d, 3), -1, 1);
            rt_tensor *y3 = rt_softmax(C, x3, 1), *ly3 = rt_log_softmax(C, x3, 1);
            out(NAME("softmax_inner_bwd"), cl, rt_softmax_bwd(C, y3, dy3, 1));
            out(NAME("log_softmax_inner_bwd"), cl, rt_log_softmax_bwd(C, ly3, dy3, 1));
            out(NAME("softmax_inner"), cl, y3);
            out(NAME("log_softmax_inner"), cl, ly3);
#undef NAME
            rt_free(C, x3); rt_free(C, dy3);
            rt_free(C, t); rt_free(C, none_dy); rt_free(C, sdy);
            rt_free(C, x); rt_free(C, dy); rt_free(C, w); rt_free(C, b);
        }
    }
    /* embedding: a table of 300 rows, ids repeated (a group longer than a
     * warp), the first and last rows */
    rt_tensor *table = input(RT_F32, SH(300, 6), -1, 1);
    int32_t iv[96];
    for (int i = 0; i < 96; i++)
        iv[i] = i % 3 == 0 ? 7 : i % 5 == 0 ? 299 : (i * 37) % 300;
    iv[1] = 0;
    rt_tensor *ids = rt_from_data(C, RT_I32, SH(4, 24), iv), *edy = input(RT_F32, SH(4, 24, 6), -1, 1);
    out("rows_embedding", "bits", rt_embedding(C, table, ids));
    out("rows_embedding_bwd", "f32", rt_embedding_bwd(C, ids, edy, 300));
    /* the CUDA target's three ways to the table's gradient: the table above
     * is one launch (at most RT_EMB_ONE_WAVE elements); 300 rows of 900
     * (more) group the positions by a scan per row; 3000 rows (below) sort */
    rt_tensor *wdy = input(RT_F64, SH(4, 24, 900), -1, 1);
    out("rows_embedding_bwd_scan", "bits", rt_embedding_bwd(C, ids, wdy, 300));
    rt_free(C, wdy);
    rt_free(C, table); rt_free(C, ids); rt_free(C, edy);
    /* a vocabulary of 3000 rows of 100 (the CUDA target sorts the positions by id):
     * 1000 positions (runs of uneven length), an id repeated 200 times, the
     * first and last rows, in f64 where the order of the sums shows */
    int32_t lv[1000];
    for (int i = 0; i < 1000; i++)
        lv[i] = i % 5 == 0 ? 1234 : i % 7 == 0 ? 2999 : (i * 997) % 3000;
    lv[3] = 0;
    rt_tensor *lids = rt_from_data(C, RT_I32, SH(8, 125), lv), *ldy = input(RT_F64, SH(8, 125, 100), -1, 1);
    out("rows_embedding_bwd_sorted", "bits", rt_embedding_bwd(C, lids, ldy, 3000));
    rt_free(C, lids); rt_free(C, ldy);
}

/* reductions over lanes longer than a chunk in one launch on the CUDA
 * target (issue 26; runtime/cuda/dev.h's rt_launch_last: each block's
 * partial sums, then the last block to take its ticket adds them in order
 * and sets the block counter back to 0): several blocks and one, a tree
 * with a level on the last block, the max tree, layer_norm_bwd's dx and
 * parameters' gradients; and the sizes past RT_LAST_MAX chunks, two
 * launches. Each is called twice: the second must give the first's bits
 * (a counter not set back: the second launch's last block never adds, its
 * result is not written) and, where the target counts its launches (the
 * CUDA target and its simulation), each call of the one-launch sizes is
 * one launch. */
static double kernel_ops(void) { return C->prof.counts_launches ? C->prof.ops[RT_OP_KERNEL] : -1; }
static bool same_bytes(const rt_tensor *a, const rt_tensor *b) /* on the host: no reduction */
{
    size_t n = (size_t)a->numel * rt_dtype_size(a->dtype);
    if (a->dtype != b->dtype || a->numel != b->numel)
        return false;
    unsigned char *ha = malloc(n ? n : 1), *hb = malloc(n ? n : 1);
    rt_to_host(C, a, ha);
    rt_to_host(C, b, hb);
    bool same = memcmp(ha, hb, n) == 0;
    free(ha);
    free(hb);
    return same;
}
static void twice_check(const char *name, rt_tensor *r1, rt_tensor *r2, double k0, double k1, double k2, int want)
{
    if (!same_bytes(r1, r2)) {
        fprintf(stderr, "onelaunch: %s's second call differs from its first\n", name);
        exit(1);
    }
    if (k0 >= 0 && want > 0 && (k1 - k0 != want || k2 - k1 != want)) {
        fprintf(stderr, "onelaunch: %s took %g and %g launches, not %d\n", name, k1 - k0, k2 - k1, want);
        exit(1);
    }
}
#define TWICE(name, want, expr)                                        \
    do {                                                               \
        double k0_ = kernel_ops();                                     \
        rt_tensor *r1_ = (expr);                                       \
        double k1_ = kernel_ops();                                     \
        rt_tensor *r2_ = (expr);                                       \
        twice_check(name, r1_, r2_, k0_, k1_, kernel_ops(), want);     \
        out(name, "f32", r1_);                                         \
        rt_free(C, r2_);                                               \
    } while (0)
static void onelaunch(void)
{
    rt_tensor *g = input(RT_F32, SH(1000, 300), -1, 1), *h = input(RT_F32, SH(100, 3), -1, 1);
    TWICE("onelaunch_sum_to_shape_blocks", 1, rt_sum_to_shape(C, g, SH(300)));
    TWICE("onelaunch_sum_to_shape_one_block", 1, rt_sum_to_shape(C, h, SH(1, 3)));
    rt_tensor *a = input(RT_F32, SH(70000), -1, 1), *b = input(RT_F32, SH(5000), -1, 1);
    TWICE("onelaunch_sum_all_level", 1, rt_sum_all(C, a));
    TWICE("onelaunch_amax_all_level", 1, rt_amax_all(C, a));
    TWICE("onelaunch_sum_all_one_block", 1, rt_sum_all(C, b));
    TWICE("onelaunch_mean_cols", 1, rt_mean(C, g, 0, false));
    /* 2 chunks of 65600 lanes: more than RT_LAST_MAX, two launches */
    rt_tensor *wide = input(RT_F32, SH(65, 65600), -1, 1);
    TWICE("onelaunch_sum_to_shape_wide", 2, rt_sum_to_shape(C, wide, SH(65600)));
    rt_free(C, g); rt_free(C, h); rt_free(C, a); rt_free(C, b); rt_free(C, wide);
    /* layer_norm_bwd: 16 blocks of 64 rows, 2 blocks, 1 block; rms_norm_bwd
     * (dw alone); 2 chunks of 32800 columns twice (dw and db): two launches,
     * once (rms_norm's dw): one */
    static const int64_t shapes[][4] = {{1000, 40, 1, 1}, {70, 5, 1, 1}, {40, 6, 1, 1}, {65, 32800, 2, 1}};
    for (int q = 0; q < 4; q++) {
        int64_t rows = shapes[q][0], d = shapes[q][1];
        int want = (int)shapes[q][2];
        rt_tensor *x = input(RT_F32, SH(rows, d), -3, 3), *dy = input(RT_F32, SH(rows, d), -1, 1);
        rt_tensor *w = input(RT_F32, SH(d), 0.5, 1.5), *dx[2], *dw[2], *db[2];
        double k[3];
        for (int t = 0; t < 2; t++) {
            k[t] = kernel_ops();
            rt_layer_norm_bwd(C, x, w, 1e-5, dy, &dx[t], &dw[t], &db[t]);
        }
        k[2] = kernel_ops();
        char name[96];
#define NAME(what) (snprintf(name, sizeof name, "onelaunch_layer_norm_bwd_%lld_%s", (long long)rows, what), name)
        twice_check(NAME("dx"), dx[0], dx[1], k[0], k[1], k[2], want);
        twice_check(NAME("dw"), dw[0], dw[1], -1, 0, 0, 0);
        twice_check(NAME("db"), db[0], db[1], -1, 0, 0, 0);
        out(NAME("dx"), "f32", dx[0]);
        out(NAME("dw"), "f32", dw[0]);
        out(NAME("db"), "f32", db[0]);
        rt_free(C, dx[1]); rt_free(C, dw[1]); rt_free(C, db[1]);
        for (int t = 0; t < 2; t++) {
            k[t] = kernel_ops();
            rt_rms_norm_bwd(C, x, w, 1e-6, dy, &dx[t], &dw[t]);
        }
        k[2] = kernel_ops();
        twice_check(NAME("rms_dw"), dw[0], dw[1], k[0], k[1], k[2], (int)shapes[q][3]);
        twice_check(NAME("rms_dx"), dx[0], dx[1], -1, 0, 0, 0);
        out(NAME("rms_dw"), "f32", dw[0]);
        out(NAME("rms_dx"), "f32", dx[0]);
#undef NAME
        rt_free(C, dx[1]); rt_free(C, dw[1]);
        rt_free(C, x); rt_free(C, dy); rt_free(C, w);
    }
}
#undef TWICE

/* the row kernels without exp or log, in f64, where the order of a sum
 * shows in the result: the CUDA target's must equal its simulation's bit
 * for bit (tests/gpu/run.sh's simbits part, against the bundle's ref/sim
 * written by the simulation build); against the CPU's serial sums, f32 */
static void rowbits(void)
{
    static const int64_t lens[] = {1, 31, 32, 33, 128, 1000};
    for (size_t q = 0; q < sizeof lens / sizeof lens[0]; q++) {
        int64_t d = lens[q];
        char name[96];
#define NAME(what) (snprintf(name, sizeof name, "rowbits_%s_%lld", what, (long long)d), name)
        rt_tensor *x = input(RT_F64, SH(5, d), -3, 3), *dy = input(RT_F64, SH(5, d), -1, 1);
        rt_tensor *w = input(RT_F64, SH(d), 0.5, 1.5), *b = input(RT_F64, SH(d), -0.5, 0.5);
        rt_tensor *y = input(RT_F64, SH(5, d), 0, 1);
        out(NAME("layer_norm"), "f32", rt_layer_norm(C, x, w, b, 1e-5));
        out(NAME("rms_norm"), "f32", rt_rms_norm(C, x, w, 1e-6));
        rt_tensor *dx, *dw, *db;
        rt_layer_norm_bwd(C, x, w, 1e-5, dy, &dx, &dw, &db);
        out(NAME("layer_norm_bwd_dx"), "f32", dx);
        out(NAME("layer_norm_bwd_dw"), "f32", dw);
        out(NAME("layer_norm_bwd_db"), "f32", db);
        rt_rms_norm_bwd(C, x, w, 1e-6, dy, &dx, &dw);
        out(NAME("rms_norm_bwd_dx"), "f32", dx);
        out(NAME("rms_norm_bwd_dw"), "f32", dw);
        out(NAME("softmax_bwd"), "f32", rt_softmax_bwd(C, y, dy, 1));
#undef NAME
        rt_free(C, x); rt_free(C, dy); rt_free(C, w); rt_free(C, b); rt_free(C, y);
    }
    /* the reductions whose blocks' partial sums the last block adds
     * (runtime/cuda/dev.h's rt_launch_last): 16 blocks of 64 rows, 19 of
     * 256 chunks, 5 of 256 chunks and a level of the tree on that block */
    rt_tensor *x = input(RT_F64, SH(1000, 40), -3, 3), *dy = input(RT_F64, SH(1000, 40), -1, 1);
    rt_tensor *w = input(RT_F64, SH(40), 0.5, 1.5), *dx, *dw, *db;
    rt_layer_norm_bwd(C, x, w, 1e-5, dy, &dx, &dw, &db);
    out("rowbits_last_layer_norm_bwd_dx", "f32", dx);
    out("rowbits_last_layer_norm_bwd_dw", "f32", dw);
    out("rowbits_last_layer_norm_bwd_db", "f32", db);
    rt_tensor *g = input(RT_F64, SH(1000, 300), -1, 1), *a = input(RT_F64, SH(70000), -1, 1);
    out("rowbits_last_sum_to_shape", "f32", rt_sum_to_shape(C, g, SH(300)));
    out("rowbits_last_sum_all", "f32", rt_sum_all(C, a));
    rt_free(C, x); rt_free(C, dy); rt_free(C, w); rt_free(C, g); rt_free(C, a);
    int32_t iv[40];
    for (int i = 0; i < 40; i++)
        iv[i] = i % 4 == 0 ? 2 : (i * 7) % 9;
    rt_tensor *ids = rt_from_data(C, RT_I32, SH(40), iv), *edy = input(RT_F64, SH(40, 3), -1, 1);
    out("rowbits_embedding_bwd", "f32", rt_embedding_bwd(C, ids, edy, 9));
    rt_free(C, ids); rt_free(C, edy);
}

/* a and b (consumed: a) hold the same values, else the test stops */
static void same_values(const char *what, rt_tensor *a, const rt_tensor *b)
{
    rt_tensor *ne = rt_binary(C, RT_NE, a, b); /* (-inf rows of the log-sum-exp: equal) */
    rt_tensor *x = ne->numel ? rt_amax_all(C, ne) : rt_scalar(C, ne->dtype, 0);
    if (rt_item(C, x) != 0) {
        fprintf(stderr, "%s: the token-major layout's result differs from the head-major one's\n", what);
        exit(1);
    }
    rt_free(C, a); rt_free(C, ne); rt_free(C, x);
}

/* x permuted by perm (n dims) */
static rt_tensor *perm(const rt_tensor *x, const int *p) { return rt_permute(C, x, p); }

/* the same attention with some operands token-major (rt_attention_l:
 * [B, T, H, E], a grouped q [B, T, Hkv, G, E]) gives the head-major call's
 * values exactly: the output, the log-sum-exp and dq, dk, dv */
static void attention_layouts(const char *name, const rt_tensor *q, const rt_tensor *kk, const rt_tensor *v,
                              const rt_tensor *dy, bool causal, double scale, int64_t kv_len, unsigned layout,
                              const rt_tensor *y, const rt_tensor *lse, const rt_tensor *dq, const rt_tensor *dk,
                              const rt_tensor *dv)
{
    static const int to4[] = {0, 2, 1, 3}, to5[] = {0, 3, 1, 2, 4}, from5[] = {0, 2, 3, 1, 4};
    bool g5 = q->ndim == 5;
    const int *qto = g5 ? to5 : to4, *qfrom = g5 ? from5 : to4;
    bool tq = layout & RT_ATTN_Q, tk = layout & RT_ATTN_K, tv = layout & RT_ATTN_V, to = layout & RT_ATTN_OUT;
    rt_tensor *Q = tq ? perm(q, qto) : rt_copy(C, q), *K = tk ? perm(kk, to4) : rt_copy(C, kk);
    rt_tensor *V = tv ? perm(v, to4) : rt_copy(C, v), *DY = to ? perm(dy, qto) : rt_copy(C, dy);
    rt_tensor *L = NULL, *Y = rt_attention_l(C, Q, K, V, causal, scale, kv_len, layout, &L);
    rt_tensor *DQ, *DK, *DV;
    rt_attention_bwd_l(C, Q, K, V, Y, L, DY, causal, scale, kv_len, layout, &DQ, &DK, &DV);
    char what[128];
#define WHAT(x) (snprintf(what, sizeof what, "%s %s (layout %u)", name, x, layout), what)
    same_values(WHAT("out"), to ? perm(Y, qfrom) : rt_copy(C, Y), y);
    same_values(WHAT("lse"), rt_copy(C, L), lse);
    same_values(WHAT("dq"), tq ? perm(DQ, qfrom) : rt_copy(C, DQ), dq);
    same_values(WHAT("dk"), tk ? perm(DK, to4) : rt_copy(C, DK), dk);
    same_values(WHAT("dv"), tv ? perm(DV, to4) : rt_copy(C, DV), dv);
#undef WHAT
    rt_free(C, Q); rt_free(C, K); rt_free(C, V); rt_free(C, DY); rt_free(C, Y); rt_free(C, L);
    rt_free(C, DQ); rt_free(C, DK); rt_free(C, DV);
}

/* fused attention (rt_attention, rt_attention_bwd; the CUDA target's tiled
 * kernels, runtime/cuda/attention.cu) on shapes at the tiles' edges: T and S
 * not multiples of the tile (64 rows; 32 in f32's dk/dv, 32 and 16 in f64),
 * S != T (the causal mask bottom-right), kv_len, grouped-query heads in both
 * layouts ([B, H, T, E] with H = G Hkv, and [B, Hkv, G, T, E]), Ev != E,
 * E = 24 and 64, T = 1, a row that sees no key (causal, T > S), and a head
 * size too large for any tile (the reference kernels). The output, the
 * log-sum-exp and dq, dk, dv. bf16 runs the tensor-core tiles
 * (runtime/cuda/mma.h; emulated in the simulation). prefix names the
 * results; bits: f32 and f64 only, whose fma chains the GPU must reproduce
 * bit for bit (run.sh's simbits; a tensor core's sums are not IEEE's step
 * by step, so bf16's last bits may differ from the emulation's). Each case
 * also runs with operands in the token-major layout (rt_attention_l, its
 * backward), whose values must equal the head-major call's exactly on
 * every build (attention_layouts) */
static void attention_cases(const char *prefix, bool bits)
{
    static const struct {
        const char *name;
        int64_t b, hkv, g, t, s, e, ev, kv_len;
        bool causal, grouped;
    } cases[] = {
        {"edge", 2, 2, 2, 70, 70, 24, 24, -1, true, false},
        {"cross", 1, 1, 4, 5, 83, 64, 64, -1, false, false},
        {"decode", 1, 2, 1, 3, 90, 64, 64, 71, true, false},
        {"long", 1, 1, 1, 130, 130, 64, 64, -1, true, false},
        {"grouped", 1, 2, 3, 33, 40, 24, 16, 37, true, true},
        {"one", 2, 1, 2, 1, 7, 24, 24, -1, true, false},
        {"empty_rows", 1, 1, 1, 9, 4, 8, 8, -1, true, false},
        {"wide", 1, 1, 1, 2, 3, 13000, 3, -1, true, false},
    };
    static const rt_dtype dts[] = {RT_F32, RT_BF16, RT_F64};
    for (int k = 0; k < 3; k++) {
        rt_dtype dt = dts[k];
        if (bits && dt == RT_BF16)
            continue;
        const char *dn = rt_dtype_name(dt), *cl = fcls(dt);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int64_t b = cases[c].b, hkv = cases[c].hkv, g = cases[c].g, t = cases[c].t, s = cases[c].s;
            int64_t e = cases[c].e, ev = cases[c].ev;
            rt_tensor *q = cases[c].grouped ? input(dt, SH(b, hkv, g, t, e), -1, 1)
                                            : input(dt, SH(b, hkv * g, t, e), -1, 1);
            rt_tensor *kk = input(dt, SH(b, hkv, s, e), -1, 1), *v = input(dt, SH(b, hkv, s, ev), -1, 1);
            rt_tensor *dy = cases[c].grouped ? input(dt, SH(b, hkv, g, t, ev), -1, 1)
                                             : input(dt, SH(b, hkv * g, t, ev), -1, 1);
            double scale = 1 / sqrt((double)e);
            rt_tensor *lse = NULL, *y = rt_attention(C, q, kk, v, cases[c].causal, scale, cases[c].kv_len, &lse);
            rt_tensor *dq, *dk, *dv;
            rt_attention_bwd(C, q, kk, v, y, lse, dy, cases[c].causal, scale, cases[c].kv_len, &dq, &dk, &dv);
            char name[96];
            /* every operand token-major, and some only */
            snprintf(name, sizeof name, "%s_%s_%s", prefix, cases[c].name, dn);
            attention_layouts(name, q, kk, v, dy, cases[c].causal, scale, cases[c].kv_len,
                              RT_ATTN_Q | RT_ATTN_K | RT_ATTN_V | RT_ATTN_OUT, y, lse, dq, dk, dv);
            if (!getenv("KERNELS_ONE_LAYOUT"))
                attention_layouts(name, q, kk, v, dy, cases[c].causal, scale, cases[c].kv_len,
                                  c % 2 ? RT_ATTN_K | RT_ATTN_OUT : RT_ATTN_Q | RT_ATTN_V, y, lse, dq, dk, dv);
#define NAME(what) (snprintf(name, sizeof name, "%s_%s_%s_%s", prefix, cases[c].name, what, dn), name)
            out(NAME("out"), cl, y);
            out(NAME("lse"), "f32", lse);
            out(NAME("dq"), cl, dq);
            out(NAME("dk"), cl, dk);
            out(NAME("dv"), cl, dv);
#undef NAME
            rt_free(C, q); rt_free(C, kk); rt_free(C, v); rt_free(C, dy);
        }
    }
}

static void attention(void) { attention_cases("attention", false); }
static void attnbits(void) { attention_cases("attnbits", true); }

static void nn(void)
{
    static const rt_dtype dts[] = {RT_F32, RT_BF16};
    for (int k = 0; k < 2; k++) {
        rt_dtype dt = dts[k];
        const char *dn = rt_dtype_name(dt), *cl = fcls(dt);
        char name[64];
        rt_tensor *x = input(dt, SH(3, 4, 9), -3, 3), *dy = input(dt, SH(3, 4, 9), -1, 1);
        rt_tensor *w = input(dt, SH(9), 0.5, 1.5), *b = input(dt, SH(9), -0.5, 0.5);
        for (int d = 0; d < 3; d += 2) {
            rt_tensor *y = rt_softmax(C, x, d), *ly = rt_log_softmax(C, x, d);
            snprintf(name, sizeof name, "softmax_d%d_%s", d, dn);
            out(name, cl, rt_softmax_bwd(C, y, dy, d));
            snprintf(name, sizeof name, "log_softmax_bwd_d%d_%s", d, dn);
            out(name, cl, rt_log_softmax_bwd(C, ly, dy, d));
            snprintf(name, sizeof name, "softmax_fwd_d%d_%s", d, dn);
            out(name, cl, y);
            snprintf(name, sizeof name, "log_softmax_d%d_%s", d, dn);
            out(name, cl, ly);
        }
        snprintf(name, sizeof name, "layer_norm_%s", dn);
        out(name, cl, rt_layer_norm(C, x, w, b, 1e-5));
        snprintf(name, sizeof name, "layer_norm_plain_%s", dn);
        out(name, cl, rt_layer_norm(C, x, NULL, NULL, 1e-5));
        snprintf(name, sizeof name, "rms_norm_%s", dn);
        out(name, cl, rt_rms_norm(C, x, w, 1e-6));
        rt_tensor *dx, *dw, *db;
        rt_layer_norm_bwd(C, x, w, 1e-5, dy, &dx, &dw, &db);
        /* with an addend (a residual's gradient, compiler/callfuse.c):
         * dx the bits of rt_binary(RT_ADD, addend, dx), dw and db as without */
        rt_tensor *ad = input(dt, SH(3, 4, 9), -2, 2), *adx, *adw, *adb;
        rt_layer_norm_bwd_add(C, x, w, 1e-5, dy, ad, &adx, &adw, &adb);
        rt_tensor *sum = rt_binary(C, RT_ADD, ad, dx);
        if (!same_bits(adx, sum) || !same_bits(adw, dw) || !same_bits(adb, db)) {
            fprintf(stderr, "layer_norm_bwd_add (%s): not the bits of layer_norm_bwd's dx plus the addend\n", dn);
            exit(1);
        }
        snprintf(name, sizeof name, "layer_norm_bwd_add_dx_%s", dn);
        out(name, cl, adx);
        rt_free(C, ad); rt_free(C, adw); rt_free(C, adb); rt_free(C, sum);
        snprintf(name, sizeof name, "layer_norm_bwd_dx_%s", dn);
        out(name, cl, dx);
        snprintf(name, sizeof name, "layer_norm_bwd_dw_%s", dn);
        out(name, cl, dw);
        snprintf(name, sizeof name, "layer_norm_bwd_db_%s", dn);
        out(name, cl, db);
        rt_rms_norm_bwd(C, x, w, 1e-6, dy, &dx, &dw);
        snprintf(name, sizeof name, "rms_norm_bwd_dx_%s", dn);
        out(name, cl, dx);
        snprintf(name, sizeof name, "rms_norm_bwd_dw_%s", dn);
        out(name, cl, dw);
        int32_t tv[12] = {0, 3, 8, -100, 5, 5, 1, 2, 7, -100, 4, 6};
        rt_tensor *t = rt_from_data(C, RT_I32, SH(3, 4), tv);
        rt_tensor *none_dy = input(dt, SH(3, 4), -1, 1), *sdy = rt_scalar(C, dt, 0.75);
        static const char *reds[] = {"mean", "sum", "none"};
        for (int r = 0; r < 3; r++) {
            snprintf(name, sizeof name, "cross_entropy_%s_%s", reds[r], dn);
            out(name, cl, rt_cross_entropy_reduce(C, x, t, (rt_ce_reduction)r));
            snprintf(name, sizeof name, "cross_entropy_bwd_%s_%s", reds[r], dn);
            out(name, cl, rt_cross_entropy_reduce_bwd(C, x, t, r == 2 ? none_dy : sdy,
                                                      (rt_ce_reduction)r));
        }
        rt_free(C, t); rt_free(C, none_dy); rt_free(C, sdy);
        rt_free(C, x); rt_free(C, dy); rt_free(C, w); rt_free(C, b);
    }
    rt_tensor *table = input(RT_F32, SH(7, 5), -1, 1);
    int32_t iv[8] = {3, 0, 6, 3, 3, 1, 6, 2};
    rt_tensor *ids = rt_from_data(C, RT_I32, SH(2, 4), iv), *edy = input(RT_F32, SH(2, 4, 5), -1, 1);
    out("embedding", "bits", rt_embedding(C, table, ids));
    out("embedding_bwd", "f32", rt_embedding_bwd(C, ids, edy, 7));
    rt_free(C, table); rt_free(C, ids); rt_free(C, edy);
}

static void selection(void)
{
    rt_layout l = rt_layout_full(2, (int64_t[]){4, 6});
    l.global[1] = 12;
    l.offset[1] = 6;
    out("iota_f32", "bits", rt_iota(C, RT_F32, &l, 1));
    out("iota_i32", "bits", rt_iota(C, RT_I32, &l, 0));
    rt_tensor *c = input(RT_F32, SH(4, 1), -1, 1), *a = input(RT_F32, SH(4, 6), -1, 1);
    rt_tensor *b = input(RT_F32, SH(6), -1, 1), *dy = input(RT_F32, SH(4, 6), -1, 1);
    rt_tensor *cpos = rt_binary_scalar(C, RT_GT, c, 0.0, false);
    out("where", "bits", rt_where(C, cpos, a, b));
    rt_tensor *cflat = rt_binary_scalar(C, RT_GT, dy, 0.0, false); /* no broadcast: flat indices */
    out("where_flat", "bits", rt_where(C, cflat, a, dy));
    out("binary_flat", "bits", rt_binary(C, RT_SUB, a, dy));
    rt_free(C, cflat);
    rt_tensor *da, *db;
    rt_where_bwd(C, cpos, a, b, dy, &da, &db);
    out("where_bwd_a", "f32", da);
    out("where_bwd_b", "f32", db);
    int32_t iv[12] = {0, 2, 2, 1, 0, 0, 1, 2, 2, 2, 0, 1};
    rt_tensor *x = input(RT_F32, SH(4, 3), -1, 1), *idx = rt_from_data(C, RT_I32, SH(4, 3), iv);
    out("take_along_dim", "bits", rt_take_along_dim(C, x, idx, 1));
    rt_tensor *tdy = input(RT_F32, SH(4, 3), -1, 1);
    out("take_along_dim_bwd", "f32", rt_take_along_dim_bwd(C, idx, tdy, SH(4, 3), 1));
    rt_free(C, c); rt_free(C, a); rt_free(C, b); rt_free(C, dy); rt_free(C, cpos);
    rt_free(C, x); rt_free(C, idx); rt_free(C, tdy);
}

static void random_(void)
{
    rt_layout l = rt_layout_full(2, (int64_t[]){6, 8});
    l.global[0] = 12;
    l.offset[0] = 6;
    out("randn_f32", "bits", rt_randn(C, RT_F32, &l, 42, 0.02));
    out("randn_f64", "f32", rt_randn(C, RT_F64, &l, 42, 1.0));
    out("uniform_f32", "bits", rt_uniform(C, RT_F32, &l, 7, -1, 1));
    out("uniform_bf16", "bits", rt_uniform(C, RT_BF16, &l, 7, -1, 1));
    rt_tensor *x = input(RT_F32, SH(6, 8), -1, 1);
    out("dropout", "bits", rt_dropout(C, x, 0.3, 99, &l, RT_NO_AXES));
    rt_free(C, x);
}

static const rt_dtype dts_bgrad[] = {RT_F32, RT_F64, RT_BF16};

static void linalg(void)
{
    static const rt_dtype dts[] = {RT_F32, RT_F64, RT_BF16};
    for (int k = 0; k < 3; k++) {
        rt_dtype dt = dts[k];
        const char *dn = rt_dtype_name(dt), *cl = fcls(dt);
        char name[64];
        rt_tensor *a = input(dt, SH(2, 5, 7), -1, 1), *b = input(dt, SH(7, 3), -1, 1);
        rt_tensor *bb = input(dt, SH(2, 7, 3), -1, 1), *dy = input(dt, SH(2, 5, 3), -1, 1);
        rt_tensor *v = input(dt, SH(7), -1, 1);
        snprintf(name, sizeof name, "matmul_%s", dn);
        out(name, cl, rt_matmul(C, a, b));
        snprintf(name, sizeof name, "bmm_%s", dn);
        out(name, cl, rt_matmul(C, a, bb));
        snprintf(name, sizeof name, "matvec_%s", dn);
        out(name, cl, rt_matmul(C, a, v));
        rt_tensor *da, *db;
        rt_matmul_bwd(C, a, b, dy, &da, &db);
        snprintf(name, sizeof name, "matmul_bwd_a_%s", dn);
        out(name, cl, da);
        snprintf(name, sizeof name, "matmul_bwd_b_%s", dn);
        out(name, cl, db);
        rt_tensor *e = rt_einsum(C, "bij,bjk->bik", 2, (const rt_tensor *const[]){a, bb});
        snprintf(name, sizeof name, "einsum_%s", dn);
        out(name, cl, e);
        rt_tensor *dxs[2];
        rt_einsum_bwd(C, "bij,jk->bik", 2, (const rt_tensor *const[]){a, b}, dy, dxs);
        snprintf(name, sizeof name, "einsum_bwd_0_%s", dn);
        out(name, cl, dxs[0]);
        snprintf(name, sizeof name, "einsum_bwd_1_%s", dn);
        out(name, cl, dxs[1]);
        rt_free(C, a); rt_free(C, b); rt_free(C, bb); rt_free(C, dy); rt_free(C, v);
    }
    /* the GEMM epilogues (bf16): bias and relu / gelu_tanh in cuBLASLt's
     * epilogue on the CUDA target (added to the f32 accumulator, one
     * rounding), oneDNN's post-ops on the CPU; gelu (erf) after the GEMM */
    rt_tensor *a = input(RT_BF16, SH(2, 5, 7), -1, 1), *b = input(RT_BF16, SH(7, 3), -1, 1);
    rt_tensor *bias = input(RT_BF16, SH(3), -1, 1);
    static const struct {
        const char *name;
        int act;
        bool bias;
    } epi[] = {{"bias", -1, true}, {"bias_relu", RT_RELU, true}, {"bias_gelu_tanh", RT_GELU_TANH, true},
               {"bias_gelu", RT_GELU, true}, {"relu", RT_RELU, false}, {"gelu_tanh", RT_GELU_TANH, false}};
    for (size_t i = 0; i < sizeof epi / sizeof epi[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "matmul_epilogue_%s_bf16", epi[i].name);
        out(name, "bf16", rt_matmul_bias_act(C, a, b, epi[i].bias ? bias : NULL, epi[i].act));
    }
    rt_free(C, a); rt_free(C, b); rt_free(C, bias);
    /* f32 on the CUDA target: an einsum "btd,dhe->bthe" plus a bias of
     * [h, e] in one GEMM, and a linear layer's backward with the bias's
     * gradient from the dW GEMM (cuBLASLt's bias-gradient epilogue; on the
     * CPU and for f64 the GEMM and a sum); bf16's bias gradient too */
    rt_tensor *x = input(RT_F32, SH(2, 3, 4), -1, 1), *w = input(RT_F32, SH(4, 2, 5), -1, 1);
    rt_tensor *bhe = input(RT_F32, SH(2, 5), -1, 1);
    out("einsum_bias_f32", "f32", rt_matmul_bias_act(C, x, w, bhe, -1));
    rt_free(C, bhe);
    for (int k = 0; k < 3; k++) {
        rt_dtype dt = dts_bgrad[k];
        const char *dn = rt_dtype_name(dt), *cl = fcls(dt);
        char name[64];
        rt_tensor *xk = rt_astype(C, x, dt), *wk = rt_astype(C, w, dt);
        rt_tensor *dy = input(dt, SH(2, 3, 2, 5), -1, 1);
        rt_tensor *dx, *dw, *dbias;
        rt_matmul_bwd_bias(C, xk, wk, dy, &dx, &dw, &dbias);
        snprintf(name, sizeof name, "matmul_bwd_bias_x_%s", dn);
        out(name, cl, dx);
        snprintf(name, sizeof name, "matmul_bwd_bias_w_%s", dn);
        out(name, cl, dw);
        snprintf(name, sizeof name, "matmul_bwd_bias_b_%s", dn);
        out(name, cl, dbias);
        rt_free(C, xk); rt_free(C, wk); rt_free(C, dy);
    }
    rt_free(C, x); rt_free(C, w);
    /* rt_matmul_bwd_bias_acc (the CUDA target's gradient sums in the dX
     * GEMM, cuBLASLt's beta = 1): the GEMM's result added to the
     * accumulator's and rounded once, the bits of rt_matmul_bwd_bias's dX
     * and rt_binary's add on every target (eq: 1 everywhere), in place or,
     * for an accumulator another reference holds, in a copy (kept: the
     * held one unchanged) */
    for (int k = 0; k < 3; k++) {
        rt_dtype dt = dts_bgrad[k];
        const char *dn = rt_dtype_name(dt), *cl = fcls(dt);
        char name[64];
        rt_tensor *xa = input(dt, SH(2, 24, 16), -1, 1), *wa = input(dt, SH(16, 4, 8), -1, 1);
        rt_tensor *dy = input(dt, SH(2, 24, 4, 8), -1, 1), *acc = input(dt, SH(2, 24, 16), -1, 1);
        rt_tensor *dx, *dw, *dbias;
        rt_matmul_bwd_bias(C, xa, wa, dy, &dx, NULL, NULL);
        rt_tensor *want = rt_binary(C, RT_ADD, acc, dx), *keep = rt_copy(C, acc);
        rt_tensor *copied = rt_matmul_bwd_bias_acc(C, xa, wa, dy, rt_retain(acc), NULL, NULL);
        snprintf(name, sizeof name, "matmul_bwd_acc_kept_%s", dn);
        out(name, "bits", rt_binary(C, RT_EQ, acc, keep));
        rt_tensor *sum = rt_matmul_bwd_bias_acc(C, xa, wa, dy, acc, &dw, &dbias);
        snprintf(name, sizeof name, "matmul_bwd_acc_eq_%s", dn);
        out(name, "bits", rt_binary(C, RT_EQ, sum, want));
        snprintf(name, sizeof name, "matmul_bwd_acc_copy_eq_%s", dn);
        out(name, "bits", rt_binary(C, RT_EQ, copied, want));
        snprintf(name, sizeof name, "matmul_bwd_acc_x_%s", dn);
        out(name, cl, sum);
        snprintf(name, sizeof name, "matmul_bwd_acc_w_%s", dn);
        out(name, cl, dw);
        snprintf(name, sizeof name, "matmul_bwd_acc_b_%s", dn);
        out(name, cl, dbias);
        rt_free(C, xa); rt_free(C, wa); rt_free(C, dy); rt_free(C, dx); rt_free(C, want); rt_free(C, keep);
        rt_free(C, copied);
    }
    /* x / s's gradient for a host number s (the CUDA target's loss mean):
     * rt_div_scalar_grad_h, the bits of rt_binary_bwd with rt_scalar(s)
     * (eq: 1 everywhere; 16777217 rounds to another f32) */
    for (int k = 0; k < 2; k++) {
        rt_dtype dt = k ? RT_F64 : RT_F32;
        const char *dn = rt_dtype_name(dt);
        rt_tensor *xs = input(dt, SH(64, 64), -1, 1), *dy = input(dt, SH(64, 64), -1, 1);
        for (int v = 0; v < 2; v++) {
            double sv = v ? 16777217.0 : 96.0;
            char name[64];
            rt_tensor *s = rt_scalar(C, dt, sv), *want, *got = rt_div_scalar_grad_h(C, dy, sv);
            rt_binary_bwd(C, RT_DIV, xs, s, dy, &want, NULL);
            snprintf(name, sizeof name, "div_scalar_grad_h_eq_%d_%s", v, dn);
            out(name, "bits", rt_binary(C, RT_EQ, got, want));
            snprintf(name, sizeof name, "div_scalar_grad_h_%d_%s", v, dn);
            out(name, fcls(dt), got);
            rt_free(C, s); rt_free(C, want);
        }
        rt_free(C, xs); rt_free(C, dy);
    }
}

static void collectives(void)
{
    int n = rt_world_size(C);
    rt_axes x = RT_AXES(0);
    rt_tensor *t = input(RT_F32, SH(2 * n, 3 * n), -1, 1);
    /* each rank its own values: add the rank */
    rt_tensor *v = rt_binary_scalar(C, RT_ADD, t, (double)rt_rank(C), false);
    out("all_reduce_sum", "f32", rt_all_reduce(C, v, x, RT_RED_SUM));
    out("all_reduce_avg", "f32", rt_all_reduce(C, v, x, RT_RED_AVG));
    out("all_reduce_max", "bits", rt_all_reduce(C, v, x, RT_RED_MAX));
    out("all_reduce_min", "bits", rt_all_reduce(C, v, x, RT_RED_MIN)); /* mutate.sh's sim_allreduce_op */
    rt_tensor *vb = rt_astype(C, v, RT_BF16);
    out("all_reduce_bf16", "bf16", rt_all_reduce(C, vb, x, RT_RED_SUM));
    out("all_reduce_bf16_max", "bits", rt_all_reduce(C, vb, x, RT_RED_MAX));
    out("all_reduce_bf16_min", "bits", rt_all_reduce(C, vb, x, RT_RED_MIN));
    out("all_gather_0", "bits", rt_all_gather(C, v, x, 0));
    out("all_gather_1", "bits", rt_all_gather(C, v, x, 1));
    out("all_gather_stack", "bits", rt_all_gather(C, v, x, RT_STACK));
    out("reduce_scatter_0", "f32", rt_reduce_scatter(C, v, x, 0, RT_RED_SUM));
    out("reduce_scatter_1", "f32", rt_reduce_scatter(C, v, x, 1, RT_RED_SUM));
    out("reduce_scatter_avg", "f32", rt_reduce_scatter(C, v, x, 1, RT_RED_AVG));
    out("all_to_all_01", "bits", rt_all_to_all(C, v, x, 0, 1));
    out("all_to_all_10", "bits", rt_all_to_all(C, v, x, 1, 0));
    out("convert_r_v", "bits", rt_convert(C, v, x, RT_R, RT_V, 1));
    out("convert_v_p", "bits", rt_convert(C, v, x, RT_V, RT_P, 0));
    out("ppermute_1", "bits", rt_ppermute(C, v, x, 1));
    out("ppermute_m3", "bits", rt_ppermute(C, v, x, -3));
    /* uneven shards (SPEC 4): 2n+1 rows and 3n+1 columns split as
     * torch.chunk does (the CPU's counts against the GPU's padding), and one
     * row over n ranks (every block but the first empty) */
    int64_t nr = 2 * n + 1, nc = 3 * n + 1, ro, co, eo;
    rt_tensor *u0 = input(RT_F32, SH(nr, nc), -1, 1);
    rt_tensor *u = rt_binary_scalar(C, RT_ADD, u0, (double)rt_rank(C), false);
    int64_t re = rt_shard_block(C, nr, x, rt_rank(C), &ro), ce = rt_shard_block(C, nc, x, rt_rank(C), &co);
    rt_tensor *rows = rt_slice(C, u, 0, ro, ro + re), *cols = rt_slice(C, u, 1, co, co + ce);
    out("uneven_all_gather_0", "bits", rt_all_gather_to(C, rows, x, 0, nr));
    out("uneven_all_gather_1", "bits", rt_all_gather_to(C, cols, x, 1, nc));
    /* results whose shape differs per rank are gathered back whole */
    rt_tensor *r;
    r = rt_reduce_scatter(C, u, x, 0, RT_RED_SUM);
    out("uneven_reduce_scatter_0", "f32", rt_all_gather_to(C, r, x, 0, nr));
    rt_free(C, r);
    r = rt_reduce_scatter(C, u, x, 1, RT_RED_AVG);
    out("uneven_reduce_scatter_avg", "f32", rt_all_gather_to(C, r, x, 1, nc));
    rt_free(C, r);
    r = rt_all_to_all_to(C, rows, x, 0, 1, nr);
    out("uneven_all_to_all_01", "bits", rt_all_gather_to(C, r, x, 1, nc));
    rt_free(C, r);
    r = rt_all_to_all_to(C, cols, x, 1, 0, nc);
    out("uneven_all_to_all_10", "bits", rt_all_gather_to(C, r, x, 0, nr));
    rt_free(C, r);
    r = rt_convert(C, u, x, RT_R, RT_V, 1);
    out("uneven_convert_r_v", "bits", rt_all_gather_to(C, r, x, 1, nc));
    rt_free(C, r);
    out("uneven_convert_v_p", "bits", rt_convert_to(C, rows, x, RT_V, RT_P, 0, nr));
    rt_tensor *one = input(RT_F32, SH(1, 3), -1, 1);
    int64_t ee = rt_shard_block(C, 1, x, rt_rank(C), &eo);
    rt_tensor *mine = rt_slice(C, one, 0, eo, eo + ee);
    out("uneven_all_gather_empty", "bits", rt_all_gather_to(C, mine, x, 0, 1));
    rt_free(C, u0); rt_free(C, u); rt_free(C, rows); rt_free(C, cols); rt_free(C, one); rt_free(C, mine);
    rt_tensor *s = rt_all_reduce_start(C, v, x, RT_RED_SUM);
    rt_flush(C);
    rt_wait(C, s);
    out("all_reduce_start", "f32", s);
    rt_free(C, t); rt_free(C, v); rt_free(C, vb);
}

static void files(void)
{
    /* a checkpoint written and read back (bf16 stored as f32) */
    char ck[4096];
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    rt_tensor *a = input(RT_F32, SH(3, 4), -1, 1), *b = input(RT_BF16, SH(5), -1, 1);
    rt_layout la = rt_layout_full(2, a->shape), lb = rt_layout_full(1, b->shape);
    rt_ckpt *k = rt_ckpt_begin(C, ck);
    rt_ckpt_write(C, k, "a", a, &la);
    rt_ckpt_write(C, k, "b", b, &lb);
    rt_ckpt_commit(C, k);
    out("ckpt_a", "bits", rt_ckpt_read(C, ck, "a", RT_F32, &la));
    out("ckpt_b", "bits", rt_ckpt_read(C, ck, "b", RT_BF16, &lb));
    char np[4096];
    snprintf(np, sizeof np, "%s/plain.tmpnpy", dir);
    rt_save_npy(C, np, a, &la);
    out("npy_roundtrip", "bits", rt_load_npy(C, np, RT_F32, &la));
    rt_tensor *sum = rt_sum_all(C, a);
    double hv[2] = {rt_item(C, sum), rt_get(a, 5)}; /* host values synchronise */
    out("item", "f32", rt_from_data(C, RT_F64, SH(2), hv));
    rt_free(C, sum);
    rt_free(C, a);
    rt_free(C, b);
}

/* a checkpoint written by another run (another target: KERNELS_RESUME_FROM,
 * the reference's DIR/ckpt), read back as this target's tensors */
static void resume(void)
{
    const char *from = getenv("KERNELS_RESUME_FROM");
    char ck[4096];
    snprintf(ck, sizeof ck, "%s", from ? from : "");
    if (!from)
        snprintf(ck, sizeof ck, "%s/ckpt", dir);
    rt_layout la = rt_layout_full(2, (int64_t[]){3, 4}), lb = rt_layout_full(1, (int64_t[]){5});
    out("resume_a", "bits", rt_ckpt_read(C, ck, "a", RT_F32, &la));
    out("resume_b", "bits", rt_ckpt_read(C, ck, "b", RT_BF16, &lb));
}

int main(int argc, char **argv)
{
    C = rt_init(&argc, &argv, 1, (const char *const[]){"x"}, (const int[]){-1});
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: kernels DIR [SECTION,...]\n");
        return 2;
    }
    const char *only = argc == 3 ? argv[2] : NULL;
    dir = argv[1];
    mkdir(dir, 0777);
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s/manifest.txt", dir);
    if (rt_rank(C) == 0) {
        manifest = fopen(mpath, "w");
        if (!manifest) {
            perror(mpath);
            return 1;
        }
    }
    static const struct {
        const char *name;
        void (*run)(void);
    } sections[] = {{"elementwise", elementwise}, {"shapes", shapes},   {"reductions", reductions},
                    {"nn", nn},                   {"selection", selection}, {"random", random_},
                    {"linalg", linalg},           {"collectives", collectives}, {"files", files}, {"long", long_lanes}, {"sum_squares", sum_squares}, {"multi", multi}, {"batched", batched},
                    {"rows", rows},               {"rowbits", rowbits}, {"onelaunch", onelaunch},
                    {"resume", resume},           {"attention", attention},
                    {"attnbits", attnbits}};
    /* "-a,b": every section but a and b */
    bool except = only && only[0] == '-';
    const char *list = except ? only + 1 : only;
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        const char *at = list ? strstr(list, sections[i].name) : NULL;
        size_t len = strlen(sections[i].name);
        bool named = at && (at == list || at[-1] == ',') && (at[len] == 0 || at[len] == ',');
        if (!list || named != except)
            sections[i].run();
    }
    if (manifest)
        fclose(manifest);
    return rt_finalize(C);
}
