/* Helpers shared by the Criterion unit tests of libspmdrt: deterministic
 * inputs, comparison against double references, and a central finite
 * difference checker for backward kernels (f64). */
#ifndef RT_TEST_UTIL_H
#define RT_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "spmdrt.h"

static rt_ctx *C;

static inline void setup(void) { C = rt_ctx_serial(); }
static inline void teardown(void) { rt_ctx_free_serial(C); }

/* values in [lo, hi) from a small LCG keyed by seed */
static inline rt_tensor *mk_range(rt_dtype dt, int nd, const int64_t *s, unsigned seed, double lo,
                           double hi)
{
    rt_tensor *t = rt_empty(C, dt, nd, s);
    uint64_t st = seed * 2654435761u + 12345;
    for (int64_t i = 0; i < t->numel; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(st >> 11) / 9007199254740992.0;
        rt_set(t, i, lo + (hi - lo) * u);
    }
    return t;
}

static inline rt_tensor *mk(rt_dtype dt, int nd, const int64_t *s, unsigned seed)
{
    return mk_range(dt, nd, s, seed, -1.0, 1.0);
}

static inline void expect_close(const rt_tensor *t, const double *ref, int64_t n, double tol,
                         const char *what)
{
    cr_assert_eq(t->numel, n, "%s: %lld elements, expected %lld", what, (long long)t->numel,
                 (long long)n);
    for (int64_t i = 0; i < n; i++) {
        double got = rt_get(t, i);
        int ok = fabs(got - ref[i]) <= tol * (1.0 + fabs(ref[i])) ||
                 (isnan(got) && isnan(ref[i])) || got == ref[i];
        cr_assert(ok, "%s: element %lld is %.9g, expected %.9g", what, (long long)i, got,
                  ref[i]);
    }
}

static inline void expect_shape(const rt_tensor *t, int nd, const int64_t *s, const char *what)
{
    cr_assert_eq(t->ndim, nd, "%s: %d dims, expected %d", what, t->ndim, nd);
    for (int d = 0; d < nd; d++)
        cr_assert_eq(t->shape[d], s[d], "%s: dim %d is %lld, expected %lld", what, d,
                     (long long)t->shape[d], (long long)s[d]);
}

static inline double dot(const rt_tensor *a, const rt_tensor *b)
{
    double s = 0;
    for (int64_t i = 0; i < a->numel; i++)
        s += rt_get(a, i) * rt_get(b, i);
    return s;
}

/* f computes the op on xs; b writes the gradients of <f(xs), dy> into dxs */
typedef rt_tensor *(*fd_fwd)(rt_tensor **xs, const void *p);
typedef void (*fd_bwd)(rt_tensor **xs, const rt_tensor *dy, rt_tensor **dxs, const void *p);

/* checks every f64 input's analytic gradient against central differences */
static inline void fd_check(int n, rt_tensor **xs, fd_fwd f, fd_bwd b, const void *p, double tol,
                     const char *what)
{
    rt_tensor *y = f(xs, p);
    rt_tensor *dy = mk(RT_F64, y->ndim, y->shape, 777);
    rt_tensor *dxs[4] = {0};
    b(xs, dy, dxs, p);
    const double h = 1e-6;
    for (int i = 0; i < n; i++) {
        if (xs[i]->dtype != RT_F64 || !dxs[i])
            continue;
        cr_assert_eq(dxs[i]->numel, xs[i]->numel, "%s: gradient %d has the wrong size", what, i);
        for (int64_t j = 0; j < xs[i]->numel; j++) {
            double x0 = rt_get(xs[i], j);
            rt_set(xs[i], j, x0 + h);
            rt_tensor *yp = f(xs, p);
            rt_set(xs[i], j, x0 - h);
            rt_tensor *ym = f(xs, p);
            rt_set(xs[i], j, x0);
            double num = (dot(yp, dy) - dot(ym, dy)) / (2 * h), ana = rt_get(dxs[i], j);
            cr_assert(fabs(num - ana) <= tol * (1.0 + fabs(num)),
                      "%s: d/dx%d[%lld] analytic %.9g, numeric %.9g", what, i, (long long)j, ana,
                      num);
            rt_free(C, yp);
            rt_free(C, ym);
        }
        rt_free(C, dxs[i]);
    }
    rt_free(C, y);
    rt_free(C, dy);
}

/* error hook for testing failures in-process */
static jmp_buf fail_jmp;
static char fail_msg[1024];
static inline void catch_fail(void *user, const char *msg)
{
    (void)user;
    snprintf(fail_msg, sizeof fail_msg, "%s", msg);
    longjmp(fail_jmp, 1);
}
#define EXPECT_FAIL(stmt, substr)                                                     \
    do {                                                                              \
        rt_set_error_hook(C, catch_fail, NULL);                                       \
        fail_msg[0] = 0;                                                              \
        if (setjmp(fail_jmp) == 0) {                                                  \
            stmt;                                                                     \
            cr_assert_fail("expected a failure containing \"%s\"", substr);         \
        }                                                                             \
        rt_set_error_hook(C, NULL, NULL);                                             \
        cr_assert(strstr(fail_msg, substr), "message \"%s\" lacks \"%s\"", fail_msg, substr); \
    } while (0)

#endif
