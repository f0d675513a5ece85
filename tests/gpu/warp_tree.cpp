/* The simulation's warp (runtime/cuda/dev.h, RT_SIM's rt_warp): each step's
 * 32 lane partials and the butterfly tree emulated lane by lane must equal a
 * plain serial description of the same tree, bit for bit:
 *   lane l:  p[l] = fold of the terms l, l+32, l+64, ... in order
 *   tree:    for (h = 16; h >= 1; h /= 2) for (l = 0; l < h; l++) p[l] = op(p[l], p[l + h])
 * for sums (in double), the CPU kernels' max (NaN skipped) and the int64
 * minimum the id checks use, on rows of 1 to 4097 terms; every lane of the
 * emulated butterfly must end with the same bits (what makes a step's result
 * uniform across a warp on the GPU); and the tree must differ from a plain
 * serial sum somewhere, or this test could not tell them apart. Then the
 * simulation's row kernels themselves (kernels_use_the_tree), and one
 * thread's rt_tree_sum against rt_lanes_f64's chunked tree (tree_sum), and
 * rt_launch_last's last block's tree over the chunks (tree_finish). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dev.h"

static uint64_t lcg = 777;
static double next_u(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) * (1.0 / 9007199254740992.0);
}

template <class T, class Op> static T serial_tree(const T *x, int64_t n, T id, Op op)
{
    T p[32];
    for (int l = 0; l < 32; l++) {
        p[l] = id;
        for (int64_t j = l; j < n; j += 32)
            p[l] = op(p[l], x[j]);
    }
    for (int h = 16; h >= 1; h /= 2)
        for (int l = 0; l < h; l++)
            p[l] = op(p[l], p[l + h]);
    return p[0];
}

static int fails;
template <class T> static void same(const char *what, int64_t n, T got, T want)
{
    if (memcmp(&got, &want, sizeof got) != 0) {
        printf("FAIL %s n=%lld: emulated %.17g, serial tree %.17g\n", what, (long long)n,
               (double)got, (double)want);
        fails++;
    }
}

/* libspmdrt_cudasim's row kernels run that tree: f64 rows of 1000 terms
 * (where the order of a double sum shows in the result) through softmax,
 * layer_norm and cross_entropy equal the tree's formulas bit for bit, and
 * differ somewhere from the same formulas with serial sums */
static void kernels_use_the_tree(void)
{
    enum { ROWS = 3, D = 1000 };
    static double x[ROWS * D], e[D], c[D];
    for (int i = 0; i < ROWS * D; i++)
        x[i] = (next_u() - 0.5) * pow(10.0, floor(next_u() * 4 - 2));
    rt_ctx *ctx = rt_ctx_serial();
    int64_t shape[2] = {ROWS, D};
    int32_t tv[ROWS] = {5, 999, 0};
    rt_tensor *t = rt_from_data(ctx, RT_F64, 2, shape, x);
    rt_tensor *tg = rt_from_data(ctx, RT_I32, 1, shape, tv);
    rt_tensor *sm = rt_softmax(ctx, t, 1), *ln = rt_layer_norm(ctx, t, NULL, NULL, 1e-5);
    rt_tensor *ce = rt_cross_entropy_reduce(ctx, t, tg, RT_CE_NONE);
    int serial_differs = 0;
    for (int r = 0; r < ROWS; r++) {
        const double *row = x + r * D;
        for (int pass = 0; pass < 2; pass++) { /* 0: the tree, 1: serial sums */
            auto sum = [&](const double *v) {
                double a = 0;
                if (pass == 1)
                    for (int j = 0; j < D; j++)
                        a += v[j];
                return pass == 0 ? serial_tree(v, D, 0.0, rt_op_add()) : a;
            };
            double m = serial_tree(row, D, (double)-INFINITY, rt_op_max());
            for (int j = 0; j < D; j++)
                e[j] = exp(row[j] - m);
            double s = sum(e), mean = sum(row) / D;
            for (int j = 0; j < D; j++)
                c[j] = (row[j] - mean) * (row[j] - mean);
            double rstd = 1.0 / sqrt(sum(c) / (double)D + 1e-5);
            double loss = -(row[tv[r]] - (m + log(s)));
            int bad = 0;
            for (int j = 0; j < D; j++) {
                double want_sm = exp(row[j] - m) / s, want_ln = (row[j] - mean) * rstd * 1.0 + 0.0;
                double got_sm = rt_get(sm, r * D + j), got_ln = rt_get(ln, r * D + j);
                bad += memcmp(&got_sm, &want_sm, sizeof got_sm) != 0;
                bad += memcmp(&got_ln, &want_ln, sizeof got_ln) != 0;
            }
            double got_ce = rt_get(ce, r);
            bad += memcmp(&got_ce, &loss, sizeof loss) != 0;
            if (pass == 0 && bad) {
                printf("FAIL row %d: %d results of softmax, layer_norm, cross_entropy differ from the tree's\n", r, bad);
                fails++;
            }
            serial_differs += pass == 1 && bad;
        }
    }
    if (!serial_differs) {
        printf("FAIL: the kernels' results equal serial sums' too: the test cannot tell them apart\n");
        fails++;
    }
    rt_free(ctx, t); rt_free(ctx, tg); rt_free(ctx, sm); rt_free(ctx, ln); rt_free(ctx, ce);
    rt_ctx_free_serial(ctx);
}

