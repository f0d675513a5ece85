/* The NumPy .npy format: the header we write (version 1.0, padded with
 * spaces to a multiple of 64 bytes as numpy does), the headers we read
 * (versions 1.0, 2.0, 3.0; little-endian <f4 <f8 <i4; C order; bf16 as <f4) checked
 * against the dtype and global shape a program expects, and plain POSIX
 * block I/O for contexts without MPI (rt_ctx_serial). The collective MPI-IO
 * paths, the atomic save protocol and checkpoint directories are in
 * checkpoint.c. Nothing here stops the program: errors are returned as
 * messages, so that checkpoint.c can make every rank agree on them. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_internal.h"

const char *rt_npy_descr(rt_dtype dt)
{
    switch (dt) {
    case RT_F32: return "<f4";
    case RT_F64: return "<f8";
    case RT_I32: return "<i4";
    case RT_BF16: return "<f4"; /* .npy has no bf16: stored as f32 (checkpoint.c) */
    }
    return "?";
}

size_t rt_npy_header(char *buf, size_t cap, rt_dtype dt, int ndim, const int64_t *shape)
{
    char sh[256];
    rt_shape_str(sh, sizeof sh, ndim, shape);
    int n = snprintf(buf + 10, cap - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     rt_npy_descr(dt), sh);
    size_t total = 10 + (size_t)n + 1, padded = (total + 63) / 64 * 64;
    memset(buf + 10 + n, ' ', padded - total);
    buf[padded - 1] = '\n';
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((padded - 10) & 0xff);
    buf[9] = (char)((padded - 10) >> 8);
    return padded;
}

/* ---- reading a header */

typedef struct npy_header {
    char descr[16];
    bool fortran;
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    int64_t data_off;
} npy_header;

static const char *after_key(const char *h, const char *key)
{
    const char *p = strstr(h, key);
    if (!p)
        return NULL;
    p += strlen(key);
    p += strspn(p, " \t");
    if (*p != ':')
        return NULL;
    p++;
    return p + strspn(p, " \t");
}

/* returns NULL or a description of what is malformed */
static const char *parse_dict(const char *h, npy_header *hd)
{
    const char *p = after_key(h, "'descr'");
    if (!p || (*p != '\'' && *p != '"'))
        return "header has no 'descr'";
    size_t n = strcspn(p + 1, "'\"");
    if (n == 0 || n >= sizeof hd->descr)
        return "header 'descr' is malformed";
    memcpy(hd->descr, p + 1, n);
    hd->descr[n] = 0;
    p = after_key(h, "'fortran_order'");
    if (!p)
        return "header has no 'fortran_order'";
    hd->fortran = strncmp(p, "True", 4) == 0;
    if (!hd->fortran && strncmp(p, "False", 5) != 0)
        return "header 'fortran_order' is neither True nor False";
    p = after_key(h, "'shape'");
    if (!p || *p != '(')
        return "header has no 'shape' tuple";
    p++;
    hd->ndim = 0;
    for (;;) {
        p += strspn(p, " \t,");
        if (*p == ')')
            break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || errno == ERANGE)
            return "header 'shape' is malformed";
        if (hd->ndim == RT_MAX_DIMS)
            return "array has too many dims";
        hd->shape[hd->ndim++] = v;
        p = end;
    }
    return NULL;
}

