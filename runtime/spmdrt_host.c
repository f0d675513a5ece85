/* spmdrt_host.c: the flat C interface of a library `spmdc --shared` builds,
 * for hosts that cannot read C headers (the Python module, python/spmdc;
 * docs/python.md).  spmdc compiles it into every such library with
 * -include of the program's generated header, so it reads the program's
 * own description of its export fns (spmd_exports[]) and calls them
 * through their array-form entry points.
 *
 * One context per library: spmd_host_open gives the mesh once; the world is
 * MPI_COMM_WORLD.  MPI is initialised here only if nobody has (mpi4py under
 * `mpirun python3` has), and then finalised by spmd_host_close; an MPI the
 * host initialised is never finalised here.  The malloc policy of
 * standalone programs is not set (rt_init_lib).
 *
 * Errors.  While a call runs, the runtime's error hook longjmps back here
 * with its message.  The failing rank then waits, up to SPMD_HOST_ERROR_WAIT
 * seconds (default 10), for every other rank to fail too (a non-blocking
 * barrier on a communicator of its own): if all did, as they do in a check
 * every rank makes alike (a bad mesh, a checkpoint that is not there), each
 * returns the error and the host raises it; if some did not, they are
 * stuck in a collective that will never complete, so the failing rank
 * prints the message and ends the job with MPI_Abort, as a standalone
 * program does.  spmd_host_agree does the same for the host's own checks
 * of the arguments, at once: an argument one rank alone gets wrong raises
 * on every rank, with that rank's message. */
#include <mpi.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spmdrt.h"

#define HOST_API __attribute__((visibility("default")))

#ifndef SPMD_HOST_TARGET
#define SPMD_HOST_TARGET "cpu"
#endif

static rt_ctx *ctx;
static bool own_mpi;                   /* MPI_Init was ours: finalise it at close */
static MPI_Comm errcomm = MPI_COMM_NULL; /* the error agreement's barrier */
static jmp_buf *on_error;              /* the running call's, or NULL */
static char message[1024];

static void hook(void *user, const char *msg) {
  (void)user;
  jmp_buf *j = on_error;
  if (!j) /* outside a call: the runtime stops every rank */
    return;
  on_error = NULL;
  snprintf(message, sizeof message, "%s", msg);
  longjmp(*j, 1);
}

static int rank_of_world(void) {
  int r = 0, inited = 0;
  MPI_Initialized(&inited);
  if (inited)
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

static _Noreturn void stop(const char *msg, const char *why) {
  fprintf(stderr, "spmd: error: [rank %d] %s%s\n", rank_of_world(), msg, why);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

/* After an error on this rank: true when every rank failed (the caller
 * returns the error), else the job ends here. */
static void agree_on_failure(void) {
  int world = 1;
  if (errcomm == MPI_COMM_NULL || MPI_Comm_size(errcomm, &world) != MPI_SUCCESS)
    stop(message, "");
  if (world == 1)
    return;
  double wait = 10;
  const char *env = getenv("SPMD_HOST_ERROR_WAIT");
  if (env && *env)
    wait = atof(env);
  MPI_Request req;
  if (MPI_Ibarrier(errcomm, &req) != MPI_SUCCESS)
    stop(message, "");
  struct timespec t0, now, nap = {0, 1000000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      stop(message, "");
    if (done)
      return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) > wait)
      stop(message, " (the other ranks did not fail alike: the job stops)");
    nanosleep(&nap, NULL);
  }
}

static int failed(char *err, size_t n) {
  agree_on_failure();
  if (err && n)
    snprintf(err, n, "%s", message);
  return 1;
}

/* runs body with the runtime's errors coming back here */
#define GUARDED(err, n, ...)             \
  do {                                   \
    jmp_buf jb_;                         \
    if (setjmp(jb_))                     \
      return failed((err), (n));         \
    on_error = &jb_;                     \
    __VA_ARGS__;                         \
    on_error = NULL;                     \
  } while (0)

/* ---- the description: JSON, built once */

