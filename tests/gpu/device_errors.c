/* An id or target out of range found on the device (CUDA target: a check
 * kernel writes a device error record, read at the next synchronisation)
 * stops every rank with the CPU target's message, the op and the .spmd line
 * given by rt_at; the op itself does not wait for the device.
 *   device_errors CASE   (under mpirun; CASE: ce, ce_bwd, embedding,
 *                         embedding_bwd, take: take_along_dim's index,
 *                         first: two bad ops, the first
 *                         one's message; ce_vp, ce_vp_bwd: the
 *                         vocabulary-parallel loss, 5 classes a rank of 5
 *                         per rank, the message naming all of them)
 * Each case prints "after the op" on stderr once the bad op has returned,
 * then reads a value (a synchronisation); it exits 0 only if no error
 * stopped it, which the tests count as a failure. */
#include <stdio.h>
#include <string.h>

#include "spmdrt.h"

int main(int argc, char **argv)
{
    rt_ctx *C = rt_init(&argc, &argv, 1, (const char *const[]){"x"}, (const int[]){-1});
    if (argc != 2) {
        fprintf(stderr, "usage: device_errors CASE\n");
        return 2;
    }
    const char *c = argv[1];
    float lv[15];
    for (int i = 0; i < 15; i++)
        lv[i] = (float)(i % 4) * 0.5f;
    int32_t tv[3] = {1, -100, 7}, iv[4] = {2, 0, 9, 1};
    rt_tensor *logits = rt_from_data(C, RT_F32, 2, (int64_t[]){3, 5}, lv);
    rt_tensor *t = rt_from_data(C, RT_I32, 1, (int64_t[]){3}, tv);
    rt_tensor *ids = rt_from_data(C, RT_I32, 2, (int64_t[]){2, 2}, iv);
    rt_tensor *table = rt_from_data(C, RT_F32, 2, (int64_t[]){3, 5}, lv);
    rt_tensor *dy = rt_scalar(C, RT_F32, 1.0), *edy = rt_from_data(C, RT_F32, 3, (int64_t[]){2, 2, 3}, lv);
    rt_tensor *r = NULL;
    if (strcmp(c, "ce") == 0) {
        rt_at(C, "bad.spmd:7");
        r = rt_cross_entropy(C, logits, t);
    } else if (strcmp(c, "ce_bwd") == 0) {
        rt_at(C, "bad.spmd:8");
        r = rt_cross_entropy_bwd(C, logits, t, dy);
    } else if (strcmp(c, "embedding") == 0) {
        rt_at(C, "bad.spmd:3");
        r = rt_embedding(C, table, ids);
    } else if (strcmp(c, "embedding_bwd") == 0) {
        rt_at(C, "bad.spmd:4");
        r = rt_embedding_bwd(C, ids, edy, 3);
    } else if (strcmp(c, "take") == 0) {
        int32_t kv[3] = {1, 6, 2};
        rt_tensor *k = rt_from_data(C, RT_I32, 2, (int64_t[]){3, 1}, kv);
        rt_at(C, "bad.spmd:5");
        r = rt_take_along_dim(C, logits, k, 1);
    } else if (strcmp(c, "ce_vp") == 0 || strcmp(c, "ce_vp_bwd") == 0) {
        int n = rt_group_size(C, RT_AXES(0));
        rt_axes axes[2] = {RT_NO_AXES, RT_AXES(0)};
        rt_layout l = rt_layout_of(C, "logits", 2, (int64_t[]){3, 5 * (int64_t)n}, axes);
        int32_t vv[3] = {1, -100, 5 * n + 3};
        rt_tensor *tvp = rt_from_data(C, RT_I32, 1, (int64_t[]){3}, vv);
        if (strcmp(c, "ce_vp") == 0) {
            rt_at(C, "bad.spmd:9");
            r = rt_cross_entropy_vp(C, logits, tvp, RT_CE_MEAN, &l, RT_AXES(0), NULL);
        } else {
            double z[3] = {0, 0, 0};
            rt_tensor *lse = rt_from_data(C, RT_F64, 1, (int64_t[]){3}, z);
            rt_at(C, "bad.spmd:10");
            r = rt_cross_entropy_vp_bwd(C, logits, tvp, lse, dy, RT_CE_MEAN, &l);
        }
    } else if (strcmp(c, "first") == 0) {
        rt_at(C, "bad.spmd:3");
        rt_free(C, rt_embedding(C, table, ids));
        rt_at(C, "bad.spmd:7");
        r = rt_cross_entropy(C, logits, t);
    } else {
        fprintf(stderr, "device_errors: unknown case %s\n", c);
        return 2;
    }
    rt_at(C, NULL);
    fprintf(stderr, "after the op\n");
    fflush(stderr);
    rt_tensor *s = rt_sum_all(C, r);
    fprintf(stderr, "no error: %g\n", rt_item(C, s));
    return rt_finalize(C);
}
