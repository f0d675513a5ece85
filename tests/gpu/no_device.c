/* libspmdrt_cuda on a machine without a GPU: rt_init stops with
 * "spmd: error: [rank 0] no CUDA device" (SPEC 14). */
#include "spmdrt.h"

int main(int argc, char **argv)
{
    rt_ctx *ctx = rt_init(&argc, &argv, 1, (const char *const[]){"x"}, (const int[]){-1});
    return rt_finalize(ctx);
}