static const char *const dtype_names[] = {[RT_F32] = "f32", [RT_F64] = "f64", [RT_I32] = "i32", [RT_BF16] = "bf16"};
static const char *const ltype_names[] = {[RT_R] = "R", [RT_I] = "I", [RT_V] = "V", [RT_P] = "P"};

static void put_arg(FILE *fp, const spmd_export_arg *a) {
  fprintf(fp, "{\"name\": \"%s\", \"path\": \"%s\", \"dtype\": \"%s\", \"shape\": [", a->name, a->path,
          dtype_names[a->dtype]);
  for (int d = 0; d < a->ndim; d++)
    fprintf(fp, "%s%lld", d ? ", " : "", (long long)a->global[d]);
  fputs("], \"dim_axes\": [", fp);
  for (int d = 0; d < a->ndim; d++) {
    fputs(d ? ", [" : "[", fp);
    for (int k = 0; k < a->dim_axes[d].n; k++)
      fprintf(fp, "%s%d", k ? ", " : "", a->dim_axes[d].idx[k]);
    fputs("]", fp);
  }
  fputs("], \"types\": [", fp);
  for (int x = 0; x < spmd_mesh_naxes; x++)
    fprintf(fp, "%s\"%s\"", x ? ", " : "", ltype_names[a->ltype[x]]);
  fprintf(fp, "], \"differentiable\": %s}", a->differentiable ? "true" : "false");
}

HOST_API const char *spmd_host_describe(void) {
  static char *text;
  static size_t len;
  if (text)
    return text;
  FILE *fp = open_memstream(&text, &len);
  if (!fp)
    return NULL;
  fprintf(fp, "{\"target\": \"%s\", \"mesh\": {\"names\": [", SPMD_HOST_TARGET);
  for (int a = 0; a < spmd_mesh_naxes; a++)
    fprintf(fp, "%s\"%s\"", a ? ", " : "", spmd_mesh_names[a]);
  fputs("], \"sizes\": [", fp);
  for (int a = 0; a < spmd_mesh_naxes; a++)
    fprintf(fp, "%s%d", a ? ", " : "", spmd_mesh_sizes[a]);
  fputs("]}, \"functions\": [", fp);
  for (int i = 0; spmd_exports[i]; i++) {
    const spmd_export_info *f = spmd_exports[i];
    fprintf(fp, "%s{\"name\": \"%s\", \"vjp\": %s, \"args\": [", i ? ", " : "", f->name, f->vjp ? "true" : "false");
    for (int k = 0; k < f->nargs; k++) {
      fputs(k ? ", " : "", fp);
      put_arg(fp, &f->args[k]);
    }
    fputs("], \"results\": [", fp);
    for (int k = 0; k < f->nresults; k++) {
      fputs(k ? ", " : "", fp);
      put_arg(fp, &f->results[k]);
    }
    fputs("]}", fp);
  }
  fputs("]}", fp);
  if (fclose(fp) != 0) {
    free(text);
    text = NULL;
  }
  return text;
}

/* ---- the context */

HOST_API int spmd_host_open(const char *mesh, char *err, size_t n) {
  if (ctx) {
    snprintf(err, n, "the library is open already (its mesh is given once)");
    return 1;
  }
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
      snprintf(err, n, "MPI_Init failed");
      return 1;
    }
    own_mpi = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (errcomm == MPI_COMM_NULL && MPI_Comm_dup(MPI_COMM_WORLD, &errcomm) != MPI_SUCCESS)
    stop("MPI_Comm_dup failed", "");
  rt_ctx *c = NULL;
  GUARDED(err, n, c = rt_init_lib(spmd_mesh_naxes, spmd_mesh_names, spmd_mesh_sizes, mesh, hook, NULL));
  ctx = c;
  return 0;
}

HOST_API int spmd_host_close(void) {
  if (!ctx)
    return 0;
  rt_finalize(ctx);
  ctx = NULL;
  if (errcomm != MPI_COMM_NULL)
    MPI_Comm_free(&errcomm);
  if (own_mpi)
    MPI_Finalize();
  own_mpi = false;
  return 0;
}

