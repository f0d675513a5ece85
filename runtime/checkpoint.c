/* Saving and loading tensors and checkpoints, collectively with MPI-IO.
 *
 * A tensor is one NumPy .npy file holding the GLOBAL tensor. Every rank
 * opens it on MPI_COMM_WORLD, sets a file view (a subarray of the global
 * shape: this rank's block, after the header) and calls
 * MPI_File_write_all / MPI_File_read_all, so each rank moves only its own
 * block and no rank ever holds the whole tensor. A block that several ranks
 * hold (R or I on some axis) is written by the lowest world rank holding it;
 * the others write nothing but still join the collective. Rank 0 writes the
 * header, and reads and checks it on load.
 *
 * Atomicity: save(path) writes `path.tmp.XXXXXX` and renames it over
 * `path`; a checkpoint directory is written as `dir.tmp.XXXXXX` and renamed
 * into place (atomically exchanged with an old one, which is then removed)
 * only after every rank has written and synced every file, so a crash
 * leaves the previous file or checkpoint untouched.
 *
 * Errors: whatever rank 0 decides alone (a directory it cannot create, a
 * malformed header, a failed rename) is broadcast and reported by every
 * rank; an MPI-IO call that fails stops every rank through MPI_Abort, so
 * nobody waits forever in a collective. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_internal.h"

#define MSG RT_IO_MSG

/* ---- small helpers */

char *rt_io_fmt(rt_ctx *ctx, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    int n = vasprintf(&s, f, ap);
    va_end(ap);
    RT_CHECK(ctx, n >= 0 && s, "out of memory");
    return s;
}

mode_t rt_io_umask(void)
{
    mode_t m = umask(0);
    umask(m);
    return m;
}

/* Every rank learns rank 0's verdict (msg[0] == 0: success) and, on failure,
 * every rank reports it and stops. msg has MSG bytes. */
void rt_io_verdict(rt_ctx *ctx, char *msg)
{
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Bcast(msg, MSG, MPI_CHAR, 0, MPI_COMM_WORLD));
    if (msg[0])
        rt_fail_all(ctx, msg);
}

/* Any rank may have found an error (msg != NULL): every rank reports the
 * lowest such rank's message and stops. */
void rt_io_agree(rt_ctx *ctx, const char *msg)
{
    if (!ctx->mpi) {
        if (msg)
            rt_fail(ctx, "%s", msg);
        return;
    }
    int mine = msg ? ctx->rank : ctx->world, first = 0;
    RT_CALL_MPI(ctx, MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first == ctx->world)
        return;
    char buf[MSG] = "";
    if (msg)
        snprintf(buf, sizeof buf, "%s", msg);
    RT_CALL_MPI(ctx, MPI_Bcast(buf, MSG, MPI_CHAR, first, MPI_COMM_WORLD));
    rt_fail_all(ctx, buf);
}

/* rank 0's string, on every rank (a new malloc'd copy) */
char *rt_io_bcast_string(rt_ctx *ctx, const char *s)
{
    long long n = ctx->rank == 0 ? (long long)strlen(s) : 0;
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
    char *out = malloc((size_t)n + 1);
    RT_CHECK(ctx, out != NULL, "out of memory");
    if (ctx->rank == 0)
        memcpy(out, s, (size_t)n);
    if (ctx->mpi && n > 0)
        RT_CALL_MPI(ctx, MPI_Bcast(out, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD));
    out[n] = 0;
    return out;
}

/* An MPI-IO call failed on this rank: stop every rank (MPI_Abort). */
void rt_io_check(rt_ctx *ctx, int rc, const char *what, const char *call, const char *file)
{
    if (rc == MPI_SUCCESS)
        return;
    char text[MPI_MAX_ERROR_STRING + 1] = "unknown MPI error";
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error code %d", rc);
    rt_fail(ctx, "%s: %s on '%s' failed: %s", what, call, file, text);
}

/* ---- POSIX work done by rank 0 alone; each returns false with a message */

/* writes the message into err (MSG bytes) and returns false */
static bool failf(char *err, const char *f, ...) __attribute__((format(printf, 2, 3)));
static bool failf(char *err, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(err, MSG, f, ap);
    va_end(ap);
    return false;
}
#define FAIL(...) failf(err, __VA_ARGS__)

