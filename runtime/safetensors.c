/* Records in .safetensors files by tensor name, through a name map
 * (docs/weights.md).
 *
 * A safetensors file: an 8-byte little-endian header length N, N bytes of
 * JSON (name -> dtype, shape, data_offsets [begin, end) into the data),
 * then the data, little-endian and row-major. The JSON is parsed with
 * cJSON (Debian's libcjson).
 *
 * A map line turns a tensor (each layer's, for a name with {L}) into a
 * field by steps: splits (a dim seen as several), then selects and parts
 * (a box of the split tensor), then a permutation. So a rank's block of a
 * field is a box of the split tensor: one collective MPI-IO call per
 * tensor moves it, through a subarray view of the split shape, and a copy
 * permutes it (and converts the dtype on load).
 *
 * Load: rank 0 reads and checks the whole header before any rank reads
 * data; every rank then parses the same JSON. Save: the map and the
 * tensors the fields make (a fused tensor joined from several fields, which
 * must cover it exactly) are checked on every rank alike before anything
 * is written; the file is written as file.tmp.XXXXXX and renamed over file
 * when every rank has written and synced (checkpoint.c's way). */
#include <cjson/cJSON.h>
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

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c reads and writes little-endian data in place: a little-endian host is needed"
#endif

#define MSG RT_IO_MSG
#define ST_MAX_HEADER 100000000LL /* the format's own limit (safetensors' MAX_HEADER_SIZE) */

static void *xcalloc(rt_ctx *ctx, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    RT_CHECK(ctx, p != NULL, "out of memory");
    return p;
}

