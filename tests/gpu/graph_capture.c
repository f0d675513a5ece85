/* Graph regions in the simulation build (runtime/graph.c, cuda/sim.cpp),
 * driven as generated code drives them (rt_region_begin .. rt_region_end):
 *   replay: a region y = 2 * x + 1 is run once (warm-up), captured, then
 *     replayed with a new x each iteration, which the replay copies into the
 *     captured input: the results are those of the eager runs, and the
 *     replays happen (rt_region_begin returns false from the third call on);
 *   frozen scalars: the same region with a host scalar that changes runs
 *     eagerly, with the same results;
 *   a wait for the device in a warm-up keeps the region eager;
 *   a synchronisation during a capture (the warm-up had none) stops the
 *     program with an error naming the region.
 * The CPU runtime never captures: linked with libspmdrt, every iteration is
 * eager (the "cpu" argument checks that). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmdrt.h"

static jmp_buf on_error;
static char error_msg[1024];

static void hook(void *user, const char *msg)
{
    (void)user;
    snprintf(error_msg, sizeof error_msg, "%s", msg);
    longjmp(on_error, 1);
}

/* y = s * x + 1 over x = [k, k+1, k+2, k+3]; sum(y) checked; returns
 * whether it was replayed */
static int step(rt_ctx *ctx, rt_graph_region **r, int k, double s, int sync_in_body, int *bad)
{
    float v[4] = {(float)k, (float)k + 1, (float)k + 2, (float)k + 3};
    rt_tensor *x = rt_from_data(ctx, RT_F32, 1, (int64_t[]){4}, v), *y = NULL;
    rt_tensor **in[] = {&x}, **dies[] = {&x};
    const uint64_t host[] = {rt_region_f(s)};
    int replayed = 0;
    if (rt_region_begin(ctx, r, "graph_capture.c:1-2", in, 1, dies, 1, host, 1, "s", NULL)) {
        rt_tensor *a = rt_binary_scalar(ctx, RT_MUL, x, s, false);
        rt_free(ctx, x);
        x = NULL;
        if (sync_in_body) { /* a copy to the host: waits for the device */
            rt_tensor *t = rt_sum_all(ctx, a);
            (void)rt_item(ctx, t);
            rt_free(ctx, t);
        }
        y = rt_binary_scalar(ctx, RT_ADD, a, 1.0, false);
        rt_free(ctx, a);
        rt_tensor *out[] = {y};
        rt_region_end(ctx, *r, out, 1);
    } else {
        replayed = 1;
        y = rt_region_out(ctx, *r, 0);
        if (x != NULL) {
            fprintf(stderr, "FAIL: a replay left the input that dies in the region set\n");
            *bad = 1;
        }
    }
    rt_tensor *sum = rt_sum_all(ctx, y);
    double want = s * (4.0 * k + 6.0) + 4.0, got = rt_item(ctx, sum);
    if (got != want) {
        fprintf(stderr, "FAIL: k=%d s=%g: sum(y) is %g, not %g (%s)\n", k, s, got, want,
                replayed ? "replayed" : "eager");
        *bad = 1;
    }
    rt_free(ctx, sum);
    rt_free(ctx, y);
    rt_free(ctx, x);
    return replayed;
}

int main(int argc, char **argv)
{
    int cpu = argc > 1 && !strcmp(argv[1], "cpu");
    rt_ctx *ctx = rt_ctx_serial();
    rt_set_error_hook(ctx, hook, NULL);
    int bad = 0;
    if (setjmp(on_error)) {
        fprintf(stderr, "FAIL: unexpected error: %s\n", error_msg);
        return 1;
    }
    /* replays */
    rt_graph_region *r = NULL;
    int replays = 0;
    for (int k = 0; k < 6; k++)
        replays += step(ctx, &r, k, 2.0, 0, &bad);
    int want = cpu ? 0 : 4;
    if (replays != want) {
        fprintf(stderr, "FAIL: %d of 6 iterations replayed, not %d\n", replays, want);
        bad = 1;
    }
    /* a host scalar that changes: eager after the capture */
    rt_graph_region *r2 = NULL;
    replays = 0;
    for (int k = 0; k < 5; k++)
        replays += step(ctx, &r2, k, 1.0 + k, 0, &bad);
    if (replays != 0) {
        fprintf(stderr, "FAIL: a region whose host scalar changed was replayed %d times\n", replays);
        bad = 1;
    }
    /* a wait for the device in the warm-up: eager for good */
    rt_graph_region *r3 = NULL;
    replays = 0;
    for (int k = 0; k < 4; k++)
        replays += step(ctx, &r3, k, 3.0, 1, &bad);
    if (replays != 0) {
        fprintf(stderr, "FAIL: a region that waits for the device was replayed %d times\n", replays);
        bad = 1;
    }
    if (!cpu) {
        /* a synchronisation in the capture only: an error naming the region */
        rt_graph_region *r4 = NULL;
        step(ctx, &r4, 0, 4.0, 0, &bad); /* the warm-up, without */
        if (setjmp(on_error) == 0) {
            step(ctx, &r4, 1, 4.0, 1, &bad); /* the capture, with */
            fprintf(stderr, "FAIL: a synchronisation during a capture did not stop the program\n");
            return 1;
        }
        if (!strstr(error_msg, "during the capture of graph region graph_capture.c:1-2")) {
            fprintf(stderr, "FAIL: the capture's error is '%s'\n", error_msg);
            return 1;
        }
        printf("ok: %s\n", error_msg);
        return bad; /* the runtime is mid-capture: not freed */
    }
    rt_ctx_free_serial(ctx);
    if (!bad)
        printf("ok: every iteration eager on the CPU runtime\n");
    return bad;
}