/* mkdir -p */
bool rt_io_make_dirs(const char *what, const char *path, char *err)
{
    char *p = strdup(path);
    if (!p)
        return FAIL("out of memory");
    mode_t mode = 0777 & ~rt_io_umask();
    bool ok = true;
    for (char *s = p + 1; ok; s++) {
        bool end = *s == 0;
        if (*s != '/' && !end)
            continue;
        *s = 0;
        struct stat st;
        if (stat(p, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                ok = FAIL("%s: cannot create directory '%s': it exists and is not a directory",
                          what, p);
        } else if (mkdir(p, mode) != 0 && errno != EEXIST) {
            ok = FAIL("%s: cannot create directory '%s': %s", what, p, strerror(errno));
        }
        if (end)
            break;
        *s = '/';
    }
    free(p);
    return ok;
}

/* the directory holding path ("." for a bare name), malloc'd */
char *rt_io_parent_of(rt_ctx *ctx, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return rt_io_fmt(ctx, ".");
    if (slash == path)
        return rt_io_fmt(ctx, "/");
    return rt_io_fmt(ctx, "%.*s", (int)(slash - path), path);
}

bool rt_io_fsync_dir(const char *what, const char *dir, char *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return FAIL("%s: cannot open directory '%s': %s", what, dir, strerror(errno));
    /* some file systems cannot sync a directory (EINVAL); the rename stands */
    bool ok = fsync(fd) == 0 || errno == EINVAL || errno == EROFS;
    int e = errno;
    close(fd);
    return ok || FAIL("%s: fsync of directory '%s' failed: %s", what, dir, strerror(e));
}

/* Only a directory holding nothing but .npy files may be replaced (and its
 * files removed): anything else at the path is the user's, never ours. */
static bool replaceable(const char *what, const char *dir, char *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return FAIL("%s: cannot read directory '%s': %s", what, dir, strerror(errno));
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        size_t n = strlen(e->d_name);
        bool npy = n > 4 && strcmp(e->d_name + n - 4, ".npy") == 0;
        bool file = e->d_type == DT_REG || e->d_type == DT_UNKNOWN;
        if (!npy || !file)
            ok = FAIL("%s: '%s' exists and holds '%s', which is not part of a checkpoint; "
                      "remove it or save elsewhere", what, dir, e->d_name);
    }
    closedir(d);
    return ok;
}

static bool remove_checkpoint_dir(const char *what, const char *dir, char *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return FAIL("%s: cannot read directory '%s': %s", what, dir, strerror(errno));
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0)
            ok = FAIL("%s: cannot remove '%s/%s': %s", what, dir, e->d_name, strerror(errno));
    }
    closedir(d);
    if (ok && rmdir(dir) != 0)
        ok = FAIL("%s: cannot remove directory '%s': %s", what, dir, strerror(errno));
    return ok;
}

/* ---- layouts: which rank writes which block */

/* True on the one rank that writes this rank's block: the lowest world rank
 * holding the same block (its offset and extent in every dim), never one
 * whose block is empty. The blocks need not be equal: a dim the mesh does
 * not divide splits as torch.chunk does (SPEC 4), so the last blocks are
 * smaller or empty. Also checks that the distinct blocks cover the tensor
 * (their elements add up to its size; each lies inside it: check_block):
 * one allgather of each rank's offsets and extents. */
bool rt_io_is_writer(rt_ctx *ctx, const char *what, const rt_layout *l)
{
    int nd = l->ndim, w = 2 * (nd ? nd : 1);
    char err[MSG];
    if (!ctx->mpi) {
        for (int d = 0; d < nd; d++)
            if (l->offset[d] != 0 || l->local[d] != l->global[d])
                rt_fail(ctx, "%s: on one rank the block must be the whole tensor", what);
        return true;
    }
    int64_t *mine = calloc((size_t)w, sizeof *mine);
    int64_t *all = malloc((size_t)ctx->world * (size_t)w * sizeof *all);
    RT_CHECK(ctx, mine != NULL && all != NULL, "out of memory");
    for (int d = 0; d < nd; d++) {
        mine[2 * d] = l->offset[d];
        mine[2 * d + 1] = l->local[d];
    }
    RT_CALL_MPI(ctx, MPI_Allgather(mine, w, MPI_INT64_T, all, w, MPI_INT64_T, MPI_COMM_WORLD));
    bool writer = rt_numel_of(nd, l->local) > 0;
    int64_t covered = 0;
    for (int r = 0; r < ctx->world; r++) {
        const int64_t *b = all + (size_t)r * (size_t)w;
        int64_t n = 1;
        for (int d = 0; d < nd; d++)
            n *= b[2 * d + 1];
        bool first = n > 0; /* the lowest rank holding block b */
        for (int q = 0; first && q < r; q++)
            first = memcmp(all + (size_t)q * (size_t)w, b, (size_t)w * sizeof *b) != 0;
        if (first)
            covered += n;
        if (r < ctx->rank && memcmp(b, mine, (size_t)w * sizeof *b) == 0)
            writer = false;
    }
    bool ok = covered == rt_numel_of(nd, l->global);
    if (!ok) {
        char g[256];
        rt_shape_str(g, sizeof g, l->ndim, l->global);
        FAIL("%s: the ranks' blocks do not tile the global tensor %s", what, g);
    }
    free(mine);
    free(all);
    rt_io_agree(ctx, ok ? NULL : err);
    return writer;
}