/* every rank found the same error (a deterministic check of shared data) */
static void fail_all(rt_ctx *ctx, const char *f, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail_all(rt_ctx *ctx, const char *f, ...)
{
    char m[MSG];
    va_list ap;
    va_start(ap, f);
    vsnprintf(m, sizeof m, f, ap);
    va_end(ap);
    rt_fail_all(ctx, m);
}

static bool failf(char *err, const char *f, ...) __attribute__((format(printf, 2, 3)));
static bool failf(char *err, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(err, MSG, f, ap);
    va_end(ap);
    return false;
}

/* ---- dtypes */

typedef enum { D_F64, D_F32, D_F16, D_BF16, D_I64, D_I32, D_I16, D_I8, D_U64, D_U32, D_U16, D_U8,
               D_BOOL, D_F8_E4M3, D_F8_E5M2, D_N } st_dtype;
static const char *const dt_name[D_N] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8",
                                         "U64", "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};
static const int dt_size[D_N] = {8, 4, 2, 2, 8, 4, 2, 1, 8, 4, 2, 1, 1, 1, 1};

static int dtype_named(const char *s)
{
    for (int i = 0; i < D_N; i++)
        if (strcmp(s, dt_name[i]) == 0)
            return i;
    return -1;
}

static st_dtype dtype_of_field(rt_dtype dt)
{
    switch (dt) {
    case RT_F32: return D_F32;
    case RT_F64: return D_F64;
    case RT_BF16: return D_BF16;
    case RT_I32: return D_I32;
    }
    return D_F32;
}

/* whether a tensor of file dtype s can be loaded into a field of dtype dt */
static bool loadable(st_dtype s, rt_dtype dt)
{
    bool flt = s == D_F64 || s == D_F32 || s == D_F16 || s == D_BF16;
    bool intg = s >= D_I64 && s <= D_U8;
    return dt == RT_I32 ? intg : flt;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 0) {
        if (m == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            e = 127 - 15 + 1;
            while (!(m & 1024)) {
                m <<= 1;
                e--;
            }
            bits = sign | (e << 23) | ((m & 1023) << 13);
        }
    } else if (e == 31) {
        bits = sign | 0x7f800000u | (m << 13);
    } else {
        bits = sign | ((e + 127 - 15) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static double load_float(st_dtype s, const unsigned char *p)
{
    switch (s) {
    case D_F64: { double d; memcpy(&d, p, 8); return d; }
    case D_F32: { float f; memcpy(&f, p, 4); return f; }
    case D_F16: { uint16_t h; memcpy(&h, p, 2); return half_to_float(h); }
    default: { uint16_t h; memcpy(&h, p, 2); return rt_bf16_to_f32(h); }
    }
}

/* an integer element; *ok false when it does not fit an i32 */
static int32_t load_int(st_dtype s, const unsigned char *p, bool *ok)
{
    int64_t v = 0;
    switch (s) {
    case D_I64: memcpy(&v, p, 8); break;
    case D_I32: { int32_t x; memcpy(&x, p, 4); v = x; break; }
    case D_I16: { int16_t x; memcpy(&x, p, 2); v = x; break; }
    case D_I8: { int8_t x; memcpy(&x, p, 1); v = x; break; }
    case D_U64: { uint64_t x; memcpy(&x, p, 8); v = x > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)x; break; }
    case D_U32: { uint32_t x; memcpy(&x, p, 4); v = x; break; }
    case D_U16: { uint16_t x; memcpy(&x, p, 2); v = x; break; }
    default: { uint8_t x; memcpy(&x, p, 1); v = x; break; }
    }
    *ok = v >= INT32_MIN && v <= INT32_MAX;
    return (int32_t)v;
}

/* ---- the header */

typedef struct st_entry {
    const char *name; /* into the cJSON tree */
    st_dtype dtype;
    int ndim;
    int64_t *shape;
    int64_t begin, end;
} st_entry;

typedef struct st_header {
    cJSON *json;
    st_entry *e; /* sorted by name */
    int n;
    int64_t data_off; /* 8 + N */
} st_header;

static void free_header(st_header *h)
{
    for (int i = 0; i < h->n; i++)
        free(h->e[i].shape);
    free(h->e);
    cJSON_Delete(h->json);
    memset(h, 0, sizeof *h);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int by_begin(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

/* a JSON number that is a non-negative integer (exact in a double) */
static bool json_count(const cJSON *j, int64_t *out)
{
    if (!cJSON_IsNumber(j))
        return false;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(int64_t)d)
        return false;
    *out = (int64_t)d;
    return true;
}

static void shape_text(char *buf, size_t n, int nd, const int64_t *s)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < nd && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)s[d]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* Parses and checks the JSON header (len bytes) of `what`'s file, whose data
 * part has data_size bytes; false with a message in err. */
static bool parse_header(const char *what, const char *json, size_t len, int64_t data_size,
                         st_header *h, char *err)
{
    memset(h, 0, sizeof *h);
    h->json = cJSON_ParseWithLength(json, len);
    if (!h->json) {
        const char *at = cJSON_GetErrorPtr();
        long long pos = at && at >= json && at <= json + len ? (long long)(at - json) : -1;
        return failf(err, "%s: the header is not JSON (at byte %lld of %zu)", what, pos, len);
    }
    if (!cJSON_IsObject(h->json))
        return failf(err, "%s: the header is not a JSON object", what);
    int n = cJSON_GetArraySize(h->json);
    h->e = calloc((size_t)(n ? n : 1), sizeof *h->e);
    if (!h->e)
        return failf(err, "out of memory");
    for (cJSON *t = h->json->child; t; t = t->next) {
        const char *name = t->string ? t->string : "";
        if (strcmp(name, "__metadata__") == 0)
            continue;
        st_entry *e = &h->e[h->n++];
        e->name = name;
        cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
        cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
        cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        if (!cJSON_IsObject(t) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) ||
            cJSON_GetArraySize(off) != 2)
            return failf(err, "%s: tensor '%s': its entry needs \"dtype\" (a string), \"shape\" (an array) "
                         "and \"data_offsets\" (two numbers)", what, name);
        int d = dtype_named(dt->valuestring);
        if (d < 0)
            return failf(err, "%s: tensor '%s': unknown dtype '%s'", what, name, dt->valuestring);
        e->dtype = (st_dtype)d;
        e->ndim = cJSON_GetArraySize(sh);
        e->shape = calloc((size_t)(e->ndim ? e->ndim : 1), sizeof *e->shape);
        if (!e->shape)
            return failf(err, "out of memory");
        int64_t numel = 1;
        bool big = false;
        int k = 0;
        for (cJSON *s = sh->child; s; s = s->next, k++) {
            if (!json_count(s, &e->shape[k]))
                return failf(err, "%s: tensor '%s': shape holds something other than a size", what, name);
            if (e->shape[k] && numel > INT64_MAX / 8 / e->shape[k])
                big = true;
            else
                numel *= e->shape[k];
        }
        if (!json_count(off->child, &e->begin) || !json_count(off->child->next, &e->end) || e->begin > e->end)
            return failf(err, "%s: tensor '%s': data_offsets must be two sizes, begin <= end", what, name);
        if (e->end > data_size)
            return failf(err, "%s: tensor '%s': data_offsets [%lld, %lld] are outside the file's %lld bytes of data",
                         what, name, (long long)e->begin, (long long)e->end, (long long)data_size);
        char sb[256];
        shape_text(sb, sizeof sb, e->ndim, e->shape);
        if (big || numel * dt_size[d] != e->end - e->begin)
            return failf(err, "%s: tensor '%s': data_offsets [%lld, %lld] hold %lld bytes, but %s %s is %lld",
                         what, name, (long long)e->begin, (long long)e->end, (long long)(e->end - e->begin),
                         dt_name[d], sb, big ? -1LL : (long long)(numel * dt_size[d]));
    }
    qsort(h->e, (size_t)h->n, sizeof *h->e, by_name);
    for (int i = 1; i < h->n; i++)
        if (strcmp(h->e[i - 1].name, h->e[i].name) == 0)
            return failf(err, "%s: tensor '%s' appears twice in the header", what, h->e[i].name);
    const st_entry **o = calloc((size_t)(h->n ? h->n : 1), sizeof *o);
    if (!o)
        return failf(err, "out of memory");
    for (int i = 0; i < h->n; i++)
        o[i] = &h->e[i];
    qsort(o, (size_t)h->n, sizeof *o, by_begin);
    bool ok = true;
    const st_entry *last = NULL; /* the non-empty range reaching furthest */
    for (int i = 0; ok && i < h->n; i++) {
        if (o[i]->begin == o[i]->end)
            continue;
        if (last && o[i]->begin < last->end)
            ok = failf(err, "%s: tensor '%s': data_offsets [%lld, %lld] overlap tensor '%s''s [%lld, %lld]", what,
                       o[i]->name, (long long)o[i]->begin, (long long)o[i]->end, last->name,
                       (long long)last->begin, (long long)last->end);
        if (!last || o[i]->end > last->end)
            last = o[i];
    }
    free(o);
    return ok;
}

static const st_entry *find_entry(const st_header *h, const char *name)
{
    st_entry key = {.name = name};
    return bsearch(&key, h->e, (size_t)h->n, sizeof *h->e, by_name);
}

/* Rank 0 reads and checks the header; every rank gets it parsed. */
static void read_header(rt_ctx *ctx, const char *what, const char *path, st_header *h)
{
    char err[MSG] = "";
    char *json = NULL;
    long long n = 0, size = 0;
    if (ctx->rank == 0) {
        int fd = open(path, O_RDONLY);
        struct stat st;
        unsigned char len8[8];
        if (fd < 0) {
            failf(err, "%s: cannot open: %s", what, strerror(errno));
        } else if (fstat(fd, &st) != 0) {
            failf(err, "%s: cannot stat: %s", what, strerror(errno));
        } else if ((size = st.st_size) < 8 || pread(fd, len8, 8, 0) != 8) {
            failf(err, "%s: file is truncated: %lld bytes, not even the 8-byte header length", what, size);
        } else {
            uint64_t u = 0;
            for (int i = 7; i >= 0; i--)
                u = u << 8 | len8[i];
            if (u > (uint64_t)ST_MAX_HEADER || (long long)u > size - 8) {
                failf(err, "%s: header too long: %llu bytes (the file has %lld; the format allows %lld)", what,
                      (unsigned long long)u, size, ST_MAX_HEADER);
            } else {
                n = (long long)u;
                json = malloc((size_t)n + 1);
                ssize_t got = 0;
                while (json && got < n) {
                    ssize_t r = pread(fd, json + got, (size_t)(n - got), 8 + got);
                    if (r <= 0)
                        break;
                    got += r;
                }
                if (!json)
                    failf(err, "out of memory");
                else if (got != n)
                    failf(err, "%s: cannot read the header: %s", what, got < 0 ? strerror(errno) : "short read");
                else
                    json[n] = 0;
            }
        }
        if (fd >= 0)
            close(fd);
        if (!err[0]) {
            st_header t;
            parse_header(what, json, (size_t)n, size - 8 - n, &t, err);
            free_header(&t);
        }
    }
    rt_io_verdict(ctx, err);
    long long v[2] = {n, size};
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Bcast(v, 2, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
    char *all = rt_io_bcast_string(ctx, ctx->rank == 0 ? json : "");
    free(json);
    if (!parse_header(what, all, (size_t)v[0], v[1] - 8 - v[0], h, err))
        rt_fail(ctx, "%s", err); /* rank 0 accepted these very bytes */
    h->data_off = 8 + v[0];
    free(all);
}

/* ---- the name map */

typedef enum { S_SPLIT, S_SELECT, S_PART, S_TRANSPOSE, S_PERMUTE } step_kind;

typedef struct st_step {
    step_kind kind;
    int d;      /* the dim (split, select, part) */
    int n;      /* how many values */
    int64_t *v; /* split: the sizes; select: i; part: i, n; permute: p */
} st_step;

typedef struct st_line {
    char *field, *pattern;
    int lineno, nsteps;
    st_step *steps;
    bool stacked; /* the pattern holds {L} */
} st_line;

typedef struct st_map {
    char *path; /* NULL: no map (a field's tensor is named by its path) */
    st_line *lines;
    int n;
} st_map;

static void free_map(st_map *m)
{
    for (int i = 0; i < m->n; i++) {
        for (int s = 0; s < m->lines[i].nsteps; s++)
            free(m->lines[i].steps[s].v);
        free(m->lines[i].steps);
        free(m->lines[i].field);
        free(m->lines[i].pattern);
    }
    free(m->lines);
    free(m->path);
    memset(m, 0, sizeof *m);
}

static const char *skip_blanks(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

/* one step at *pp; false with a message */
static bool parse_step(rt_ctx *ctx, const char **pp, st_step *st, char *err, const char *where)
{
    const char *p = *pp, *name = p;
    while ((*p >= 'a' && *p <= 'z') || *p == '_')
        p++;
    size_t nl = (size_t)(p - name);
    static const char *const names[] = {"split", "select", "part", "transpose", "permute"};
    int kind = -1;
    for (int k = 0; k < 5; k++)
        if (strlen(names[k]) == nl && strncmp(name, names[k], nl) == 0)
            kind = k;
    const char *end = p;
    int64_t vals[64];
    int nv = 0;
    int64_t *heap = NULL;
    int cap = 64;
    p = skip_blanks(p);
    if (*p == '(') {
        p = skip_blanks(p + 1);
        while (*p && *p != ')') {
            char *e;
            errno = 0;
            long long x = strtoll(p, &e, 10);
            if (e == p || errno)
                break;
            if (nv == cap) { /* no fixed limit: grow */
                cap *= 2;
                int64_t *h2 = realloc(heap, (size_t)cap * sizeof *h2);
                RT_CHECK(ctx, h2 != NULL, "out of memory");
                if (!heap)
                    memcpy(h2, vals, sizeof vals);
                heap = h2;
            }
            (heap ? heap : vals)[nv++] = x;
            p = skip_blanks(e);
            if (*p == ',')
                p = skip_blanks(p + 1);
        }
        if (*p != ')') {
            free(heap);
            size_t w = strcspn(name, "\n");
            return failf(err, "%s: step '%.*s' is not NAME(INTEGER, ...)", where, (int)(w > 60 ? 60 : w), name);
        }
        end = p + 1;
    }
    size_t w = (size_t)(end - name);
    int64_t *v = heap ? heap : vals;
    bool ok = true;
    if (kind < 0)
        ok = failf(err, "%s: unknown step '%.*s' (split, select, part, transpose, permute)", where,
                   (int)(w ? w : strcspn(name, " \t\n")), name);
    else if (kind == S_SPLIT && (nv < 2 || v[0] < 0))
        ok = failf(err, "%s: '%.*s': split(d, n1, n2, ...) takes a dim and its sizes", where, (int)w, name);
    else if (kind == S_SELECT && (nv != 2 || v[0] < 0 || v[1] < 0))
        ok = failf(err, "%s: '%.*s': select(d, i) takes a dim and an index", where, (int)w, name);
    else if (kind == S_PART && (nv != 3 || v[0] < 0 || v[2] < 1 || v[1] < 0 || v[1] >= v[2]))
        ok = failf(err, "%s: '%.*s': part(d, i, n) takes a dim, the part i and the number of parts n > i", where,
                   (int)w, name);
    else if (kind == S_TRANSPOSE && nv != 0)
        ok = failf(err, "%s: 'transpose' takes nothing (it swaps the last two dims)", where);
    else if (kind == S_PERMUTE && nv < 1)
        ok = failf(err, "%s: '%.*s': permute(p0, p1, ...) takes the dims in their new order", where, (int)w, name);
    if (ok && kind == S_SPLIT) {
        int minus = 0;
        for (int i = 1; i < nv; i++) {
            minus += v[i] == -1;
            if (v[i] == 0 || v[i] < -1)
                ok = failf(err, "%s: '%.*s': split sizes are positive, or -1 for the rest", where, (int)w, name);
        }
        if (ok && minus > 1)
            ok = failf(err, "%s: '%.*s': at most one split size may be -1", where, (int)w, name);
    }
    if (!ok) {
        free(heap);
        return false;
    }
    st->kind = (step_kind)kind;
    int first = kind == S_SPLIT || kind == S_SELECT || kind == S_PART;
    st->d = first ? (int)v[0] : 0;
    st->n = nv - first;
    st->v = xcalloc(ctx, (size_t)(st->n ? st->n : 1), sizeof *st->v);
    memcpy(st->v, v + first, (size_t)st->n * sizeof *st->v);
    free(heap);
    *pp = end;
    return true;
}

/* Parses the map's text; every rank parses the same text, so an error
 * stops every rank with the same message. */
static void parse_map(rt_ctx *ctx, const char *path, const char *text, st_map *m)
{
    memset(m, 0, sizeof *m);
    m->path = rt_io_fmt(ctx, "%s", path);
    int cap = 0;
    char err[MSG];
    int lineno = 0;
    for (const char *p = text; *p;) {
        lineno++;
        size_t len = strcspn(p, "\n");
        char *line = rt_io_fmt(ctx, "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        const char *q = skip_blanks(line);
        if (!*q) {
            free(line);
            continue;
        }
        char *where = rt_io_fmt(ctx, "map '%s' line %d", path, lineno);
        size_t fl = strcspn(q, " \t\r");
        char *field = rt_io_fmt(ctx, "%.*s", (int)fl, q);
        q = skip_blanks(q + fl);
        size_t pl = strcspn(q, " \t\r");
        if (!pl)
            fail_all(ctx, "%s: a line is a field path, a tensor name and steps; '%s' has no tensor name", where, field);
        char *pattern = rt_io_fmt(ctx, "%.*s", (int)pl, q);
        q = skip_blanks(q + pl);
        const char *brace = strstr(pattern, "{L}");
        if (brace && strstr(brace + 3, "{L}"))
            fail_all(ctx, "%s: '%s' holds {L} twice", where, pattern);
        if (strchr(pattern, '{') && !brace)
            fail_all(ctx, "%s: '%s': the only pattern in a tensor name is {L}, the layer index", where, pattern);
        for (int i = 0; i < m->n; i++)
            if (strcmp(m->lines[i].field, field) == 0)
                fail_all(ctx, "%s: field '%s' has a line already (line %d)", where, field, m->lines[i].lineno);
        if (m->n == cap) {
            cap = cap ? 2 * cap : 16;
            m->lines = realloc(m->lines, (size_t)cap * sizeof *m->lines);
            RT_CHECK(ctx, m->lines != NULL, "out of memory");
        }
        st_line *ln = &m->lines[m->n++];
        memset(ln, 0, sizeof *ln);
        ln->field = field;
        ln->pattern = pattern;
        ln->lineno = lineno;
        ln->stacked = brace != NULL;
        int scap = 0, phase = 0; /* 0: splits, 1: selects and parts, 2: a permutation */
        while (*q) {
            if (ln->nsteps == scap) {
                scap = scap ? 2 * scap : 4;
                ln->steps = realloc(ln->steps, (size_t)scap * sizeof *ln->steps);
                RT_CHECK(ctx, ln->steps != NULL, "out of memory");
            }
            st_step *st = &ln->steps[ln->nsteps];
            if (!parse_step(ctx, &q, st, err, where))
                rt_fail_all(ctx, err);
            ln->nsteps++;
            int ph = st->kind == S_SPLIT ? 0 : st->kind == S_SELECT || st->kind == S_PART ? 1 : 2;
            if (ph < phase || (ph == 2 && phase == 2 && ln->nsteps > 1 &&
                               ln->steps[ln->nsteps - 2].kind >= S_TRANSPOSE))
                fail_all(ctx, "%s: steps go in this order: splits, then selects and parts, then one transpose or "
                         "permute", where);
            phase = ph;
            q = skip_blanks(q);
        }
        free(where);
        free(line);
    }
}

/* The map at path (rank 0 reads it; every rank parses it). */
static void read_map(rt_ctx *ctx, const char *what, const char *path, st_map *m)
{
    char err[MSG] = "", *text = NULL;
    if (ctx->rank == 0) {
        FILE *f = fopen(path, "r");
        size_t n = 0, cap = 0;
        if (!f) {
            failf(err, "%s: map '%s': cannot open: %s", what, path, strerror(errno));
        } else {
            int c;
            while ((c = fgetc(f)) != EOF) {
                if (n + 1 >= cap) {
                    cap = cap ? 2 * cap : 4096;
                    char *t = realloc(text, cap);
                    RT_CHECK(ctx, t != NULL, "out of memory");
                    text = t;
                }
                if (c == 0)
                    c = ' ';
                text[n++] = (char)c;
            }
            if (ferror(f))
                failf(err, "%s: map '%s': cannot read: %s", what, path, strerror(errno));
            fclose(f);
            if (!text)
                text = rt_io_fmt(ctx, "%s", "");
            text[n] = 0;
        }
    }
    rt_io_verdict(ctx, err);
    char *all = rt_io_bcast_string(ctx, ctx->rank == 0 ? text : "");
    free(text);
    parse_map(ctx, path, all, m);
    free(all);
}

static const st_line *line_of(const st_map *m, const char *field)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->lines[i].field, field) == 0)
            return &m->lines[i];
    return NULL;
}

/* the tensor name of layer l (l < 0: not stacked) */
static char *tensor_name(rt_ctx *ctx, const st_line *ln, const char *field, int64_t l)
{
    if (!ln)
        return rt_io_fmt(ctx, "%s", field);
    const char *b = strstr(ln->pattern, "{L}");
    if (!b || l < 0)
        return rt_io_fmt(ctx, "%s", ln->pattern);
    return rt_io_fmt(ctx, "%.*s%lld%s", (int)(b - ln->pattern), ln->pattern, (long long)l, b + 3);
}

/* ---- views: a field (per layer) as a box of the tensor's split shape */

typedef struct st_view {
    int nf, nv, nfl;
    int64_t *fshape;  /* the tensor */
    int64_t *vshape;  /* after the splits */
    int64_t *start, *len; /* per view dim: the field's box */
    int *fd2vd;       /* field dim j (per layer) -> view dim */
} st_view;

static void free_view(st_view *v)
{
    free(v->fshape);
    free(v->vshape);
    free(v->start);
    free(v->len);
    free(v->fd2vd);
    memset(v, 0, sizeof *v);
}

/* Applies ln's steps to a tensor of shape fshape; false with a message (err
 * starts with what it is about). */
static bool view_forward(rt_ctx *ctx, const st_line *ln, int nf, const int64_t *fshape, st_view *v, char *err,
                         const char *where)
{
    memset(v, 0, sizeof *v);
    int cap = nf + 1;
    for (int s = 0; ln && s < ln->nsteps; s++)
        if (ln->steps[s].kind == S_SPLIT)
            cap += ln->steps[s].n;
    v->nf = nf;
    v->fshape = xcalloc(ctx, (size_t)cap, sizeof(int64_t));
    memcpy(v->fshape, fshape, (size_t)nf * sizeof(int64_t));
    int64_t *cur = xcalloc(ctx, (size_t)cap, sizeof(int64_t));
    memcpy(cur, fshape, (size_t)nf * sizeof(int64_t));
    int n = nf, s = 0;
    bool ok = true;
    for (; ok && ln && s < ln->nsteps && ln->steps[s].kind == S_SPLIT; s++) {
        const st_step *st = &ln->steps[s];
        if (st->d >= n) {
            ok = failf(err, "%s: split(%d, ...) names dim %d, but the tensor has %d dims there", where, st->d,
                       st->d, n);
            break;
        }
        int64_t prod = 1, rest = -1;
        bool minus = false;
        for (int i = 0; i < st->n; i++) {
            minus |= st->v[i] == -1;
            if (st->v[i] > 0)
                prod = prod > INT64_MAX / st->v[i] ? INT64_MAX : prod * st->v[i];
        }
        if (cur[st->d] % prod != 0 || (prod != cur[st->d] && !minus))
            ok = failf(err, "%s: split(%d, ...) does not fit dim %d of size %lld", where, st->d, st->d,
                       (long long)cur[st->d]);
        else
            rest = cur[st->d] / prod;
        if (!ok)
            break;
        memmove(cur + st->d + st->n, cur + st->d + 1, (size_t)(n - st->d - 1) * sizeof *cur);
        for (int i = 0; i < st->n; i++)
            cur[st->d + i] = st->v[i] > 0 ? st->v[i] : rest;
        n += st->n - 1;
    }
    if (!ok) {
        free(cur);
        return false;
    }
    v->nv = n;
    v->vshape = cur;
    v->start = xcalloc(ctx, (size_t)(n + 1), sizeof(int64_t));
    v->len = xcalloc(ctx, (size_t)(n + 1), sizeof(int64_t));
    int *k2v = xcalloc(ctx, (size_t)(n + 1), sizeof(int));
    for (int i = 0; i < n; i++) {
        v->len[i] = cur[i];
        k2v[i] = i;
    }
    int nk = n;
    int *perm = NULL;
    for (; ok && ln && s < ln->nsteps; s++) {
        const st_step *st = &ln->steps[s];
        if (st->kind == S_SELECT || st->kind == S_PART) {
            const char *nm = st->kind == S_SELECT ? "select" : "part";
            if (st->d >= nk) {
                ok = failf(err, "%s: %s(%d, ...) names dim %d, but the tensor has %d dims there", where, nm, st->d,
                           st->d, nk);
                break;
            }
            int vd = k2v[st->d];
            if (st->kind == S_SELECT) {
                if (st->v[0] >= v->len[vd]) {
                    ok = failf(err, "%s: select(%d, %lld) is past dim %d of size %lld", where, st->d,
                               (long long)st->v[0], st->d, (long long)v->len[vd]);
                    break;
                }
                v->start[vd] += st->v[0];
                v->len[vd] = 1;
                memmove(k2v + st->d, k2v + st->d + 1, (size_t)(nk - st->d - 1) * sizeof *k2v);
                nk--;
            } else {
                if (v->len[vd] % st->v[1] != 0) {
                    ok = failf(err, "%s: part(%d, %lld, %lld): dim %d of size %lld is not %lld equal parts", where,
                               st->d, (long long)st->v[0], (long long)st->v[1], st->d, (long long)v->len[vd],
                               (long long)st->v[1]);
                    break;
                }
                v->len[vd] /= st->v[1];
                v->start[vd] += st->v[0] * v->len[vd];
            }
        } else {
            perm = xcalloc(ctx, (size_t)(nk + 1), sizeof(int));
            if (st->kind == S_TRANSPOSE) {
                if (nk < 2) {
                    ok = failf(err, "%s: transpose needs two dims, the tensor has %d there", where, nk);
                    break;
                }
                for (int i = 0; i < nk; i++)
                    perm[i] = i;
                perm[nk - 2] = nk - 1;
                perm[nk - 1] = nk - 2;
            } else {
                bool good = st->n == nk;
                unsigned char *seen = xcalloc(ctx, (size_t)(nk + 1), 1);
                for (int i = 0; good && i < nk; i++) {
                    good = st->v[i] >= 0 && st->v[i] < nk && !seen[st->v[i]];
                    if (good) {
                        seen[st->v[i]] = 1;
                        perm[i] = (int)st->v[i];
                    }
                }
                free(seen);
                if (!good) {
                    ok = failf(err, "%s: permute(...) must order all %d dims of the tensor there", where, nk);
                    break;
                }
            }
        }
    }
    if (ok) {
        v->nfl = nk;
        v->fd2vd = xcalloc(ctx, (size_t)(nk + 1), sizeof(int));
        for (int j = 0; j < nk; j++)
            v->fd2vd[j] = k2v[perm ? perm[j] : j];
    }
    free(perm);
    free(k2v);
    return ok;
}

/* The tensor's shape a field of per-layer shape fl[nfl] makes through ln's
 * steps (save): the steps undone, then done again to check. */
static bool view_backward(rt_ctx *ctx, const st_line *ln, int nfl, const int64_t *fl, st_view *v, char *err,
                          const char *where)
{
    int cap = nfl + 1;
    for (int s = 0; ln && s < ln->nsteps; s++)
        cap += ln->steps[s].kind == S_SELECT ? 1 : 0;
    int64_t *cur = xcalloc(ctx, (size_t)cap, sizeof(int64_t));
    int n = nfl, s = ln ? ln->nsteps : 0;
    /* undo the permutation */
    const st_step *last = s > 0 ? &ln->steps[s - 1] : NULL;
    if (last && (last->kind == S_TRANSPOSE || last->kind == S_PERMUTE)) {
        s--;
        bool good = last->kind == S_TRANSPOSE ? n >= 2 : last->n == n;
        for (int j = 0; good && j < n; j++) {
            int64_t p = last->kind == S_TRANSPOSE ? (j >= n - 2 ? 2 * n - 3 - j : j) : last->v[j];
            good = p >= 0 && p < n;
            if (good)
                cur[p] = fl[j];
        }
        if (!good) {
            free(cur);
            return failf(err, "%s: the field has %d dims, which %s does not order", where, n,
                         last->kind == S_TRANSPOSE ? "transpose" : "permute(...)");
        }
    } else {
        memcpy(cur, fl, (size_t)n * sizeof *cur);
    }
    /* undo selects and parts: a selected dim's size comes from a split (-2 until then) */
    for (; s > 0 && (ln->steps[s - 1].kind == S_SELECT || ln->steps[s - 1].kind == S_PART); s--) {
        const st_step *st = &ln->steps[s - 1];
        if (st->d > n || (st->kind == S_PART && st->d >= n)) {
            free(cur);
            return failf(err, "%s: the steps name dim %d, which the field's %d dims do not have", where, st->d, n);
        }
        if (st->kind == S_PART) {
            cur[st->d] *= st->v[1];
        } else {
            memmove(cur + st->d + 1, cur + st->d, (size_t)(n - st->d) * sizeof *cur);
            cur[st->d] = -2;
            n++;
        }
    }
    /* undo the splits */
    for (; s > 0; s--) {
        const st_step *st = &ln->steps[s - 1];
        if (st->d + st->n > n) {
            free(cur);
            return failf(err, "%s: split(%d, ...) needs %d dims from dim %d, which the field does not have", where,
                         st->d, st->n, st->d);
        }
        int64_t prod = 1;
        for (int i = 0; i < st->n; i++) {
            int64_t *c = &cur[st->d + i];
            if (st->v[i] == -1 && *c == -2) {
                free(cur);
                return failf(err, "%s: split(%d, ...): a selected dim's size is needed to save; write it, not -1",
                             where, st->d);
            }
            if (*c == -2)
                *c = st->v[i];
            prod *= *c;
        }
        cur[st->d] = prod;
        memmove(cur + st->d + 1, cur + st->d + st->n, (size_t)(n - st->d - st->n) * sizeof *cur);
        n -= st->n - 1;
    }
    for (int i = 0; i < n; i++)
        if (cur[i] == -2) {
            free(cur);
            return failf(err, "%s: a selected dim's size is needed to save: write it in a split", where);
        }
    bool ok = view_forward(ctx, ln, n, cur, v, err, where);
    free(cur);
    if (!ok)
        return false;
    bool same = v->nfl == nfl;
    for (int j = 0; same && j < nfl; j++)
        same = v->len[v->fd2vd[j]] == fl[j];
    if (!same) {
        free_view(v);
        return failf(err, "%s: the steps do not give back the field's shape", where);
    }
    return true;
}

/* ---- moving a box of one tensor */

typedef struct st_file {
    const char *path, *what;
    bool mpi;
    MPI_File fh;
    int fd;
} st_file;

static void file_open(rt_ctx *ctx, st_file *f, bool write)
{
    if (ctx->mpi) {
        rt_io_check_visible(ctx, f->what, f->path, write);
        rt_io_check(ctx, MPI_File_open(MPI_COMM_WORLD, f->path, write ? MPI_MODE_WRONLY : MPI_MODE_RDONLY,
                                       MPI_INFO_NULL, &f->fh),
                    f->what, "MPI_File_open", f->path);
        f->mpi = true;
    } else {
        f->fd = open(f->path, write ? O_WRONLY : O_RDONLY);
        RT_CHECK(ctx, f->fd >= 0, "%s: cannot open '%s': %s", f->what, f->path, strerror(errno));
    }
}

static bool posix_io(int fd, bool write, void *buf, size_t n, int64_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = write ? pwrite(fd, (char *)buf + done, n - done, off + (off_t)done)
                          : pread(fd, (char *)buf + done, n - done, off + (off_t)done);
        if (r <= 0)
            return false;
        done += (size_t)r;
    }
    return true;
}

