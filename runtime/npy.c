/* NumPy .npy files. Load: each rank parses the header (v1.0, 2.0, 3.0;
 * little-endian <f4 <f8 <i4, C order) and reads only its own block with
 * pread. Save: blocks are gathered on rank 0, which writes a temporary file
 * in the target's directory, fsyncs it and renames it over the target. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_internal.h"

static const char *descr_of(rt_dtype dt)
{
    switch (dt) {
    case RT_F32: return "<f4";
    case RT_F64: return "<f8";
    case RT_I32: return "<i4";
    }
    return "?";
}

/* ---- block walking: contiguous runs of a local block inside the global array */

typedef struct run_iter {
    const rt_layout *l;
    int k;                 /* runs span dims k.. */
    int64_t run;           /* elements per run */
    int64_t gstr[RT_MAX_DIMS];
} run_iter;

static run_iter runs_of(const rt_layout *l)
{
    run_iter it = {.l = l, .k = 0, .run = 1};
    int64_t s = 1;
    for (int d = l->ndim - 1; d >= 0; d--) {
        it.gstr[d] = s;
        s *= l->global[d];
    }
    it.k = l->ndim;
    while (it.k > 0 && (it.k == l->ndim || (l->local[it.k] == l->global[it.k]))) {
        it.k--;
        it.run *= l->local[it.k];
        if (l->local[it.k] != l->global[it.k])
            break;
    }
    return it;
}

typedef void (*run_fn)(void *user, int64_t global_off, int64_t local_off, int64_t n);

static void for_each_run(const rt_layout *l, run_fn f, void *user)
{
    run_iter it = runs_of(l);
    int64_t nl = rt_numel_of(l->ndim, l->local);
    if (nl == 0)
        return;
    int64_t idx[RT_MAX_DIMS] = {0}, g = 0;
    for (int d = 0; d < l->ndim; d++)
        g += l->offset[d] * it.gstr[d];
    for (int64_t lo = 0; lo < nl; lo += it.run) {
        f(user, g, lo, it.run);
        for (int d = it.k - 1; d >= 0; d--) {
            g += it.gstr[d];
            if (++idx[d] < l->local[d])
                break;
            g -= it.gstr[d] * l->local[d];
            idx[d] = 0;
        }
    }
}

/* ---- header parsing */

typedef struct npy_header {
    char descr[16];
    bool fortran;
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    long data_off;
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
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0)
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

static void read_header(rt_ctx *ctx, const char *path, int fd, npy_header *hd)
{
    unsigned char pre[12];
    ssize_t got = pread(fd, pre, sizeof pre, 0);
    RT_CHECK(ctx, got >= 10 && memcmp(pre, "\x93NUMPY", 6) == 0,
             "load '%s': not a .npy file (bad magic)", path);
    int major = pre[6];
    RT_CHECK(ctx, major >= 1 && major <= 3, "load '%s': unsupported .npy version %d.%d", path,
             major, pre[7]);
    int lensz = major == 1 ? 2 : 4;
    RT_CHECK(ctx, got >= 8 + lensz, "load '%s': truncated header", path);
    uint32_t hlen = le(pre + 8, lensz);
    RT_CHECK(ctx, hlen < (1u << 24), "load '%s': header too long", path);
    char *h = malloc(hlen + 1);
    RT_CHECK(ctx, h != NULL, "out of memory");
    got = pread(fd, h, hlen, 8 + lensz);
    RT_CHECK(ctx, got == (ssize_t)hlen, "load '%s': truncated header", path);
    h[hlen] = 0;
    const char *bad = parse_dict(h, hd);
    free(h);
    RT_CHECK(ctx, bad == NULL, "load '%s': malformed header: %s", path, bad);
    hd->data_off = 8 + lensz + (long)hlen;
}