static void check_block(rt_ctx *ctx, const char *what, const rt_tensor *x, const rt_layout *l)
{
    RT_CHECK(ctx, x->ndim == l->ndim, "%s: tensor has %d dims, layout %d", what, x->ndim,
             l->ndim);
    for (int d = 0; d < l->ndim; d++)
        RT_CHECK(ctx, x->shape[d] == l->local[d] && l->offset[d] + l->local[d] <= l->global[d],
                 "%s: block does not match the layout in dim %d", what, d);
}

/* ---- MPI-IO file views */

typedef struct io_view {
    MPI_Datatype etype;    /* one element: dtype-size bytes */
    MPI_Datatype filetype; /* this rank's block of the global array */
    MPI_Datatype memtype;  /* what `count` counts in the buffer */
    int count;
} io_view;

static void make_view(rt_ctx *ctx, const char *what, const rt_layout *l, rt_dtype dt,
                      io_view *v)
{
    int nd = l->ndim ? l->ndim : 1, sizes[RT_MAX_DIMS], subs[RT_MAX_DIMS], starts[RT_MAX_DIMS];
    sizes[0] = subs[0] = 1;
    starts[0] = 0;
    for (int d = 0; d < l->ndim; d++) {
        RT_CHECK(ctx, l->global[d] <= INT_MAX,
                 "%s: dim %d (size %lld) is larger than MPI-IO can address (%d)", what, d,
                 (long long)l->global[d], INT_MAX);
        sizes[d] = (int)l->global[d];
        subs[d] = (int)l->local[d];
        starts[d] = (int)l->offset[d];
    }
    RT_CALL_MPI(ctx, MPI_Type_contiguous((int)rt_dtype_size(dt), MPI_BYTE, &v->etype));
    RT_CALL_MPI(ctx, MPI_Type_commit(&v->etype));
    int64_t numel = rt_numel_of(l->ndim, l->local), per = 1;
    if (numel == 0) { /* an empty block (uneven shards): Open MPI rejects a
                       * zero-size subarray; this rank joins the collective
                       * call with nothing to move */
        RT_CALL_MPI(ctx, MPI_Type_contiguous(1, v->etype, &v->filetype));
        RT_CALL_MPI(ctx, MPI_Type_commit(&v->filetype));
        v->count = 0;
        v->memtype = v->etype;
        return;
    }
    RT_CALL_MPI(ctx, MPI_Type_create_subarray(nd, sizes, subs, starts, MPI_ORDER_C, v->etype,
                                              &v->filetype));
    RT_CALL_MPI(ctx, MPI_Type_commit(&v->filetype));
    /* the count argument is an int: count rows of trailing dims when needed */
    for (int d = l->ndim; numel / per > INT_MAX && d > 0;)
        per *= l->local[--d];
    RT_CHECK(ctx, numel / per <= INT_MAX && per <= INT_MAX,
             "%s: a block of %lld elements is larger than one MPI-IO call can move", what,
             (long long)numel);
    v->count = (int)(numel / per);
    v->memtype = v->etype;
    if (per > 1) {
        RT_CALL_MPI(ctx, MPI_Type_contiguous((int)per, v->etype, &v->memtype));
        RT_CALL_MPI(ctx, MPI_Type_commit(&v->memtype));
    }
}

static void free_view(rt_ctx *ctx, io_view *v)
{
    if (v->memtype != v->etype)
        RT_CALL_MPI(ctx, MPI_Type_free(&v->memtype));
    RT_CALL_MPI(ctx, MPI_Type_free(&v->filetype));
    RT_CALL_MPI(ctx, MPI_Type_free(&v->etype));
}

