/* comm_report.c: `spmdc --comm-report FILE`.  Walks every IR function that
 * main or an export fn reaches (every function of a library without
 * either), forward and generated backward, and prints each collective with
 * its location, direction, axes, what it does, the local shape and the bytes
 * each rank sends (redistribute.h's cost model) as a formula and its value
 * at the declared mesh sizes; then the total per call of each function and
 * of the program.  Loops multiply by their trip count when it is a
 * constant; both branches of an `if` are counted (an upper bound).  Steps of
 * a redistribute(x, T) also list their local converts and the plan note.
 * A collective that starts non-blocking (overlap.h) says where it is waited. */
#include <string.h>

#include "comm_report.h"
#include "overlap.h"
#include "redistribute.h"

typedef struct FnTotal {
  IrFn *f;
  CommCost cost;
  int state; /* 0 not computed, 1 computing, 2 done */
} FnTotal;

typedef struct Report {
  Compiler *c;
  IrProgram *p;
  const Mesh *m;  /* the program's mesh at the report's sizes (--mesh) */
  int uneven;     /* collectives listed whose blocks the mesh splits unevenly */
  FILE *out;
  FnTotal *fns;  /* reachable functions, in program order */
  int nfns, cap;
} Report;

static FnTotal *info(Report *R, IrFn *f) {
  for (int i = 0; i < R->nfns; i++)
    if (R->fns[i].f == f)
      return &R->fns[i];
  return NULL;
}

static void reach(Report *R, IrFn *f);

static void reach_block(Report *R, IrBlock *b) {
  for (IrInst *in = b->head; in; in = in->next) {
    if (in->callee)
      reach(R, in->callee);
    reach_block(R, &in->body);
    reach_block(R, &in->els);
  }
}

static void reach(Report *R, IrFn *f) {
  if (!f || info(R, f))
    return;
  ARENA_RESERVE(&R->c->arena, R->fns, R->nfns, R->cap, 16);
  R->fns[R->nfns++] = (FnTotal){.f = f};
  reach(R, f->exp_fwd);
  reach(R, f->exp_bwd);
  reach(R, f->vjp_fwd);
  reach(R, f->vjp_bwd);
  reach_block(R, &f->body);
}

static bool is_comm(IrOp op) { return ir_has(op, IRF_COMM); }

/* Whether the report lists this instruction on a line of its own. */
static bool listed(const IrInst *in) {
  return is_comm(in->op) || ((in->op == IR_CONVERT || in->op == IR_COPY) && in->redistribute);
}

static bool is_backward(const IrFn *f) { return f->role == IRFN_BACKWARD; }

static Type *vtype(IrFn *f, int v) { return v >= 0 && v < f->nvalues ? f->values[v].type : NULL; }

static Size group_of(const IrInst *in) {
  Size g = size_int(1);
  for (int i = 0; i < in->naxes; i++)
    g = size_mul(g, size_axis(in->axes[i]));
  return g;
}

/* Uneven shards (SPEC 4): a dim the mesh does not divide splits as
 * torch.chunk does, the first block (ceil at each axis, major to minor) the
 * largest.  The largest rank's local bytes of t over its equal blocks' at
 * the report's sizes; 0 when the blocks are equal or a size is unknown. */
static double uneven_ratio(Report *R, const Type *t) {
  if (t->local)
    return 0;
  double r = 1;
  bool any = false;
  for (int d = 0; d < t->ndim; d++) {
    long long n, group = 1, hi;
    if (t->spec[d][0] < 0 || !size_is_int(t->shape[d], &n) || n <= 0)
      continue;
    hi = n;
    for (int k = 0; k < MAX_MESH_AXES && t->spec[d][k] >= 0; k++) {
      long long a = R->m->axes[t->spec[d][k]].size;
      if (a <= 0)
        return 0;
      group *= a;
      hi = (hi + a - 1) / a;
    }
    if (n % group == 0)
      continue;
    r *= (double)hi * (double)group / (double)n;
    any = true;
  }
  return any ? r : 0;
}

