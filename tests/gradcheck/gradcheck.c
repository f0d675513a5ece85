/* gradcheck.c: checks every export fn of a generated program: NAME_vjp
 * against central finite differences of NAME, on the mesh the program is
 * run with.  Compiled with -include of the program's generated header.
 *
 * The denotation of the scalar result is its value summed over the axes on
 * which it is P.  A parameter's gradient is compared element by element in
 * global indices: the owners of an element (the ranks whose block holds
 * it) perturb it together, and the analytic value is the sum of the owners'
 * local gradients over the axes on which the parameter is R (its gradient
 * is P there) and one copy on the axes on which it is I.
 *
 * With SPMD_GRADCHECK_DUMP=FILE it checks nothing: rank 0 writes each export
 * fn's value and its gradients (every element up to 4096 per argument, in
 * global indices) to FILE, for run_bf16.sh to compare a bf16 program with
 * its f64 twin. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmdrt.h"

enum { SAMPLES = 10 };

static double denotation(rt_ctx *ctx, const spmd_export_arg *res, const rt_tensor *out) {
  double v = rt_item(ctx, out), sum = 0;
  /* every rank contributes v / (copies of it): sum over P axes only */
  double copies = 1;
  for (int a = 0; a < rt_naxes(ctx); a++)
    if (res->ltype[a] != RT_P)
      copies *= rt_axis_size(ctx, a);
  double mine = v / copies;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

static double eval(rt_ctx *ctx, const spmd_export_info *info, rt_tensor **args) {
  rt_tensor *out = NULL;
  info->fn(ctx, (const rt_tensor *const *)args, &out);
  double d = denotation(ctx, &info->result, out);
  rt_free(ctx, out);
  return d;
}

/* The local flat index of global element g of an argument, or -1. */
static int64_t local_index(const rt_layout *l, const int64_t *g) {
  int64_t idx = 0;
  for (int d = 0; d < l->ndim; d++) {
    if (g[d] < l->offset[d] || g[d] >= l->offset[d] + l->local[d])
      return -1;
    idx = idx * l->local[d] + (g[d] - l->offset[d]);
  }
  return idx;
}