/* ---- one tensor, one file: collective write and read */

/* MPI_File_open is collective, and when it fails on some ranks only, the
 * MPI-IO layer may wait forever inside it (OMPIO does). So before it, every
 * rank opens the file with POSIX (rank 0 has created it for writing) and
 * all agree: a file some rank cannot see (a file system not shared by every
 * node) becomes an error on every rank instead of a hang. */
void rt_io_check_visible(rt_ctx *ctx, const char *what, const char *file, bool write)
{
    char err[MSG];
    const char *msg = NULL;
    int fd = open(file, write ? O_WRONLY : O_RDONLY);
    if (fd < 0) {
        /* a load names its file already */
        bool named = strncmp(what, "load ", 5) == 0;
        snprintf(err, sizeof err, "%s: cannot open%s%s%s: %s (on rank %d%s)", what,
                 named ? "" : " '", named ? "" : file, named ? "" : "'", strerror(errno),
                 ctx->rank,
                 ctx->rank ? ", while rank 0 can: is it on a file system every rank sees?" : "");
        msg = err;
    } else {
        close(fd);
    }
    rt_io_agree(ctx, msg);
}

/* Writes x (this rank's block of l) as the global tensor into `file`
 * (created or truncated), synced to storage. Collective over the world. */
static void write_tensor_file(rt_ctx *ctx, const char *what, const char *file,
                                const rt_tensor *x, const rt_layout *l)
{
    if (x->dtype == RT_BF16) { /* .npy has no bf16: written as '<f4', exactly */
        rt_tensor *w = rt_bf16_widen(ctx, x);
        write_tensor_file(ctx, what, file, w, l);
        rt_free(ctx, w);
        return;
    }
    check_block(ctx, what, x, l);
    bool any = rt_numel_of(l->ndim, l->global) > 0; /* an empty tensor is just a header */
    bool writer = any && rt_io_is_writer(ctx, what, l);
    if (!ctx->mpi) {
        char err[MSG];
        rt_tensor hx = *x; /* the data in host memory */
        hx.data = (void *)rt_host_view(ctx, x);
        if (!rt_npy_write_posix(what, file, &hx, err, sizeof err))
            rt_fail(ctx, "%s", err);
        return;
    }
    char head[512], err[MSG] = "";
    size_t hl = rt_npy_header(head, sizeof head, x->dtype, l->ndim, l->global);
    if (ctx->rank == 0) {
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd < 0 || close(fd) != 0)
            FAIL("%s: cannot create '%s': %s", what, file, strerror(errno));
    }
    rt_io_verdict(ctx, err);
    rt_io_check_visible(ctx, what, file, true);
    MPI_File fh;
    rt_io_check(ctx, MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh),
             what, "MPI_File_open", file);
    MPI_Status st;
    int n = 0;
    /* A short write (a full disk) is this rank's error until all agree:
     * every rank reports it, and the temporary is removed. */
    char *short_write = NULL;
    if (ctx->rank == 0) {
        rt_io_check(ctx, MPI_File_write_at(fh, 0, head, (int)hl, MPI_BYTE, &st), what,
                 "MPI_File_write_at (header)", file);
        RT_CALL_MPI(ctx, MPI_Get_count(&st, MPI_BYTE, &n));
        if (n != (int)hl)
            short_write = rt_io_fmt(ctx, "%s: short write of the header of '%s' (%d of %zu bytes): is the disk full?",
                              what, file, n, hl);
    }
    if (any) {
        io_view v;
        make_view(ctx, what, l, x->dtype, &v);
        rt_io_check(ctx, MPI_File_set_view(fh, (MPI_Offset)hl, v.etype, v.filetype, "native",
                                        MPI_INFO_NULL),
                 what, "MPI_File_set_view", file);
        int count = writer ? v.count : 0;
        rt_io_check(ctx, MPI_File_write_all(fh, rt_host_view(ctx, x), count, v.memtype, &st), what,
                 "MPI_File_write_all", file);
        RT_CALL_MPI(ctx, MPI_Get_count(&st, v.memtype, &n));
        if (n != count && !short_write)
            short_write = rt_io_fmt(ctx, "%s: short write to '%s' (%d of %d blocks): is the disk full?", what,
                              file, n, count);
        free_view(ctx, &v);
    }
    rt_io_check(ctx, MPI_File_sync(fh), what, "MPI_File_sync", file);
    /* OpenMPI's OMPIO may print ENOSPC and still return success with the
     * full count: rank 0 also checks the size of the synced file */
    struct stat sb = {0};
    long long want = (long long)hl + (long long)rt_numel_of(l->ndim, l->global) * (long long)rt_dtype_size(x->dtype);
    if (ctx->rank == 0 && !short_write && (stat(file, &sb) != 0 || (long long)sb.st_size < want))
        short_write = rt_io_fmt(ctx, "%s: '%s' has %lld of %lld bytes after writing: is the disk full?", what, file,
                          (long long)sb.st_size, want);
    int failed = short_write != NULL, any_failed = 0;
    RT_CALL_MPI(ctx, MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    rt_io_check(ctx, MPI_File_close(&fh), what, "MPI_File_close", file);
    if (any_failed && ctx->rank == 0)
        unlink(file);
    rt_io_agree(ctx, short_write);
    free(short_write);
}