/* The bytes of one collective, added to cost (times mult). */
static void price(Report *R, IrFn *f, IrInst *in, CommCost *cost, double mult) {
  if (!is_comm(in->op))
    return;
  Type *x = vtype(f, in->args[0]), *y = in->ndst ? vtype(f, in->dst[0]) : NULL;
  Type *t = in->op == IR_ALL_GATHER && y ? y : x;
  if (!t || t->kind != TY_TENSOR)
    return;
  if (in->op == IR_CROSS_ENTROPY_VP) { /* all-reduces of 3 f64 per row: the maximum, the sum, the target's logit */
    t = type_clone(R->c, t);
    t->dtype = DT_F64;
    t->shape[t->ndim - 1] = size_int(3);
    t->spec[t->ndim - 1][0] = -1;
    comm_cost_add(R->c, cost, 2 * mult, group_of(in), comm_local_bytes(t), comm_local_bytes_text(R->c, R->m, t));
    cost->t[cost->n - 1].uneven = uneven_ratio(R, t);
    return;
  }
  if (in->wire != DT_NONE && in->wire != t->dtype) { /* dtype=: the wire's bytes */
    t = type_clone(R->c, t);
    t->dtype = in->wire;
  }
  if (in->op == IR_PPERMUTE) /* the whole block to one other rank */
    comm_cost_add_p2p(R->c, cost, mult, group_of(in), comm_local_bytes(t), comm_local_bytes_text(R->c, R->m, t));
  else
    comm_cost_add(R->c, cost, (in->op == IR_ALL_REDUCE ? 2 : 1) * mult, group_of(in), comm_local_bytes(t),
                  comm_local_bytes_text(R->c, R->m, t));
  cost->t[cost->n - 1].uneven = uneven_ratio(R, t);
}

static void fn_total(Report *R, IrFn *f, CommCost *out);

static IrInst *find_def(IrBlock *b, int v) {
  for (IrInst *in = b->head; in; in = in->next) {
    for (int i = 0; i < in->ndst; i++)
      if (in->dst[i] == v)
        return in;
    IrInst *d = find_def(&in->body, v);
    if (!d)
      d = find_def(&in->els, v);
    if (d)
      return d;
  }
  return NULL;
}

/* The trip count of a loop of g whose bounds are constants, or -1. */
static long long const_trip(IrFn *g, IrInst *loop) {
  long long b[2];
  for (int i = 0; i < 2; i++) {
    IrInst *d = find_def(&g->body, loop->args[i]);
    if (!d || d->op != IR_HOST_CONST)
      return -1;
    b[i] = IR_I(d, VALUE);
  }
  return b[1] > b[0] ? b[1] - b[0] : 0;
}

static IrInst *find_loop(IrBlock *b, Span sp) {
  for (IrInst *in = b->head; in; in = in->next) {
    if (in->op == IR_FOR && in->span.file == sp.file && in->span.begin == sp.begin)
      return in;
    IrInst *l = find_loop(&in->body, sp);
    if (!l)
      l = find_loop(&in->els, sp);
    if (l)
      return l;
  }
  return NULL;
}

/* The trip count of a for loop whose bounds are constants, or -1.  A
 * backward loop takes its bounds from the tape: it runs as often as the
 * same loop of the forward, found by its span. */
static long long trip_count(Report *R, IrFn *f, IrInst *loop) {
  long long n = const_trip(f, loop);
  for (int i = 0; n < 0 && is_backward(f) && i < R->nfns; i++) {
    IrFn *g = R->fns[i].f;
    IrInst *l = g != f && g->fn == f->fn && !is_backward(g) ? find_loop(&g->body, loop->span) : NULL;
    if (l)
      n = const_trip(g, l);
  }
  return n;
}

static void call_cost(Report *R, IrInst *in, CommCost *cost, double mult) {
  if (!in->callee)
    return;
  CommCost sub = {0};
  fn_total(R, in->callee, &sub);
  comm_cost_addall(R->c, cost, &sub, mult);
}