static void check_header(rt_ctx *ctx, const char *path, const npy_header *hd, rt_dtype dt,
                         const rt_layout *l)
{
    RT_CHECK(ctx, strcmp(hd->descr, descr_of(dt)) == 0,
             "load '%s': dtype is '%s', expected '%s' (%s)", path, hd->descr, descr_of(dt),
             rt_dtype_name(dt));
    RT_CHECK(ctx, !hd->fortran, "load '%s': fortran_order arrays are not supported", path);
    bool same = hd->ndim == l->ndim;
    for (int d = 0; same && d < l->ndim; d++)
        same = hd->shape[d] == l->global[d];
    char have[256], want[256];
    rt_shape_str(have, sizeof have, hd->ndim, hd->shape);
    rt_shape_str(want, sizeof want, l->ndim, l->global);
    RT_CHECK(ctx, same, "load '%s': shape is %s, expected %s", path, have, want);
}

typedef struct load_state {
    rt_ctx *ctx;
    const char *path;
    int fd;
    long data_off;
    size_t esz;
    char *dst;
} load_state;

static void load_run(void *user, int64_t g, int64_t lo, int64_t n)
{
    load_state *s = user;
    size_t want = (size_t)n * s->esz, done = 0;
    while (done < want) {
        ssize_t k = pread(s->fd, s->dst + (size_t)lo * s->esz + done, want - done,
                          s->data_off + (off_t)((size_t)g * s->esz + done));
        RT_CHECK(s->ctx, k > 0, "load '%s': file is truncated (%s)", s->path,
                 k < 0 ? strerror(errno) : "unexpected end of file");
        done += (size_t)k;
    }
}

rt_tensor *rt_load_npy(rt_ctx *ctx, const char *path, rt_dtype dt, const rt_layout *l)
{
    RT_KERNEL(ctx, RT_K_IO, "load_npy");
    int fd = open(path, O_RDONLY);
    RT_CHECK(ctx, fd >= 0, "load '%s': cannot open: %s", path, strerror(errno));
    npy_header hd;
    read_header(ctx, path, fd, &hd);
    check_header(ctx, path, &hd, dt, l);
    struct stat st;
    int64_t need = hd.data_off + rt_numel_of(l->ndim, l->global) * (int64_t)rt_dtype_size(dt);
    RT_CHECK(ctx, fstat(fd, &st) == 0 && st.st_size >= need,
             "load '%s': file is truncated (%lld bytes, expected %lld)", path,
             (long long)st.st_size, (long long)need);
    rt_tensor *t = rt_empty(ctx, dt, l->ndim, l->local);
    load_state s = {ctx, path, fd, hd.data_off, rt_dtype_size(dt), t->data};
    for_each_run(l, load_run, &s);
    close(fd);
    return t;
}

/* ---- save */

static size_t header_text(char *buf, size_t cap, rt_dtype dt, int ndim, const int64_t *shape)
{
    char sh[256];
    rt_shape_str(sh, sizeof sh, ndim, shape);
    int n = snprintf(buf + 10, cap - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr_of(dt), sh);
    size_t total = 10 + (size_t)n + 1, padded = (total + 63) / 64 * 64;
    memset(buf + 10 + n, ' ', padded - total);
    buf[padded - 1] = '\n';
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((padded - 10) & 0xff);
    buf[9] = (char)((padded - 10) >> 8);
    return padded;
}

static void write_all(rt_ctx *ctx, int fd, const char *tmp, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        RT_CHECK(ctx, k > 0, "save: cannot write '%s': %s", tmp, strerror(errno));
        c += k;
        n -= (size_t)k;
    }
}

