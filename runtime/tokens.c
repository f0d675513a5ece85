/* Token files as batches (docs/weights.md, "Token files").
 *
 * A token file is nanoGPT's raw uint16 array (no header), or llm.c's .bin:
 * a header of 256 little-endian int32 (magic 20240520 with version 1:
 * uint16 tokens; magic 20240801 with version 7: uint32 tokens; header[2]
 * the number of tokens), then the tokens. rt_token_batch reads a [B, W]
 * batch of windows of W consecutive tokens, row b starting at
 * trunc(u_b * (n - W)) where u_b is element b of uniform(f64[B], seed) on
 * [0, 1): the runtime's counter-based generator, keyed by the global row,
 * so a batch is the same on every mesh. Rank 0 reads and checks the
 * header; each rank maps the file and copies only its block. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "philox.h"
#include "rt_internal.h"

#define MSG RT_IO_MSG
#define LLMC_HEADER 1024 /* 256 int32 */

/* rank 0: the file's token count, token size and where they start */
static void token_header(const char *path, int64_t w, long long *v, char *err)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0) {
        snprintf(err, MSG, "token file '%s': cannot open: %s", path, strerror(errno));
        return;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(err, MSG, "token file '%s': cannot stat: %s", path, strerror(errno));
        close(fd);
        return;
    }
    long long size = st.st_size, n = 0, tsize = 2, start = 0;
    int32_t h[3] = {0, 0, 0};
    bool headed = size >= LLMC_HEADER && pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h &&
                  (h[0] == 20240520 || h[0] == 20240801);
    close(fd);
    if (headed) {
        if (!((h[0] == 20240520 && h[1] == 1) || (h[0] == 20240801 && h[1] == 7))) {
            snprintf(err, MSG, "token file '%s': llm.c header with magic %d and version %d, which is not "
                     "20240520 version 1 (uint16) or 20240801 version 7 (uint32)", path, (int)h[0], (int)h[1]);
            return;
        }
        tsize = h[0] == 20240520 ? 2 : 4;
        start = LLMC_HEADER;
        n = h[2];
        if (n < 0 || (size - LLMC_HEADER) != n * tsize) {
            snprintf(err, MSG, "token file '%s': the header says %lld tokens of %lld bytes, but %lld bytes follow it",
                     path, n, tsize, size - LLMC_HEADER);
            return;
        }
    } else {
        if (size % 2 != 0) {
            snprintf(err, MSG, "token file '%s': odd length (%lld bytes): a raw token file holds uint16 tokens "
                     "(or an llm.c header is missing)", path, size);
            return;
        }
        n = size / 2;
    }
    if (n <= w) {
        snprintf(err, MSG, "token file '%s': %lld tokens, but a window takes %lld and must fit more than once", path,
                 n, (long long)w);
        return;
    }
    v[0] = n;
    v[1] = tsize;
    v[2] = start;
}

rt_tensor *rt_token_batch(rt_ctx *ctx, const char *path, uint64_t seed, int64_t vocab, const rt_layout *l)
{
    RT_CHECK(ctx, l->ndim == 2, "token_batch '%s': the batch is [B, W], not %d dims", path, l->ndim);
    rt_kspan ks = rt_kernel_begin(ctx);
    int64_t w = l->global[1];
    char err[MSG] = "";
    long long v[3] = {0, 0, 0};
    if (ctx->rank == 0)
        token_header(path, w, v, err);
    rt_io_verdict(ctx, err);
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Bcast(v, 3, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
    long long n = v[0], tsize = v[1], start = v[2];
    /* the windows' starts: uniform(f64[B], seed) on [0, n - W) at the
     * global rows of this block, drawn here on the host with philox.h's
     * generator (random.c's and the CUDA target's: the same bits), so a
     * device target neither waits for the device nor stages through the
     * pinned buffer; the batch goes up as one copy (rt_from_data) */
    int64_t nloc = l->local[0] * l->local[1];
    int32_t *out = malloc(nloc > 0 ? (size_t)nloc * sizeof *out : 1);
    RT_CHECK(ctx, out != NULL, "token_batch '%s': out of memory for %lld tokens", path, (long long)nloc);
    const char *bad = NULL;
    char badmsg[MSG];
    if (nloc > 0) {
        int fd = open(path, O_RDONLY);
        RT_CHECK(ctx, fd >= 0, "token file '%s': cannot open: %s (on rank %d)", path, strerror(errno), ctx->rank);
        size_t len = (size_t)(start + n * tsize);
        const unsigned char *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        RT_CHECK(ctx, map != MAP_FAILED, "token file '%s': cannot map: %s", path, strerror(errno));
        close(fd);
        for (int64_t r = 0; r < l->local[0]; r++) {
            uint32_t u[4];
            rt_philox_(seed, (uint64_t)(l->offset[0] + r), 1, u);   /* uniform's stream 1 */
            double first = 0.0 + (double)(n - w) * rt_philox_unit_(u[0], u[1]);   /* lo + (hi - lo) u */
            int64_t o = (int64_t)first + l->offset[1];
            for (int64_t c = 0; c < l->local[1]; c++) {
                const unsigned char *p = map + start + (o + c) * tsize;
                uint32_t tok;
                if (tsize == 2) {
                    uint16_t x;
                    memcpy(&x, p, 2);
                    tok = x;
                } else {
                    memcpy(&tok, p, 4);
                }
                if ((vocab > 0 && (int64_t)tok >= vocab) || tok > INT32_MAX) {
                    if (!bad) {
                        snprintf(badmsg, sizeof badmsg, "token file '%s': token %u at position %lld is not below "
                                 "the vocabulary's %lld", path, tok, (long long)(o + c), (long long)vocab);
                        bad = badmsg;
                    }
                    tok = 0;
                }
                out[r * l->local[1] + c] = (int32_t)tok;
            }
        }
        munmap((void *)map, len);
    }
    rt_io_agree(ctx, bad);
    rt_tensor *t = rt_from_data(ctx, RT_I32, 2, l->local, out);
    free(out);
    rt_kernel_end(ctx, &ks, RT_K_IO, "token_batch");
    return t;
}