static void block_total(Report *R, IrFn *f, IrBlock *b, CommCost *cost, double mult) {
  for (IrInst *in = b->head; in; in = in->next) {
    if (in->op == IR_FOR) {
      long long n = trip_count(R, f, in);
      block_total(R, f, &in->body, cost, mult * (double)(n >= 0 ? n : 1));
    } else if (in->op == IR_IF) {
      block_total(R, f, &in->body, cost, mult);
      block_total(R, f, &in->els, cost, mult);
    } else if (in->op == IR_CALL || in->op == IR_VJP_CALL) {
      call_cost(R, in, cost, mult);
    } else {
      price(R, f, in, cost, mult);
    }
  }
}

static void fn_total(Report *R, IrFn *f, CommCost *out) {
  FnTotal *fi = info(R, f);
  if (!fi || fi->state == 1)
    return; /* not reached, or recursive */
  if (fi->state == 0) {
    fi->state = 1;
    if (f->vjp_fwd) {
      fn_total(R, f->vjp_fwd, &fi->cost);
      fn_total(R, f->vjp_bwd, &fi->cost);
    }
    block_total(R, f, &f->body, &fi->cost, 1);
    fi->state = 2;
  }
  comm_cost_addall(R->c, out, &fi->cost, 1);
}

/* ---- printing */

static const char *where(Report *R, Span sp) {
  if (!sp.file)
    return "<generated>";
  int line, col;
  source_position(R->c, sp, &line, &col);
  const char *path = source_file(R->c, sp.file)->path;
  const char *lib = R->c->stdlib_dir;
  size_t n = lib ? strlen(lib) : 0;
  if (n && strncmp(path, lib, n) == 0 && path[n] == '/')
    path = arena_sprintf(&R->c->arena, "<stdlib>%s", path + n);
  return arena_sprintf(&R->c->arena, "%s:%d:%d", path, line, col);
}

static const char *axes_list(Report *R, const IrInst *in) {
  StrBuf sb;
  sb_init(&sb, &R->c->arena);
  sb_putc(&sb, '(');
  for (int i = 0; i < in->naxes; i++)
    sb_printf(&sb, "%s%s", i ? ", " : "", R->m->axes[in->axes[i]].name);
  sb_putc(&sb, ')');
  return sb.data;
}

/* A value's form on an axis: S(d) when the axis shards dim d, else R/I/V/P. */
static const char *form(Report *R, const Type *t, int axis) {
  int d;
  if (!t || t->kind != TY_TENSOR)
    return "?";
  if (!t->local && type_spec_has(t, axis, &d))
    return arena_sprintf(&R->c->arena, "S(%d)", d);
  return lt_name(t->lt[axis]);
}

static const char *dim_text(Report *R, long long d) {
  return d < 0 ? "stack" : arena_sprintf(&R->c->arena, "dim %lld", d);
}

static const char *op_text(Report *R, IrFn *f, IrInst *in, bool bwd) {
  Compiler *c = R->c;
  const char *name = ir_op_name[in->op];
  const char *ax = axes_list(R, in);
  const char *what;
  switch (in->op) {
  case IR_ALL_REDUCE: {
    static const char *const ops[] = {"", " op=avg", " op=max", " op=min"};
    what = ops[IR_I(in, REDUCE)]; /* in range: ir_verify */
    break;
  }
  case IR_ALL_GATHER: what = arena_sprintf(&c->arena, " %s", dim_text(R, IR_I(in, DIM))); break;
  case IR_REDUCE_SCATTER:
    what = arena_sprintf(&c->arena, " %s%s", dim_text(R, IR_I(in, DIM)), IR_I(in, REDUCE) == RED_AVG ? " op=avg" : "");
    break;
  case IR_ALL_TO_ALL:
    what = arena_sprintf(&c->arena, " %s->%s", dim_text(R, IR_I(in, SRC_DIM)), IR_I(in, DST_DIM) < 0 ? "stack" : arena_sprintf(&c->arena, "%lld", IR_I(in, DST_DIM)));
    break;
  case IR_PPERMUTE: what = arena_sprintf(&c->arena, " shift=%lld", IR_I(in, SHIFT)); break;
  case IR_COPY: return "no communication (the layout is already the target's)";
  case IR_CROSS_ENTROPY_VP: what = " (each row's maximum, sum of exponentials and target logit, f64)"; break;
  default: what = ""; break;
  }
  const char *letters = "";
  if (!bwd && in->naxes && in->ndst && in->dst[0] >= 0) {
    Type *x = vtype(f, in->args[0]), *y = vtype(f, in->dst[0]);
    letters = arena_sprintf(&c->arena, ", %s->%s", form(R, x, in->axes[0]), form(R, y, in->axes[0]));
  }
  const char *wire = "";
  if (is_comm(in->op) && in->wire != DT_NONE && in->wire != vtype(f, in->args[0])->dtype)
    wire = arena_sprintf(&c->arena, " dtype=%s", dtype_name(in->wire));
  return arena_sprintf(&c->arena, "%s %s%s%s%s", name, ax, what, wire, letters);
}