/* Reads or writes the box [bs, bs + bl) of an array of shape vshape[nv] and
 * element size es at byte disp, row-major, into or from buf. Collective:
 * every rank calls it; an inactive rank moves nothing. Returns false on a
 * short transfer. */
static bool box_io(rt_ctx *ctx, st_file *f, bool write, int64_t disp, int es, int nv, const int64_t *vshape,
                   const int64_t *bs, const int64_t *bl, void *buf, bool active)
{
    int64_t numel = 1;
    for (int d = 0; d < nv; d++)
        numel *= bl[d];
    if (!f->mpi) {
        if (!active || numel == 0)
            return true;
        int64_t rows = nv ? numel / bl[nv - 1] : 1, rowlen = nv ? bl[nv - 1] : 1;
        int64_t *idx = xcalloc(ctx, (size_t)(nv + 1), sizeof *idx);
        bool ok = true;
        for (int64_t r = 0; ok && r < rows; r++) {
            int64_t lin = 0;
            for (int d = 0; d < nv; d++)
                lin = lin * vshape[d] + bs[d] + (d < nv - 1 ? idx[d] : 0);
            ok = posix_io(f->fd, write, (char *)buf + r * rowlen * es, (size_t)(rowlen * es), disp + lin * es);
            for (int d = nv - 2; d >= 0; d--) {
                if (++idx[d] < bl[d])
                    break;
                idx[d] = 0;
            }
        }
        free(idx);
        return ok;
    }
    int nd = nv ? nv : 1;
    int *sizes = xcalloc(ctx, (size_t)nd, sizeof(int)), *subs = xcalloc(ctx, (size_t)nd, sizeof(int)),
        *starts = xcalloc(ctx, (size_t)nd, sizeof(int));
    sizes[0] = subs[0] = 1;
    for (int d = 0; d < nv; d++) {
        RT_CHECK(ctx, vshape[d] <= INT_MAX, "%s: dim %d (size %lld) is larger than MPI-IO can address", f->what, d,
                 (long long)vshape[d]);
        sizes[d] = (int)vshape[d];
        subs[d] = (int)bl[d];
        starts[d] = (int)bs[d];
    }
    MPI_Datatype et, ft, mt;
    RT_CALL_MPI(ctx, MPI_Type_contiguous(es, MPI_BYTE, &et));
    RT_CALL_MPI(ctx, MPI_Type_commit(&et));
    ft = et;
    /* an empty block (uneven shards, SPEC 4: torch.chunk leaves the last
     * ranks none) joins the collective call with nothing to move: Open MPI
     * rejects a zero-size subarray */
    active = active && numel > 0;
    if (active) {
        RT_CALL_MPI(ctx, MPI_Type_create_subarray(nd, sizes, subs, starts, MPI_ORDER_C, et, &ft));
        RT_CALL_MPI(ctx, MPI_Type_commit(&ft));
    }
    int64_t per = 1;
    for (int d = nv; numel / per > INT_MAX && d > 0;)
        per *= bl[--d];
    RT_CHECK(ctx, numel / per <= INT_MAX && per <= INT_MAX, "%s: a block of %lld elements is larger than one "
             "MPI-IO call can move", f->what, (long long)numel);
    mt = et;
    if (per > 1) {
        RT_CALL_MPI(ctx, MPI_Type_contiguous((int)per, et, &mt));
        RT_CALL_MPI(ctx, MPI_Type_commit(&mt));
    }
    int count = active ? (int)(numel / per) : 0, got = 0;
    rt_io_check(ctx, MPI_File_set_view(f->fh, (MPI_Offset)disp, et, ft, "native", MPI_INFO_NULL), f->what,
                "MPI_File_set_view", f->path);
    MPI_Status st;
    if (write)
        rt_io_check(ctx, MPI_File_write_all(f->fh, buf, count, mt, &st), f->what, "MPI_File_write_all", f->path);
    else
        rt_io_check(ctx, MPI_File_read_all(f->fh, buf, count, mt, &st), f->what, "MPI_File_read_all", f->path);
    RT_CALL_MPI(ctx, MPI_Get_count(&st, mt, &got));
    if (mt != et)
        RT_CALL_MPI(ctx, MPI_Type_free(&mt));
    if (ft != et)
        RT_CALL_MPI(ctx, MPI_Type_free(&ft));
    RT_CALL_MPI(ctx, MPI_Type_free(&et));
    free(sizes);
    free(subs);
    free(starts);
    return got == count;
}

