/* tuple_host.c: a C host over an export fn whose result is a tuple of a
 * scalar and two records (mlp_step.spmd's `step`): its description
 * (nresults, results[] with their paths, no vjp) and its two entry points,
 * the direct one and the array form, giving the same bits.  Compiled with
 * -include of the generated header. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmdrt.h"

static int fails;
#define EXPECT(c)                                                   \
  do {                                                              \
    if (!(c)) {                                                     \
      fprintf(stderr, "tuple_host: %s:%d: %s\n", __FILE__, __LINE__, #c); \
      fails++;                                                      \
    }                                                               \
  } while (0)

int main(int argc, char **argv) {
  rt_ctx *ctx = rt_init(&argc, &argv, spmd_mesh_naxes, spmd_mesh_names, spmd_mesh_sizes);
  const spmd_export_info *info = &step_info;
  EXPECT(spmd_exports[0] == &step_info && spmd_exports[1] == &eval_loss_info && spmd_exports[2] == &init_info);
  EXPECT(info->nargs == 6 && info->nresults == 5 && info->vjp == NULL);
  EXPECT(eval_loss_info.nresults == 1 && eval_loss_info.vjp != NULL);
  static const char *const paths[] = {"0", "1.w1", "1.w2", "2.w1", "2.w2"};
  for (int r = 0; r < info->nresults; r++)
    EXPECT(strcmp(info->results[r].path, paths[r]) == 0);
  EXPECT(strcmp(info->args[2].path, "p.w1") == 0 && strcmp(info->args[5].name, "buf_w2") == 0);
  EXPECT(info->result.ndim == 0 && info->results[1].global[1] == 64);
  rt_tensor *args[6], *out[5] = {0}, *direct[5] = {0};
  for (int i = 0; i < info->nargs; i++) {
    const spmd_export_arg *a = &info->args[i];
    rt_layout l = rt_layout_of(ctx, a->name, a->ndim, a->global, a->dim_axes);
    args[i] = rt_uniform(ctx, a->dtype, &l, 7 + (uint64_t)i, -0.5, 0.5);
  }
  info->fn(ctx, (const rt_tensor *const *)args, out);
  step(ctx, args[0], args[1], args[2], args[3], args[4], args[5], &direct[0], &direct[1], &direct[2], &direct[3],
       &direct[4]);
  for (int r = 0; r < info->nresults; r++) {
    const spmd_export_arg *res = &info->results[r];
    rt_layout l = rt_layout_of(ctx, res->name, res->ndim, res->global, res->dim_axes);
    EXPECT(out[r] && direct[r] && out[r]->ndim == res->ndim);
    for (int d = 0; out[r] && d < res->ndim; d++)
      EXPECT(out[r]->shape[d] == l.local[d]);
    EXPECT(out[r] && direct[r] && memcmp(out[r]->data, direct[r]->data, (size_t)out[r]->numel * rt_dtype_size(out[r]->dtype)) == 0);
  }
  if (rt_rank(ctx) == 0)
    printf("%s step: %d results, loss %.6g\n", fails ? "FAIL" : "ok", info->nresults, rt_item(ctx, out[0]));
  for (int i = 0; i < info->nargs; i++)
    rt_free(ctx, args[i]);
  for (int r = 0; r < info->nresults; r++) {
    rt_free(ctx, out[r]);
    rt_free(ctx, direct[r]);
  }
  rt_finalize(ctx);
  return fails ? 1 : 0;
}