static uint32_t le(const unsigned char *b, int n)
{
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* writes the message into err (errn bytes) and returns false */
static bool failf(char *err, size_t errn, const char *f, ...) __attribute__((format(printf, 3, 4)));
static bool failf(char *err, size_t errn, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(err, errn, f, ap);
    va_end(ap);
    return false;
}
#define FAIL(...) failf(err, errn, __VA_ARGS__)

static bool read_header(int fd, const char *path, npy_header *hd, char *err, size_t errn)
{
    unsigned char pre[12];
    ssize_t got = pread(fd, pre, sizeof pre, 0);
    if (got < 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return FAIL("load '%s': not a .npy file (bad magic)", path);
    int major = pre[6];
    if (major < 1 || major > 3)
        return FAIL("load '%s': unsupported .npy version %d.%d", path, major, pre[7]);
    int lensz = major == 1 ? 2 : 4;
    if (got < 8 + lensz)
        return FAIL("load '%s': truncated header", path);
    uint32_t hlen = le(pre + 8, lensz);
    if (hlen >= (1u << 24))
        return FAIL("load '%s': header too long (%u bytes)", path, hlen);
    char *h = malloc(hlen + 1);
    if (!h)
        return FAIL("load '%s': out of memory", path);
    got = pread(fd, h, hlen, 8 + lensz);
    if (got != (ssize_t)hlen) {
        free(h);
        return FAIL("load '%s': truncated header", path);
    }
    h[hlen] = 0;
    const char *bad = parse_dict(h, hd);
    free(h);
    if (bad)
        return FAIL("load '%s': malformed header: %s", path, bad);
    hd->data_off = 8 + lensz + (int64_t)hlen;
    return true;
}

static bool check_header(const char *path, const npy_header *hd, rt_dtype dt, int ndim,
                         const int64_t *shape, char *err, size_t errn)
{
    if (strcmp(hd->descr, rt_npy_descr(dt)) != 0)
        return FAIL("load '%s': dtype is '%s', expected '%s' (%s)", path, hd->descr,
                    rt_npy_descr(dt), rt_dtype_name(dt));
    if (hd->fortran)
        return FAIL("load '%s': fortran_order arrays are not supported", path);
    bool same = hd->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = hd->shape[d] == shape[d];
    if (!same) {
        char have[256], want[256];
        rt_shape_str(have, sizeof have, hd->ndim, hd->shape);
        rt_shape_str(want, sizeof want, ndim, shape);
        return FAIL("load '%s': shape is %s, expected %s", path, have, want);
    }
    return true;
}

bool rt_npy_check_file(const char *path, rt_dtype dt, int ndim, const int64_t *shape,
                       int64_t *data_off, int *open_errno, char *err, size_t errn)
{
    *open_errno = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        *open_errno = errno;
        return FAIL("load '%s': cannot open: %s", path, strerror(errno));
    }
    npy_header hd;
    bool ok = read_header(fd, path, &hd, err, errn) &&
              check_header(path, &hd, dt, ndim, shape, err, errn);
    struct stat st;
    if (ok && fstat(fd, &st) != 0)
        ok = FAIL("load '%s': cannot stat: %s", path, strerror(errno));
    /* the shape equals the expected one, so this product cannot overflow */
    int64_t need = ok ? hd.data_off + rt_numel_of(ndim, shape) * (int64_t)rt_dtype_size(dt) : 0;
    if (ok && S_ISDIR(st.st_mode))
        ok = FAIL("load '%s': is a directory, not a .npy file", path);
    if (ok && st.st_size < need)
        ok = FAIL("load '%s': file is truncated (%lld bytes, expected %lld)", path,
                  (long long)st.st_size, (long long)need);
    close(fd);
    *data_off = hd.data_off;
    return ok;
}

/* ---- serial block I/O: contiguous runs of a local block inside the global array */

typedef void (*run_fn)(void *user, int64_t global_off, int64_t local_off, int64_t n);

static void for_each_run(const rt_layout *l, run_fn f, void *user)
{
    int64_t gstr[RT_MAX_DIMS], s = 1;
    for (int d = l->ndim - 1; d >= 0; d--) {
        gstr[d] = s;
        s *= l->global[d];
    }
    /* runs span dims k..: the trailing dims the block holds whole, plus one */
    int k = l->ndim;
    int64_t run = 1;
    while (k > 0) {
        k--;
        run *= l->local[k];
        if (l->local[k] != l->global[k])
            break;
    }
    int64_t nl = rt_numel_of(l->ndim, l->local);
    if (nl == 0)
        return;
    int64_t idx[RT_MAX_DIMS] = {0}, g = 0;
    for (int d = 0; d < l->ndim; d++)
        g += l->offset[d] * gstr[d];
    for (int64_t lo = 0; lo < nl; lo += run) {
        f(user, g, lo, run);
        for (int d = k - 1; d >= 0; d--) {
            g += gstr[d];
            if (++idx[d] < l->local[d])
                break;
            g -= gstr[d] * l->local[d];
            idx[d] = 0;
        }
    }
}

typedef struct io_state {
    int fd;
    int64_t data_off;
    size_t esz;
    char *buf;
    bool ok;
    int err;
} io_state;

static void read_run(void *user, int64_t g, int64_t lo, int64_t n)
{
    io_state *s = user;
    size_t want = (size_t)n * s->esz, done = 0;
    while (s->ok && done < want) {
        ssize_t k = pread(s->fd, s->buf + (size_t)lo * s->esz + done, want - done,
                          (off_t)(s->data_off + (int64_t)((size_t)g * s->esz + done)));
        if (k <= 0) {
            s->ok = false;
            s->err = k < 0 ? errno : 0;
        }
        done += k > 0 ? (size_t)k : 0;
    }
}

bool rt_npy_read_posix(const char *path, int64_t data_off, const rt_layout *l, rt_tensor *t,
                       char *err, size_t errn)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return FAIL("load '%s': cannot open: %s", path, strerror(errno));
    io_state s = {fd, data_off, rt_dtype_size(t->dtype), t->data, true, 0};
    for_each_run(l, read_run, &s);
    close(fd);
    if (!s.ok)
        return FAIL("load '%s': file is truncated (%s)", path,
                    s.err ? strerror(s.err) : "unexpected end of file");
    return true;
}

static bool write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k <= 0)
            return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

bool rt_npy_write_posix(const char *what, const char *file, const rt_tensor *x, char *err,
                        size_t errn)
{
    char head[512];
    size_t hl = rt_npy_header(head, sizeof head, x->dtype, x->ndim, x->shape);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0)
        return FAIL("%s: cannot create '%s': %s", what, file, strerror(errno));
    bool ok = write_all(fd, head, hl) &&
              write_all(fd, x->data, (size_t)x->numel * rt_dtype_size(x->dtype));
    int e = errno;
    if (ok && fsync(fd) != 0) {
        ok = false;
        e = errno;
    }
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok)
        return FAIL("%s: cannot write '%s': %s", what, file, strerror(e));
    return true;
}