/* The box of view v that this rank's per-layer block (off, loc of the
 * field's per-layer dims) is, and the box's strides by field dim. */
static void field_box(const st_view *v, const int64_t *off, const int64_t *loc, int64_t *bs, int64_t *bl,
                      int64_t *fstride)
{
    for (int d = 0; d < v->nv; d++) {
        bs[d] = v->start[d];
        bl[d] = v->len[d];
    }
    for (int j = 0; j < v->nfl; j++) {
        bs[v->fd2vd[j]] = v->start[v->fd2vd[j]] + off[j];
        bl[v->fd2vd[j]] = loc[j];
    }
    int64_t *vstride = fstride + v->nfl; /* scratch after the field's strides */
    int64_t acc = 1;
    for (int d = v->nv - 1; d >= 0; d--) {
        vstride[d] = acc;
        acc *= bl[d];
    }
    for (int j = 0; j < v->nfl; j++)
        fstride[j] = vstride[v->fd2vd[j]];
}

/* Walks the field's per-layer block (loc[nfl], row-major) and the box
 * (strides fstride) together: fn(element e of the field, element b of the box). */
#define WALK(nfl, loc, fstride, BODY)                                            \
    do {                                                                         \
        int64_t n_ = 1;                                                          \
        for (int j_ = 0; j_ < (nfl); j_++)                                       \
            n_ *= (loc)[j_];                                                     \
        int64_t *i_ = xcalloc(ctx, (size_t)(nfl) + 1, sizeof(int64_t)), b = 0; \
        for (int64_t e = 0; e < n_; e++) {                                       \
            BODY;                                                                \
            for (int j_ = (nfl) - 1; j_ >= 0; j_--) {                            \
                b += (fstride)[j_];                                              \
                if (++i_[j_] < (loc)[j_])                                        \
                    break;                                                       \
                b -= (fstride)[j_] * (loc)[j_];                                  \
                i_[j_] = 0;                                                      \
            }                                                                    \
        }                                                                        \
        free(i_);                                                                \
    } while (0)

