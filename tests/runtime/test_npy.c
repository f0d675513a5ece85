/* Unit tests of .npy load/save (serial context): round trips, block loads,
 * files written by NumPy (skipped when /usr/bin/python3 has no numpy), and
 * every error case with its message. */
#include <stdlib.h>
#include <unistd.h>

#include "rt_test_util.h"

static char dir[256];

static void npy_setup(void)
{
    setup();
    snprintf(dir, sizeof dir, "/tmp/spmdrt_npy_XXXXXX");
    cr_assert(mkdtemp(dir) != NULL);
}

static void npy_teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    (void)system(cmd);
    teardown();
}

TestSuite(npy, .init = npy_setup, .fini = npy_teardown);

static const char *path_of(const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *name, const void *data, size_t n)
{
    FILE *f = fopen(path_of(name), "wb");
    cr_assert(f != NULL);
    fwrite(data, 1, n, f);
    fclose(f);
}

Test(npy, round_trip_every_dtype)
{
    int64_t s[3] = {3, 4, 5};
    rt_layout l = rt_layout_full(3, s);
    for (int dt = RT_F32; dt <= RT_I32; dt++) {
        rt_tensor *x = mk_range(dt, 3, s, 3, -50, 50);
        rt_save_npy(C, path_of("rt.npy"), x, &l);
        rt_tensor *y = rt_load_npy(C, path_of("rt.npy"), dt, &l);
        cr_assert_eq(memcmp(x->data, y->data, (size_t)x->numel * rt_dtype_size(dt)), 0);
        expect_shape(y, 3, s, "round trip");
        rt_free(C, x);
        rt_free(C, y);
    }
    int64_t none[1] = {0};
    rt_layout l0 = rt_layout_full(0, none);
    rt_tensor *sc = rt_scalar(C, RT_F64, 2.5);
    rt_save_npy(C, path_of("scalar.npy"), sc, &l0);
    rt_tensor *back = rt_load_npy(C, path_of("scalar.npy"), RT_F64, &l0);
    cr_assert_eq(rt_item(C, back), 2.5);
    rt_free(C, sc);
    rt_free(C, back);
}

Test(npy, block_load)
{
    int64_t s[3] = {4, 6, 2};
    rt_layout full = rt_layout_full(3, s);
    rt_tensor *x = mk(RT_F64, 3, s, 4);
    rt_save_npy(C, path_of("b.npy"), x, &full);
    rt_layout l = {.ndim = 3, .global = {4, 6, 2}, .offset = {2, 3, 0}, .local = {2, 3, 2}};
    rt_tensor *y = rt_load_npy(C, path_of("b.npy"), RT_F64, &l);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                cr_assert_eq(rt_get(y, (i * 3 + j) * 2 + k), rt_get(x, ((i + 2) * 6 + j + 3) * 2 + k));
    rt_layout l2 = {.ndim = 3, .global = {4, 6, 2}, .offset = {0, 0, 1}, .local = {4, 6, 1}};
    rt_tensor *z = rt_load_npy(C, path_of("b.npy"), RT_F64, &l2);
    for (int i = 0; i < 24; i++)
        cr_assert_eq(rt_get(z, i), rt_get(x, i * 2 + 1));
    rt_free(C, x); rt_free(C, y); rt_free(C, z);
}

static bool have_numpy(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s -c 'import numpy' 2>/dev/null", RT_TEST_PYTHON);
    return access(RT_TEST_PYTHON, X_OK) == 0 && system(cmd) == 0;
}

static void python(const char *code)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s && %s -c \"%s\"", dir, RT_TEST_PYTHON, code);
    cr_assert_eq(system(cmd), 0, "python failed: %s", code);
}

