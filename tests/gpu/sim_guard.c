/* The simulation build keeps device memory unreadable by the host: a read
 * of x->data outside a (simulated) kernel or runtime copy must crash, as it
 * would fault on a GPU; the runtime's own copies (rt_item) still work. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spmdrt.h"

int main(void)
{
    rt_ctx *ctx = rt_ctx_serial();
    float v[4] = {1, 2, 3, 4};
    rt_tensor *x = rt_from_data(ctx, RT_F32, 1, (int64_t[]){4}, v);
    rt_tensor *s = rt_sum_all(ctx, x);
    if (rt_item(ctx, s) != 10.0) {
        fprintf(stderr, "FAIL: sum through the runtime is %g, not 10\n", rt_item(ctx, s));
        return 1;
    }
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) { /* the host reads device memory */
        volatile float f = ((const float *)x->data)[0];
        (void)f;
        _exit(0);
    }
    int st = 0;
    waitpid(p, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        fprintf(stderr, "FAIL: a host read of simulated device memory did not crash\n");
        return 1;
    }
    printf("ok: a host read of device memory crashed (%s %d)\n",
           WIFSIGNALED(st) ? "signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    rt_free(ctx, s);
    rt_free(ctx, x);
    rt_ctx_free_serial(ctx);
    return 0;
}