static const char *shape_text(Report *R, IrFn *f, IrInst *in) {
  Type *x = vtype(f, in->args[0]), *y = in->ndst ? vtype(f, in->dst[0]) : NULL;
  if (!x || x->kind != TY_TENSOR)
    return "?";
  const char *xs = comm_local_type_text(R->c, R->m, x);
  if (in->op == IR_ALL_REDUCE || in->op == IR_COPY || !y || y->kind != TY_TENSOR)
    return xs;
  return arena_sprintf(&R->c->arena, "%s -> %s", xs, comm_local_type_text(R->c, R->m, y));
}

static void indent(Report *R, int n) { fprintf(R->out, "%*s", 2 * n, ""); }

static void print_cost_line(Report *R, int ind, const char *label, const CommCost *cost) {
  indent(R, ind);
  const char *v = comm_cost_value(R->c, R->m, cost);
  const char *t = comm_cost_text(R->c, R->m, cost);
  if (strcmp(t, v) == 0)
    fprintf(R->out, "%s: %s bytes\n", label, t);
  else
    fprintf(R->out, "%s: %s = %s bytes\n", label, t, v);
}

static void print_inst(Report *R, IrFn *f, IrBlock *b, IrInst *in, int ind, bool bwd) {
  CommCost one = {0};
  price(R, f, in, &one, 1);
  indent(R, ind);
  fprintf(R->out, "%s  %s  %s  %s  ", where(R, in->span), bwd ? "backward" : "forward", op_text(R, f, in, bwd),
          shape_text(R, f, in));
  if (one.n && one.t[0].uneven > 0) {
    R->uneven++;
    fprintf(R->out, "%s = %s bytes (uneven shards: the largest rank's)\n", comm_term_text(R->c, R->m, &one.t[0]),
            comm_cost_value(R->c, R->m, &one));
  } else if (one.n)
    fprintf(R->out, "%s = %s bytes\n", comm_term_text(R->c, R->m, &one.t[0]), comm_cost_value(R->c, R->m, &one));
  else
    fputs("local, 0 bytes\n", R->out);
  if (in->redistribute && in->s) {
    indent(R, ind + 1);
    fprintf(R->out, "note: redistribute %s\n", in->s);
  }
  const IrInst *first = NULL;
  if (overlap_starts_early(f, b, in, &first)) {
    indent(R, ind + 1);
    if (first)
      fprintf(R->out, "overlaps: started non-blocking, waited for before its first use at %s\n",
              where(R, first->span));
    else
      fputs("overlaps: started non-blocking, returned pending; waited for where the caller first uses it\n",
            R->out);
  }
}

static bool block_has(Report *R, IrBlock *b);

static bool inst_has(Report *R, IrInst *in) {
  if (listed(in))
    return true;
  if (in->op == IR_CALL || in->op == IR_VJP_CALL) {
    CommCost sub = {0};
    call_cost(R, in, &sub, 1);
    return sub.n > 0;
  }
  return block_has(R, &in->body) || block_has(R, &in->els);
}