/* Reads this rank's block of l from `path`. Rank 0 checks the header (and
 * that the file is long enough) before anyone allocates or reads. dir, when
 * given, is the checkpoint directory the file belongs to. */
static rt_tensor *read_tensor_file(rt_ctx *ctx, const char *path, const char *dir,
                                   const char *field, rt_dtype dt, const rt_layout *l)
{
    if (dt == RT_BF16) /* an '<f4' file, rounded to nearest even (exact for saved bf16) */
        return rt_bf16_narrow(ctx, read_tensor_file(ctx, path, dir, field, RT_F32, l));
    rt_kspan ks = rt_kernel_begin(ctx);
    char err[MSG] = "";
    long long off = 0;
    if (ctx->rank == 0) {
        int64_t data_off = 0;
        int open_errno = 0;
        struct stat st;
        if (!rt_npy_check_file(path, dt, l->ndim, l->global, &data_off, &open_errno, err,
                               sizeof err) && open_errno == ENOENT && dir) {
            if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
                FAIL("load '%s': no such checkpoint directory", dir);
            else
                FAIL("load '%s': no such file: the checkpoint has no field '%s'", path, field);
        }
        off = data_off;
    }
    rt_io_verdict(ctx, err);
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Bcast(&off, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
    rt_tensor *t = rt_empty(ctx, dt, l->ndim, l->local);
    rt_tensor ht = *t; /* read into host memory, then moved into t */
    ht.data = rt_host_buffer(ctx, t);
    if (!ctx->mpi) {
        if (!rt_npy_read_posix(path, off, l, &ht, err, sizeof err))
            rt_fail(ctx, "%s", err);
    } else {
        MPI_File fh;
        char *w = rt_io_fmt(ctx, "load '%s'", path);
        rt_io_check_visible(ctx, w, path, false);
        rt_io_check(ctx, MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh),
                 w, "MPI_File_open", path);
        if (rt_numel_of(l->ndim, l->global) > 0) {
            io_view v;
            make_view(ctx, w, l, dt, &v);
            rt_io_check(ctx, MPI_File_set_view(fh, (MPI_Offset)off, v.etype, v.filetype, "native",
                                            MPI_INFO_NULL),
                     w, "MPI_File_set_view", path);
            MPI_Status st;
            int n = 0;
            rt_io_check(ctx, MPI_File_read_all(fh, ht.data, v.count, v.memtype, &st), w,
                     "MPI_File_read_all", path);
            RT_CALL_MPI(ctx, MPI_Get_count(&st, v.memtype, &n));
            RT_CHECK(ctx, n == v.count, "load '%s': file is truncated (read %d of %d)", path, n,
                     v.count);
            free_view(ctx, &v);
        }
        rt_io_check(ctx, MPI_File_close(&fh), w, "MPI_File_close", path);
        free(w);
    }
    rt_host_commit(ctx, t, ht.data);
    rt_kernel_end(ctx, &ks, RT_K_IO, "load");
    return t;
}

/* ---- save(path, x) and load(path, T): one file */

rt_tensor *rt_load_npy(rt_ctx *ctx, const char *path, rt_dtype dt, const rt_layout *l)
{
    return read_tensor_file(ctx, path, NULL, NULL, dt, l);
}