HOST_API int spmd_host_rank(void) { return ctx ? rt_rank(ctx) : 0; }
HOST_API int spmd_host_world(void) { return ctx ? rt_world_size(ctx) : 1; }

/* the mesh's sizes as run (sizes[naxes]) */
HOST_API void spmd_host_mesh(int *sizes) {
  for (int a = 0; a < spmd_mesh_naxes; a++)
    sizes[a] = ctx ? rt_axis_size(ctx, a) : spmd_mesh_sizes[a];
}

/* This rank's block of argument (is_result 0) or result i of fn. */
HOST_API int spmd_host_layout(int fn, int is_result, int i, int64_t *offset, int64_t *local, char *err, size_t n) {
  const spmd_export_info *f = spmd_exports[fn];
  const spmd_export_arg *a = is_result ? &f->results[i] : &f->args[i];
  rt_layout l;
  GUARDED(err, n, l = rt_layout_of(ctx, a->name, a->ndim, a->global, a->dim_axes));
  for (int d = 0; d < a->ndim; d++) {
    offset[d] = l.offset[d];
    local[d] = l.local[d];
  }
  return 0;
}

/* An argument check the host made on each rank: bad on this rank with msg.
 * Returns 1 on every rank when any rank was bad, with the message of the
 * first such rank in out. */
HOST_API int spmd_host_agree(int bad, const char *msg, char *out, size_t n) {
  int world = 1, rank = 0;
  if (errcomm == MPI_COMM_NULL || MPI_Comm_size(errcomm, &world) != MPI_SUCCESS || world == 1) {
    if (bad)
      snprintf(out, n, "%s", msg);
    return bad != 0;
  }
  MPI_Comm_rank(errcomm, &rank);
  int mine = bad ? rank : world, first = world;
  if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, errcomm) != MPI_SUCCESS)
    stop("MPI_Allreduce failed while checking the arguments", "");
  if (first == world)
    return 0;
  char buf[1024] = "";
  if (rank == first)
    snprintf(buf, sizeof buf, "%s", msg);
  if (MPI_Bcast(buf, (int)sizeof buf, MPI_CHAR, first, errcomm) != MPI_SUCCESS)
    stop("MPI_Bcast failed while checking the arguments", "");
  snprintf(out, n, "%s", buf);
  return 1;
}

/* ---- tensors: this rank's blocks, in host memory on the host's side */

HOST_API void *spmd_host_tensor(int dtype, int ndim, const int64_t *shape, const void *data) {
  return rt_from_host(ctx, (rt_dtype)dtype, ndim, shape, data);
}

HOST_API int spmd_host_tensor_shape(const void *t, int64_t *shape) {
  const rt_tensor *x = t;
  for (int d = 0; d < x->ndim; d++)
    shape[d] = x->shape[d];
  return x->ndim;
}

HOST_API int spmd_host_tensor_dtype(const void *t) { return (int)((const rt_tensor *)t)->dtype; }

HOST_API void spmd_host_read(const void *t, void *data) { rt_to_host(ctx, t, data); }

HOST_API void spmd_host_free(void *t) {
  if (ctx)
    rt_free(ctx, t);
}

/* ---- calls */

/* outs: nresults slots, filled with new tensors */
HOST_API int spmd_host_call(int fn, void *const *args, void **outs, char *err, size_t n) {
  const spmd_export_info *f = spmd_exports[fn];
  GUARDED(err, n, {
    f->fn(ctx, (const rt_tensor *const *)args, (rt_tensor **)outs);
    for (int r = 0; r < f->nresults; r++)
      rt_wait(ctx, outs[r]);
  });
  return 0;
}

/* grads: nargs slots, NULL for an argument without gradient */
HOST_API int spmd_host_vjp(int fn, void *const *args, const void *dout, void **grads, char *err, size_t n) {
  const spmd_export_info *f = spmd_exports[fn];
  if (!f->vjp) {
    snprintf(err, n, "export fn '%s' has no vjp (its result is a tuple or a record)", f->name);
    return 1;
  }
  GUARDED(err, n, f->vjp(ctx, (const rt_tensor *const *)args, dout, (rt_tensor **)grads));
  return 0;
}