static bool block_has(Report *R, IrBlock *b) {
  for (IrInst *in = b->head; in; in = in->next)
    if (inst_has(R, in))
      return true;
  return false;
}

static void print_block(Report *R, IrFn *f, IrBlock *b, int ind, bool bwd) {
  for (IrInst *in = b->head; in; in = in->next) {
    if (!inst_has(R, in))
      continue;
    if (in->op == IR_FOR) {
      long long n = trip_count(R, f, in);
      indent(R, ind);
      if (n >= 0)
        fprintf(R->out, "%s  for loop, %lld iteration%s; per iteration:\n", where(R, in->span), n, n == 1 ? "" : "s");
      else
        fprintf(R->out, "%s  for loop, trip count not known (counted once); per iteration:\n", where(R, in->span));
      print_block(R, f, &in->body, ind + 1, bwd);
      CommCost it = {0};
      block_total(R, f, &in->body, &it, 1);
      print_cost_line(R, ind + 1, "per iteration", &it);
    } else if (in->op == IR_IF) {
      indent(R, ind);
      fprintf(R->out, "%s  if (counted as taken):\n", where(R, in->span));
      print_block(R, f, &in->body, ind + 1, bwd);
      if (block_has(R, &in->els)) {
        indent(R, ind);
        fputs("else (counted as taken too):\n", R->out);
        print_block(R, f, &in->els, ind + 1, bwd);
      }
    } else if (in->op == IR_CALL || in->op == IR_VJP_CALL) {
      CommCost sub = {0};
      call_cost(R, in, &sub, 1);
      IrFn *g = in->callee;
      const char *label = in->op == IR_VJP_CALL && g->vjp_fwd
                              ? arena_sprintf(&R->c->arena, "%s  value_and_grad: %s then %s", where(R, in->span),
                                              g->vjp_fwd->cname, g->vjp_bwd->cname)
                              : arena_sprintf(&R->c->arena, "%s  call %s", where(R, in->span), g->cname);
      print_cost_line(R, ind, label, &sub);
    } else {
      print_inst(R, f, b, in, ind, bwd);
    }
  }
}

static const char *fn_title(Report *R, IrFn *f) {
  const char *name = f->fn ? f->fn->name : f->cname;
  if (is_backward(f))
    return arena_sprintf(&R->c->arena, "%s (backward of %s)", f->cname, name);
  if (ir_uses_tape(f))
    return arena_sprintf(&R->c->arena, "%s (forward of %s, keeping what its backward needs)", f->cname, name);
  if (f->is_main)
    return arena_sprintf(&R->c->arena, "%s (main)", f->cname);
  if (f->exported)
    return arena_sprintf(&R->c->arena, "%s (export fn %s)", f->cname, name);
  return arena_sprintf(&R->c->arena, "%s (fn %s)", f->cname, name);
}

static void print_fn(Report *R, IrFn *f) {
  bool bwd = is_backward(f);
  if (!block_has(R, &f->body) && !f->is_main && !f->exported)
    return;
  fprintf(R->out, "\nfn %s\n", fn_title(R, f));
  print_block(R, f, &f->body, 1, bwd);
  CommCost tot = {0};
  fn_total(R, f, &tot);
  print_cost_line(R, 1, f->is_main ? "total per run" : "total per call", &tot);
  if (f->exp_fwd) {
    CommCost v = {0};
    fn_total(R, f->exp_fwd, &v);
    fn_total(R, f->exp_bwd, &v);
    print_cost_line(R, 1, arena_sprintf(&R->c->arena, "%s_vjp per call (%s then %s)", f->fn->name, f->exp_fwd->cname,
                                        f->exp_bwd->cname),
                    &v);
  }
}

static bool block_uses(const IrBlock *b, IrOp op) {
  for (const IrInst *in = b->head; in; in = in->next)
    if (in->op == op || block_uses(&in->body, op) || block_uses(&in->els, op))
      return true;
  return false;
}