static void write_npy(rt_ctx *ctx, const char *path, const rt_tensor *full)
{
    size_t len = strlen(path) + 16;
    char *tmp = malloc(len), head[512];
    RT_CHECK(ctx, tmp != NULL, "out of memory");
    snprintf(tmp, len, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    RT_CHECK(ctx, fd >= 0, "save '%s': cannot create a temporary file: %s", path,
             strerror(errno));
    fchmod(fd, 0644);
    size_t hl = header_text(head, sizeof head, full->dtype, full->ndim, full->shape);
    write_all(ctx, fd, tmp, head, hl);
    write_all(ctx, fd, tmp, full->data, (size_t)full->numel * rt_dtype_size(full->dtype));
    RT_CHECK(ctx, fsync(fd) == 0, "save '%s': fsync failed: %s", path, strerror(errno));
    RT_CHECK(ctx, close(fd) == 0, "save '%s': close failed: %s", path, strerror(errno));
    RT_CHECK(ctx, rename(tmp, path) == 0, "save '%s': rename failed: %s", path, strerror(errno));
    free(tmp);
}

typedef struct place_state {
    size_t esz;
    char *dst;
    const char *src;
} place_state;

static void place_run(void *user, int64_t g, int64_t lo, int64_t n)
{
    place_state *s = user;
    memcpy(s->dst + (size_t)g * s->esz, s->src + (size_t)lo * s->esz, (size_t)n * s->esz);
}

/* rank 0 receives (layout, bytes) from every rank and places the blocks */
static rt_tensor *gather_global(rt_ctx *ctx, const rt_tensor *x, const rt_layout *l)
{
    size_t esz = rt_dtype_size(x->dtype);
    rt_tensor *full = ctx->rank == 0 ? rt_empty(ctx, x->dtype, l->ndim, l->global) : NULL;
    rt_layout *ls = ctx->rank == 0 ? malloc((size_t)ctx->world * sizeof *ls) : NULL;
    int *counts = NULL, *displs = NULL, mine = (int)((size_t)x->numel * esz);
    RT_CHECK(ctx, (size_t)x->numel * esz < (1u << 31), "save: block too large to gather");
    if (ctx->rank == 0) {
        counts = calloc((size_t)ctx->world, sizeof *counts);
        displs = calloc((size_t)ctx->world, sizeof *displs);
    }
    RT_CALL_MPI(ctx, MPI_Gather(l, (int)sizeof *l, MPI_BYTE, ls, (int)sizeof *l, MPI_BYTE, 0,
                                MPI_COMM_WORLD));
    RT_CALL_MPI(ctx, MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD));
    char *all = NULL;
    if (ctx->rank == 0) {
        int64_t sum = 0;
        for (int r = 0; r < ctx->world; r++) {
            displs[r] = (int)sum;
            sum += counts[r];
        }
        RT_CHECK(ctx, sum < (1ll << 31), "save: tensor too large to gather");
        all = malloc((size_t)sum + 1);
    }
    RT_CALL_MPI(ctx, MPI_Gatherv(x->data, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, 0,
                                 MPI_COMM_WORLD));
    for (int r = 0; ctx->rank == 0 && r < ctx->world; r++) {
        place_state s = {esz, full->data, all + displs[r]};
        for_each_run(&ls[r], place_run, &s);
    }
    free(all);
    free(ls);
    free(counts);
    free(displs);
    return full;
}

void rt_save_npy(rt_ctx *ctx, const char *path, const rt_tensor *x, const rt_layout *l)
{
    RT_CHECK(ctx, x->ndim == l->ndim, "save '%s': tensor has %d dims, layout %d", path, x->ndim,
             l->ndim);
    for (int d = 0; d < l->ndim; d++)
        RT_CHECK(ctx, x->shape[d] == l->local[d] && l->offset[d] + l->local[d] <= l->global[d],
                 "save '%s': block does not match the layout in dim %d", path, d);
    rt_kspan ks_ = rt_kernel_begin(ctx);
    rt_tensor *full;
    if (ctx->mpi) {
        full = gather_global(ctx, x, l);
    } else {
        full = rt_empty(ctx, x->dtype, l->ndim, l->global);
        place_state s = {rt_dtype_size(x->dtype), full->data, x->data};
        for_each_run(l, place_run, &s);
    }
    if (ctx->rank == 0)
        write_npy(ctx, path, full);
    rt_free(ctx, full);
    if (ctx->mpi) /* nobody reads the file before it is complete */
        RT_CALL_MPI(ctx, MPI_Barrier(MPI_COMM_WORLD));
    rt_coll_record(ctx, RT_COLL_GATHER_SAVE, &ks_, (double)x->numel * rt_dtype_size(x->dtype));
}