/* rt_lanes_f64's order, as reduce.cu computes it: chunks of RT_CHUNK
 * terms, then chunks of the chunks' sums, until one */
static double chunked_tree(const double *x, int64_t n)
{
    if (n <= RT_CHUNK) {
        double a = 0;
        for (int64_t j = 0; j < n; j++)
            a += x[j];
        return a;
    }
    static double p[1 << 14], q[1 << 14];
    int64_t nc = (n + RT_CHUNK - 1) / RT_CHUNK;
    for (int64_t c = 0; c < nc; c++) {
        double a = 0;
        for (int64_t j = c * RT_CHUNK; j < n && j < (c + 1) * RT_CHUNK; j++)
            a += x[j];
        p[c] = a;
    }
    while (nc > 1) {
        int64_t m = (nc + RT_CHUNK - 1) / RT_CHUNK;
        for (int64_t c = 0; c < m; c++) {
            double a = 0;
            for (int64_t j = c * RT_CHUNK; j < nc && j < (c + 1) * RT_CHUNK; j++)
                a += p[j];
            q[c] = a;
        }
        memcpy(p, q, (size_t)m * sizeof *p);
        nc = m;
    }
    return p[0];
}

static void tree_sum(void)
{
    static const int64_t lens[] = {0, 1, 63, 64, 65, 4095, 4096, 4097, 262144, 262145, 300000};
    static double x[300000];
    for (size_t q = 0; q < sizeof lens / sizeof lens[0]; q++) {
        int64_t n = lens[q];
        for (int64_t j = 0; j < n; j++)
            x[j] = j % 1000 == 7 ? -0.0 : (next_u() - 0.5) * pow(10.0, floor(next_u() * 16 - 8));
        rt_tree_sum t = {};
        for (int64_t j = 0; j < n; j++)
            t.add(x[j]);
        same("tree_sum", n, t.total(), chunked_tree(x, n));
    }
}

/* the last block's tree over the lanes' chunk sums (rt_tree_finish, as
 * rt_launch_last's fin runs it: its levels a phase each, then a thread a
 * lane) against rt_lanes_f64's chunked tree, for 6 lanes ([2, d, 3]: lane
 * (o, i)'s chunks strided by 3) of one chunk to several levels */