/* ---- load */

rt_tensor *rt_st_read(rt_ctx *ctx, const char *file, const char *map, const char *field, rt_dtype dt,
                      const rt_layout *l)
{
    rt_kspan ks = rt_kernel_begin(ctx);
    char *what = rt_io_fmt(ctx, "load '%s'", file);
    st_map m = {0};
    const st_line *ln = NULL;
    if (map) {
        read_map(ctx, what, map, &m);
        ln = line_of(&m, field);
        if (!ln)
            fail_all(ctx, "%s: the map '%s' has no line for field '%s'", what, map, field);
    }
    bool stacked = ln && ln->stacked;
    if (stacked && l->ndim < 1)
        fail_all(ctx, "%s: field '%s': the map's {L} stacks layers on dim 0, but the field has no dims", what, field);
    st_header h;
    read_header(ctx, what, file, &h);
    int64_t nlayers = stacked ? l->global[0] : 1;
    int lay = stacked ? 1 : 0, nfl = l->ndim - lay;
    const int64_t *gfl = l->global + lay;
    st_view *views = xcalloc(ctx, (size_t)(nlayers ? nlayers : 1), sizeof *views);
    const st_entry **ents = xcalloc(ctx, (size_t)(nlayers ? nlayers : 1), sizeof *ents);
    char err[MSG];
    /* every layer's tensor, checked before anything is read */
    for (int64_t li = 0; li < nlayers; li++) {
        char *name = tensor_name(ctx, ln, field, stacked ? li : -1);
        const st_entry *e = find_entry(&h, name);
        if (!e)
            fail_all(ctx, "%s: field '%s': no tensor '%s'", what, field, name);
        char shp[256];
        shape_text(shp, sizeof shp, e->ndim, e->shape);
        char *where = map ? rt_io_fmt(ctx, "%s: field '%s': tensor '%s' of shape %s (map '%s' line %d)", what, field, name,
                                shp, map, ln->lineno)
                          : rt_io_fmt(ctx, "%s: field '%s': tensor '%s' of shape %s", what, field, name, shp);
        if (!view_forward(ctx, ln, e->ndim, e->shape, &views[li], err, where))
            rt_fail_all(ctx, err);
        bool same = views[li].nfl == nfl;
        for (int j = 0; same && j < nfl; j++)
            same = views[li].len[views[li].fd2vd[j]] == gfl[j];
        if (!same) {
            char got[256], made[256], want[256];
            shape_text(got, sizeof got, e->ndim, e->shape);
            int64_t *mk = xcalloc(ctx, (size_t)views[li].nfl + 1, sizeof *mk);
            for (int j = 0; j < views[li].nfl; j++)
                mk[j] = views[li].len[views[li].fd2vd[j]];
            shape_text(made, sizeof made, views[li].nfl, mk);
            shape_text(want, sizeof want, nfl, gfl);
            free(mk);
            if (ln && ln->nsteps)
                fail_all(ctx, "%s: field '%s': tensor '%s' has shape %s, which the map makes %s, expected %s", what,
                         field, name, got, made, want);
            fail_all(ctx, "%s: field '%s': tensor '%s' has shape %s, expected %s", what, field, name, got, want);
        }
        if (!loadable(e->dtype, dt))
            fail_all(ctx, "%s: field '%s': tensor '%s' is %s, which %s %s field cannot hold", what, field, name,
                     dt_name[e->dtype], dt == RT_I32 ? "an" : "a", rt_dtype_name(dt));
        ents[li] = e;
        free(where);
        free(name);
    }
    rt_tensor *t = rt_empty(ctx, dt, l->ndim, l->local);
    unsigned char *dst = rt_host_buffer(ctx, t);
    int64_t slot = 1;
    for (int j = 0; j < nfl; j++)
        slot *= l->local[lay + j];
    size_t dsz = rt_dtype_size(dt);
    st_file f = {.path = file, .what = what, .fd = -1};
    int64_t total = 1;
    for (int d = 0; d < l->ndim; d++)
        total *= l->global[d];
    const char *bad = NULL; /* this rank's first value an i32 cannot hold */
    char badmsg[MSG];
    if (total > 0) {
        file_open(ctx, &f, false);
        for (int64_t li = 0; li < nlayers; li++) {
            const st_view *v = &views[li];
            const st_entry *e = ents[li];
            bool active = !stacked || (li >= l->offset[0] && li < l->offset[0] + l->local[0]);
            int64_t *bs = xcalloc(ctx, (size_t)v->nv + 1, sizeof *bs), *bl = xcalloc(ctx, (size_t)v->nv + 1, sizeof *bl);
            int64_t *fstride = xcalloc(ctx, (size_t)(v->nfl + v->nv) + 1, sizeof *fstride);
            field_box(v, l->offset + lay, l->local + lay, bs, bl, fstride);
            int64_t nbox = 1;
            for (int d = 0; d < v->nv; d++)
                nbox *= bl[d];
            int es = dt_size[e->dtype];
            unsigned char *raw = xcalloc(ctx, (size_t)(active ? nbox : 1), (size_t)es);
            if (!box_io(ctx, &f, false, h.data_off + e->begin, es, v->nv, v->vshape, bs, bl, raw, active))
                rt_fail(ctx, "%s: tensor '%s': file is truncated (a short read)", what, e->name);
            if (active) {
                unsigned char *out = dst + (size_t)((stacked ? li - l->offset[0] : 0) * slot) * dsz;
                const unsigned char *src = raw;
                st_dtype fd = e->dtype;
                if (fd == dtype_of_field(dt) && dt != RT_I32) { /* the same bits */
                    WALK(nfl, l->local + lay, fstride, memcpy(out + (size_t)e * dsz, src + (size_t)b * dsz, dsz));
                } else if (dt == RT_I32) {
                    WALK(nfl, l->local + lay, fstride, {
                        bool ok = true;
                        ((int32_t *)(void *)out)[e] = load_int(fd, src + (size_t)b * (size_t)es, &ok);
                        if (!ok && !bad) {
                            snprintf(badmsg, sizeof badmsg, "%s: field '%s': tensor '%s' holds a value an i32 "
                                     "cannot hold", what, field, ents[li]->name);
                            bad = badmsg;
                        }
                    });
                } else {
                    WALK(nfl, l->local + lay, fstride, {
                        double x = load_float(fd, src + (size_t)b * (size_t)es);
                        if (dt == RT_F32)
                            ((float *)(void *)out)[e] = (float)x;
                        else if (dt == RT_F64)
                            ((double *)(void *)out)[e] = x;
                        else
                            ((uint16_t *)(void *)out)[e] = rt_f32_to_bf16((float)x);
                    });
                }
            }
            free(raw);
            free(bs);
            free(bl);
            free(fstride);
        }
        if (f.mpi)
            rt_io_check(ctx, MPI_File_close(&f.fh), what, "MPI_File_close", file);
        else
            close(f.fd);
    }
    rt_io_agree(ctx, bad);
    rt_host_commit(ctx, t, dst);
    for (int64_t li = 0; li < nlayers; li++)
        free_view(&views[li]);
    free(views);
    free(ents);
    free_header(&h);
    free_map(&m);
    free(what);
    rt_kernel_end(ctx, &ks, RT_K_IO, "load");
    return t;
}