void rt_save_npy(rt_ctx *ctx, const char *path, const rt_tensor *x, const rt_layout *l)
{
    rt_kspan ks = rt_kernel_begin(ctx);
    char *what = rt_io_fmt(ctx, "save '%s'", path);
    char err[MSG] = "", *tmp = NULL;
    if (ctx->rank == 0) {
        char *parent = rt_io_parent_of(ctx, path);
        struct stat st;
        if (rt_io_make_dirs(what, parent, err)) {
            if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
                FAIL("%s: it is a directory", what);
            } else {
                tmp = rt_io_fmt(ctx, "%s.tmp.XXXXXX", path);
                int fd = mkstemp(tmp);
                if (fd < 0)
                    FAIL("%s: cannot create a temporary file '%s': %s", what, tmp,
                         strerror(errno));
                else if (fchmod(fd, 0666 & ~rt_io_umask()) != 0 || close(fd) != 0)
                    FAIL("%s: cannot set up '%s': %s", what, tmp, strerror(errno));
            }
        }
        free(parent);
    }
    rt_io_verdict(ctx, err);
    char *file = rt_io_bcast_string(ctx, ctx->rank == 0 ? tmp : "");
    write_tensor_file(ctx, what, file, x, l);
    if (ctx->mpi) /* every rank has closed the file */
        RT_CALL_MPI(ctx, MPI_Barrier(MPI_COMM_WORLD));
    if (ctx->rank == 0) {
        char *parent = rt_io_parent_of(ctx, path);
        if (rename(file, path) != 0)
            FAIL("%s: cannot rename '%s' to '%s': %s", what, file, path, strerror(errno));
        else
            rt_io_fsync_dir(what, parent, err);
        free(parent);
    }
    rt_io_verdict(ctx, err);
    free(file);
    free(tmp);
    free(what);
    rt_kernel_end(ctx, &ks, RT_K_IO, "save");
}

/* ---- checkpoint directories */

struct rt_ckpt {
    char *dir;   /* the target, without trailing slashes */
    char *tmp;   /* where the files go until the commit */
    char *what;  /* "save 'dir'" */
    char **names;
    int n, cap;
};

static bool valid_field_name(const char *name)
{
    return name[0] && strchr(name, '/') == NULL && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0;
}

rt_ckpt *rt_ckpt_begin(rt_ctx *ctx, const char *dir)
{
    RT_KERNEL(ctx, RT_K_IO, "save");
    rt_ckpt *ck = calloc(1, sizeof *ck);
    RT_CHECK(ctx, ck != NULL, "out of memory");
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    ck->dir = rt_io_fmt(ctx, "%.*s", (int)len, dir);
    ck->what = rt_io_fmt(ctx, "save '%s'", ck->dir);
    char err[MSG] = "", *tmp = NULL;
    if (ctx->rank == 0) {
        const char *base = strrchr(ck->dir, '/');
        base = base ? base + 1 : ck->dir;
        char *parent = rt_io_parent_of(ctx, ck->dir);
        struct stat st;
        if (!base[0] || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
            FAIL("%s: not a name a checkpoint directory can have", ck->what);
        } else if (rt_io_make_dirs(ck->what, parent, err)) {
            bool exists = stat(ck->dir, &st) == 0;
            if (exists && !S_ISDIR(st.st_mode))
                FAIL("%s: '%s' exists and is not a directory", ck->what, ck->dir);
            else if (!exists || replaceable(ck->what, ck->dir, err)) {
                tmp = rt_io_fmt(ctx, "%s.tmp.XXXXXX", ck->dir);
                if (!mkdtemp(tmp))
                    FAIL("%s: cannot create the temporary directory '%s': %s", ck->what, tmp,
                         strerror(errno));
                else if (chmod(tmp, 0777 & ~rt_io_umask()) != 0)
                    FAIL("%s: cannot set up '%s': %s", ck->what, tmp, strerror(errno));
            }
        }
        free(parent);
    }
    rt_io_verdict(ctx, err);
    ck->tmp = rt_io_bcast_string(ctx, ctx->rank == 0 ? tmp : "");
    free(tmp);
    return ck;
}

