/* Every argument check of the runtime's ops, failed on purpose: each case
 * prints "NAME: MESSAGE" (rank 0), the message caught by the error hook.
 * Built against libspmdrt and libspmdrt_cudasim (gpu/errors_sim): both
 * targets must print the same lines, since a program stopped by a bad
 * argument says the same on either (the checks are runtime/checks.c's and
 * comm.c's, one for every target). A case that does not fail prints
 * "NAME: no error" and the run exits 1.
 *   errors     (under mpirun -np 2: the collectives' group-size checks) */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "spmdrt.h"

static rt_ctx *C;
static jmp_buf jmp;
static char msg[1024];
static int cases, missing;

static void on_error(void *user, const char *m)
{
    (void)user;
    snprintf(msg, sizeof msg, "%s", m);
    longjmp(jmp, 1);
}

#define SH(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

static rt_tensor *f32(int ndim, const int64_t *shape) { return rt_zeros(C, RT_F32, ndim, shape); }
static rt_tensor *i32(int ndim, const int64_t *shape, double v) { return rt_full(C, RT_I32, ndim, shape, v); }

/* runs stmt, which must fail (the tensors it made leak: a failure stops a
 * program) */
#define FAILS(name, stmt)                                                     \
    do {                                                                      \
        msg[0] = 0;                                                           \
        cases++;                                                              \
        if (setjmp(jmp) == 0) {                                               \
            stmt;                                                             \
            missing++;                                                        \
            snprintf(msg, sizeof msg, "no error");                            \
        }                                                                     \
        if (rt_rank(C) == 0)                                                  \
            printf("%s: %s\n", name, msg);                                    \
    } while (0)