/* ---- save */

typedef struct st_put {
    char *field;
    rt_tensor *x;
    rt_layout l;
    const st_line *ln;
    st_view *views; /* per layer */
    int64_t nlayers;
    bool writer;
} st_put;

/* one field's layer written into one tensor */
typedef struct st_part {
    char *tensor;
    int put;
    int64_t layer;
} st_part;

struct rt_st_save {
    char *file, *map, *what;
    st_put *puts;
    int n, cap;
};

rt_st_save *rt_st_save_begin(rt_ctx *ctx, const char *file, const char *map)
{
    rt_st_save *s = xcalloc(ctx, 1, sizeof *s);
    s->file = rt_io_fmt(ctx, "%s", file);
    s->map = map ? rt_io_fmt(ctx, "%s", map) : NULL;
    s->what = rt_io_fmt(ctx, "save '%s'", file);
    return s;
}

void rt_st_save_put(rt_ctx *ctx, rt_st_save *s, const char *field, const rt_tensor *x, const rt_layout *l)
{
    RT_CHECK(ctx, x->ndim == l->ndim, "%s: field '%s': tensor has %d dims, layout %d", s->what, field, x->ndim,
             l->ndim);
    for (int i = 0; i < s->n; i++)
        RT_CHECK(ctx, strcmp(s->puts[i].field, field) != 0, "%s: field '%s' written twice", s->what, field);
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->puts = realloc(s->puts, (size_t)s->cap * sizeof *s->puts);
        RT_CHECK(ctx, s->puts != NULL, "out of memory");
    }
    st_put *p = &s->puts[s->n++];
    memset(p, 0, sizeof *p);
    p->field = rt_io_fmt(ctx, "%s", field);
    p->x = rt_retain((rt_tensor *)x);
    p->l = *l;
}