void rt_ckpt_write(rt_ctx *ctx, rt_ckpt *ck, const char *name, const rt_tensor *x,
                   const rt_layout *l)
{
    RT_KERNEL(ctx, RT_K_IO, "save");
    RT_CHECK(ctx, valid_field_name(name), "%s: '%s' is not a valid field name", ck->what, name);
    for (int i = 0; i < ck->n; i++)
        RT_CHECK(ctx, strcmp(ck->names[i], name) != 0, "%s: field '%s' written twice",
                 ck->what, name);
    if (ck->n == ck->cap) {
        ck->cap = ck->cap ? 2 * ck->cap : 16;
        ck->names = realloc(ck->names, (size_t)ck->cap * sizeof *ck->names);
        RT_CHECK(ctx, ck->names != NULL, "out of memory");
    }
    ck->names[ck->n++] = rt_io_fmt(ctx, "%s", name);
    char *file = rt_io_fmt(ctx, "%s/%s.npy", ck->tmp, name);
    char *what = rt_io_fmt(ctx, "%s (field '%s')", ck->what, name);
    write_tensor_file(ctx, what, file, x, l);
    free(what);
    free(file);
}

static void free_ckpt(rt_ckpt *ck)
{
    for (int i = 0; i < ck->n; i++)
        free(ck->names[i]);
    free(ck->names);
    free(ck->dir);
    free(ck->tmp);
    free(ck->what);
    free(ck);
}

/* rank 0: put the finished temporary directory in place */
static bool commit_dir(rt_ctx *ctx, rt_ckpt *ck, char *err)
{
    const char *what = ck->what;
    if (!rt_io_fsync_dir(what, ck->tmp, err))
        return false;
    struct stat st;
    bool exists = lstat(ck->dir, &st) == 0;
    if (exists && !S_ISDIR(st.st_mode))
        return FAIL("%s: '%s' exists and is not a directory", what, ck->dir);
    if (!exists) {
        if (rename(ck->tmp, ck->dir) != 0)
            return FAIL("%s: cannot rename '%s' to '%s': %s", what, ck->tmp, ck->dir,
                        strerror(errno));
    } else {
        if (!replaceable(what, ck->dir, err))
            return false;
        /* swap old and new in one step; the old one then has the temporary name */
        char *old = NULL;
        if (renameat2(AT_FDCWD, ck->tmp, AT_FDCWD, ck->dir, RENAME_EXCHANGE) == 0) {
            old = rt_io_fmt(ctx, "%s", ck->tmp);
        } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
            /* no atomic exchange here: move the old one aside first */
            const char *suffix = ck->tmp + strlen(ck->dir) + strlen(".tmp");
            old = rt_io_fmt(ctx, "%s.old%s", ck->dir, suffix);
            if (rename(ck->dir, old) != 0 || rename(ck->tmp, ck->dir) != 0) {
                FAIL("%s: cannot replace '%s' with '%s': %s", what, ck->dir, ck->tmp,
                     strerror(errno));
                free(old);
                return false;
            }
        } else {
            return FAIL("%s: cannot exchange '%s' and '%s': %s", what, ck->tmp, ck->dir,
                        strerror(errno));
        }
        bool ok = remove_checkpoint_dir(what, old, err);
        free(old);
        if (!ok)
            return false;
    }
    char *parent = rt_io_parent_of(ctx, ck->dir);
    bool ok = rt_io_fsync_dir(what, parent, err);
    free(parent);
    return ok;
}

void rt_ckpt_commit(rt_ctx *ctx, rt_ckpt *ck)
{
    RT_KERNEL(ctx, RT_K_IO, "save");
    if (ctx->mpi) /* every rank has written, synced and closed every file */
        RT_CALL_MPI(ctx, MPI_Barrier(MPI_COMM_WORLD));
    char err[MSG] = "";
    if (ctx->rank == 0)
        commit_dir(ctx, ck, err);
    rt_io_verdict(ctx, err);
    free_ckpt(ck);
}

rt_tensor *rt_ckpt_read(rt_ctx *ctx, const char *dir, const char *name, rt_dtype dt,
                        const rt_layout *l)
{
    RT_CHECK(ctx, valid_field_name(name), "load '%s': '%s' is not a valid field name", dir,
             name);
    char *path = rt_io_fmt(ctx, "%s/%s.npy", dir, name);
    rt_tensor *t = read_tensor_file(ctx, path, dir, name, dt, l);
    free(path);
    return t;
}

bool rt_exists(rt_ctx *ctx, const char *path)
{
    int found = 0;
    if (ctx->rank == 0) {
        struct stat st;
        found = stat(path, &st) == 0;
    }
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Bcast(&found, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return found != 0;
}