void comm_report(Compiler *c, IrProgram *p, FILE *out, const char *source_path, const long long *sizes) {
  Mesh *m = arena_alloc(&c->arena, sizeof *m);
  *m = *p->mesh;
  for (int a = 0; sizes && a < m->naxes; a++)
    if (sizes[a] > 0)
      m->axes[a].size = sizes[a];
  Report R = {.c = c, .p = p, .m = m, .out = out};
  if (p->main)
    reach(&R, p->main);
  for (IrFn *f = p->fns; f; f = f->next)
    if (f->exported)
      reach(&R, f);
  bool library = R.nfns == 0;
  if (library)
    for (IrFn *f = p->fns; f; f = f->next)
      reach(&R, f);
  fprintf(out, "# spmdc --comm-report %s\n", source_path);
  fputs("# mesh:", out);
  for (int a = 0; a < R.m->naxes; a++) {
    if (R.m->axes[a].size)
      fprintf(out, "%s n_%s = %lld", a ? "," : "", R.m->axes[a].name, R.m->axes[a].size);
    else
      fprintf(out, "%s n_%s (size not declared)", a ? "," : "", R.m->axes[a].name);
  }
  if (sizes)
    for (int a = 0; a < R.m->naxes; a++)
      if (sizes[a] > 0 && sizes[a] != p->mesh->axes[a].size) {
        fputs(" (--mesh)", out);
        break;
      }
  fputs(R.m->naxes ? "\n" : " no axes\n", out);
  fputs("# Each line: location, forward or backward, the collective over its axes (one\n"
        "# communicator), what it does, the local shape, and the bytes each rank sends\n"
        "# per call as a formula = its value at the declared sizes.  N is the local\n"
        "# buffer in bytes, n the number of ranks in the group:\n"
        "#   all_reduce 2*(n-1)/n*N; all_gather (n-1)/n*N of the result;\n"
        "#   reduce_scatter (n-1)/n*N of the input; all_to_all (n-1)/n*N; converts are local.\n", out);
  bool p2p = false;
  for (int i = 0; i < R.nfns && !p2p; i++)
    p2p = block_uses(&R.fns[i].f->body, IR_PPERMUTE);
  if (p2p)
    fputs("#   ppermute (n>1)*N: the whole block to one other rank (MPI_Sendrecv).\n", out);
  fputs("# Loops multiply by their trip count; both branches of an if are counted.\n"
        "# \"overlaps\": a gradient all_reduce started non-blocking and waited for where\n"
        "# first used; those under 1 MiB (SPMD_BUCKET_KB) share one all_reduce at run time.\n", out);
  if (library)
    fputs("# no main and no export fn: every function is listed\n", out);
  /* callees before callers: the program's order, main last */
  for (IrFn *f = p->fns; f; f = f->next)
    if (info(&R, f) && !f->vjp_fwd && !f->is_main)
      print_fn(&R, f);
  if (p->main)
    print_fn(&R, p->main);
  fputs("\n", out);
  if (p->main) {
    CommCost tot = {0};
    fn_total(&R, p->main, &tot);
    print_cost_line(&R, 0, arena_sprintf(&c->arena, "program total per run (%s)", p->main->cname), &tot);
  }
  for (IrFn *f = p->fns; f; f = f->next)
    if (f->exported && info(&R, f)) {
      CommCost a = {0}, b = {0};
      fn_total(&R, f, &a);
      print_cost_line(&R, 0, arena_sprintf(&c->arena, "export %s per call", f->fn->name), &a);
      if (!f->exp_fwd)
        continue;
      fn_total(&R, f->exp_fwd, &b);
      fn_total(&R, f->exp_bwd, &b);
      print_cost_line(&R, 0, arena_sprintf(&c->arena, "export %s_vjp per call", f->fn->name), &b);
    }
  if (R.uneven)
    fprintf(out, "# uneven shards (SPEC 4, torch.chunk's split): %d collective%s above move%s blocks this mesh splits "
                 "unevenly; their bytes (and the totals) are the largest rank's, their formulas count equal blocks\n",
            R.uneven, R.uneven == 1 ? "" : "s", R.uneven == 1 ? "s" : "");
}