static int by_tensor(const void *a, const void *b)
{
    const st_part *x = a, *y = b;
    int c = strcmp(x->tensor, y->tensor);
    return c ? c : x->put != y->put ? x->put - y->put : (x->layer > y->layer) - (x->layer < y->layer);
}

static bool boxes_overlap(const st_view *a, const st_view *b)
{
    for (int d = 0; d < a->nv; d++)
        if (a->start[d] + a->len[d] <= b->start[d] || b->start[d] + b->len[d] <= a->start[d])
            return false;
    return true;
}

void rt_st_save_commit(rt_ctx *ctx, rt_st_save *s)
{
    rt_kspan ks = rt_kernel_begin(ctx);
    const char *what = s->what;
    st_map m = {0};
    if (s->map)
        read_map(ctx, what, s->map, &m);
    char err[MSG];
    /* every field's tensors, as the map makes them */
    int nparts = 0, pcap = 0;
    st_part *parts = NULL;
    for (int i = 0; i < s->n; i++) {
        st_put *p = &s->puts[i];
        p->ln = s->map ? line_of(&m, p->field) : NULL;
        if (s->map && !p->ln)
            fail_all(ctx, "%s: the map '%s' has no line for field '%s'", what, s->map, p->field);
        bool stacked = p->ln && p->ln->stacked;
        if (stacked && p->l.ndim < 1)
            fail_all(ctx, "%s: field '%s': the map's {L} stacks layers on dim 0, but the field has no dims", what,
                     p->field);
        int lay = stacked ? 1 : 0;
        p->nlayers = stacked ? p->l.global[0] : 1;
        p->views = xcalloc(ctx, (size_t)(p->nlayers ? p->nlayers : 1), sizeof *p->views);
        char *where = s->map ? rt_io_fmt(ctx, "%s: field '%s' (map '%s' line %d)", what, p->field, s->map, p->ln->lineno)
                             : rt_io_fmt(ctx, "%s: field '%s'", what, p->field);
        for (int64_t li = 0; li < p->nlayers; li++) {
            if (!view_backward(ctx, p->ln, p->l.ndim - lay, p->l.global + lay, &p->views[li], err, where))
                rt_fail_all(ctx, err);
            if (nparts == pcap) {
                pcap = pcap ? 2 * pcap : 64;
                parts = realloc(parts, (size_t)pcap * sizeof *parts);
                RT_CHECK(ctx, parts != NULL, "out of memory");
            }
            parts[nparts++] = (st_part){tensor_name(ctx, p->ln, p->field, stacked ? li : -1), i, li};
        }
        free(where);
    }
    qsort(parts, (size_t)nparts, sizeof *parts, by_tensor);
    /* the tensors: each covered exactly by its parts, in one dtype and split shape */
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    RT_CHECK(ctx, root && meta, "out of memory");
    cJSON_AddItemToObject(root, "__metadata__", meta);
    RT_CHECK(ctx, cJSON_AddStringToObject(meta, "format", "pt") != NULL, "out of memory");
    int64_t data = 0;
    int64_t *begin = xcalloc(ctx, (size_t)(nparts ? nparts : 1), sizeof *begin); /* per part: its tensor's */
    for (int a = 0, b; a < nparts; a = b) {
        for (b = a + 1; b < nparts && strcmp(parts[b].tensor, parts[a].tensor) == 0; b++)
            ;
        const st_put *pa = &s->puts[parts[a].put];
        const st_view *va = &pa->views[parts[a].layer];
        int64_t numel = 1, covered = 0;
        for (int d = 0; d < va->nf; d++)
            numel *= va->fshape[d];
        for (int c = a; c < b; c++) {
            const st_put *pc = &s->puts[parts[c].put];
            const st_view *vc = &pc->views[parts[c].layer];
            bool same = vc->nv == va->nv && vc->nf == va->nf;
            for (int d = 0; same && d < va->nv; d++)
                same = vc->vshape[d] == va->vshape[d];
            if (!same)
                fail_all(ctx, "%s: tensor '%s': fields '%s' and '%s' make it with different shapes or splits", what,
                         parts[a].tensor, pa->field, pc->field);
            if (pc->x->dtype != pa->x->dtype)
                fail_all(ctx, "%s: tensor '%s': fields '%s' (%s) and '%s' (%s) differ in dtype", what,
                         parts[a].tensor, pa->field, rt_dtype_name(pa->x->dtype), pc->field,
                         rt_dtype_name(pc->x->dtype));
            int64_t vol = 1;
            for (int d = 0; d < vc->nv; d++)
                vol *= vc->len[d];
            covered += vol;
            for (int o = a; o < c; o++) {
                const st_put *po = &s->puts[parts[o].put];
                if (vol && boxes_overlap(vc, &po->views[parts[o].layer]))
                    fail_all(ctx, "%s: tensor '%s' is written by field '%s' and by field '%s', which overlap", what,
                             parts[a].tensor, po->field, pc->field);
            }
        }
        if (covered != numel)
            fail_all(ctx, "%s: tensor '%s' is only partly written: the record's fields make %lld of its %lld "
                     "elements (a field of the map missing from the record?)", what, parts[a].tensor,
                     (long long)covered, (long long)numel);
        st_dtype fd = dtype_of_field(pa->x->dtype);
        cJSON *t = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();
        RT_CHECK(ctx, t && shape && offs, "out of memory");
        for (int d = 0; d < va->nf; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)va->fshape[d]));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)data));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(data + numel * dt_size[fd])));
        RT_CHECK(ctx, cJSON_AddStringToObject(t, "dtype", dt_name[fd]) != NULL, "out of memory");
        cJSON_AddItemToObject(t, "shape", shape);
        cJSON_AddItemToObject(t, "data_offsets", offs);
        cJSON_AddItemToObject(root, parts[a].tensor, t);
        for (int c = a; c < b; c++)
            begin[c] = data;
        data += numel * dt_size[fd];
    }
    char *json = cJSON_PrintUnformatted(root);
    RT_CHECK(ctx, json != NULL, "out of memory");
    size_t jl = strlen(json), hl = (jl + 7) / 8 * 8;
    char *head = xcalloc(ctx, 8 + hl + 1, 1);
    for (int i = 0; i < 8; i++)
        head[i] = (char)((uint64_t)hl >> (8 * i) & 0xff);
    memcpy(head + 8, json, jl);
    memset(head + 8 + jl, ' ', hl - jl);
    free(json);
    cJSON_Delete(root);
    for (int i = 0; i < s->n; i++) /* which rank writes each block (collective) */
        s->puts[i].writer = rt_io_is_writer(ctx, what, &s->puts[i].l);

    /* the temporary file, beside the target */
    char err0[MSG] = "", *tmp = NULL;
    if (ctx->rank == 0) {
        char *parent = rt_io_parent_of(ctx, s->file);
        struct stat st;
        if (rt_io_make_dirs(what, parent, err0)) {
            if (stat(s->file, &st) == 0 && S_ISDIR(st.st_mode)) {
                failf(err0, "%s: it is a directory", what);
            } else {
                tmp = rt_io_fmt(ctx, "%s.tmp.XXXXXX", s->file);
                int fd = mkstemp(tmp);
                if (fd < 0)
                    failf(err0, "%s: cannot create a temporary file '%s': %s", what, tmp, strerror(errno));
                else if (fchmod(fd, 0666 & ~rt_io_umask()) != 0 || close(fd) != 0)
                    failf(err0, "%s: cannot set up '%s': %s", what, tmp, strerror(errno));
            }
        }
        free(parent);
    }
    rt_io_verdict(ctx, err0);
    char *path = rt_io_bcast_string(ctx, ctx->rank == 0 ? tmp : "");
    st_file f = {.path = path, .what = what, .fd = -1};
    file_open(ctx, &f, true);
    char *short_write = NULL;
    if (ctx->rank == 0) {
        bool ok;
        if (f.mpi) {
            MPI_Status st;
            int n = 0;
            rt_io_check(ctx, MPI_File_write_at(f.fh, 0, head, (int)(8 + hl), MPI_BYTE, &st), what,
                        "MPI_File_write_at (header)", path);
            RT_CALL_MPI(ctx, MPI_Get_count(&st, MPI_BYTE, &n));
            ok = n == (int)(8 + hl);
        } else {
            ok = posix_io(f.fd, true, head, 8 + hl, 0);
        }
        if (!ok)
            short_write = rt_io_fmt(ctx, "%s: short write of the header of '%s': is the disk full?", what, path);
    }
    for (int c = 0; c < nparts; c++) {
        const st_put *p = &s->puts[parts[c].put];
        const st_view *v = &p->views[parts[c].layer];
        bool stacked = p->ln && p->ln->stacked;
        int lay = stacked ? 1 : 0, nfl = p->l.ndim - lay;
        int64_t li = parts[c].layer;
        bool active = p->writer && (!stacked || (li >= p->l.offset[0] && li < p->l.offset[0] + p->l.local[0]));
        int64_t nbox = 1;
        for (int d = 0; d < v->nv; d++)
            nbox *= v->len[d];
        if (nbox == 0)
            continue; /* nothing to write, on every rank */
        int64_t *bs = xcalloc(ctx, (size_t)v->nv + 1, sizeof *bs), *bl = xcalloc(ctx, (size_t)v->nv + 1, sizeof *bl);
        int64_t *fstride = xcalloc(ctx, (size_t)(v->nfl + v->nv) + 1, sizeof *fstride);
        field_box(v, p->l.offset + lay, p->l.local + lay, bs, bl, fstride);
        int64_t n = 1, slot = 1;
        for (int d = 0; d < v->nv; d++)
            n *= bl[d];
        for (int j = 0; j < nfl; j++)
            slot *= p->l.local[lay + j];
        size_t es = rt_dtype_size(p->x->dtype);
        unsigned char *buf = xcalloc(ctx, (size_t)(active ? n : 1), es);
        if (active) {
            const unsigned char *src = (const unsigned char *)rt_host_view(ctx, p->x) +
                                       (size_t)((stacked ? li - p->l.offset[0] : 0) * slot) * es;
            WALK(nfl, p->l.local + lay, fstride, memcpy(buf + (size_t)b * es, src + (size_t)e * es, es));
        }
        if (!box_io(ctx, &f, true, (int64_t)(8 + hl) + begin[c], (int)es, v->nv, v->vshape, bs, bl, buf, active) &&
            !short_write)
            short_write = rt_io_fmt(ctx, "%s: short write of tensor '%s' to '%s': is the disk full?", what, parts[c].tensor,
                              path);
        free(buf);
        free(bs);
        free(bl);
        free(fstride);
    }
    if (f.mpi) {
        rt_io_check(ctx, MPI_File_sync(f.fh), what, "MPI_File_sync", path);
    } else if (fsync(f.fd) != 0 && !short_write) {
        short_write = rt_io_fmt(ctx, "%s: fsync of '%s' failed: %s", what, path, strerror(errno));
    }
    struct stat sb = {0};
    long long want = (long long)(8 + hl) + (long long)data;
    if (ctx->rank == 0 && !short_write && (stat(path, &sb) != 0 || (long long)sb.st_size < want))
        short_write = rt_io_fmt(ctx, "%s: '%s' has %lld of %lld bytes after writing: is the disk full?", what, path,
                          (long long)sb.st_size, want);
    int failed = short_write != NULL, any_failed = failed;
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (f.mpi)
        rt_io_check(ctx, MPI_File_close(&f.fh), what, "MPI_File_close", path);
    else
        close(f.fd);
    if (any_failed && ctx->rank == 0)
        unlink(path);
    rt_io_agree(ctx, short_write);
    if (ctx->mpi) /* every rank has closed the file */
        RT_CALL_MPI(ctx, MPI_Barrier(MPI_COMM_WORLD));
    char err1[MSG] = "";
    if (ctx->rank == 0) {
        char *parent = rt_io_parent_of(ctx, s->file);
        if (rename(path, s->file) != 0) {
            failf(err1, "%s: cannot rename '%s' to '%s': %s", what, path, s->file, strerror(errno));
            unlink(path);
        } else {
            rt_io_fsync_dir(what, parent, err1);
        }
        free(parent);
    }
    rt_io_verdict(ctx, err1);
    free(short_write);
    free(path);
    free(tmp);
    free(head);
    free(begin);
    for (int c = 0; c < nparts; c++)
        free(parts[c].tensor);
    free(parts);
    for (int i = 0; i < s->n; i++) {
        for (int64_t li = 0; li < s->puts[i].nlayers; li++)
            free_view(&s->puts[i].views[li]);
        free(s->puts[i].views);
        free(s->puts[i].field);
        rt_free(ctx, s->puts[i].x);
    }
    free(s->puts);
    free(s->file);
    free(s->map);
    free(s->what);
    free(s);
    free_map(&m);
    rt_kernel_end(ctx, &ks, RT_K_IO, "save");
}