int main(int argc, char **argv)
{
    C = rt_init(&argc, &argv, 1, (const char *const[]){"x"}, (const int[]){-1});
    rt_set_error_hook(C, on_error, NULL);
    rt_axes ax = rt_axes_parse(C, "x");
    rt_tensor *x23 = f32(SH(2, 3)), *x3 = f32(SH(3)), *x43 = f32(SH(4, 3));

    /* shapes */
    FAILS("reshape -1s", rt_reshape(C, x23, 2, (int64_t[]){-1, -1}));
    FAILS("reshape size", rt_reshape(C, x23, 2, (int64_t[]){4, 2}));
    FAILS("permute repeated", rt_permute(C, x23, (const int[]){0, 0}));
    FAILS("transpose dim", rt_transpose(C, x23, 0, 2));
    FAILS("concat none", rt_concat(C, 0, (const rt_tensor *const[]){x23}, 0));
    FAILS("concat rank", rt_concat(C, 2, (const rt_tensor *const[]){x23, x3}, 0));
    FAILS("concat size", rt_concat(C, 2, (const rt_tensor *const[]){x23, x43}, 1));
    FAILS("slice range", rt_slice(C, x23, 1, 2, 4));
    FAILS("slice_bwd fit", rt_slice_bwd(C, x23, SH(4, 3), 0, 3));
    FAILS("expand dims", rt_expand(C, x23, SH(3)));
    FAILS("expand size", rt_expand(C, x23, SH(2, 4)));
    FAILS("index 0-d", rt_index(C, f32(0, (int64_t[]){1}), 0));
    FAILS("index range", rt_index(C, x23, 2));
    FAILS("add_ shapes", rt_add_(C, f32(SH(2, 3)), x43));
    FAILS("index_add_ rank", rt_index_add_(C, f32(SH(2, 3)), 0, x23));
    FAILS("index_add_ index", rt_index_add_(C, f32(SH(2, 3)), 2, x3));
    FAILS("index_add_ shape", rt_index_add_(C, f32(SH(2, 3)), 0, f32(SH(4))));

    /* elementwise, reductions */
    FAILS("binary broadcast", rt_binary(C, RT_ADD, x23, x43));
    FAILS("sum dim", rt_sum(C, x23, 2, false));
    FAILS("amax empty dim", rt_amax(C, f32(SH(2, 0)), 1, false));
    FAILS("mean i32", rt_mean(C, i32(SH(2), 1), 0, false));
    FAILS("sum_bwd gradient", rt_sum_bwd(C, x23, 1, x23));
    FAILS("sum_to_shape dims", rt_sum_to_shape(C, x3, 2, (int64_t[]){2, 3}));
    FAILS("sum_to_shape dim", rt_sum_to_shape(C, x23, 1, (int64_t[]){2}));

    /* selection */
    FAILS("where dtypes", rt_where(C, x23, x23, rt_zeros(C, RT_F64, SH(2, 3))));
    FAILS("where broadcast", rt_where(C, x23, x23, x43));
    FAILS("take_along_dim dtype", rt_take_along_dim(C, x23, x23, 1));
    FAILS("take_along_dim dims", rt_take_along_dim(C, x23, i32(SH(2), 0), 1));
    FAILS("take_along_dim broadcast", rt_take_along_dim(C, x23, i32(SH(4, 1), 0), 1));
    /* checked on the device on the CUDA target: reported at the next
     * synchronisation (the item) */
    FAILS("take_along_dim index", rt_item(C, rt_sum_all(C, rt_take_along_dim(C, x23, i32(SH(2, 1), 3), 1))));
    FAILS("take_along_dim dim", rt_take_along_dim(C, x23, i32(SH(2, 1), 0), -3));
    FAILS("take_along_dim_bwd gradient",
          rt_take_along_dim_bwd(C, i32(SH(2, 1), 0), x23, SH(2, 3), 1));

    /* neural-network ops */
    FAILS("softmax i32", rt_softmax(C, i32(SH(2, 3), 0), -1));
    FAILS("softmax dim", rt_softmax(C, x23, 2));
    FAILS("softmax_bwd gradient", rt_softmax_bwd(C, x23, x43, -1));
    FAILS("log_softmax_bwd gradient", rt_log_softmax_bwd(C, x23, rt_zeros(C, RT_F64, SH(2, 3)), -1));
    FAILS("layer_norm weight", rt_layer_norm(C, x23, f32(SH(2)), NULL, 1e-5));
    FAILS("layer_norm bias", rt_layer_norm(C, x23, x3, rt_zeros(C, RT_F64, SH(3)), 1e-5));
    FAILS("rms_norm 0-d", rt_rms_norm(C, f32(0, (int64_t[]){1}), NULL, 1e-5));
    rt_tensor *dx, *dw, *db;
    FAILS("layer_norm_bwd gradient", rt_layer_norm_bwd(C, x23, x3, 1e-5, x43, &dx, &dw, &db));
    FAILS("cross_entropy shapes", rt_cross_entropy(C, x23, i32(SH(3), 0)));
    FAILS("cross_entropy targets dtype", rt_cross_entropy(C, x23, f32(SH(2))));
    /* (the CUDA target checks ids and targets on the device: the message
     * comes at the next synchronisation, here rt_item's) */
    FAILS("cross_entropy target", rt_item(C, rt_cross_entropy(C, x23, i32(SH(2), 3))));
    FAILS("cross_entropy_bwd gradient",
          rt_cross_entropy_reduce_bwd(C, x23, i32(SH(2), 1), x3, RT_CE_NONE));
    FAILS("embedding table", rt_embedding(C, x3, i32(SH(2), 0)));
    FAILS("embedding ids dtype", rt_embedding(C, x43, x3));
    FAILS("embedding id", rt_item(C, rt_sum_all(C, rt_embedding(C, x43, i32(SH(2), 4)))));
    FAILS("embedding_bwd gradient", rt_embedding_bwd(C, i32(SH(2), 1), x3, 4));

    /* collectives (2 ranks: a group of 2) */
    FAILS("all_reduce avg i32", rt_all_reduce(C, i32(SH(2), 0), ax, RT_RED_AVG));
    FAILS("all_gather dim", rt_all_gather(C, x23, ax, 2));
    FAILS("reduce_scatter V", rt_reduce_scatter(C, x3, ax, RT_STACK, RT_RED_SUM));
    /* (a dim the group does not divide is split as torch.chunk does, SPEC
     * 4: reduce_scatter and convert R->S(i) of 3 columns on 2 ranks are
     * legal; a block that is not the split of the extent given is not) */
    FAILS("all_gather block", rt_all_gather_to(C, x23, ax, 1, 9));
    FAILS("all_to_all block", rt_all_to_all_to(C, x23, ax, 1, 0, 8));
    FAILS("convert block", rt_convert_to(C, x23, ax, RT_V, RT_P, 0, 7));
    FAILS("reduce_scatter op", rt_reduce_scatter(C, x23, ax, 0, RT_RED_MAX));
    FAILS("reduce_scatter avg i32", rt_reduce_scatter(C, i32(SH(2), 0), ax, 0, RT_RED_AVG));
    FAILS("all_to_all forms", rt_all_to_all(C, x23, ax, RT_STACK, 0));
    FAILS("all_to_all V", rt_all_to_all(C, x3, ax, RT_STACK, RT_STACK));
    FAILS("all_to_all S", rt_all_to_all(C, x23, ax, 0, 1));
    FAILS("convert V", rt_convert(C, x3, ax, RT_R, RT_V, RT_STACK));
    FAILS("convert dim", rt_convert(C, x23, ax, RT_R, RT_V, 5));

    rt_set_error_hook(C, NULL, NULL);
    if (rt_rank(C) == 0)
        printf("%d cases failed as they should, %d did not\n", cases - missing, missing);
    rt_finalize(C);
    return missing ? 1 : 0;
}