static void tree_finish(void)
{
    static const int64_t lens[] = {65, 128, 4095, 4096, 4097, 262145, 300000};
    const int64_t outer = 2, inner = 3, lanes = outer * inner;
    for (size_t q = 0; q < sizeof lens / sizeof lens[0]; q++) {
        int64_t n = lens[q], nc = (n + RT_CHUNK - 1) / RT_CHUNK;
        double *x = (double *)malloc((size_t)(lanes * n) * sizeof *x);
        double *P = (double *)malloc((size_t)rt_tree_ws(lanes, nc) * sizeof *P);
        double res[6];
        for (int64_t t = 0; t < lanes; t++) {
            int64_t o = t / inner, i = t % inner;
            double *xl = x + t * n;
            for (int64_t j = 0; j < n; j++)
                xl[j] = j % 1000 == 7 ? -0.0 : (next_u() - 0.5) * pow(10.0, floor(next_u() * 16 - 8));
            for (int64_t c = 0; c < nc; c++) {
                double a = 0.0;
                for (int64_t j = c * RT_CHUNK; j < n && j < (c + 1) * RT_CHUNK; j++)
                    a += xl[j];
                P[(o * nc + c) * inner + i] = a;
            }
        }
        rt_block blk;
        blk.smem = nullptr;
        rt_tree_finish(blk, P, outer, nc, inner, false, [&](int64_t t, double v) { res[t] = v; });
        for (int64_t t = 0; t < lanes; t++)
            same("tree_finish", n, res[t], chunked_tree(x + t * n, n));
        free(x);
        free(P);
    }
}

int main(void)
{
    kernels_use_the_tree();
    tree_sum();
    tree_finish();
    static const int64_t lens[] = {0, 1, 2, 31, 32, 33, 64, 100, 128, 1000, 4097};
    static double x[4097];
    static int64_t xi[4097];
    int differs = 0;
    rt_warp w;
    for (size_t q = 0; q < sizeof lens / sizeof lens[0]; q++) {
        int64_t n = lens[q];
        for (int64_t j = 0; j < n; j++) { /* mixed signs and magnitudes: order shows */
            x[j] = (next_u() - 0.5) * pow(10.0, floor(next_u() * 16 - 8));
            xi[j] = (int64_t)(next_u() * 1e6);
        }
        auto ld = [&](int64_t j) { return x[j]; };
        double s = w.sum(n, ld);
        same("sum", n, s, serial_tree(x, n, 0.0, rt_op_add()));
        double plain = 0;
        for (int64_t j = 0; j < n; j++)
            plain += x[j];
        differs += memcmp(&s, &plain, sizeof s) != 0;
        same("max", n, w.max(n, ld), serial_tree(x, n, (double)-INFINITY, rt_op_max()));
        same("min", n, w.reduce(n, (int64_t)INT64_MAX, [&](int64_t j) { return xi[j]; }, rt_op_min()),
             serial_tree(xi, n, (int64_t)INT64_MAX, rt_op_min()));
        /* NaNs and signed zeros in the max (order-sensitive for -0/+0) */
        for (int64_t j = 0; j < n; j++)
            x[j] = j % 7 == 3 ? NAN : j % 2 ? 0.0 : -0.0;
        same("max_nan_zeros", n, w.max(n, ld), serial_tree(x, n, (double)-INFINITY, rt_op_max()));
    }
    /* the emulated butterfly leaves every lane with lane 0's bits */
    for (int trial = 0; trial < 100; trial++) {
        double v[32];
        for (int l = 0; l < 32; l++)
            v[l] = trial % 2 ? (l % 3 ? 0.0 : -0.0) : (next_u() - 0.5) * pow(10.0, floor(next_u() * 16 - 8));
        double r = trial % 4 < 2 ? rt_warp_tree(v, rt_op_add()) : rt_warp_tree(v, rt_op_max());
        for (int l = 0; l < 32; l++)
            if (memcmp(&v[l], &r, sizeof r) != 0) {
                printf("FAIL: after the tree lane %d holds %.17g, lane 0 %.17g\n", l, v[l], r);
                fails++;
                break;
            }
    }
    if (!differs) {
        printf("FAIL: the tree never differed from a serial sum: the test cannot tell them apart\n");
        fails++;
    }
    printf("%s: %d rows differ from a serial sum\n", fails ? "FAILED" : "ok", differs);
    return fails != 0;
}
