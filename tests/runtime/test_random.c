/* Unit tests of the counter-based RNG: the Philox4x32-10 known answer, a
 * block of a sharded tensor equals the same block of the unsharded one, and
 * the distributions have the right moments. */
#include "rt_test_util.h"

TestSuite(random, .init = setup, .fini = teardown);

Test(random, philox_known_answer)
{
    /* Random123's kat_vectors: philox4x32 10, counter 0, key 0 */
    uint32_t out[4];
    rt_philox4x32(0, 0, 0, out);
    cr_assert_eq(out[0], 0x6627e8d5u);
    cr_assert_eq(out[1], 0xe169c58du);
    cr_assert_eq(out[2], 0xbc57ac4cu);
    cr_assert_eq(out[3], 0x9b00dbd8u);
}

Test(random, blocks_match_the_unsharded_tensor)
{
    int64_t g[3] = {6, 4, 10};
    rt_layout full = rt_layout_full(3, g);
    rt_tensor *ref = rt_randn(C, RT_F64, &full, 42, 1.0);
    rt_layout l = {.ndim = 3, .global = {6, 4, 10}, .offset = {3, 1, 5}, .local = {3, 2, 5}};
    rt_tensor *blk = rt_randn(C, RT_F64, &l, 42, 1.0);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 5; k++)
                cr_assert_eq(rt_get(blk, (i * 2 + j) * 5 + k),
                             rt_get(ref, ((i + 3) * 4 + j + 1) * 10 + k + 5));
    rt_tensor *other = rt_randn(C, RT_F64, &full, 43, 1.0);
    cr_assert_neq(rt_get(other, 0), rt_get(ref, 0), "seeds must differ");
    rt_tensor *f = rt_randn(C, RT_F32, &full, 42, 1.0);
    for (int i = 0; i < 240; i++)
        cr_assert_eq(rt_get(f, i), (float)rt_get(ref, i), "f32 is the rounded f64 stream");
    rt_free(C, ref); rt_free(C, blk); rt_free(C, other); rt_free(C, f);
}

Test(random, moments)
{
    int64_t n[1] = {200000};
    rt_layout l = rt_layout_full(1, n);
    rt_tensor *z = rt_randn(C, RT_F64, &l, 7, 2.0), *u = rt_uniform(C, RT_F64, &l, 7, -1, 3);
    double s = 0, s2 = 0, us = 0, umin = 1e9, umax = -1e9;
    for (int64_t i = 0; i < n[0]; i++) {
        double v = rt_get(z, i), w = rt_get(u, i);
        s += v;
        s2 += v * v;
        us += w;
        umin = fmin(umin, w);
        umax = fmax(umax, w);
    }
    double mean = s / n[0], var = s2 / n[0] - mean * mean;
    cr_assert(fabs(mean) < 0.03, "randn mean %g", mean);
    cr_assert(fabs(var - 4.0) < 0.1, "randn variance %g", var);
    cr_assert(fabs(us / n[0] - 1.0) < 0.02, "uniform mean %g", us / n[0]);
    cr_assert(umin >= -1 && umax < 3 && umin < -0.99 && umax > 2.99);
    EXPECT_FAIL(rt_randn(C, RT_I32, &l, 1, 1), "needs a float dtype");
    rt_free(C, z);
    rt_free(C, u);
}