/* dump: write (rank 0, to out) instead of checking */
static int check_fn(rt_ctx *ctx, const spmd_export_info *info, bool dump, FILE *out) {
  size_t n = info->nargs > 0 ? (size_t)info->nargs : 1;
  rt_tensor **args = calloc(n, sizeof *args), **grads = calloc(n, sizeof *grads);
  rt_layout *lay = calloc(n, sizeof *lay);
  if (!args || !grads || !lay) {
    fprintf(stderr, "gradcheck: out of memory\n");
    exit(1);
  }
  for (int i = 0; i < info->nargs; i++) {
    const spmd_export_arg *a = &info->args[i];
    lay[i] = rt_layout_of(ctx, a->name, a->ndim, a->global, a->dim_axes);
    if (a->dtype == RT_I32) { /* ids and class targets: 0 or 1 */
      rt_tensor *u = rt_uniform(ctx, RT_F64, &lay[i], 100 + (uint64_t)i, 0.0, 1.999);
      rt_tensor *f = rt_unary(ctx, RT_ABS, u);
      args[i] = rt_astype(ctx, f, RT_I32);
      rt_free(ctx, u);
      rt_free(ctx, f);
    } else {
      args[i] = rt_uniform(ctx, a->dtype, &lay[i], 100 + (uint64_t)i, -1.0, 1.0);
    }
  }
  rt_tensor *dout = rt_scalar(ctx, info->result.dtype, 1.0);
  info->vjp(ctx, (const rt_tensor *const *)args, dout, grads);
  if (dump) {
    double v = eval(ctx, info, args);
    if (rt_rank(ctx) == 0)
      fprintf(out, "value %s %.17g\n", info->name, v);
  }
  int fails = 0, checked = 0;
  double worst = 0;
  for (int i = 0; i < info->nargs; i++) {
    const spmd_export_arg *a = &info->args[i];
    if (!a->differentiable)
      continue;
    int64_t numel = 1;
    for (int d = 0; d < a->ndim; d++)
      numel *= a->global[d];
    double replicas = 1; /* copies of the gradient on I axes */
    for (int x = 0; x < rt_naxes(ctx); x++) {
      bool shards = false;
      for (int d = 0; d < a->ndim; d++)
        for (int k = 0; k < a->dim_axes[d].n; k++)
          shards |= a->dim_axes[d].idx[k] == x;
      if (!shards && a->ltype[x] == RT_I)
        replicas *= rt_axis_size(ctx, x);
    }
    int64_t nsamples = dump ? (numel < 4096 ? numel : 4096) : SAMPLES;
    for (int64_t s = 0; s < nsamples && s < numel; s++) {
      int64_t flat = numel <= nsamples ? s : (s * 7919) % numel, g[RT_MAX_DIMS], rem = flat;
      for (int d = a->ndim - 1; d >= 0; d--) {
        g[d] = rem % a->global[d];
        rem /= a->global[d];
      }
      int64_t li = local_index(&lay[i], g);
      if (dump) { /* the analytic gradient only */
        double mine = li >= 0 && grads[i] ? rt_get(grads[i], li) : 0, an = 0;
        MPI_Allreduce(&mine, &an, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rt_rank(ctx) == 0)
          fprintf(out, "grad %s %s %lld %.17g\n", info->name, a->name, (long long)flat, an / replicas);
        checked++;
        continue;
      }
      double h = 1e-5, x0 = li >= 0 ? rt_get(args[i], li) : 0;
      if (li >= 0)
        rt_set(args[i], li, x0 + h);
      double lp = eval(ctx, info, args);
      if (li >= 0)
        rt_set(args[i], li, x0 - h);
      double lm = eval(ctx, info, args);
      if (li >= 0)
        rt_set(args[i], li, x0);
      double fd = (lp - lm) / (2 * h);
      double mine = li >= 0 && grads[i] ? rt_get(grads[i], li) : 0, an = 0;
      MPI_Allreduce(&mine, &an, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      an /= replicas;
      double err = fabs(fd - an), tol = 1e-6 + 1e-5 * fmax(fabs(fd), fabs(an));
      worst = fmax(worst, err / tol);
      checked++;
      if (err > tol) {
        fails++;
        if (rt_rank(ctx) == 0 && fails <= 5)
          printf("FAIL %s: d/d%s[%lld] finite difference %.10g, gradient %.10g\n", info->name, a->name,
                 (long long)flat, fd, an);
      }
    }
  }
  if (rt_rank(ctx) == 0 && dump)
    printf("dumped %s: value and %d derivatives\n", info->name, checked);
  else if (rt_rank(ctx) == 0)
    printf("%s %s: %d derivatives, worst error %.3g of tolerance\n", fails ? "FAIL" : "ok", info->name, checked, worst);
  for (int i = 0; i < info->nargs; i++) {
    rt_free(ctx, args[i]);
    rt_free(ctx, grads[i]);
  }
  rt_free(ctx, dout);
  free(args);
  free(grads);
  free(lay);
  return fails;
}

int main(int argc, char **argv) {
  rt_ctx *ctx = rt_init(&argc, &argv, spmd_mesh_naxes, spmd_mesh_names, spmd_mesh_sizes);
  int fails = 0;
  const char *dump_path = getenv("SPMD_GRADCHECK_DUMP");
  FILE *dump = NULL;
  if (dump_path && *dump_path && rt_rank(ctx) == 0) {
    dump = fopen(dump_path, "w");
    if (!dump) {
      perror(dump_path);
      return 1;
    }
  }
  int dumping = dump_path && *dump_path;
  for (int i = 0; spmd_exports[i]; i++)
    if (spmd_exports[i]->vjp) /* a tuple or record result has none */
      fails += check_fn(ctx, spmd_exports[i], dumping, dump);
  if (dump)
    fclose(dump);
  fflush(stdout);
  rt_finalize(ctx);
  return fails ? 1 : 0;
}