Test(npy, numpy_reference_files)
{
    /* numpy is a declared test dependency (scripts/deps.sh --test): its
     * absence fails the test (ctest counts cr_skip_test as a pass) */
    cr_assert(have_numpy(), "numpy is missing under " RT_TEST_PYTHON " (scripts/deps.sh --test installs it)");
    python("import numpy as np\n"
           "a = (np.arange(24).reshape(2, 3, 4) * 0.5 - 3).astype('<f4'); np.save('f4.npy', a)\n"
           "np.save('f8.npy', np.linspace(-1, 1, 10))\n"
           "np.save('i4.npy', np.arange(-6, 6, dtype='<i4').reshape(3, 4))\n"
           "f = open('v2.npy', 'wb'); np.lib.format.write_array(f, a, version=(2, 0)); f.close()\n"
           "np.save('fortran.npy', np.asfortranarray(np.ones((2, 3), dtype='<f4')))\n"
           "np.save('big.npy', np.ones(3, dtype='>f4'))\n");
    int64_t s3[3] = {2, 3, 4}, s1[1] = {10}, s2[2] = {3, 4};
    rt_layout l3 = rt_layout_full(3, s3), l1 = rt_layout_full(1, s1), l2 = rt_layout_full(2, s2);
    rt_tensor *a = rt_load_npy(C, path_of("f4.npy"), RT_F32, &l3);
    rt_tensor *v2 = rt_load_npy(C, path_of("v2.npy"), RT_F32, &l3);
    rt_tensor *b = rt_load_npy(C, path_of("f8.npy"), RT_F64, &l1);
    rt_tensor *c = rt_load_npy(C, path_of("i4.npy"), RT_I32, &l2);
    for (int i = 0; i < 24; i++) {
        cr_assert_eq(rt_get(a, i), i * 0.5 - 3);
        cr_assert_eq(rt_get(v2, i), i * 0.5 - 3);
    }
    for (int i = 0; i < 10; i++)
        cr_assert_float_eq(rt_get(b, i), -1 + 2.0 * i / 9, 1e-15);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(rt_get(c, i), i - 6);
    int64_t sf[2] = {2, 3};
    rt_layout lf = rt_layout_full(2, sf);
    EXPECT_FAIL(rt_load_npy(C, path_of("fortran.npy"), RT_F32, &lf), "fortran_order");
    int64_t sb[1] = {3};
    rt_layout lb = rt_layout_full(1, sb);
    EXPECT_FAIL(rt_load_npy(C, path_of("big.npy"), RT_F32, &lb), "dtype is '>f4'");
    /* and NumPy reads what we write */
    rt_save_npy(C, path_of("ours.npy"), c, &l2);
    python("import numpy as np\n"
           "x = np.load('ours.npy'); assert x.dtype == np.dtype('<i4') and x.shape == (3, 4)\n"
           "assert (x == np.arange(-6, 6).reshape(3, 4)).all()\n");
    rt_free(C, a); rt_free(C, v2); rt_free(C, b); rt_free(C, c);
}

Test(npy, errors_name_the_file_and_problem)
{
    int64_t s[2] = {2, 3};
    rt_layout l = rt_layout_full(2, s);
    EXPECT_FAIL(rt_load_npy(C, path_of("missing.npy"), RT_F32, &l),
                "missing.npy': cannot open: No such file or directory");
    write_bytes("magic.npy", "PK\x03\x04 not numpy at all", 20);
    EXPECT_FAIL(rt_load_npy(C, path_of("magic.npy"), RT_F32, &l),
                "magic.npy': not a .npy file (bad magic)");
    rt_tensor *x = mk(RT_F64, 2, s, 5);
    rt_save_npy(C, path_of("f8.npy"), x, &l);
    EXPECT_FAIL(rt_load_npy(C, path_of("f8.npy"), RT_F32, &l),
                "f8.npy': dtype is '<f8', expected '<f4' (f32)");
    int64_t s2[2] = {3, 2};
    rt_layout l2 = rt_layout_full(2, s2);
    EXPECT_FAIL(rt_load_npy(C, path_of("f8.npy"), RT_F64, &l2),
                "f8.npy': shape is (2, 3), expected (3, 2)");
    rt_layout l1 = rt_layout_full(1, s);
    EXPECT_FAIL(rt_load_npy(C, path_of("f8.npy"), RT_F64, &l1),
                "shape is (2, 3), expected (2,)");
    /* a header that promises more data than the file has */
    char buf[1024];
    FILE *f = fopen(path_of("f8.npy"), "rb");
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    write_bytes("short.npy", buf, n - 16);
    EXPECT_FAIL(rt_load_npy(C, path_of("short.npy"), RT_F64, &l), "short.npy': file is truncated");
    char hdr[] = "\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}";
    write_bytes("nodict.npy", hdr, sizeof hdr - 1);
    EXPECT_FAIL(rt_load_npy(C, path_of("nodict.npy"), RT_F32, &l), "malformed header");
    rt_free(C, x);
}

Test(npy, save_is_atomic_and_leaves_no_temporaries)
{
    int64_t s[1] = {5};
    rt_layout l = rt_layout_full(1, s);
    rt_tensor *x = mk(RT_F32, 1, s, 6);
    rt_save_npy(C, path_of("a.npy"), x, &l);
    rt_save_npy(C, path_of("a.npy"), x, &l); /* overwrite by rename */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test \"$(ls %s)\" = a.npy", dir);
    cr_assert_eq(system(cmd), 0, "temporary files left behind");
    /* a parent that is a file: no directory can be made there (even as root) */
    write_bytes("plain", "x", 1);
    char bad[600];
    snprintf(bad, sizeof bad, "%s/plain/x.npy", dir);
    EXPECT_FAIL(rt_save_npy(C, bad, x, &l), "plain': it exists and is not a directory");
    rt_free(C, x);
}
