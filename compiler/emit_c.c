/* emit_c.c: C from the IR.  Each IrFn becomes a static C function named
 * after its source function; each value a C variable named after the source
 * variable it came from; each instruction one runtime call with a
 * comment giving its source line.  Tensor values are owned by their
 * variable and freed right after their last use in the block that defines
 * them; parameters are borrowed; results are returned as new references. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "memory_report.h"
#include "regions.h"
#include "schedule.h"

static void out(Emitter *E, int indent, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void out(Emitter *E, int indent, const char *fmt, ...) {
  fprintf(E->out, "%*s", indent * 2, "");
  va_list ap;
  va_start(ap, fmt);
  vfprintf(E->out, fmt, ap);
  va_end(ap);
}

void emit_out(Emitter *E, int indent, const char *fmt, ...) {
  fprintf(E->out, "%*s", indent * 2, "");
  va_list ap;
  va_start(ap, fmt);
  vfprintf(E->out, fmt, ap);
  va_end(ap);
}

static const char *vname(Emitter *E, int v) {
  IrValue *val = &E->f->values[v];
  return arena_sprintf(&E->c->arena, "%s_%d", val->hint ? val->hint : "tmp", v);
}

const char *emit_vname(Emitter *E, int v) { return vname(E, v); }

static const char *varname(Emitter *E, int slot) {
  return arena_sprintf(&E->c->arena, "var_%s_%d", E->f->vars[slot].name, slot);
}

static bool is_tensor(Emitter *E, int v) { return E->f->values[v].type->kind == TY_TENSOR; }

static const char *ctype_of(const Type *t) {
  switch (t->kind) {
  case TY_INT: return "int64_t";
  case TY_FLOAT: return "double";
  case TY_BOOL: return "bool";
  default: return "rt_tensor *";
  }
}

/* The IR's vocabulary as the runtime's enums (ir.h) */
static const char *const reduce_c[] = {[RED_SUM] = "RT_RED_SUM", [RED_AVG] = "RT_RED_AVG", [RED_MAX] = "RT_RED_MAX",
                                       [RED_MIN] = "RT_RED_MIN"};
static const char *const ce_reduction_c[] = {[CE_MEAN] = "RT_CE_MEAN", [CE_SUM] = "RT_CE_SUM", [CE_NONE] = "RT_CE_NONE"};
static const char *const ltype_c[] = {[LTY_R] = "RT_R", [LTY_I] = "RT_I", [LTY_V] = "RT_V", [LTY_P] = "RT_P"};

static const char *dtype_c(DType d) {
  return d == DT_F64 ? "RT_F64" : d == DT_I32 ? "RT_I32" : d == DT_BF16 ? "RT_BF16" : "RT_F32";
}

const char *emit_dtype_c(DType d) { return dtype_c(d); }
const char *emit_ctype(const Type *t) { return ctype_of(t); }

/* A size as a C expression over the runtime mesh sizes. */
static const char *size_c(Emitter *E, Size s) {
  StrBuf sb;
  sb_init(&sb, &E->c->arena);
  sb_printf(&sb, "((int64_t)%lld", s.num);
  for (int i = 0; i < s.nf; i++)
    for (int k = 0; k < s.f[i].exp; k++)
      sb_printf(&sb, " * rt_axis_size(ctx, %d)", s.f[i].axis);
  if (s.den != 1)
    sb_printf(&sb, " / %lld", s.den);
  for (int i = 0; i < s.nf; i++)
    for (int k = 0; k < -s.f[i].exp; k++)
      sb_printf(&sb, " / rt_axis_size(ctx, %d)", s.f[i].axis);
  sb_putc(&sb, ')');
  return sb.data;
}

static const char *c_string(Emitter *E, const char *s);
/* This rank's extent of dim d of a value of type t, as a C expression: the
 * torch.chunk split of the global size over the axes sharding it (SPEC 4,
 * uneven shards; rt_shard_extent). In a local type a dim's size divided by
 * local axes is the global size over those axes, which lead the dim's
 * global ones (a local_map takes a dim's major axes local), taken in mesh
 * order (the size does not keep the spec's). The runtime's uneven collectives need
 * the gathered dim's extent, which the operand's own does not give; a
 * tensor made in local code with such a size is this rank's block (with_spec
 * false: only the local axes, a local type's global axes keep their size). */
static const char *extent_or(Emitter *E, const Type *t, long long d, bool with_spec, const char *other) {
  if (d < 0 || d >= t->ndim)
    return other;
  Size s = t->shape[d];
  int axes[2 * MAX_MESH_AXES], n = 0;
  for (int i = 0; i < s.nf; i++) { /* the size over local axes, the dim's leading (major) ones, in mesh order */
    if (s.f[i].exp >= 0)
      continue;
    if (s.f[i].exp != -1)
      return other;
    axes[n++] = s.f[i].axis;
    s.f[i].exp = 0;
  }
  for (int k = 0; with_spec && k < MAX_MESH_AXES && t->spec[d][k] >= 0; k++)
    axes[n++] = t->spec[d][k];
  if (s.unknown)
    return other;
  if (n == 0)
    return size_c(E, s);
  StrBuf sb;
  sb_init(&sb, &E->c->arena);
  sb_printf(&sb, "rt_shard_extent(ctx, %s, (rt_axes){.n = %d, .idx = {", size_c(E, s), n);
  for (int i = 0; i < n; i++)
    sb_printf(&sb, "%s%d", i ? ", " : "", axes[i]);
  sb_puts(&sb, "}})");
  return sb.data;
}

static const char *extent_c(Emitter *E, const Type *t, long long d, bool with_spec) {
  return extent_or(E, t, d, with_spec, "RT_EVEN");
}

/* Declares shape_[] (local shape) and, for global types, the layout. */
static void emit_shape(Emitter *E, int ind, const Type *t, const char *name) {
  out(E, ind, "int64_t global_[%d] = {", t->ndim ? t->ndim : 1);
  for (int d = 0; d < t->ndim; d++) /* a size over local axes: this rank's block of it */
    fprintf(E->out, "%s%s", d ? ", " : "", extent_or(E, t, d, false, size_c(E, t->shape[d])));
  fprintf(E->out, "%s};\n", t->ndim ? "" : "0");
  if (t->local) {
    out(E, ind, "rt_layout layout_ = rt_layout_full(%d, global_);\n", t->ndim);
    return;
  }
  out(E, ind, "rt_axes axes_[%d] = {", t->ndim ? t->ndim : 1);
  for (int d = 0; d < t->ndim; d++) {
    int n = 0;
    while (n < MAX_MESH_AXES && t->spec[d][n] >= 0)
      n++;
    fprintf(E->out, "%s{.n = %d", d ? ", " : "", n);
    for (int k = 0; k < n; k++)
      fprintf(E->out, "%s%d", k ? ", " : ", .idx = {", t->spec[d][k]);
    fputs(n ? "}}" : "}", E->out);
  }
  fprintf(E->out, "%s};\n", t->ndim ? "" : "{.n = 0}");
  out(E, ind, "rt_layout layout_ = rt_layout_of(ctx, %s, %d, global_, axes_);\n", c_string(E, name), t->ndim);
}

/* The shortest text that reads back as exactly v. */
static const char *num(Emitter *E, double v) {
  char buf[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v)
      break;
  }
  if (!strpbrk(buf, ".eEni"))
    strcat(buf, ".0");
  return arena_strndup(&E->c->arena, buf, strlen(buf));
}

static const char *c_string(Emitter *E, const char *s) {
  StrBuf sb;
  sb_init(&sb, &E->c->arena);
  sb_putc(&sb, '"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\' || ch == '?') /* '?': no trigraph */
      sb_printf(&sb, "\\%c", ch);
    else if (ch == '\n')
      sb_puts(&sb, "\\n");
    else if (ch < 0x20 || ch >= 0x7f)
      sb_printf(&sb, "\\%03o", ch);
    else
      sb_putc(&sb, (char)ch);
  }
  sb_putc(&sb, '"');
  return sb.data;
}

/* Uneven shards (SPEC 4) in a reshape. In global code a sharded dim merged
 * or split (shard_reshape: it stays the outermost factor of a new dim with
 * its axes) needs equal blocks: checked where the checker could not
 * (rt_check_reshape_even, naming the variable and line). In local code the
 * one dim whose size is over local axes is this rank's block, whatever
 * the blocks: rt_reshape infers it (-1) from the element count. */
static void emit_reshape_uneven(Emitter *E, IrInst *in, int ind) {
  const Type *x = E->f->values[in->args[0]].type, *t = in->t;
  int over = -1, n = 0;
  for (int d = 0; d < t->ndim; d++) {
    bool local_axes = false;
    for (int i = 0; i < t->shape[d].nf; i++)
      local_axes |= t->shape[d].f[i].exp < 0;
    if (local_axes) {
      over = d;
      n++;
    }
  }
  if (n == 1)
    out(E, ind, "layout_.local[%d] = -1; /* this rank's block, from the element count */\n", over);
  if (t->local)
    return;
  int line, col;
  source_position(E->c, in->span, &line, &col);
  const char *name = E->f->values[in->args[0]].hint ? E->f->values[in->args[0]].hint : "tensor";
  for (int d = 0; d < x->ndim && !x->local; d++) {
    if (x->spec[d][0] < 0)
      continue;
    for (int o = 0; o < t->ndim; o++) {
      if (memcmp(t->spec[o], x->spec[d], sizeof t->spec[o]) != 0 || size_eq(x->shape[d], t->shape[o]))
        continue;
      StrBuf ax;
      sb_init(&ax, &E->c->arena);
      int n = 0;
      while (n < MAX_MESH_AXES && x->spec[d][n] >= 0)
        sb_printf(&ax, "%s%d", n ? ", " : "", x->spec[d][n]), n++;
      out(E, ind, "rt_check_reshape_even(ctx, %s, \"%s:%d\", %d, %s, %s, (rt_axes){.n = %d, .idx = {%s}});\n",
          c_string(E, name), source_file(E->c, in->span.file)->path, line, d, size_c(E, x->shape[d]),
          size_c(E, t->shape[o]), n, ax.data);
    }
  }
}

/* reinterpret(x, a, src=S(d), ...) in global code makes each rank's block
 * the whole value: it needs equal blocks (SPEC 4), checked where the
 * checker could not (check_collectives.c's even_blocks). */
static void emit_reinterpret_even(Emitter *E, IrInst *in, int ind) {
  const Type *x = E->f->values[in->args[0]].type, *t = E->f->values[in->dst[0]].type;
  if (x->kind != TY_TENSOR || x->local || t->local || in->naxes == 0)
    return;
  for (int d = 0; d < x->ndim; d++) {
    bool has = false, kept = false;
    for (int j = 0; j < MAX_MESH_AXES && x->spec[d][j] >= 0; j++)
      has |= x->spec[d][j] == in->axes[0];
    for (int j = 0; d < t->ndim && j < MAX_MESH_AXES && t->spec[d][j] >= 0; j++)
      kept |= t->spec[d][j] == in->axes[0];
    if (!has || kept)
      continue;
    int line, col;
    source_position(E->c, in->span, &line, &col);
    const char *name = E->f->values[in->args[0]].hint ? E->f->values[in->args[0]].hint : "tensor";
    StrBuf ax;
    sb_init(&ax, &E->c->arena);
    for (int i = 0; i < in->naxes; i++)
      sb_printf(&ax, "%s%d", i ? ", " : "", in->axes[i]);
    out(E, ind, "rt_check_even_at(ctx, %s, \"%s:%d\", \"reinterpret\", %d, %s, (rt_axes){.n = %d, .idx = {%s}});\n",
        c_string(E, name), source_file(E->c, in->span.file)->path, line, d, size_c(E, x->shape[d]), in->naxes,
        ax.data);
  }
}

/* attention's grouped-query heads split over axes (q [B, H, T, E], k
 * [B, Hkv, S, E]): each rank's query heads must be its key/value heads'
 * groups, checked where the checker could not (check_attention.c's
 * gqa_blocks_line_up: an axis size left to the run). */
/* rt_attention_l's layout argument (", RT_ATTN_Q | ...") where the op
 * reads or writes the token-major layout (attention_layout.c), else "" */
static const char *attn_layout_c(Emitter *E, IrInst *in) {
  long long l = IR_I(in, LAYOUT);
  if (!l)
    return "";
  StrBuf sb;
  sb_init(&sb, &E->c->arena);
  static const char *const bit[] = {"RT_ATTN_Q", "RT_ATTN_K", "RT_ATTN_V", "RT_ATTN_OUT"};
  const char *sep = ", ";
  for (int i = 0; i < 4; i++)
    if (l >> i & 1)
      sb_printf(&sb, "%s%s", sep, bit[i]), sep = " | ";
  return sb.data;
}

static void emit_gqa_blocks(Emitter *E, IrInst *in, int ind) {
  const Type *q = E->f->values[in->args[0]].type, *k = E->f->values[in->args[1]].type;
  int qh = IR_I(in, LAYOUT) & 1 ? 2 : 1, kh = IR_I(in, LAYOUT) & 2 ? 2 : 1; /* the heads' dims */
  if (q->kind != TY_TENSOR || q->local || q->ndim != 4 || q->spec[qh][0] < 0 || size_eq(q->shape[qh], k->shape[kh]))
    return;
  int line, col;
  source_position(E->c, in->span, &line, &col);
  const char *name = E->f->values[in->args[0]].hint ? E->f->values[in->args[0]].hint : "q";
  StrBuf ax;
  sb_init(&ax, &E->c->arena);
  int n = 0;
  while (n < MAX_MESH_AXES && q->spec[qh][n] >= 0)
    sb_printf(&ax, "%s%d", n ? ", " : "", q->spec[qh][n]), n++;
  out(E, ind, "rt_check_gqa_blocks(ctx, %s, \"%s:%d\", %s, %s, (rt_axes){.n = %d, .idx = {%s}});\n", c_string(E, name),
      source_file(E->c, in->span.file)->path, line, size_c(E, q->shape[qh]), size_c(E, k->shape[kh]), n, ax.data);
}

static const char *axes_c(Emitter *E, IrInst *in) {
  StrBuf sb;
  sb_init(&sb, &E->c->arena);
  sb_printf(&sb, "(rt_axes){.n = %d, .idx = {", in->naxes);
  for (int i = 0; i < in->naxes; i++)
    sb_printf(&sb, "%s%d", i ? ", " : "", in->axes[i]);
  sb_puts(&sb, "}}");
  return sb.data;
}

static const char *A(Emitter *E, IrInst *in, int i) { return vname(E, in->args[i]); }
static const char *D(Emitter *E, IrInst *in, int i) { return vname(E, in->dst[i]); }

/* A collective that moves data: rt_all_reduce and friends.  With dtype= (or
 * bwd_dtype= on a backward's collective) naming another dtype than the
 * operand's, the operand is converted, the collective runs in the wire
 * dtype, and the result is converted back (SPEC 13). */
/* Whether tensor v, an operand of the instruction being emitted, is owned by
 * its block and freed right after it: an all_reduce may then reduce in v's
 * buffer (rt_all_reduce_reuse / rt_all_reduce_start_reuse, which do so only
 * when the block's reference is v's only one). */
static bool dies_here(Emitter *E, int v) {
  return E->dying[v] && E->defblk[v] == E->curblk;
}

/* A collective's or a cast's dim: S(i)'s i, or the stacked form. */
static const char *dim_c(Emitter *E, long long d) {
  return d == IR_STACK ? "RT_STACK" : arena_sprintf(&E->c->arena, "%lld", d);
}

static void emit_comm(Emitter *E, IrInst *in, int ind, const char *loc) {
  DType have = E->f->values[in->args[0]].type->dtype;
  bool wire = in->wire != DT_NONE && in->wire != have;
  const char *x = wire ? "wire_in_" : A(E, in, 0), *d = wire ? "wire_out_" : D(E, in, 0);
  if (wire) {
    out(E, ind, "{ /* dtype=%s on the wire */\n", dtype_name(in->wire));
    ind++;
    out(E, ind, "rt_tensor *wire_in_ = rt_astype(ctx, %s, %s), *wire_out_;\n", A(E, in, 0), dtype_c(in->wire));
  }
  switch (in->op) {
  case IR_ALL_REDUCE:
    out(E, ind, "%s = rt_all_reduce%s(ctx, %s, %s, %s); %s\n", d, !wire && dies_here(E, in->args[0]) ? "_reuse" : "",
        x, axes_c(E, in), reduce_c[IR_I(in, REDUCE)], loc);
    break;
  case IR_ALL_GATHER:
    if (IR_I(in, DIM) == IR_STACK)
      out(E, ind, "%s = rt_all_gather(ctx, %s, %s, RT_STACK); %s\n", d, x, axes_c(E, in), loc);
    else
      out(E, ind, "%s = rt_all_gather_to(ctx, %s, %s, %lld, %s); %s\n", d, x, axes_c(E, in), IR_I(in, DIM),
          extent_c(E, E->f->values[in->dst[0]].type, IR_I(in, DIM), true), loc);
    break;
  case IR_REDUCE_SCATTER:
    out(E, ind, "%s = rt_reduce_scatter(ctx, %s, %s, %s, %s); %s\n", d, x, axes_c(E, in), dim_c(E, IR_I(in, DIM)),
        reduce_c[IR_I(in, REDUCE)], loc);
    break;
  default:
    if (IR_I(in, SRC_DIM) == IR_STACK)
      out(E, ind, "%s = rt_all_to_all(ctx, %s, %s, RT_STACK, RT_STACK); %s\n", d, x, axes_c(E, in), loc);
    else
      out(E, ind, "%s = rt_all_to_all_to(ctx, %s, %s, %lld, %lld, %s); %s\n", d, x, axes_c(E, in), IR_I(in, SRC_DIM),
          IR_I(in, DST_DIM), extent_c(E, E->f->values[in->dst[0]].type, IR_I(in, SRC_DIM), true), loc);
    break;
  }
  if (wire) {
    out(E, ind, "%s = rt_astype(ctx, wire_out_, %s);\n", D(E, in, 0), dtype_c(have));
    out(E, ind, "rt_free(ctx, wire_in_);\n");
    out(E, ind, "rt_free(ctx, wire_out_);\n");
    out(E, ind - 1, "}\n");
  }
}

static const char *host_op(OpKind op) {
  switch (op) {
  case OP_AND: return "&&";
  case OP_OR: return "||";
  default: return op_spelling[op];
  }
}

/* The runtime names the .spmd line of a failing op (rt_at; an error in a
 * callee also names the line of each call, rt_call_begin): an instruction
 * that runs a tensor op tells it its line when that changed. Host
 * arithmetic, vars and the tape cannot fail. */
/* What a runtime error calls a value without a name: its expression as
 * written, on one line, at most 48 characters ("randn(f32[V@tp, D], ..."),
 * for a C string (c_string). */
static const char *source_text(Emitter *E, Span sp) {
  if (!sp.file || sp.end <= sp.begin)
    return "tensor";
  const char *t = source_file(E->c, sp.file)->text + sp.begin;
  size_t n = sp.end - sp.begin, k = 0;
  char buf[64];
  for (size_t i = 0; i < n && k < 48; i++) {
    char ch = t[i] == '\n' || t[i] == '\t' || t[i] == '\r' ? ' ' : t[i];
    if (ch == ' ' && k && buf[k - 1] == ' ')
      continue;
    buf[k++] = ch;
  }
  if (k == 48)
    memcpy(buf + 44, "...", 3), k = 47;
  return arena_strndup(&E->c->arena, buf, k);
}

static bool runs_tensor_op(const IrInst *in) {
  switch (in->op) {
  case IR_HOST_CONST:
  case IR_HOST_BINARY:
  case IR_HOST_NEG:
  case IR_HOST_NOT:
  case IR_HOST_SIZE:
  case IR_HOST_MATH:
  case IR_HOST_WALL_TIME:
  case IR_SHARD_RANGE:
  case IR_VAR_SET:
  case IR_VAR_GET:
  case IR_FOR:
  case IR_IF:
  case IR_RETURN:
  case IR_PUSH:
  case IR_POP:
  case IR_FREE: return false;
  default: return true;
  }
}

static const char *loc_string(Emitter *E, Span sp, int *line) {
  int col;
  source_position(E->c, sp, line, &col);
  return c_string(E, arena_sprintf(&E->c->arena, "%s:%d", source_file(E->c, sp.file)->path, *line));
}

/* An op that checks the values of its ids, targets or indices: its error
 * names the expression too (the ids' variable), "m.spmd:10: in 'embedding(ids, table)'". */
static bool checks_indices(const IrInst *in) {
  switch (in->op) {
  case IR_EMBEDDING:
  case IR_EMBEDDING_BWD:
  case IR_CROSS_ENTROPY:
  case IR_CROSS_ENTROPY_BWD:
  case IR_TAKE_ALONG_DIM:
  case IR_TAKE_ALONG_DIM_BWD:
  case IR_INDEX:
  case IR_INDEX_BWD: return true;
  default: return false;
  }
}

static void emit_loc(Emitter *E, const IrInst *in, int ind) {
  if (!in->span.file || !runs_tensor_op(in) || in->op == IR_CALL || in->op == IR_VJP_CALL)
    return; /* a call says its line itself */
  int line, col;
  source_position(E->c, in->span, &line, &col);
  if (checks_indices(in)) {
    const char *loc = arena_sprintf(&E->c->arena, "%s:%d: in '%s'", source_file(E->c, in->span.file)->path, line,
                                    source_text(E, in->span));
    out(E, ind, "rt_at(ctx, %s);\n", c_string(E, loc));
    E->at_line = 0; /* the next op says its plain line */
    return;
  }
  if (in->span.file == E->at_file && line == E->at_line)
    return;
  out(E, ind, "rt_at(ctx, %s);\n", loc_string(E, in->span, &line));
  E->at_file = in->span.file;
  E->at_line = line;
}

static void emit_block(Emitter *E, IrBlock *b, int ind);


/* ---- graph regions' host numbers on the CUDA target (runtime/graph.c):
 * a device operation's host number that a kernel can read from device
 * memory goes through rt_slot_f/rt_slot_i (a region's slot table, refreshed
 * before each replay); every other host number a device operation takes by
 * value, and each `if` condition and `for` bound of a function a region may
 * call, is named to rt_guard (a replay is refused when one differs). A
 * region's fill makes the same calls in the same order. */
static bool host_scalar(Emitter *E, int v) {
  TypeKind k = E->f->values[v].type->kind;
  return k == TY_INT || k == TY_FLOAT || k == TY_BOOL;
}

static int slot_of(IrInst *in, int a) { return region_slot_of(in, a); }
static bool host_work(IrOp op) { return region_host_work(op); }

static bool graph_numbers(Emitter *E) {
  return E->tgt == &target_cuda && (E->f != E->p->main || E->in_region || E->fill);
}

static void emit_guards(Emitter *E, IrInst *in, int ind) {
  if (!graph_numbers(E))
    return;
  int n = 0;
  if (in->op == IR_IF)
    n = 1;
  else if (in->op == IR_FOR)
    n = 2;
  else if (!host_work(in->op))
    n = in->nargs;
  if ((in->op == IR_IF || in->op == IR_FOR) && E->f == E->p->main)
    return;
  for (int a = 0; a < n; a++) {
    int v = in->args[a];
    if (v < 0 || !host_scalar(E, v) || slot_of(in, a))
      continue;
    if (E->defs && E->defs[v] && E->defs[v]->op == IR_HOST_CONST)
      continue; /* a literal cannot change */
    int line, col;
    source_position(E->c, in->span, &line, &col);
    const char *path = source_file(E->c, in->span.file)->path, *base = strrchr(path, '/');
    const char *what = in->op == IR_IF ? "an `if`'s condition" : in->op == IR_FOR ? "a `for`'s bound" : ir_op_name[in->op];
    const char *vn = E->f->values[v].hint ? E->f->values[v].hint
                     : E->defs && E->defs[v] && *source_text(E, E->defs[v]->span) ? source_text(E, E->defs[v]->span)
                                                                       : vname(E, v);
    const char *name = arena_sprintf(&E->c->arena, "%s (%s, %s:%d)", vn, what, base ? base + 1 : path, line);
    out(E, ind, "rt_guard(ctx, %s(%s), %s);\n", E->f->values[v].type->kind == TY_FLOAT ? "rt_region_f" : "rt_region_i",
        vname(E, v), c_string(E, name));
  }
}

/* argument a of in as the operation takes it: through a slot on the CUDA target */
static const char *slot_arg(Emitter *E, IrInst *in, int a, const char *cast) {
  if (E->tgt != &target_cuda)
    return arena_sprintf(&E->c->arena, "%s%s", cast, vname(E, in->args[a]));
  return arena_sprintf(&E->c->arena, "rt_slot_%c(ctx, %s%s)", slot_of(in, a), cast, vname(E, in->args[a]));
}

static void emit_inst(Emitter *E, IrInst *in, int ind) {
  int line, col;
  source_position(E->c, in->span, &line, &col);
  const char *loc = arena_sprintf(&E->c->arena, "/* %s:%d */", source_file(E->c, in->span.file)->path, line);
  if (!E->fill)
    emit_guards(E, in, ind);
  bool cu = E->tgt == &target_cuda;
  switch (in->op) {
  case IR_HOST_CONST:
    if (in->t->kind == TY_FLOAT)
      out(E, ind, "%s = %s; %s\n", D(E, in, 0), num(E, in->f), loc);
    else if (in->t->kind == TY_BOOL)
      out(E, ind, "%s = %s; %s\n", D(E, in, 0), IR_I(in, VALUE) ? "true" : "false", loc);
    else
      out(E, ind, "%s = %lld; %s\n", D(E, in, 0), IR_I(in, VALUE), loc);
    return;
  case IR_HOST_SIZE: out(E, ind, "%s = %s; %s\n", D(E, in, 0), size_c(E, in->size), loc); return;
  case IR_HOST_BINARY:
    if (IR_I(in, HOST_OP) == OP_DIV && E->f->values[in->dst[0]].type->kind == TY_INT)
      out(E, ind, "%s = %s / %s; %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1), loc);
    else
      out(E, ind, "%s = %s %s %s; %s\n", D(E, in, 0), A(E, in, 0), host_op((OpKind)IR_I(in, HOST_OP)), A(E, in, 1), loc);
    return;
  case IR_HOST_NEG: out(E, ind, "%s = -%s;\n", D(E, in, 0), A(E, in, 0)); return;
  case IR_HOST_MATH: {
    const char *cast = E->f->values[in->dst[0]].type->kind == TY_INT ? "(int64_t)" : "";
    if (in->nargs == 1)
      out(E, ind, "%s = %srt_host_unary(RT_%s, (double)%s); %s\n", D(E, in, 0), cast, ir_unary_name[in->unop],
          A(E, in, 0), loc);
    else
      out(E, ind, "%s = %srt_host_binary(RT_%s, (double)%s, (double)%s); %s\n", D(E, in, 0), cast,
          ir_binary_name[in->binop], A(E, in, 0), A(E, in, 1), loc);
    return;
  }
  case IR_HOST_WALL_TIME: out(E, ind, "%s = rt_wall_time(ctx); %s\n", D(E, in, 0), loc); return;
  case IR_HOST_NOT: out(E, ind, "%s = !%s;\n", D(E, in, 0), A(E, in, 0)); return;
  case IR_HOST_ITEM: out(E, ind, "%s = rt_item(ctx, %s) != 0; %s\n", D(E, in, 0), A(E, in, 0), loc); return;
  case IR_ITEM:
    out(E, ind, "%s = (%s)rt_item(ctx, %s); %s\n", D(E, in, 0), ctype_of(E->f->values[in->dst[0]].type), A(E, in, 0),
        loc);
    return;
  case IR_SCALAR:
    out(E, ind, "%s = rt_scalar(ctx, %s, (double)%s); %s\n", D(E, in, 0),
        dtype_c(E->f->values[in->dst[0]].type->dtype), A(E, in, 0), loc);
    return;
  case IR_UNARY:
    out(E, ind, "%s = rt_unary(ctx, RT_%s, %s); %s\n", D(E, in, 0), ir_unary_name[in->unop], A(E, in, 0), loc);
    return;
  case IR_UNARY_GRAD:
    out(E, ind, "rt_unary_with_grad(ctx, RT_%s, %s, &%s, &%s); %s\n", ir_unary_name[in->unop], A(E, in, 0),
        D(E, in, 0), D(E, in, 1), loc);
    return;
  case IR_BINARY:
    out(E, ind, "%s = rt_binary(ctx, RT_%s, %s, %s); %s\n", D(E, in, 0), ir_binary_name[in->binop], A(E, in, 0),
        A(E, in, 1), loc);
    return;
  case IR_BINARY_SCALAR:
    out(E, ind, "%s = rt_binary_scalar%s(ctx, RT_%s, %s, %s, %s); %s\n", D(E, in, 0), cu ? "_h" : "",
        ir_binary_name[in->binop], A(E, in, 0), slot_arg(E, in, 1, "(double)"), IR_I(in, SCALAR_LEFT) ? "true" : "false",
        loc);
    return;
  case IR_MATMUL: out(E, ind, "%s = rt_matmul(ctx, %s, %s); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1), loc); return;
  case IR_EINSUM: {
    out(E, ind, "{ const rt_tensor *xs_[] = {");
    for (int i = 0; i < in->nargs; i++)
      fprintf(E->out, "%s%s", i ? ", " : "", A(E, in, i));
    fprintf(E->out, "}; %s = rt_einsum(ctx, %s, %d, xs_); } %s\n", D(E, in, 0), c_string(E, in->s), in->nargs, loc);
    return;
  }
  case IR_SUM:
  case IR_MEAN:
  case IR_AMAX: {
    const char *fn = ir_op_name[in->op]; /* the IR op's name is the runtime's */
    if (IR_I(in, DIM) == IR_ALL_DIMS)
      out(E, ind, "%s = rt_%s_all(ctx, %s); %s\n", D(E, in, 0), fn, A(E, in, 0), loc);
    else
      out(E, ind, "%s = rt_%s(ctx, %s, %lld, %s); %s\n", D(E, in, 0), fn, A(E, in, 0), IR_I(in, DIM),
          IR_I(in, KEEPDIM) ? "true" : "false", loc);
    return;
  }
  case IR_SUM_SQUARES:
    out(E, ind, "{ const rt_tensor *xs_[] = {");
    for (int i = 0; i < in->nargs; i++)
      fprintf(E->out, "%s%s", i ? ", " : "", A(E, in, i));
    fprintf(E->out, "}; %s = rt_sum_squares(ctx, %d, xs_); } %s\n", D(E, in, 0), in->nargs, loc);
    return;
  case IR_ARGMAX:
  case IR_ARGMIN:
    out(E, ind, "%s = rt_%s(ctx, %s, %lld, %s); %s\n", D(E, in, 0), ir_op_name[in->op],
        A(E, in, 0), IR_I(in, DIM), IR_I(in, KEEPDIM) ? "true" : "false", loc);
    return;
  case IR_TOPK:
    out(E, ind, "%s = rt_topk(ctx, %s, %lld, %lld); %s\n", D(E, in, 0), A(E, in, 0), IR_I(in, K), IR_I(in, DIM), loc);
    return;
  case IR_CATEGORICAL: /* the noise is keyed by the logits' global indices: their layout */
    out(E, ind, "{ %s\n", loc);
    emit_shape(E, ind + 1, E->f->values[in->args[0]].type, "categorical");
    out(E, ind + 1, "%s = rt_categorical(ctx, %s, &layout_, (uint64_t)%s, (double)%s, (int64_t)%s);\n", D(E, in, 0),
        A(E, in, 0), A(E, in, 1), A(E, in, 2), A(E, in, 3));
    out(E, ind, "}\n");
    return;
  case IR_CUMSUM: out(E, ind, "%s = rt_cumsum(ctx, %s, %lld); %s\n", D(E, in, 0), A(E, in, 0), IR_I(in, DIM), loc); return;
  case IR_SOFTMAX:
  case IR_LOG_SOFTMAX:
    out(E, ind, "%s = rt_%s(ctx, %s, %lld); %s\n", D(E, in, 0), ir_op_name[in->op],
        A(E, in, 0), IR_I(in, DIM), loc);
    return;
  case IR_LAYER_NORM:
    out(E, ind, "%s = rt_layer_norm(ctx, %s, %s, %s, %s); %s\n", D(E, in, 0), A(E, in, 0),
        in->nargs > 1 ? A(E, in, 1) : "NULL", in->nargs > 2 ? A(E, in, 2) : "NULL", num(E, in->f), loc);
    return;
  case IR_RMS_NORM:
    out(E, ind, "%s = rt_rms_norm(ctx, %s, %s, %s); %s\n", D(E, in, 0), A(E, in, 0),
        in->nargs > 1 ? A(E, in, 1) : "NULL", num(E, in->f), loc);
    return;
  case IR_ATTENTION: { /* each row's log-sum-exp only where the backward keeps it */
    bool lse = in->ndst > 1 && in->dst[1] >= 0 && E->nuses[in->dst[1]] > 0;
    emit_gqa_blocks(E, in, ind);
    out(E, ind, "%s = rt_attention%s(ctx, %s, %s, %s, %s, %s, %s%s, %s); %s\n", D(E, in, 0),
        IR_I(in, LAYOUT) ? "_l" : "", A(E, in, 0), A(E, in, 1), A(E, in, 2), IR_I(in, CAUSAL) ? "true" : "false",
        num(E, in->f), in->nargs > 3 ? A(E, in, 3) : "-1", attn_layout_c(E, in),
        lse ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 1)) : "NULL", loc);
    return;
  }
  case IR_CROSS_ENTROPY:
    out(E, ind, "%s = rt_cross_entropy_reduce(ctx, %s, %s, %s); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1),
        ce_reduction_c[IR_I(in, CE_REDUCTION)], loc);
    return;
  case IR_CROSS_ENTROPY_VP: { /* the class offset from the logits' layout; lse only for a backward */
    bool lse = in->ndst > 1 && in->dst[1] >= 0 && E->nuses[in->dst[1]] > 0;
    out(E, ind, "{ %s\n", loc);
    emit_shape(E, ind + 1, E->f->values[in->args[0]].type, "cross_entropy");
    out(E, ind + 1, "%s = rt_cross_entropy_vp(ctx, %s, %s, %s, &layout_, %s, %s);\n", D(E, in, 0), A(E, in, 0),
        A(E, in, 1), ce_reduction_c[IR_I(in, CE_REDUCTION)], axes_c(E, in),
        lse ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 1)) : "NULL");
    out(E, ind, "}\n");
    return;
  }
  case IR_SHARD_RANGE:
    out(E, ind, "%s = rt_shard_%s(ctx, %s, %s); %s\n", D(E, in, 0),
        IR_I(in, EXTENT) ? "extent" : "offset", A(E, in, 0), axes_c(E, in), loc);
    return;
  case IR_AXIS_INDEX:
    out(E, ind, "%s = rt_scalar(ctx, RT_I32, (double)rt_axis_index(ctx, %d)); %s\n", D(E, in, 0), in->axes[0], loc);
    return;
  case IR_IOTA:
    out(E, ind, "{ %s\n", loc);
    emit_shape(E, ind + 1, in->t, E->f->values[in->dst[0]].hint ? E->f->values[in->dst[0]].hint : "iota");
    out(E, ind + 1, "%s = rt_iota(ctx, %s, &layout_, %lld);\n", D(E, in, 0), dtype_c(in->t->dtype), IR_I(in, DIM));
    out(E, ind, "}\n");
    return;
  case IR_WHERE: {
    bool ha = !is_tensor(E, in->args[1]), hb = !is_tensor(E, in->args[2]);
    if (!ha && !hb) {
      out(E, ind, "%s = rt_where(ctx, %s, %s, %s); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1), A(E, in, 2), loc);
      return;
    }
    /* a host number (sched_host_scalars) not in a fused loop: its 0-d tensor made here */
    const char *dt = dtype_c(E->f->values[in->dst[0]].type->dtype);
    out(E, ind, "{ %s\n", loc);
    out(E, ind + 1, "rt_tensor *a_ = %s;\n",
        ha ? arena_sprintf(&E->c->arena, "rt_scalar(ctx, %s, (double)%s)", dt, A(E, in, 1)) : A(E, in, 1));
    out(E, ind + 1, "rt_tensor *b_ = %s;\n",
        hb ? arena_sprintf(&E->c->arena, "rt_scalar(ctx, %s, (double)%s)", dt, A(E, in, 2)) : A(E, in, 2));
    out(E, ind + 1, "%s = rt_where(ctx, %s, a_, b_);\n", D(E, in, 0), A(E, in, 0));
    if (ha)
      out(E, ind + 1, "rt_free(ctx, a_);\n");
    if (hb)
      out(E, ind + 1, "rt_free(ctx, b_);\n");
    out(E, ind, "}\n");
    return;
  }
  case IR_TAKE_ALONG_DIM:
    out(E, ind, "%s = rt_take_along_dim(ctx, %s, %s, %lld); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1), IR_I(in, DIM),
        loc);
    return;
  case IR_DROPOUT:
    /* the mask is keyed by each element's index in x's global layout */
    out(E, ind, "{ %s\n", loc);
    emit_shape(E, ind + 1, in->t, "dropout");
    out(E, ind + 1, "%s = rt_dropout%s(ctx, %s, (double)%s, %s, &layout_, %s);\n", D(E, in, 0), cu ? "_h" : "",
        A(E, in, 0), A(E, in, 2), slot_arg(E, in, 1, "(int64_t)"), axes_c(E, in));
    out(E, ind, "}\n");
    return;
  case IR_EMBEDDING:
    out(E, ind, "%s = rt_embedding(ctx, %s, %s); %s\n", D(E, in, 0), A(E, in, 1), A(E, in, 0), loc);
    return;
  case IR_TRANSPOSE:
    out(E, ind, "%s = rt_transpose(ctx, %s, %lld, %lld); %s\n", D(E, in, 0), A(E, in, 0), IR_I(in, DIM0), IR_I(in, DIM1), loc);
    return;
  case IR_PERMUTE: {
    int nd = E->f->values[in->args[0]].type->ndim;
    out(E, ind, "{ int perm_[] = {");
    for (int i = 0; i < nd; i++)
      fprintf(E->out, "%s%lld", i ? ", " : "", IR_PERM(in, i));
    fprintf(E->out, "}; %s = rt_permute(ctx, %s, perm_); } %s\n", D(E, in, 0), A(E, in, 0), loc);
    return;
  }
  case IR_RESHAPE:
  case IR_EXPAND: {
    out(E, ind, "{ %s\n", loc);
    emit_shape(E, ind + 1, in->t, "reshape");
    if (in->op == IR_RESHAPE)
      emit_reshape_uneven(E, in, ind + 1);
    out(E, ind + 1, "%s = rt_%s(ctx, %s, %d, layout_.local);\n", D(E, in, 0),
        ir_op_name[in->op], A(E, in, 0), in->t->ndim);
    out(E, ind, "}\n");
    return;
  }
  case IR_CONCAT: {
    out(E, ind, "{ const rt_tensor *xs_[] = {");
    for (int i = 0; i < in->nargs; i++)
      fprintf(E->out, "%s%s", i ? ", " : "", A(E, in, i));
    fprintf(E->out, "}; %s = rt_concat(ctx, %d, xs_, %lld); } %s\n", D(E, in, 0), in->nargs, IR_I(in, DIM), loc);
    return;
  }
  case IR_SLICE:
    out(E, ind, "%s = rt_slice(ctx, %s, %lld, %lld, %lld); %s\n", D(E, in, 0), A(E, in, 0), IR_I(in, DIM), IR_I(in, START),
        IR_I(in, END), loc);
    return;
  case IR_ASTYPE:
    out(E, ind, "%s = rt_astype(ctx, %s, %s); %s\n", D(E, in, 0), A(E, in, 0), dtype_c((DType)IR_I(in, DTYPE)), loc);
    return;
  case IR_INDEX: out(E, ind, "%s = rt_index(ctx, %s, %s); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1), loc); return;
  case IR_COPY: {
    /* a local_map's result: local blocks become a global value, whose
     * layout they must be (uneven shards, SPEC 4: torch.chunk's split) */
    const Type *from = E->f->values[in->args[0]].type, *to = E->f->values[in->dst[0]].type;
    bool sharded = false;
    for (int d = 0; to->kind == TY_TENSOR && d < to->ndim; d++)
      sharded |= to->spec[d][0] >= 0;
    if (from->kind == TY_TENSOR && from->local && !to->local && sharded) {
      int line, col;
      source_position(E->c, in->span, &line, &col);
      out(E, ind, "{ /* local_map's blocks must be the layout's */ %s\n", loc);
      emit_shape(E, ind + 1, to, "local_map");
      out(E, ind + 1, "rt_check_blocks(ctx, %s, &layout_, \"local_map's result\", \"%s:%d\");\n", A(E, in, 0),
          source_file(E->c, in->span.file)->path, line);
      out(E, ind, "}\n");
    }
    out(E, ind, "%s = rt_retain(%s); %s\n", D(E, in, 0), A(E, in, 0), loc);
    return;
  }
  case IR_FILL:
  case IR_RANDN:
  case IR_UNIFORM:
  case IR_TOKEN_BATCH:
  case IR_LOAD: {
    const char *name = E->f->values[in->dst[0]].hint ? E->f->values[in->dst[0]].hint : source_text(E, in->span);
    if (in->op == IR_LOAD && in->strs) /* a record's field: its path */
      name = in->strs[0];
    out(E, ind, "{ %s\n", loc);
    emit_shape(E, ind + 1, in->t, name);
    const char *dt = dtype_c(in->t->dtype);
    if (in->op == IR_FILL)
      out(E, ind + 1, "%s = rt_full(ctx, %s, %d, layout_.local, %s);\n", D(E, in, 0), dt, in->t->ndim,
          in->nargs ? arena_sprintf(&E->c->arena, "(double)%s", A(E, in, 0)) : num(E, in->f));
    else if (in->op == IR_RANDN && !IR_I(in, MEAN_GIVEN))
      out(E, ind + 1, "%s = rt_randn%s(ctx, %s, &layout_, %s, (double)%s);\n", D(E, in, 0), cu ? "_h" : "", dt,
          slot_arg(E, in, 0, cu ? "(int64_t)" : "(uint64_t)"), A(E, in, 1));
    else if (in->op == IR_RANDN) { /* with a mean */
      out(E, ind + 1, "rt_tensor *z_ = rt_randn%s(ctx, %s, &layout_, %s, (double)%s);\n", cu ? "_h" : "", dt,
          slot_arg(E, in, 0, cu ? "(int64_t)" : "(uint64_t)"), A(E, in, 1));
      out(E, ind + 1, "%s = rt_binary_scalar%s(ctx, RT_ADD, z_, %s, false);\n", D(E, in, 0), cu ? "_h" : "",
          slot_arg(E, in, 2, "(double)"));
      out(E, ind + 1, "rt_free(ctx, z_);\n");
    } else if (in->op == IR_TOKEN_BATCH)
      out(E, ind + 1, "%s = rt_token_batch(ctx, %s, (uint64_t)%s, (int64_t)%s, &layout_);\n", D(E, in, 0),
          c_string(E, in->s), A(E, in, 0), A(E, in, 1));
    else if (in->op == IR_UNIFORM)
      out(E, ind + 1, "%s = rt_uniform%s(ctx, %s, &layout_, %s, (double)%s, (double)%s);\n", D(E, in, 0),
          cu ? "_h" : "", dt, slot_arg(E, in, 0, cu ? "(int64_t)" : "(uint64_t)"), A(E, in, 1), A(E, in, 2));
    else if (in->strs && path_is_safetensors(in->s)) /* a field of a .safetensors file, by the map */
      out(E, ind + 1, "%s = rt_st_read(ctx, %s, %s, %s, %s, &layout_);\n", D(E, in, 0), c_string(E, in->s),
          in->strs[1] ? c_string(E, in->strs[1]) : "NULL", c_string(E, in->strs[0]), dt);
    else if (in->strs) /* a field of a checkpoint directory */
      out(E, ind + 1, "%s = rt_ckpt_read(ctx, %s, %s, %s, &layout_);\n", D(E, in, 0), c_string(E, in->s),
          c_string(E, in->strs[0]), dt);
    else
      out(E, ind + 1, "%s = rt_load_npy(ctx, %s, %s, &layout_);\n", D(E, in, 0), c_string(E, in->s), dt);
    out(E, ind, "}\n");
    return;
  }
  case IR_SAVE:
    if (in->strs && path_is_safetensors(in->s)) { /* a record: a .safetensors file, by the map */
      const char *map = in->strs[in->nargs];
      out(E, ind, "{ rt_st_save *st_ = rt_st_save_begin(ctx, %s, %s); %s\n", c_string(E, in->s),
          map ? c_string(E, map) : "NULL", loc);
      for (int j = 0; j < in->nargs; j++) {
        out(E, ind + 1, "{\n");
        emit_shape(E, ind + 2, E->f->values[in->args[j]].type, in->strs[j]);
        out(E, ind + 2, "rt_st_save_put(ctx, st_, %s, %s, &layout_);\n", c_string(E, in->strs[j]), A(E, in, j));
        out(E, ind + 1, "}\n");
      }
      out(E, ind + 1, "rt_st_save_commit(ctx, st_);\n");
      out(E, ind, "}\n");
      return;
    }
    if (in->strs) { /* a record: a checkpoint directory, one file per field */
      out(E, ind, "{ rt_ckpt *ckpt_ = rt_ckpt_begin(ctx, %s); %s\n", c_string(E, in->s), loc);
      for (int j = 0; j < in->nargs; j++) {
        out(E, ind + 1, "{\n");
        emit_shape(E, ind + 2, E->f->values[in->args[j]].type, in->strs[j]);
        out(E, ind + 2, "rt_ckpt_write(ctx, ckpt_, %s, %s, &layout_);\n", c_string(E, in->strs[j]), A(E, in, j));
        out(E, ind + 1, "}\n");
      }
      out(E, ind + 1, "rt_ckpt_commit(ctx, ckpt_);\n");
      out(E, ind, "}\n");
      return;
    }
    out(E, ind, "{ %s\n", loc);
    emit_shape(E, ind + 1, in->t, "save");
    out(E, ind + 1, "rt_save_npy(ctx, %s, %s, &layout_);\n", c_string(E, in->s), A(E, in, 0));
    out(E, ind, "}\n");
    return;
  case IR_EXISTS: out(E, ind, "%s = rt_exists(ctx, %s); %s\n", D(E, in, 0), c_string(E, in->s), loc); return;
  case IR_PRINT: {
    out(E, ind, "if (rt_rank(ctx) == 0) { %s\n", loc);
    int a = 0;
    for (int i = 0; i < IR_I(in, NITEMS); i++) {
      const char *sep = i ? "\" \"" : "\"\"";
      if (in->strs[i]) {
        out(E, ind + 1, "printf(%s \"%%s\", %s);\n", sep, c_string(E, in->strs[i]));
        continue;
      }
      int v = in->args[a++];
      Type *t = E->f->values[v].type;
      const char *n = vname(E, v);
      if (t->kind == TY_INT)
        out(E, ind + 1, "printf(%s \"%%lld\", (long long)%s);\n", sep, n);
      else if (t->kind == TY_FLOAT)
        out(E, ind + 1, "printf(%s \"%%.6g\", %s);\n", sep, n);
      else if (t->kind == TY_BOOL)
        out(E, ind + 1, "printf(%s \"%%s\", %s ? \"true\" : \"false\");\n", sep, n);
      else if (t->ndim == 0)
        out(E, ind + 1, "printf(%s \"%%.6g\", rt_item(ctx, %s));\n", sep, n);
      else
        out(E, ind + 1, "%srt_print_values(%s);\n", i ? "fputs(\" \", stdout), " : "", n);
    }
    out(E, ind + 1, "printf(\"\\n\");\n");
    out(E, ind + 1, "fflush(stdout);\n");
    out(E, ind, "}\n");
    return;
  }
  case IR_ALL_REDUCE:
  case IR_ALL_GATHER:
  case IR_REDUCE_SCATTER:
  case IR_ALL_TO_ALL: emit_comm(E, in, ind, loc); return;
  case IR_PPERMUTE:
    out(E, ind, "%s = rt_ppermute(ctx, %s, %s, %lld); %s\n", D(E, in, 0), A(E, in, 0), axes_c(E, in), IR_I(in, SHIFT), loc);
    return;
  case IR_CONVERT:
  case IR_REINTERPRET: {
    if (in->op == IR_CONVERT && IR_I(in, SRC) == LTY_V && IR_I(in, DST) == LTY_P && IR_I(in, DIM) != IR_STACK)
      out(E, ind, "%s = rt_convert_to(ctx, %s, %s, RT_V, RT_P, %lld, %s); %s\n", D(E, in, 0), A(E, in, 0),
          axes_c(E, in), IR_I(in, DIM), extent_c(E, E->f->values[in->dst[0]].type, IR_I(in, DIM), true), loc);
    else if (in->op == IR_CONVERT)
      out(E, ind, "%s = rt_convert(ctx, %s, %s, %s, %s, %s); %s\n", D(E, in, 0), A(E, in, 0), axes_c(E, in),
          ltype_c[IR_I(in, SRC)], ltype_c[IR_I(in, DST)], dim_c(E, IR_I(in, DIM)), loc);
    else {
      emit_reinterpret_even(E, in, ind);
      out(E, ind, "%s = rt_reinterpret(ctx, %s, %s, %s, %s); %s\n", D(E, in, 0), A(E, in, 0), axes_c(E, in),
          ltype_c[IR_I(in, SRC)], ltype_c[IR_I(in, DST)], loc);
    }
    return;
  }
  case IR_UNARY_BWD:
    out(E, ind, "%s = rt_unary_bwd(ctx, RT_%s, %s, %s); %s\n", D(E, in, 0), ir_unary_name[in->unop], A(E, in, 0),
        A(E, in, 1), loc);
    return;
  case IR_BINARY_BWD:
    out(E, ind, "rt_binary_bwd(ctx, RT_%s, %s, %s, %s, %s, %s); %s\n", ir_binary_name[in->binop], A(E, in, 0), A(E, in, 1), A(E, in, 2),
        in->dst[0] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 0)) : "NULL",
        in->dst[1] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 1)) : "NULL", loc);
    return;
  case IR_SUM_TO_SHAPE:
    out(E, ind, "%s = rt_sum_to_shape(ctx, %s, %s->ndim, %s->shape); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1),
        A(E, in, 1), loc);
    return;
  case IR_ATTENTION_BWD:
    out(E, ind, "rt_attention_bwd%s(ctx, %s, %s, %s, %s, %s, %s, %s, %s, %s%s, %s, %s, %s); %s\n",
        IR_I(in, LAYOUT) ? "_l" : "", A(E, in, 0), A(E, in, 1), A(E, in, 2), A(E, in, 3), A(E, in, 4), A(E, in, 5),
        IR_I(in, CAUSAL) ? "true" : "false", num(E, in->f), in->nargs > 6 ? A(E, in, 6) : "-1", attn_layout_c(E, in),
        in->dst[0] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 0)) : "NULL",
        in->dst[1] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 1)) : "NULL",
        in->dst[2] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 2)) : "NULL", loc);
    return;
  case IR_MATMUL_BWD:
    out(E, ind, "rt_matmul_bwd(ctx, %s, %s, %s, %s, %s); %s\n", A(E, in, 0), A(E, in, 1), A(E, in, 2),
        in->dst[0] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 0)) : "NULL",
        in->dst[1] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 1)) : "NULL", loc);
    return;
  case IR_EINSUM_BWD: {
    out(E, ind, "{ const rt_tensor *xs_[] = {");
    for (int i = 0; i + 1 < in->nargs; i++)
      fprintf(E->out, "%s%s", i ? ", " : "", A(E, in, i));
    fprintf(E->out, "}; rt_tensor *dxs_[4] = {0}; rt_einsum_bwd(ctx, %s, %d, xs_, %s, dxs_);", c_string(E, in->s),
            in->nargs - 1, A(E, in, in->nargs - 1));
    for (int i = 0; i < in->ndst; i++)
      if (in->dst[i] >= 0)
        fprintf(E->out, " %s = dxs_[%d]; dxs_[%d] = NULL;", D(E, in, i), i, i);
    fprintf(E->out, " for (int k_ = 0; k_ < 4; k_++) rt_free(ctx, dxs_[k_]); } %s\n", loc);
    return;
  }
  case IR_REDUCE_BWD: {
    const char *fn = ir_op_name[IR_I(in, FWD_OP)]; /* rt_sum_bwd, rt_mean_bwd, rt_amax_bwd */
    out(E, ind, "%s = rt_%s_bwd(ctx, %s, %s, %s); %s\n", D(E, in, 0), fn, A(E, in, 0),
        IR_I(in, DIM) == IR_ALL_DIMS ? "RT_ALL" : arena_sprintf(&E->c->arena, "%lld", IR_I(in, DIM)), A(E, in, 1), loc);
    return;
  }
  case IR_SUM_SQUARES_BWD: { /* dsts not wanted stay NULL */
    out(E, ind, "{ const rt_tensor *xs_[] = {");
    for (int i = 1; i < in->nargs; i++)
      fprintf(E->out, "%s%s", i > 1 ? ", " : "", A(E, in, i));
    fprintf(E->out, "}; const bool want_[] = {");
    for (int i = 0; i < in->ndst; i++)
      fprintf(E->out, "%s%s", i ? ", " : "", in->dst[i] >= 0 ? "true" : "false");
    fprintf(E->out, "}; rt_tensor *dxs_[%d] = {0}; rt_sum_squares_bwd(ctx, %d, xs_, %s, want_, dxs_);", in->ndst,
            in->nargs - 1, A(E, in, 0));
    for (int i = 0; i < in->ndst; i++)
      if (in->dst[i] >= 0)
        fprintf(E->out, " %s = dxs_[%d];", D(E, in, i), i);
    fprintf(E->out, " } %s\n", loc);
    return;
  }
  case IR_CUMSUM_BWD: out(E, ind, "%s = rt_cumsum_bwd(ctx, %s, %lld); %s\n", D(E, in, 0), A(E, in, 0), IR_I(in, DIM), loc); return;
  case IR_SOFTMAX_BWD:
  case IR_LOG_SOFTMAX_BWD:
    out(E, ind, "%s = rt_%s_bwd(ctx, %s, %s, %lld); %s\n", D(E, in, 0), ir_op_name[in->op == IR_SOFTMAX_BWD ? IR_SOFTMAX : IR_LOG_SOFTMAX],
        A(E, in, 0), A(E, in, 1), IR_I(in, DIM), loc);
    return;
  case IR_LAYER_NORM_BWD:
  case IR_RMS_NORM_BWD: {
    bool ln = in->op == IR_LAYER_NORM_BWD;
    bool has_w = IR_I(in, HAS_WEIGHT);
    const char *w = has_w ? A(E, in, 1) : "NULL";
    const char *dy = A(E, in, 2);
    const char *d0 = in->dst[0] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 0)) : "NULL";
    const char *d1 = in->ndst > 1 && in->dst[1] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 1)) : "NULL";
    const char *d2 = in->ndst > 2 && in->dst[2] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 2)) : "NULL";
    if (ln && in->nargs > 3) /* dx = addend + dx (callfuse.c) */
      out(E, ind, "rt_layer_norm_bwd_add(ctx, %s, %s, %s, %s, %s, %s, %s, %s); %s\n", A(E, in, 0), w, num(E, in->f), dy,
          A(E, in, 3), d0, d1, d2, loc);
    else if (ln)
      out(E, ind, "rt_layer_norm_bwd(ctx, %s, %s, %s, %s, %s, %s, %s); %s\n", A(E, in, 0), w, num(E, in->f), dy, d0, d1, d2, loc);
    else
      out(E, ind, "rt_rms_norm_bwd(ctx, %s, %s, %s, %s, %s, %s); %s\n", A(E, in, 0), w, num(E, in->f), dy, d0, d1, loc);
    return;
  }
  case IR_CROSS_ENTROPY_BWD:
    out(E, ind, "%s = rt_cross_entropy_reduce_bwd(ctx, %s, %s, %s, %s); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1),
        A(E, in, 2), ce_reduction_c[IR_I(in, CE_REDUCTION)], loc);
    return;
  case IR_CROSS_ENTROPY_VP_BWD: { /* logits that die here: the gradient in their buffer (rt_reuse's rule) */
    bool reuse = dies_here(E, in->args[0]);
    out(E, ind, "{ %s\n", loc);
    emit_shape(E, ind + 1, E->f->values[in->args[0]].type, "cross_entropy");
    out(E, ind + 1, "%s = rt_cross_entropy_vp_bwd%s(ctx, %s, %s, %s, %s, %s, &layout_);%s\n", D(E, in, 0),
        reuse ? "_reuse" : "", A(E, in, 0), A(E, in, 1), A(E, in, 2), A(E, in, 3),
        ce_reduction_c[IR_I(in, CE_REDUCTION)],
        reuse ? arena_sprintf(&E->c->arena, " /* in place: %s dies here */", A(E, in, 0)) : "");
    out(E, ind, "}\n");
    return;
  }
  case IR_WHERE_BWD:
    out(E, ind, "rt_where_bwd(ctx, %s, %s, %s, %s, %s, %s); %s\n", A(E, in, 0), A(E, in, 1), A(E, in, 2), A(E, in, 3),
        in->dst[0] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 0)) : "NULL",
        in->dst[1] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 1)) : "NULL", loc);
    return;
  case IR_TAKE_ALONG_DIM_BWD:
    out(E, ind, "%s = rt_take_along_dim_bwd(ctx, %s, %s, %s->ndim, %s->shape, %lld); %s\n", D(E, in, 0), A(E, in, 0),
        A(E, in, 1), A(E, in, 2), A(E, in, 2), IR_I(in, DIM), loc);
    return;
  case IR_EMBEDDING_BWD:
    out(E, ind, "%s = rt_embedding_bwd(ctx, %s, %s, %s->shape[0]); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1),
        A(E, in, 2), loc);
    return;
  case IR_SLICE_BWD:
    out(E, ind, "%s = rt_slice_bwd(ctx, %s, %s->ndim, %s->shape, %lld, %lld); %s\n", D(E, in, 0), A(E, in, 0),
        A(E, in, 1), A(E, in, 1), IR_I(in, DIM), IR_I(in, START), loc);
    return;
  case IR_CONCAT_BWD: {
    out(E, ind, "{ int64_t off_ = 0; %s\n", loc);
    for (int i = 1; i < in->nargs; i++) {
      const char *x = A(E, in, i);
      if (in->dst[i - 1] >= 0)
        out(E, ind + 1, "%s = rt_slice(ctx, %s, %lld, off_, off_ + %s->shape[%lld]);\n", D(E, in, i - 1), A(E, in, 0),
            IR_I(in, DIM), x, IR_I(in, DIM));
      out(E, ind + 1, "off_ += %s->shape[%lld];\n", x, IR_I(in, DIM));
    }
    out(E, ind, "}\n");
    return;
  }
  case IR_INDEX_ADD_SLOT:
    out(E, ind, "%s = rt_index_add(ctx, %s, %s, %s); %s\n", varname(E, (int)IR_I(in, SLOT)), varname(E, (int)IR_I(in, SLOT)),
        A(E, in, 1), A(E, in, 0), loc);
    return;
  case IR_INDEX_BWD:
    out(E, ind, "%s = rt_index_bwd(ctx, %s, %s->ndim, %s->shape, %s); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1),
        A(E, in, 1), A(E, in, 2), loc);
    return;
  case IR_ACCUM: out(E, ind, "%s = rt_binary(ctx, RT_ADD, %s, %s); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 1), loc); return;
  case IR_ZEROS_LIKE:
  case IR_ONES_LIKE:
    out(E, ind, "%s = rt_full(ctx, %s->dtype, %s->ndim, %s->shape, %s); %s\n", D(E, in, 0), A(E, in, 0), A(E, in, 0),
        A(E, in, 0), in->op == IR_ONES_LIKE ? "1.0" : "0.0", loc);
    return;
  case IR_CALL:
  case IR_VJP_CALL: {
    int cline = 0;
    if (in->span.file) { /* rt_call_end restores the line after it */
      out(E, ind, "rt_call_begin(ctx, %s);\n", loc_string(E, in->span, &cline));
      E->at_file = in->span.file;
      E->at_line = cline;
    }
    out(E, ind, "f_%s(ctx%s", in->callee->cname, ir_uses_tape(in->callee) ? ", tape" : "");
    /* owned parameters (schedule.c): an argument that dies here is handed
     * over (the callee may write over it), any other gets a reference */
    bool *handed = arena_alloc(&E->c->arena, sizeof(bool) * (size_t)(in->nargs + 1));
    for (int i = 0; i < in->nargs; i++) {
      int n = 0;
      for (int k = 0; k < in->nargs; k++)
        n += in->args[k] == in->args[i];
      bool owned = in->op == IR_CALL && sched_param_owned(E->c, in->callee, i);
      handed[i] = owned && n == 1 && dies_here(E, in->args[i]);
      fprintf(E->out, owned && !handed[i] ? ", rt_retain(%s)" : ", %s", A(E, in, i));
    }
    for (int i = 0; i < in->ndst; i++)
      fprintf(E->out, ", %s", in->dst[i] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, i)) : "NULL");
    fprintf(E->out, "); %s\n", loc);
    for (int i = 0; i < in->nargs; i++)
      if (handed[i])
        out(E, ind, "%s = NULL; /* handed over to the callee */\n", A(E, in, i));
    if (in->span.file)
      out(E, ind, "rt_call_end(ctx);\n");
    return;
  }
  case IR_VAR_SET:
    if (is_tensor(E, in->args[0])) {
      out(E, ind, "rt_free(ctx, %s); %s = rt_retain(%s); %s\n", varname(E, (int)IR_I(in, SLOT)), varname(E, (int)IR_I(in, SLOT)),
          A(E, in, 0), loc);
      if (E->f == E->p->main && E->slot_kind && E->slot_kind[IR_I(in, SLOT)] != MEM_SLOT_TEMP) /* docs/memory.md */
        out(E, ind, "rt_mem_hold(ctx, %lld, %s, %s);\n", IR_I(in, SLOT), varname(E, (int)IR_I(in, SLOT)),
            E->slot_kind[IR_I(in, SLOT)] == MEM_SLOT_PARAM ? "RT_MEM_PARAM" : "RT_MEM_OPT");
    } else
      out(E, ind, "%s = %s; %s\n", varname(E, (int)IR_I(in, SLOT)), A(E, in, 0), loc);
    return;
  case IR_VAR_GET:
    if (is_tensor(E, in->dst[0]))
      out(E, ind, "%s = rt_retain(%s);\n", D(E, in, 0), varname(E, (int)IR_I(in, SLOT)));
    else
      out(E, ind, "%s = %s;\n", D(E, in, 0), varname(E, (int)IR_I(in, SLOT)));
    return;
  case IR_FOR: {
    if (IR_I(in, BACKWARDS)) /* a backward loop */
      out(E, ind, "for (%s = %s - 1; %s >= %s; %s--) { %s\n", D(E, in, 0), A(E, in, 1), D(E, in, 0), A(E, in, 0),
          D(E, in, 0), loc);
    else
      out(E, ind, "for (%s = %s; %s < %s; %s++) { %s\n", D(E, in, 0), A(E, in, 0), D(E, in, 0), A(E, in, 1),
          D(E, in, 0), loc);
    /* each iteration of a loop of main's body (the training step) is a
     * region: --profile gives its median time; the first ends start-up */
    bool step = E->f == E->p->main && ind == 1;
    if (step) {
      const char *var = E->f->values[in->dst[0]].hint;
      const char *label = arena_sprintf(&E->c->arena, "for %s (%s:%d)", var ? var : "i",
                                        source_file(E->c, in->span.file)->path, line);
      out(E, ind + 1, "rt_step_begin(ctx, %s); /* one iteration: a region in --trace and --profile */\n",
          c_string(E, label));
    }
    if (E->f == E->p->main)
      E->loop_depth++;
    if (E->f == E->p->main && E->region_report)
      fprintf(E->region_report, "%s:%d: for %s: its body's graph regions:\n", source_file(E->c, in->span.file)->path, line,
              E->f->values[in->dst[0]].hint ? E->f->values[in->dst[0]].hint : "i");
    int graphs_before = E->ngraphs;
    emit_block(E, &in->body, ind + 1);
    if (E->f == E->p->main)
      E->loop_depth--;
    if (E->f == E->p->main && E->region_report && E->ngraphs == graphs_before)
      fprintf(E->region_report, "  none: no stretch of at least %d device operations without a host effect\n",
              REGION_MIN_OPS);
    if (step)
      out(E, ind + 1, "rt_trace_end(ctx);\n");
    out(E, ind, "}\n");
    E->at_line = 0;
    return;
  }
  case IR_IF:
    out(E, ind, "if (%s) { %s\n", A(E, in, 0), loc);
    emit_block(E, &in->body, ind + 1);
    if (in->els.head) {
      out(E, ind, "} else {\n");
      emit_block(E, &in->els, ind + 1);
    }
    out(E, ind, "}\n");
    E->at_line = 0;
    return;
  case IR_RETURN:
    for (int i = 0; i < in->nargs; i++)
      if (is_tensor(E, in->args[i]))
        out(E, ind, "*ret%d = rt_retain(%s); %s\n", i, A(E, in, i), loc);
      else /* a host result (a generic fn's, SPEC 13) */
        out(E, ind, "*ret%d = %s; %s\n", i, A(E, in, i), loc);
    return;
  case IR_PUSH:
    for (int i = 0; i < in->nargs; i++) {
      int v = in->args[i];
      if (is_tensor(E, v))
        out(E, ind, "tape_push(ctx, tape, rt_retain(%s), 0);\n", vname(E, v));
      else
        out(E, ind, "tape_push(ctx, tape, NULL, (double)%s);\n", vname(E, v));
    }
    return;
  case IR_POP:
    for (int i = in->ndst - 1; i >= 0; i--) {
      int v = in->dst[i];
      if (is_tensor(E, v))
        out(E, ind, "%s = tape_pop(ctx, tape, NULL);\n", vname(E, v));
      else
        out(E, ind, "{ double h_; tape_pop(ctx, tape, &h_); %s = (%s)h_; }\n", vname(E, v),
            ctype_of(E->f->values[v].type));
    }
    return;
  case IR_FREE: out(E, ind, "rt_free(ctx, %s); %s = NULL;\n", A(E, in, 0), A(E, in, 0)); return;
  case IR_COUNT: return;
  }
}

/* ---- elementwise fusion ----
 * A run of consecutive arithmetic instructions (+ - * /, negation, sqrt,
 * square, gradient accumulation) on tensors of one shape and dtype, and host
 * scalars, becomes one C loop: intermediates live in registers, only values
 * used after the run are stored.  Each operation rounds to the dtype as the
 * runtime's kernels do, so results are bit-identical to the unfused code.
 * Host computations and var reads between them are emitted before the loop.
 *
 * In place: a stored result takes the buffer of an operand that dies in the
 * run (a tensor this block owns, read for the last time here) through
 * rt_reuse, which hands the buffer over when no one else holds it (refs ==
 * 1) and allocates otherwise.  Every element is read before the iteration
 * stores anything, so writing over an operand is safe.  With the var moves
 * of emit_block, `w = w - LR * g` and the Adam moments update in place.
 * Which instructions form a region, which members are stored and which
 * operand's buffer each takes is the schedule's (schedule.c), which
 * --memory-report follows too. */

static bool is_param(Emitter *E, int v) { return sched_is_param(E->f, v); }
static const char *fused_op(const IrInst *in) { return sched_fused_op(in); }
static bool transparent(IrInst *in) { return sched_transparent(in); }

bool emit_transparent(const IrInst *in) { return ir_has(in->op, IRF_FUSE_THROUGH); }

/* The C expression of operand v of a member inside the loop. */
static const char *fused_operand(Emitter *E, int v, const char *const *reg) {
  return reg[v] ? reg[v] : E->tgt->operand(E, v);
}

bool emit_trailing(Emitter *E, int v) {
  const Type *t = E->f->values[v].type;
  return E->fuse_t && t->kind == TY_TENSOR && sched_trailing(t, E->fuse_t);
}

/* the size of trailing operand v, a local of the region (CPU) or a kernel
 * argument (CUDA): a name no value has (theirs end in a digit) */
const char *emit_trailing_n(Emitter *E, int v) { return arena_sprintf(&E->c->arena, "%s_n_", vname(E, v)); }

bool emit_row(Emitter *E, int v) {
  const Type *t = E->f->values[v].type;
  return E->fuse_t && t->kind == TY_TENSOR && sched_row_operand(t, E->fuse_t);
}

const char *emit_row_n(Emitter *E, int v) { return arena_sprintf(&E->c->arena, "%s_r_", vname(E, v)); }

bool emit_fuse_bf16(Emitter *E) { return E->fuse_t && E->fuse_t->dtype == DT_BF16; }

/* The CPU target: the region is an inline loop over the tensors' data.  A
 * bf16 region computes in f32 (T_): each element widened as it is read, a
 * host number rounded to bf16 first (as the kernels' scalar operand). */
static const char *cpu_operand(Emitter *E, int v) {
  const Type *t = E->f->values[v].type;
  const char *n = vname(E, v);
  if (t->kind != TY_TENSOR)
    return emit_fuse_bf16(E) ? arena_sprintf(&E->c->arena, "rt_bf16_round((float)%s)", n)
                             : arena_sprintf(&E->c->arena, "((%s)%s)", t->dtype == DT_F64 ? "double" : "float", n);
  const char *at = t->ndim == 0          ? "[0]"
                   : emit_trailing(E, v) ? arena_sprintf(&E->c->arena, "[i_ %% %s]", emit_trailing_n(E, v))
                                         : "[i_]";
  if (emit_fuse_bf16(E))
    return arena_sprintf(&E->c->arena, "rt_bf16_to_f32(((const uint16_t *)%s->data)%s)", n, at);
  if (t->ndim == 0)
    return arena_sprintf(&E->c->arena, "(*(const T_ *)%s->data)", n);
  return arena_sprintf(&E->c->arena, "((const T_ *)%s->data)%s", n, at);
}

static const char *cpu_store(Emitter *E, int v) {
  return arena_sprintf(&E->c->arena, emit_fuse_bf16(E) ? "((uint16_t *)%s->data)[i_]" : "((T_ *)%s->data)[i_]",
                       vname(E, v));
}

/* special[k] (emit_block decides): a var read that hands the var's
 * reference over (var_moves), or an all_reduce that starts non-blocking
 * (overlap.c). */
static void emit_at(Emitter *E, IrInst **insts, int k, const bool *special, int ind) {
  IrInst *in = insts[k];
  if (E->in_region && region_hoisted(E->c, E->f, in))
    return; /* emitted before the region (emit_region_begin) */
  if (special[k] && in->op == IR_ALL_REDUCE) {
    int line, col;
    source_position(E->c, in->span, &line, &col);
    bool reuse = dies_here(E, in->args[0]);
    out(E, ind, "%s = rt_all_reduce_start%s(ctx, %s, %s, %s); /* %s:%d: non-blocking%s, waited where first used */\n",
        D(E, in, 0), reuse ? "_reuse" : "", A(E, in, 0), axes_c(E, in),
        reduce_c[IR_I(in, REDUCE)],
        source_file(E->c, in->span.file)->path, line,
        reuse ? arena_sprintf(&E->c->arena, ", in place: %s dies here", A(E, in, 0)) : "");
    E->started = true;
    return;
  }
  if (special[k]) {
    const char *var = varname(E, (int)IR_I(in, SLOT));
    out(E, ind, "%s = %s; %s = NULL; /* the last read before %s is set: moved */\n", D(E, in, 0), var, var,
        E->f->vars[IR_I(in, SLOT)].name);
    E->moved[in->dst[0]] = true;
    return;
  }
  emit_inst(E, in, ind);
}

/* A fused unary op's spelling (sched_fused_unary) with each X the operand x. */
static const char *fused_spelling(Emitter *E, const char *spelling, const char *x) {
  StrBuf sb;
  sb_init(&sb, &E->c->arena);
  for (const char *p = spelling; *p; p++)
    if (*p == 'X')
      sb_puts(&sb, x);
    else
      sb_putc(&sb, *p);
  return sb.data;
}

void emit_fused_body(Emitter *E, const FusedRegion *r, int ind) {
  IrInst **insts = r->insts;
  const char **reg = r->reg;
  const Type *t = r->t;
  memset(reg, 0, sizeof(char *) * (size_t)(E->f->nvalues + 1));
  for (int k = r->j; k < r->end; k++) {
    IrInst *in = insts[k];
    if (transparent(in))
      continue;
    int v = in->dst[0];
    const char *x = fused_operand(E, in->args[0], reg);
    const char *expr = NULL, *bind = NULL, *formula = NULL;
    if (in->op == IR_UNARY && sched_fused_unary(in->unop, t->dtype)) {
      expr = fused_spelling(E, sched_fused_unary(in->unop, t->dtype), x);
    } else if (in->op == IR_UNARY) { /* the CUDA target: the kernel's formula, in the dtype (spmdrt_kernels.h) */
      bind = arena_sprintf(&E->c->arena, "const T_ x = %s;", x);
      formula = arena_sprintf(&E->c->arena, "RT_FUSED_UNARY(RT_%s, T_, x, %s)", ir_unary_name[in->unop],
                              sched_unary_formula(in->unop));
    } else if (in->op == IR_WHERE) { /* the kernel's choice: the condition's value != 0 (NaN too) */
      expr = arena_sprintf(&E->c->arena, "%s != 0 ? %s : %s", x, fused_operand(E, in->args[1], reg),
                           fused_operand(E, in->args[2], reg));
    } else {
      const char *y = fused_operand(E, in->args[1], reg);
      if (in->op == IR_BINARY_SCALAR && IR_I(in, SCALAR_LEFT)) {
        const char *tmp = x;
        x = y;
        y = tmp;
      }
      if (fused_op(in) && t->dtype != DT_I32) { /* i32: rt_binary's formula in double, as its kernel */
        expr = arena_sprintf(&E->c->arena, "%s %s %s", x, fused_op(in), y);
      } else { /* the kernel's formula, in double */
        bind = arena_sprintf(&E->c->arena, "const double a = %s, b = %s;", x, y);
        formula = sched_binary_formula(in->binop);
      }
    }
    /* bf16: each member's value rounded to bf16, as each kernel stores it */
    const char *round = !emit_fuse_bf16(E) ? "" : E->tgt->typed_host ? "rt_bf16_round" : "rt_k_bf16_round";
    if (expr && *round)
      out(E, ind, "const T_ r%d_ = %s(%s);\n", v, round, expr);
    else if (expr)
      out(E, ind, "const T_ r%d_ = %s;\n", v, expr);
    else
      out(E, ind, "T_ r%d_;\n", v);
    if (!expr && *round)
      out(E, ind, "{ %s r%d_ = %s((T_)(%s)); }\n", bind, v, round, formula);
    else if (!expr)
      out(E, ind, "{ %s r%d_ = (T_)(%s); }\n", bind, v, formula);
    reg[v] = arena_sprintf(&E->c->arena, "r%d_", v);
  }
  /* stores last: an output may share its buffer with an operand read above */
  for (int k = r->j; k < r->end; k++) {
    if (transparent(insts[k]))
      continue;
    int v = insts[k]->dst[0];
    if (r->out[k] != SCHED_IN_REGISTER && emit_fuse_bf16(E)) /* exact: already rounded */
      out(E, ind, "%s = %s(r%d_);\n", E->tgt->store(E, v), E->tgt->typed_host ? "rt_f32_to_bf16" : "rt_k_f32_to_bf16", v);
    else if (r->out[k] != SCHED_IN_REGISTER)
      out(E, ind, "%s = r%d_;\n", E->tgt->store(E, v), v);
  }
}

/* whole blocks of RT_FUSED_BLOCK elements, then the rest: the blocks' loop
 * has a constant trip count and independent iterations (RT_INDEPENDENT),
 * so the C compiler vectorises it at -O2 */
static void cpu_fused(Emitter *E, const FusedRegion *r, int ind) {
  out(E, ind, "int64_t b_ = 0;\n");
  out(E, ind, "for (; b_ + RT_FUSED_BLOCK <= n_; b_ += RT_FUSED_BLOCK) {\n");
  out(E, ind + 1, "RT_INDEPENDENT for (int64_t k_ = 0; k_ < RT_FUSED_BLOCK; k_++) {\n");
  out(E, ind + 2, "const int64_t i_ = b_ + k_;\n");
  emit_fused_body(E, r, ind + 2);
  out(E, ind + 1, "}\n");
  out(E, ind, "}\n");
  out(E, ind, "for (int64_t i_ = b_; i_ < n_; i_++) {\n");
  emit_fused_body(E, r, ind + 1);
  out(E, ind, "}\n");
}

const Target target_cpu = {"cpu", true, cpu_fused, cpu_operand, cpu_store};

/* A multi-tensor group (sched_multi_group, issue 26): a layer's stacked
 * gradients added into their accumulators' rows, global_norm's sums of
 * squares, or zero fills, as one
 * runtime call. */
static void emit_multi(Emitter *E, const Schedule *S, int j, int end, int ind) {
  IrInst **insts = S->insts;
  int n = end - j, line, col;
  source_position(E->c, insts[j]->span, &line, &col);
  const char *path = insts[j]->span.file ? source_file(E->c, insts[j]->span.file)->path : "<generated>";
  for (int k = j; k < end; k++) /* the same guards as the members' own calls (a region's fill makes them) */
    emit_guards(E, insts[k], ind);
  if (insts[j]->op == IR_INDEX_ADD_SLOT) {
    out(E, ind, "{ /* %s:%d: a layer's %d stacked gradients, one operation */\n", path, line, n);
    out(E, ind + 1, "rt_tensor *acc_[] = {");
    for (int k = j; k < end; k++)
      fprintf(E->out, "%s%s", k > j ? ", " : "", varname(E, (int)IR_I(insts[k], SLOT)));
    fputs("};\n", E->out);
    out(E, ind + 1, "const rt_tensor *x_[] = {");
    for (int k = j; k < end; k++)
      fprintf(E->out, "%s%s", k > j ? ", " : "", A(E, insts[k], 0));
    fputs("};\n", E->out);
    out(E, ind + 1, "rt_index_add_multi(ctx, %d, acc_, %s, x_);\n", n, A(E, insts[j], 1));
    for (int k = j; k < end; k++)
      out(E, ind + 1, "%s = acc_[%d];\n", varname(E, (int)IR_I(insts[k], SLOT)), k - j);
    out(E, ind, "}\n");
    return;
  }
  if (insts[j]->op == IR_SUM_SQUARES) {
    out(E, ind, "{ /* %s:%d: %d sums of squares, one operation */\n", path, line, n);
    out(E, ind + 1, "const rt_tensor *xs_[] = {");
    for (int k = j, first = 1; k < end; k++)
      for (int a = 0; a < insts[k]->nargs; a++, first = 0)
        fprintf(E->out, "%s%s", first ? "" : ", ", A(E, insts[k], a));
    fputs("};\n", E->out);
    out(E, ind + 1, "rt_tensor *ys_[%d];\n", n);
    out(E, ind + 1, "rt_sum_squares_multi(ctx, %d, (const int[]){", n);
    for (int k = j; k < end; k++)
      fprintf(E->out, "%s%d", k > j ? ", " : "", insts[k]->nargs);
    fputs("}, xs_, ys_);\n", E->out);
    for (int k = j; k < end; k++)
      out(E, ind + 1, "%s = ys_[%d];\n", D(E, insts[k], 0), k - j);
    out(E, ind, "}\n");
    return;
  }
  out(E, ind, "{ /* %s:%d: %d zero fills, one operation */\n", path, line, n);
  for (int k = j; k < end; k++) {
    IrInst *in = insts[k];
    const char *name = E->f->values[in->dst[0]].hint ? E->f->values[in->dst[0]].hint : source_text(E, in->span);
    out(E, ind + 1, "{\n");
    emit_shape(E, ind + 2, in->t, name);
    out(E, ind + 2, "%s = rt_empty(ctx, %s, %d, layout_.local);\n", D(E, in, 0), dtype_c(in->t->dtype), in->t->ndim);
    out(E, ind + 1, "}\n");
  }
  out(E, ind + 1, "rt_zero_multi(ctx, %d, (rt_tensor *[]){", n);
  for (int k = j; k < end; k++)
    fprintf(E->out, "%s%s", k > j ? ", " : "", D(E, insts[k], 0));
  fputs("});\n", E->out);
  out(E, ind, "}\n");
}

/* A fused region's n_ (the size of first, a tensor operand of its shape),
 * the checks of its operands' sizes and its stored members' tensors (a
 * donor's buffer or a new one); reg marks the members.  Returns first. */
static const char *region_outputs(Emitter *E, const Schedule *S, int j, int end, const char **reg, int ind) {
  IrInst **insts = S->insts;
  const Type *t = E->fuse_t;
  const char *first = NULL;
  for (int k = j; k < end && !first; k++)
    if (!transparent(insts[k]))
      for (int a = 0; a < insts[k]->nargs && !first; a++) {
        const Type *at = E->f->values[insts[k]->args[a]].type;
        if (at->kind == TY_TENSOR && sched_same_layout(at, t) && !reg[insts[k]->args[a]])
          first = vname(E, insts[k]->args[a]);
      }
  if (!first)
    first = "NULL"; /* not reached: the first member has a tensor operand of the run's shape */
  out(E, ind, "const int64_t n_ = %s->numel;\n", first);
  /* outputs: members read after the run */
  for (int k = j; k < end; k++) {
    if (transparent(insts[k]))
      continue;
    int v = insts[k]->dst[0];
    for (int a = 0; a < insts[k]->nargs; a++) {
      int av = insts[k]->args[a];
      const Type *at = E->f->values[av].type;
      if (at->kind != TY_TENSOR || at->ndim == 0 || reg[av])
        continue;
      if (emit_row(E, av)) { /* a value per row: its row's length, once */
        out(E, ind, "const int64_t %s = %s->numel ? n_ / %s->numel : 0; /* a value per row: read at i_ / %s */\n",
            emit_row_n(E, av), vname(E, av), vname(E, av), emit_row_n(E, av));
        out(E, ind,
            "RT_CHECK(ctx, %s * %s->numel == n_, \"internal error: fused operands differ in size\");\n",
            emit_row_n(E, av), vname(E, av));
        reg[av] = "";
      } else if (!emit_trailing(E, av)) {
        out(E, ind, "RT_CHECK(ctx, %s->numel == n_, \"internal error: fused operands differ in size\");\n",
            vname(E, av));
      } else if (!reg[av]) { /* its size, once (a name of its own: reg marks it done) */
        out(E, ind, "const int64_t %s = %s->numel; /* of the trailing dims: read at i_ %% %s */\n",
            emit_trailing_n(E, av), vname(E, av), emit_trailing_n(E, av));
        out(E, ind,
            "RT_CHECK(ctx, n_ == 0 || (%s > 0 && n_ %% %s == 0), \"internal error: fused operands differ in size\");\n",
            emit_trailing_n(E, av), emit_trailing_n(E, av));
        reg[av] = "";
      }
    }
    if (S->out[k] >= 0) {
      const char *d = vname(E, S->out[k]);
      out(E, ind, "%s = rt_reuse(ctx, %s); /* in place: %s dies here */\n", vname(E, v), d, d);
    } else if (S->out[k] == SCHED_NEW_BUFFER) {
      out(E, ind, "%s = rt_empty(ctx, %s, %s->ndim, %s->shape);\n", vname(E, v), dtype_c(t->dtype), first, first);
    }
    reg[v] = arena_sprintf(&E->c->arena, "r%d_", v);
  }
  return first;
}

/* Emits the fused elementwise region the schedule starts at insts[j]
 * (schedule.c's fused_region: its members, which are stored, which take a
 * dying operand's buffer).  blk: the block's number (E->defblk). */
static void emit_fused(Emitter *E, const Schedule *S, int j, int ind) {
  IrInst **insts = S->insts;
  int end = S->run_end[j], members = 0;
  const Type *t = E->f->values[insts[j]->dst[0]].type;
  const char **reg = arena_alloc(&E->c->arena, sizeof(char *) * (size_t)(E->f->nvalues + 1));
  for (int k = j; k < end; k++)
    members += !transparent(insts[k]);
  const char *T = t->dtype == DT_F64 ? "double" : "float";
  int line, col;
  source_position(E->c, insts[j]->span, &line, &col);
  for (int k = j; k < end; k++)
    if (transparent(insts[k]))
      emit_at(E, insts, k, S->special, ind);
  out(E, ind, "{ /* %s:%d: %d elementwise operation%s in one loop */\n", source_file(E->c, insts[j]->span.file)->path,
      line, members, members > 1 ? "s" : "");
  if (E->tgt->typed_host)
    out(E, ind + 1, "typedef %s T_;\n", T);
  out(E, ind + 1, "rt_kspan span_ = rt_kernel_begin(ctx); /* --profile, --trace */\n");
  E->fuse_t = t;
  const char *first = region_outputs(E, S, j, end, reg, ind + 1);
  FusedRegion region = {insts, j, end, members, t, S->out, reg, first, insts[j]->span};
  E->tgt->fused(E, &region, ind + 1);
  E->fuse_t = NULL;
  out(E, ind + 1, "rt_kernel_end(ctx, &span_, RT_K_ELEMENTWISE, \"fused\");\n");
  out(E, ind, "}\n");
}

/* The rows of the fused regions insts[j..e) (sched_horizontal_group,
 * issue 26), each as a region of its own members (rows[i].insts, .out: the
 * schedule's, row by row); region[i]: the instruction where row i's region
 * starts. */
static FusedRegion *horizontal_rows(Emitter *E, const Schedule *S, int j, int e, int **region, int *nrows) {
  Arena *ar = &E->c->arena;
  int *comp = arena_alloc(ar, sizeof(int) * (size_t)(S->n + 1)), n = 0;
  for (int r = j; r < e; r = S->run_end[r])
    n += sched_region_rows(E->f, S, r, S->run_end[r], comp);
  FusedRegion *rows = arena_alloc(ar, sizeof(FusedRegion) * (size_t)n);
  *region = arena_alloc(ar, sizeof(int) * (size_t)n);
  int i = 0;
  for (int r = j; r < e; r = S->run_end[r]) {
    int re = S->run_end[r], nr = sched_region_rows(E->f, S, r, re, comp);
    for (int x = 0; x < nr; x++, i++) {
      int m = 0;
      IrInst **insts = arena_alloc(ar, sizeof(IrInst *) * (size_t)(re - r));
      int *out = arena_alloc(ar, sizeof(int) * (size_t)(re - r));
      for (int k = r; k < re; k++)
        if (comp[k - r] == x) {
          insts[m] = S->insts[k];
          out[m++] = S->out[k];
        }
      const char **reg = arena_alloc(ar, sizeof(char *) * (size_t)(E->f->nvalues + 1));
      rows[i] = (FusedRegion){insts, 0, m, m, E->f->values[insts[0]->dst[0]].type, out, reg, NULL, insts[0]->span};
      (*region)[i] = r;
    }
  }
  *nrows = n;
  return rows;
}

/* Fused regions whose rows have one per-element body, on the CUDA target:
 * each region's size, checks and stored tensors as emit_fused has them,
 * each row's size and device pointers into a table, then one multi-tensor
 * launch (emit_cuda.c) over all the rows. */
static void emit_horizontal(Emitter *E, const Schedule *S, int j, int e, int ind) {
  IrInst **insts = S->insts;
  int nr, *region, line, col;
  FusedRegion *rows = horizontal_rows(E, S, j, e, &region, &nr);
  for (int k = j; k < S->run_end[j]; k++)
    if (transparent(insts[k]))
      emit_at(E, insts, k, S->special, ind);
  source_position(E->c, insts[j]->span, &line, &col);
  out(E, ind, "{ /* %s:%d: %d copies of one fused body (%d elementwise operation%s), one multi-tensor launch */\n",
      source_file(E->c, insts[j]->span.file)->path, line, nr, rows[0].members, rows[0].members > 1 ? "s" : "");
  out(E, ind + 1, "rt_kspan span_ = rt_kernel_begin(ctx); /* --profile, --trace */\n");
  cuda_multi_table(E, rows, nr, ind + 1);
  for (int i = 0; i < nr;) {
    int r = region[i];
    const char **reg = arena_alloc(&E->c->arena, sizeof(char *) * (size_t)(E->f->nvalues + 1));
    out(E, ind + 1, "{\n");
    E->fuse_t = E->f->values[insts[r]->dst[0]].type;
    const char *first = region_outputs(E, S, r, S->run_end[r], reg, ind + 2);
    for (; i < nr && region[i] == r; i++) {
      rows[i].first = first;
      cuda_multi_field(E, rows, i, ind + 2);
    }
    out(E, ind + 1, "}\n");
  }
  E->fuse_t = rows[0].t;
  cuda_multi_launch(E, rows, nr, ind + 1);
  E->fuse_t = NULL;
  out(E, ind + 1, "rt_kernel_end(ctx, &span_, RT_K_ELEMENTWISE, \"fused\");\n");
  out(E, ind, "}\n");
}

/* A bf16 matmul whose result only feeds `+ bias` (bias 1-D over the last
 * dim) and/or gelu, gelu_tanh or relu becomes one oneDNN GEMM with the bias
 * and the activation as post-ops (rt_matmul_bias_act; the CUDA runtime:
 * cuBLASLt's epilogue): the intermediate [.., N] results are never
 * written.  A differentiated bf16 forward keeps the matmul's result for the
 * backward, so there the uses do not allow it: this pays in forward-only
 * code (evaluation, inference).  On the CUDA target an f32 `x @ w + b`
 * fuses too, in a differentiated forward as well: the matmul's saves are
 * pushed before the GEMM, and the add saves the sum in place of the
 * matmul's result (its backward reads only the shape).  The schedule finds
 * it (sched_gemm_epilogue). */
static void emit_gemm_epilogue(Emitter *E, const Schedule *S, int j, int ind) {
  IrInst *mm = S->insts[j];
  int bias, act, k = j + sched_gemm_epilogue(E->c, E->f, S->insts, j, S->n, E->nuses, &bias, &act);
  int cur = S->insts[k - 1]->dst[0];
  for (int i = j + 1; i < k; i++) /* a differentiated forward's saves of the matmul's operands */
    if (S->insts[i]->op == IR_PUSH)
      emit_at(E, S->insts, i, S->special, ind);
  const char *actname = act >= 0 ? ir_unary_name[act] : NULL;
  int line, col;
  source_position(E->c, mm->span, &line, &col);
  const char *what = mm->op == IR_EINSUM ? arena_sprintf(&E->c->arena, "einsum %s", mm->s) : "matmul";
  out(E, ind, "%s = rt_matmul_bias_act(ctx, %s, %s, %s, %s); /* %s:%d: %s%s%s%s in one GEMM */\n", vname(E, cur),
      A(E, mm, 0), A(E, mm, 1), bias >= 0 ? vname(E, bias) : "NULL",
      actname ? arena_sprintf(&E->c->arena, "RT_%s", actname) : "-1", source_file(E->c, mm->span.file)->path, line, what,
      bias >= 0 ? " + bias" : "", actname ? ", " : "", actname ? actname : "");
}

/* A gradient's sum that the dX GEMM of a matmul's backward does (the CUDA
 * target; sched_gemm_accumulate found it): at the MATMUL_BWD / EINSUM_BWD,
 * rt_matmul_bwd_bias_acc adds dX to the sum's other operand, whose
 * reference it takes, and returns the sum (bias: the bias gradient from
 * the dW GEMM, emit_bias_grad_gemm's; NULL: none); the sum itself is
 * done then. */
static void emit_gemm_acc(Emitter *E, const Schedule *S, int j, const char *bias, int ind) {
  IrInst *in = S->insts[j];
  if (in->op == IR_ACCUM) {
    int line, col;
    source_position(E->c, S->insts[S->acc[j]]->span, &line, &col);
    out(E, ind, "/* %s: summed by the dX GEMM of %s:%d */\n", D(E, in, 0),
        source_file(E->c, S->insts[S->acc[j]]->span.file)->path, line);
    return;
  }
  IrInst *sum = S->insts[S->acc[j]];
  int p = sum->args[sum->args[0] == in->dst[0] ? 1 : 0];
  out(E, ind, "%s = rt_matmul_bwd_bias_acc(ctx, %s, %s, %s, %s, %s, %s); %s = NULL; /* %s backward, dX added to %s in the GEMM */\n",
      D(E, sum, 0), A(E, in, 0), A(E, in, 1), A(E, in, 2), vname(E, p),
      in->ndst > 1 && in->dst[1] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, 1)) : "NULL",
      bias ? arena_sprintf(&E->c->arena, "&%s", bias) : "NULL", vname(E, p),
      in->op == IR_EINSUM_BWD ? arena_sprintf(&E->c->arena, "einsum %s", in->s) : "matmul", vname(E, p));
}

/* The backward of `x / s` for a host number s (the CUDA target;
 * sched_host_div_grad): at the SCALAR, nothing; at the BINARY_BWD,
 * rt_div_scalar_grad_h with the SCALAR's host operand. */
static void emit_host_div_grad(Emitter *E, const Schedule *S, int j, int ind) {
  IrInst *in = S->insts[j];
  if (in->op == IR_SCALAR) {
    emit_guards(E, in, ind); /* the number as a kernel's parameter: guarded as rt_scalar's was (a fill names it too) */
    out(E, ind, "/* %s: the host number %s, read as such by / backward */\n", D(E, in, 0), A(E, in, 0));
    return;
  }
  IrInst *sc = S->insts[S->hscalar[j]];
  out(E, ind, "%s = rt_div_scalar_grad_h(ctx, %s, (double)%s); /* / backward: dy / a host number */\n", D(E, in, 0),
      A(E, in, 2), A(E, sc, 0));
}

/* The bias gradient of `x @ w + b` from the dW GEMM's epilogue (the CUDA
 * target; sched_bias_grad_gemm found it): the add's backward at j passes
 * dy on as the product's gradient (a reference, as rt_binary_bwd's is) and
 * leaves the bias's to the product's backward at S->bgrad[j], one
 * rt_matmul_bwd_bias (cuBLASLt's bias-gradient epilogue on the dW GEMM). */
static void emit_bias_grad_gemm(Emitter *E, const Schedule *S, int j, int ind) {
  IrInst *in = S->insts[j];
  if (S->bgrad[j] > j) {
    IrInst *mb = S->insts[S->bgrad[j]];
    int ds = mb->args[2], db = in->dst[in->dst[0] == ds ? 1 : 0];
    int line, col;
    source_position(E->c, mb->span, &line, &col);
    out(E, ind, "%s = rt_retain(%s); /* + backward: %s comes from the dW GEMM of %s:%d */\n", vname(E, ds),
        A(E, in, 2), vname(E, db), source_file(E->c, mb->span.file)->path, line);
    return;
  }
  IrInst *add = S->insts[S->bgrad[j]], *mb = in;
  int db = add->dst[add->dst[0] == mb->args[2] ? 1 : 0];
  if (S->acc[j] >= 0) {
    emit_gemm_acc(E, S, j, vname(E, db), ind);
    return;
  }
  out(E, ind, "rt_matmul_bwd_bias(ctx, %s, %s, %s, %s, &%s, &%s); /* %s backward, the bias gradient in the dW GEMM */\n",
      A(E, mb, 0), A(E, mb, 1), A(E, mb, 2),
      mb->dst[0] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, mb, 0)) : "NULL", D(E, mb, 1), vname(E, db),
      mb->op == IR_EINSUM_BWD ? arena_sprintf(&E->c->arena, "einsum %s", mb->s) : "matmul");
}

/* ---- graph regions (regions.h, runtime/graph.c): in main's loop bodies,
 * on the CUDA target, each maximal stretch of device work is emitted
 * between rt_region_begin and rt_region_end; the runtime runs it eagerly,
 * captures it once, then replays the graph, and the else branch takes the
 * region's results.  The host arithmetic of the stretch runs before it. */
typedef struct GraphRegion {
  int a, b;     /* the schedule's insts[a..b) */
  int ops;      /* device operations (callees counted) */
} GraphRegion;

static int unit_end(const Schedule *S, int j) { return S->run_end[j] ? S->run_end[j] : j + 1; }

static RegionKind unit_kind(Emitter *E, const Schedule *S, int j, const char **why, Span *where, int *ops) {
  RegionKind k = RGN_HOST;
  *ops = 0;
  for (int i = j; i < unit_end(S, j); i++) {
    RegionKind ki = region_kind(E->c, E->f, S->insts[i], why, where);
    if (ki == RGN_STOP)
      return RGN_STOP;
    if (ki == RGN_DEVICE) {
      k = RGN_DEVICE;
      *ops += region_device_ops(E->c, S->insts[i]);
    }
  }
  return k;
}

/* ---- sinking a host `if` that only reads (a `save` or `print` of a
 * gradient every N steps) past the device work after it, so that the work
 * on both sides is one region: the `if` reads nothing that work writes (no
 * var of the work, no value it frees: those frees move after the `if`),
 * sets no var, and the work has no host effect to order it against. */
static void slots_of(IrBlock *b, bool *get, bool *set) {
  for (IrInst *in = b->head; in; in = in->next) {
    if (in->op == IR_VAR_GET)
      get[IR_I(in, SLOT)] = true;
    if (in->op == IR_VAR_SET || in->op == IR_INDEX_ADD_SLOT)
      set[IR_I(in, SLOT)] = true;
    slots_of(&in->body, get, set);
    slots_of(&in->els, get, set);
  }
}

static void values_read(IrBlock *b, bool *read) {
  for (IrInst *in = b->head; in; in = in->next) {
    for (int a = 0; a < in->nargs; a++)
      if (in->args[a] >= 0)
        read[in->args[a]] = true;
    values_read(&in->body, read);
    values_read(&in->els, read);
  }
}

static RegionKind unit_kind(Emitter *E, const Schedule *S, int j, const char **why, Span *where, int *ops);

static void sink_ifs(Emitter *E, Schedule *S) {
  IrFn *f = E->f;
  Arena *ar = &E->c->arena;
  int n = S->n, ns = f->nvars + 1, nv = f->nvalues + 1;
  for (int j = 0; j < n; j++) {
    IrInst *in = S->insts[j];
    if (in->op != IR_IF || S->run_end[j] || j + 1 >= n)
      continue;
    bool *get = arena_alloc(ar, sizeof(bool) * (size_t)ns), *set = arena_alloc(ar, sizeof(bool) * (size_t)ns);
    slots_of(&in->body, get, set);
    slots_of(&in->els, get, set);
    bool sets = false;
    for (int k = 0; k < ns; k++)
      sets |= set[k];
    if (sets)
      continue;
    bool *read = arena_alloc(ar, sizeof(bool) * (size_t)nv);
    values_read(&in->body, read);
    values_read(&in->els, read);
    /* the stretch after it: units of device work and host work up to a stop */
    int m = j + 1, ops = 0;
    while (m < n) {
      const char *why;
      Span where;
      int uops = 0;
      if (unit_kind(E, S, m, &why, &where, &uops) == RGN_STOP)
        break;
      bool clash = false;
      for (int k = m; k < unit_end(S, m); k++) {
        IrInst *x = S->insts[k];
        if ((x->op == IR_VAR_SET || x->op == IR_VAR_GET) && (get[IR_I(x, SLOT)] || set[IR_I(x, SLOT)]))
          clash = true;
      }
      if (clash)
        break;
      ops += uops;
      m = unit_end(S, m);
    }
    if (m == j + 1 || ops == 0)
      continue;
    /* insts[j+1..m) move up one place, the `if` goes to m-1; its frees go
     * with it, and so do the frees of what it reads */
    int fa = S->free_after[j], waits = S->wait_head[j];
    bool sp = S->special[j];
    for (int k = j + 1; k < m; k++) {
      int *link = &S->free_after[k], keep = -1, *tail = &keep;
      for (int v = *link; v >= 0;) {
        int next = S->next_free[v];
        if (read[v]) { /* read by the `if`: freed after it */
          S->next_free[v] = fa;
          fa = v;
        } else {
          *tail = v;
          tail = &S->next_free[v];
          *tail = -1;
        }
        v = next;
      }
      S->insts[k - 1] = S->insts[k];
      S->free_after[k - 1] = keep;
      S->special[k - 1] = S->special[k];
      S->run_end[k - 1] = S->run_end[k] ? S->run_end[k] - 1 : 0;
      S->gemm[k - 1] = S->gemm[k];
      S->out[k - 1] = S->out[k];
      S->wait_head[k - 1] = S->wait_head[k];
    }
    /* the `if`'s waits stay where it was: before the first use in the new order */
    if (waits >= 0) {
      int last = waits;
      while (S->wait_next[last] >= 0)
        last = S->wait_next[last];
      S->wait_next[last] = S->wait_head[j];
      S->wait_head[j] = waits;
    }
    S->wait_head[m - 1] = -1;
    S->insts[m - 1] = in;
    S->free_after[m - 1] = fa;
    S->special[m - 1] = sp;
    S->run_end[m - 1] = 0;
    S->gemm[m - 1] = false;
    S->out[m - 1] = SCHED_NEW_BUFFER;
    j = m - 1;
  }
}

static void report_region(Emitter *E, const Schedule *S, const GraphRegion *R, int number);

/* The regions of a block of main's loop body, in order; the report lines
 * (--regions) as it goes. */
static int find_regions(Emitter *E, const Schedule *S, GraphRegion *out) {
  int nr = 0, start = -1, last_dev = -1, ops = 0;
  for (int j = 0; j <= S->n;) {
    const char *why = NULL;
    Span where = {0};
    int uops = 0;
    RegionKind k = j < S->n ? unit_kind(E, S, j, &why, &where, &uops) : RGN_STOP;
    if (k == RGN_DEVICE) {
      if (start < 0)
        start = j;
      last_dev = unit_end(S, j);
      ops += uops;
    }
    if (k == RGN_STOP) {
      if (start >= 0 && ops >= REGION_MIN_OPS) {
        out[nr++] = (GraphRegion){start, last_dev, ops};
        if (E->region_report)
          report_region(E, S, &out[nr - 1], E->ngraphs + nr);
      }
      start = -1, ops = 0;
      if (why && E->region_report) {
        int line, col;
        source_position(E->c, where, &line, &col);
        fprintf(E->region_report, "  %s:%d:%d: stops a region: %s\n", source_file(E->c, where.file)->path, line, col, why);
      }
    }
    j = j < S->n ? unit_end(S, j) : j + 1;
  }
  return nr;
}

static void add_unique(int *xs, int *n, int v) {
  for (int i = 0; i < *n; i++)
    if (xs[i] == v)
      return;
  xs[(*n)++] = v;
}

/* What a region reads, releases, writes and freezes (its host scalars). */
typedef struct RegionIO {
  int *ins, nin, *in_slots, nin_slots;     /* tensor inputs: values, var slots */
  int *kills, nkills, *kill_slots, nkill_slots; /* what the region's code releases */
  int *scalars, nsc;                       /* host numbers its device work takes */
  int *outs, nouts, *out_slots, nout_slots; /* results: values read after it, tensor vars it sets */
  int lo, hi;                              /* its source lines */
  const char *label;                       /* "f.spmd:12-20" */
  const char *names;                       /* the host scalars' names, "step,lr" */
} RegionIO;

/* the defining instruction's source, or the value's variable */
static const char *scalar_name(Emitter *E, IrInst **defs, int v) {
  if (E->f->values[v].hint)
    return E->f->values[v].hint;
  if (!defs[v])
    return vname(E, v);
  StrBuf sb;
  sb_init(&sb, &E->c->arena);
  for (const char *p = source_text(E, defs[v]->span); *p; p++)
    sb_putc(&sb, *p == ',' ? ';' : *p);
  return sb.data;
}

static void note_defs(IrBlock *b, IrInst **defs) {
  for (IrInst *in = b->head; in; in = in->next) {
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] >= 0)
        defs[in->dst[d]] = in;
    note_defs(&in->body, defs);
    note_defs(&in->els, defs);
  }
}

static void region_io(Emitter *E, const Schedule *S, const GraphRegion *R, RegionIO *io) {
  IrFn *f = E->f;
  Arena *ar = &E->c->arena;
  int nv = f->nvalues + 1, ns = f->nvars + 1;
  bool *def = arena_alloc(ar, sizeof(bool) * (size_t)nv);
  int *freed_at = arena_alloc(ar, sizeof(int) * (size_t)nv);
  bool *set_slot = arena_alloc(ar, sizeof(bool) * (size_t)ns);
  IrInst **defs = arena_alloc(ar, sizeof(IrInst *) * (size_t)nv);
  note_defs(&f->body, defs);
  for (int v = 0; v < nv; v++)
    freed_at[v] = -1;
  for (int k = 0; k < S->n; k++)
    for (int v = S->free_after[k]; v >= 0; v = S->next_free[v])
      freed_at[v] = k;
  memset(io, 0, sizeof *io);
  io->ins = arena_alloc(ar, sizeof(int) * (size_t)nv);
  io->kills = arena_alloc(ar, sizeof(int) * (size_t)nv);
  io->scalars = arena_alloc(ar, sizeof(int) * (size_t)nv);
  io->outs = arena_alloc(ar, sizeof(int) * (size_t)nv);
  io->in_slots = arena_alloc(ar, sizeof(int) * (size_t)ns);
  io->kill_slots = arena_alloc(ar, sizeof(int) * (size_t)ns);
  io->out_slots = arena_alloc(ar, sizeof(int) * (size_t)ns);
  for (int k = R->a; k < R->b; k++) {
    IrInst *in = S->insts[k];
    if (region_hoisted(E->c, f, in))
      continue;
    int line, col;
    source_position(E->c, in->span, &line, &col);
    if (!io->lo || line < io->lo)
      io->lo = line;
    if (line > io->hi)
      io->hi = line;
    for (int a = 0; a < in->nargs; a++) {
      int v = in->args[a];
      if (v < 0)
        continue;
      TypeKind tk = f->values[v].type->kind;
      if (is_tensor(E, v)) {
        if (!def[v])
          add_unique(io->ins, &io->nin, v);
      } else if ((tk == TY_INT || tk == TY_FLOAT || tk == TY_BOOL) && !(defs[v] && defs[v]->op == IR_HOST_CONST))
        add_unique(io->scalars, &io->nsc, v); /* a literal cannot change: not compared */
    }
    if (in->op == IR_VAR_GET && !set_slot[IR_I(in, SLOT)])
      add_unique(io->in_slots, &io->nin_slots, (int)IR_I(in, SLOT));
    if (in->op == IR_VAR_GET && S->special[k])
      add_unique(io->kill_slots, &io->nkill_slots, (int)IR_I(in, SLOT));
    if (in->op == IR_VAR_SET) {
      set_slot[IR_I(in, SLOT)] = true;
      add_unique(io->kill_slots, &io->nkill_slots, (int)IR_I(in, SLOT));
      add_unique(io->out_slots, &io->nout_slots, (int)IR_I(in, SLOT));
    }
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] >= 0)
        def[in->dst[d]] = true;
    for (int v = S->free_after[k]; v >= 0; v = S->next_free[v])
      if (!def[v])
        add_unique(io->kills, &io->nkills, v);
  }
  for (int k = R->a; k < R->b; k++) {
    IrInst *in = S->insts[k];
    if (region_hoisted(E->c, f, in))
      continue;
    for (int d = 0; d < in->ndst; d++) {
      int v = in->dst[d];
      if (v >= 0 && is_tensor(E, v) && freed_at[v] >= R->b)
        add_unique(io->outs, &io->nouts, v);
    }
  }
  StrBuf names;
  sb_init(&names, ar);
  for (int i = 0; i < io->nsc; i++)
    sb_printf(&names, "%s%s", i ? "," : "", scalar_name(E, defs, io->scalars[i]));
  io->names = names.data ? names.data : "";
  io->label = arena_sprintf(ar, "%s:%d-%d", source_file(E->c, S->insts[R->a]->span.file)->path, io->lo, io->hi);
}

static void report_region(Emitter *E, const Schedule *S, const GraphRegion *R, int number) {
  RegionIO io;
  region_io(E, S, R, &io);
  /* each host scalar: where it reaches (regions.c): a slot, a number taken by value */
  StrBuf slots, guards;
  sb_init(&slots, &E->c->arena);
  sb_init(&guards, &E->c->arena);
  const char *p = io.names;
  for (int i = 0; i < io.nsc; i++) {
    size_t len = strcspn(p, ",");
    bool slot, guard;
    region_scalar_reach(E->c, E->f, S->insts, R->a, R->b, io.scalars[i], &slot, &guard);
    StrBuf *to = guard ? &guards : slot ? &slots : NULL;
    if (to)
      sb_printf(to, "%s`%.*s`", to->data && *to->data ? ", " : "", (int)len, p);
    p += len + (p[len] == ',');
  }
  fprintf(E->region_report, "  %s: region %d: capturable: %d device operations; %d tensor inputs, %d results; "
                            "host scalars its kernels read from its slot table (refreshed before each replay): %s; "
                            "taken by value (a replay is refused when one differs): %s\n",
          io.label, number, R->ops, io.nin + io.nin_slots, io.nouts + io.nout_slots,
          slots.data && *slots.data ? slots.data : "none", guards.data && *guards.data ? guards.data : "none");
}

/* The region's fill (runtime/graph.c), into E->fills: main's host scalars
 * from host_ (rt_region_begin's), its literals, then its units' host
 * numbers and the fills of the functions it calls. */
static void fill_units(Emitter *E, const Schedule *S, int a, int b, int ind);

static void emit_region_fill(Emitter *E, const Schedule *S, const GraphRegion *R, const RegionIO *io, int number) {
  IrFn *f = E->f;
  FILE *saved = E->out;
  E->out = E->fills;
  E->fill = true;
  E->in_region = true;
  fprintf(E->out, "/* graph region %d (%s): its host numbers, before each replay */\n", number, io->label);
  fprintf(E->out, "static void fill_region_%d(rt_ctx *ctx, const uint64_t *host_) {\n", number);
  out(E, 1, "(void)ctx;\n");
  out(E, 1, "(void)host_;\n");
  bool *done = arena_alloc(&E->c->arena, sizeof(bool) * (size_t)(f->nvalues + 1));
  for (int i = 0; i < io->nsc; i++) {
    int v = io->scalars[i];
    TypeKind k = f->values[v].type->kind;
    out(E, 1, "%s %s = %s;\n", ctype_of(f->values[v].type), vname(E, v),
        arena_sprintf(&E->c->arena, k == TY_FLOAT ? "rt_region_unf(host_[%d])" : k == TY_BOOL ? "host_[%d] != 0"
                                                                                              : "(int64_t)host_[%d]", i));
    done[v] = true;
  }
  for (int j = R->a; j < R->b; j++) {
    IrInst *in = S->insts[j];
    if (region_hoisted(E->c, f, in))
      continue;
    for (int a = 0; a < in->nargs; a++) {
      int v = in->args[a];
      if (v < 0 || done[v] || !host_scalar(E, v) || !E->defs[v] || E->defs[v]->op != IR_HOST_CONST)
        continue;
      done[v] = true;
      out(E, 1, "%s %s = 0;\n", ctype_of(f->values[v].type), vname(E, v));
      emit_inst(E, E->defs[v], 1);
    }
  }
  fill_units(E, S, R->a, R->b, 1);
  for (int v = 0; v < f->nvalues; v++)
    if (done[v])
      out(E, 1, "(void)%s;\n", vname(E, v));
  fputs("}\n\n", E->out);
  E->fill = false;
  E->in_region = false;
  E->out = saved;
}

/* Before insts[R->a]: the hoisted host work, then rt_region_begin with the
 * region's tensor inputs, what dies in it, its host scalars. */
static void emit_region_begin(Emitter *E, const Schedule *S, const GraphRegion *R, int ind, int number,
                              RegionIO *io) {
  IrFn *f = E->f;
  region_io(E, S, R, io);
  /* the host work first: it runs every iteration */
  out(E, ind, "/* graph region %d: the host work of %s, before it */\n", number, io->label);
  for (int k = R->a; k < R->b; k++)
    if (region_hoisted(E->c, f, S->insts[k]))
      emit_at(E, S->insts, k, S->special, ind);
  out(E, ind, "{ /* graph region %d: %s, %d device operations: run, captured once, then replayed "
              "(runtime/graph.c) */\n", number, io->label, R->ops);
  out(E, ind + 1, "static rt_graph_region *graph_ = NULL;\n");
  int nin = io->nin + io->nin_slots, nkill = io->nkills + io->nkill_slots;
  if (nin) {
    out(E, ind + 1, "rt_tensor **in_[] = {");
    for (int i = 0; i < io->nin; i++)
      fprintf(E->out, "%s&%s", i ? ", " : "", vname(E, io->ins[i]));
    for (int i = 0; i < io->nin_slots; i++)
      fprintf(E->out, "%s&%s", io->nin + i ? ", " : "", varname(E, io->in_slots[i]));
    fputs("};\n", E->out);
  }
  if (nkill) {
    out(E, ind + 1, "rt_tensor **dies_[] = {");
    for (int i = 0; i < io->nkills; i++)
      fprintf(E->out, "%s&%s", i ? ", " : "", vname(E, io->kills[i]));
    for (int i = 0; i < io->nkill_slots; i++)
      fprintf(E->out, "%s&%s", io->nkills + i ? ", " : "", varname(E, io->kill_slots[i]));
    fputs("};\n", E->out);
  }
  if (io->nsc) {
    out(E, ind + 1, "const uint64_t host_[] = {");
    for (int i = 0; i < io->nsc; i++) {
      int v = io->scalars[i];
      fprintf(E->out, "%s%s(%s)", i ? ", " : "", f->values[v].type->kind == TY_FLOAT ? "rt_region_f" : "rt_region_i",
              vname(E, v));
    }
    fputs("};\n", E->out);
  }
  out(E, ind + 1, "if (rt_region_begin(ctx, &graph_, %s, %s, %d, %s, %d, %s, %d, %s, fill_region_%d)) {\n",
      c_string(E, io->label), nin ? "in_" : "NULL", nin, nkill ? "dies_" : "NULL", nkill, io->nsc ? "host_" : "NULL",
      io->nsc, c_string(E, io->names), number);
  emit_region_fill(E, S, R, io, number);
}

static void emit_region_end(Emitter *E, const RegionIO *io, int ind) {
  int n = io->nouts + io->nout_slots;
  if (n) {
    out(E, ind + 2, "rt_tensor *out_[] = {");
    for (int i = 0; i < io->nouts; i++)
      fprintf(E->out, "%s%s", i ? ", " : "", vname(E, io->outs[i]));
    for (int i = 0; i < io->nout_slots; i++)
      fprintf(E->out, "%s%s", io->nouts + i ? ", " : "", varname(E, io->out_slots[i]));
    fputs("};\n", E->out);
  }
  out(E, ind + 2, "rt_region_end(ctx, graph_, %s, %d);\n", n ? "out_" : "NULL", n);
  out(E, ind + 1, "} else { /* replayed: its results */\n");
  for (int i = 0; i < io->nouts; i++)
    out(E, ind + 2, "%s = rt_region_out(ctx, graph_, %d);\n", vname(E, io->outs[i]), i);
  for (int i = 0; i < io->nout_slots; i++) {
    int s = io->out_slots[i];
    out(E, ind + 2, "%s = rt_region_out(ctx, graph_, %d);\n", varname(E, s), io->nouts + i);
    if (E->slot_kind && E->slot_kind[s] != MEM_SLOT_TEMP) /* docs/memory.md */
      out(E, ind + 2, "rt_mem_hold(ctx, %d, %s, %s);\n", s, varname(E, s),
          E->slot_kind[s] == MEM_SLOT_PARAM ? "RT_MEM_PARAM" : "RT_MEM_OPT");
  }
  out(E, ind + 1, "}\n");
  out(E, ind, "}\n");
}

/* ---- fills (runtime/graph.c): the host arithmetic of a region and of
 * each function it calls, without their device work, calling rt_slot_f,
 * rt_slot_i and rt_guard in the order the real code does (the same
 * schedule, walked the same way); runs before each replay. */
static bool ret_scalar(const Type *t) { return t->kind == TY_INT || t->kind == TY_FLOAT || t->kind == TY_BOOL; }

static void fill_signature(Emitter *E, IrFn *f, FILE *o) {
  IrFn *saved = E->f;
  E->f = f;
  fprintf(o, "static __attribute__((unused)) void fill_%s(rt_ctx *ctx%s", f->cname, ir_uses_tape(f) ? ", tape_t *tape" : "");
  for (int i = 0; i < f->nparams; i++)
    if (host_scalar(E, f->params[i]))
      fprintf(o, ", %s %s", ctype_of(f->values[f->params[i]].type), vname(E, f->params[i]));
  for (int i = 0; i < f->nret; i++)
    if (ret_scalar(f->ret_types[i]))
      fprintf(o, ", %s *ret%d", ctype_of(f->ret_types[i]), i);
  fputc(')', o);
  E->f = saved;
}

static void need_fill(Emitter *E, IrFn *f) {
  for (int i = 0; i < E->nfill_fns; i++)
    if (E->fill_fns[i] == f)
      return;
  if (E->nfill_fns == E->capfill_fns) {
    int nc = E->capfill_fns ? 2 * E->capfill_fns : 16;
    IrFn **n = arena_alloc(&E->c->arena, sizeof *n * (size_t)nc);
    if (E->nfill_fns)
      memcpy(n, E->fill_fns, sizeof *n * (size_t)E->nfill_fns);
    E->fill_fns = n;
    E->capfill_fns = nc;
  }
  E->fill_fns[E->nfill_fns++] = f;
  fill_signature(E, f, E->fill_protos);
  fputs(";\n", E->fill_protos);
}

static void fill_block(Emitter *E, IrBlock *b, int ind);
static void fill_units(Emitter *E, const Schedule *S, int a, int b, int ind);

static void fill_call(Emitter *E, IrInst *in, int ind) {
  IrFn *g = in->callee;
  need_fill(E, g);
  out(E, ind, "fill_%s(ctx%s", g->cname, ir_uses_tape(g) ? ", tape" : "");
  for (int i = 0; i < in->nargs && i < g->nparams; i++) {
    TypeKind k = g->values[g->params[i]].type->kind;
    if (k == TY_INT || k == TY_FLOAT || k == TY_BOOL)
      fprintf(E->out, ", %s", A(E, in, i));
  }
  for (int i = 0; i < in->ndst && i < g->nret; i++)
    if (ret_scalar(g->ret_types[i]))
      fprintf(E->out, ", %s", in->dst[i] >= 0 ? arena_sprintf(&E->c->arena, "&%s", D(E, in, i)) : "NULL");
  fputs(");\n", E->out);
}

static void fill_inst(Emitter *E, IrInst *in, int ind) {
  if (ir_has(in->op, IRF_PURE_HOST)) {
    emit_inst(E, in, ind);
    return;
  }
  switch (in->op) {
  case IR_VAR_GET:
    if (host_scalar(E, in->dst[0]))
      emit_inst(E, in, ind);
    return;
  case IR_VAR_SET:
    if (host_scalar(E, in->args[0]))
      emit_inst(E, in, ind);
    return;
  case IR_FOR:
    emit_guards(E, in, ind);
    if (IR_I(in, BACKWARDS))
      out(E, ind, "for (%s = %s - 1; %s >= %s; %s--) {\n", D(E, in, 0), A(E, in, 1), D(E, in, 0), A(E, in, 0),
          D(E, in, 0));
    else
      out(E, ind, "for (%s = %s; %s < %s; %s++) {\n", D(E, in, 0), A(E, in, 0), D(E, in, 0), A(E, in, 1), D(E, in, 0));
    fill_block(E, &in->body, ind + 1);
    out(E, ind, "}\n");
    return;
  case IR_IF:
    emit_guards(E, in, ind);
    out(E, ind, "if (%s) {\n", A(E, in, 0));
    fill_block(E, &in->body, ind + 1);
    if (in->els.head) {
      out(E, ind, "} else {\n");
      fill_block(E, &in->els, ind + 1);
    }
    out(E, ind, "}\n");
    return;
  case IR_RETURN:
    for (int i = 0; i < in->nargs; i++)
      if (host_scalar(E, in->args[i]) && i < E->f->nret && ret_scalar(E->f->ret_types[i]))
        out(E, ind, "if (ret%d)\n%*s*ret%d = %s;\n", i, 2 * (ind + 1), "", i, A(E, in, i));
    return;
  case IR_PUSH:
    for (int i = 0; i < in->nargs; i++)
      if (host_scalar(E, in->args[i]))
        out(E, ind, "tape_push(ctx, tape, NULL, (double)%s);\n", A(E, in, i));
    return;
  case IR_POP:
    for (int i = in->ndst - 1; i >= 0; i--)
      if (host_scalar(E, in->dst[i]))
        out(E, ind, "{ double h_; tape_pop(ctx, tape, &h_); %s = (%s)h_; }\n", D(E, in, i),
            ctype_of(E->f->values[in->dst[i]].type));
    return;
  case IR_CALL:
  case IR_VJP_CALL: fill_call(E, in, ind); return;
  case IR_FREE:
  case IR_COUNT: return;
  default:
    emit_guards(E, in, ind);
    for (int a = 0; a < in->nargs; a++)
      if (slot_of(in, a))
        out(E, ind, "(void)rt_slot_%c(ctx, (%s)%s);\n", slot_of(in, a), slot_of(in, a) == 'f' ? "double" : "int64_t",
            A(E, in, a));
    return;
  }
}

/* The end of the fused regions the CUDA target launches as one from
 * insts[j] (sched_horizontal_group) within [a, b); 0: none. */
static int horizontal_group(Emitter *E, const Schedule *S, int j, int a, int b) {
  (void)a;
  if (E->tgt != &target_cuda)
    return 0;
  int e = sched_horizontal_group(E->c, E->f, S, j);
  return e <= b ? e : 0;
}

static void fill_units(Emitter *E, const Schedule *S, int a, int b, int ind) {
  for (int j = a; j < b;) {
    int run = S->run_end[j] ? S->run_end[j] - j : 0;
    if (S->gemm[j]) {
      /* a GEMM with its epilogue: no host number */
    } else if (run) {
      int h = horizontal_group(E, S, j, a, b), nr, *region;
      for (int k = j; k < S->run_end[j]; k++)
        if (transparent(S->insts[k]) && !(E->in_region && region_hoisted(E->c, E->f, S->insts[k])))
          fill_inst(E, S->insts[k], ind);
      FusedRegion r = {S->insts, j, S->run_end[j], 0, E->f->values[S->insts[j]->dst[0]].type, S->out, NULL, NULL,
                       S->insts[j]->span};
      if (h) { /* one launch: its first row's host numbers */
        run = h - j;
        r = horizontal_rows(E, S, j, h, &region, &nr)[0];
      }
      cuda_fused_slots(E, &r, ind);
    } else {
      if (!(E->in_region && region_hoisted(E->c, E->f, S->insts[j])))
        fill_inst(E, S->insts[j], ind);
      run = 1;
    }
    j += run;
  }
}

static void fill_block(Emitter *E, IrBlock *b, int ind) {
  Schedule S;
  schedule_block(E->c, E->f, b, ++E->nblocks, E->nuses, E->lastuse, E->defblk, &S);
  fill_units(E, &S, 0, S.n, ind);
}

/* the fill of f (need_fill), into E->fills */
/* The per-function facts both emitters of a function read: each value's
 * uses and definition, the tables the liveness walk fills. */
static void analyse_fn(Emitter *E, IrFn *f) {
  E->lastuse = arena_alloc(&E->c->arena, sizeof(int) * (size_t)(f->nvalues + 1));
  E->nuses = arena_alloc(&E->c->arena, sizeof(int) * (size_t)(f->nvalues + 1));
  E->defblk = arena_alloc(&E->c->arena, sizeof(int) * (size_t)(f->nvalues + 1));
  E->moved = arena_alloc(&E->c->arena, sizeof(bool) * (size_t)(f->nvalues + 1));
  E->dying = arena_alloc(&E->c->arena, sizeof(bool) * (size_t)(f->nvalues + 1));
  E->nblocks = 0;
  sched_count_uses(&f->body, E->nuses);
  E->defs = arena_alloc(&E->c->arena, sizeof(IrInst *) * (size_t)(f->nvalues + 1));
  note_defs(&f->body, E->defs);
}

static void emit_fill_fn(Emitter *E, IrFn *f) {
  FILE *saved = E->out;
  E->out = E->fills;
  E->f = f;
  E->fill = true;
  fill_signature(E, f, E->out);
  fputs(" {\n", E->out);
  out(E, 1, "(void)ctx;\n");
  if (f->vjp_fwd) { /* value_and_grad: the forward's and the backward's fills on a tape of host numbers */
    out(E, 1, "tape_t tape_ = {0};\n");
    need_fill(E, f->vjp_fwd);
    need_fill(E, f->vjp_bwd);
    out(E, 1, "fill_%s(ctx, &tape_", f->vjp_fwd->cname);
    for (int i = 0; i < f->nparams && i < f->vjp_fwd->nparams; i++)
      if (host_scalar(E, f->params[i]))
        fprintf(E->out, ", %s", vname(E, f->params[i]));
    for (int i = 0; i < f->vjp_fwd->nret; i++)
      if (ret_scalar(f->vjp_fwd->ret_types[i]))
        fputs(", NULL", E->out);
    fputs(");\n", E->out);
    out(E, 1, "fill_%s(ctx, &tape_", f->vjp_bwd->cname);
    for (int i = 0; i < f->vjp_bwd->nparams; i++)
      if (ret_scalar(f->vjp_bwd->values[f->vjp_bwd->params[i]].type))
        fputs(", 0", E->out);
    for (int i = 0; i < f->vjp_bwd->nret; i++)
      if (ret_scalar(f->vjp_bwd->ret_types[i]))
        fputs(", NULL", E->out);
    fputs(");\n", E->out);
    out(E, 1, "free(tape_.t);\n");
    out(E, 1, "free(tape_.h);\n");
    for (int i = 0; i < f->nparams; i++)
      if (host_scalar(E, f->params[i]))
        out(E, 1, "(void)%s;\n", vname(E, f->params[i]));
    for (int i = 0; i < f->nret; i++)
      if (ret_scalar(f->ret_types[i]))
        out(E, 1, "(void)ret%d;\n", i);
    fputs("}\n\n", E->out);
    E->fill = false;
    E->out = saved;
    return;
  }
  analyse_fn(E, f);
  bool *param = arena_alloc(&E->c->arena, sizeof(bool) * (size_t)(f->nvalues + 1));
  for (int i = 0; i < f->nparams; i++)
    param[f->params[i]] = true;
  for (int v = 0; v < f->nvalues; v++)
    if (!param[v] && host_scalar(E, v))
      out(E, 1, "%s %s = 0;\n", ctype_of(f->values[v].type), vname(E, v));
  for (int sl = 0; sl < f->nvars; sl++)
    if (ret_scalar(f->vars[sl].type))
      out(E, 1, "%s %s = 0;\n", ctype_of(f->vars[sl].type), varname(E, sl));
  if (ir_uses_tape(f))
    out(E, 1, "(void)tape;\n");
  fill_block(E, &f->body, 1);
  for (int v = 0; v < f->nvalues; v++)
    if (host_scalar(E, v))
      out(E, 1, "(void)%s;\n", vname(E, v));
  for (int sl = 0; sl < f->nvars; sl++)
    if (ret_scalar(f->vars[sl].type))
      out(E, 1, "(void)%s;\n", varname(E, sl));
  for (int i = 0; i < f->nret; i++)
    if (ret_scalar(f->ret_types[i]))
      out(E, 1, "(void)ret%d;\n", i);
  fputs("}\n\n", E->out);
  E->fill = false;
  E->out = saved;
}

/* Emits a block; each tensor it defines is freed after its last use in it. */
static void emit_block(Emitter *E, IrBlock *b, int ind) {
  E->at_line = 0; /* a loop's body runs after its end, a branch after the other */
  Schedule S;
  schedule_block(E->c, E->f, b, ++E->nblocks, E->nuses, E->lastuse, E->defblk, &S);
  IrInst **insts = S.insts;
  int n = S.n, blk = S.blk, j;
  int *free_after = S.free_after, *next_free = S.next_free, *wait_head = S.wait_head, *wait_next = S.wait_next;
  bool *special = S.special;
  /* graph regions: main's loop bodies, on the CUDA target (or --regions) */
  GraphRegion *regions = NULL;
  int nregions = 0, cur = 0, outer = ind;
  RegionIO io = {0};
  if (E->f == E->p->main && E->loop_depth > 0 && !E->in_region && (E->tgt != &target_cpu || E->region_report)) {
    sink_ifs(E, &S);
    regions = arena_alloc(&E->c->arena, sizeof(GraphRegion) * (size_t)(n + 1));
    nregions = find_regions(E, &S, regions);
  }
  for (j = 0; j < n;) {
    if (cur < nregions && j == regions[cur].a) {
      emit_region_begin(E, &S, &regions[cur], outer, ++E->ngraphs, &io);
      E->in_region = true;
      ind = outer + 2;
      E->at_line = 0;
    }
    int run = S.run_end[j] ? S.run_end[j] - j : 0, group = run ? 0 : E->in_region ? 0 : sched_multi_group(E->f, &S, j);
    if (group && cur < nregions && regions[cur].a > j && regions[cur].a < group)
      group = regions[cur].a > j + 1 ? regions[cur].a : 0; /* not across a graph region's start */
    if (group && cur < nregions && j >= regions[cur].a && regions[cur].b < group)
      group = regions[cur].b > j + 1 ? regions[cur].b : 0; /* nor its end */
    if (group)
      run = group - j;
    int hgroup = run && !group && !S.gemm[j] ? horizontal_group(E, &S, j, j, n) : 0;
    if (hgroup && cur < nregions && ((regions[cur].a > j && regions[cur].a < hgroup) ||
                                     (j >= regions[cur].a && regions[cur].b < hgroup)))
      hgroup = 0; /* not across a graph region's start or end */
    if (hgroup)
      run = hgroup - j;
    for (int k = j; k < j + (run ? run : 1); k++)
      for (int v = wait_head[k]; v >= 0; v = wait_next[v])
        out(E, ind, "rt_wait(ctx, %s); /* a collective started early: done before its first use */\n", vname(E, v));
    emit_loc(E, insts[j], ind);
    if (S.gemm[j])
      emit_gemm_epilogue(E, &S, j, ind);
    else if (group)
      emit_multi(E, &S, j, group, ind);
    else if (hgroup)
      emit_horizontal(E, &S, j, hgroup, ind);
    else if (run)
      emit_fused(E, &S, j, ind);
    else {
      for (int v = free_after[j]; v >= 0; v = next_free[v])
        E->dying[v] = true;
      E->curblk = blk;
      if (S.bgrad[j] >= 0)
        emit_bias_grad_gemm(E, &S, j, ind);
      else if (S.acc[j] >= 0)
        emit_gemm_acc(E, &S, j, NULL, ind);
      else if (S.hscalar[j] >= 0)
        emit_host_div_grad(E, &S, j, ind);
      else
        emit_at(E, insts, j, special, ind);
      for (int v = free_after[j]; v >= 0; v = next_free[v])
        E->dying[v] = false;
      run = 1;
    }
    for (int k = j; k < j + run; k++)
      for (int v = free_after[k]; v >= 0; v = next_free[v])
        out(E, ind, "rt_free(ctx, %s); %s = NULL;\n", vname(E, v), vname(E, v));
    j += run;
    if (cur < nregions && j == regions[cur].b) {
      emit_region_end(E, &io, outer);
      E->in_region = false;
      ind = outer;
      E->at_line = 0;
      cur++;
    }
  }
}


/* "mlp", "mlp (forward)", "mlp (backward)": a function's trace region. */
static const char *trace_label(Emitter *E, IrFn *f) {
  const char *name = f->fn ? f->fn->name : f->cname;
  const char *role = f->role == IRFN_BACKWARD ? " (backward)" : f->role == IRFN_FORWARD ? " (forward)" : "";
  return arena_sprintf(&E->c->arena, "%s%s", name, role);
}

static void emit_signature(Emitter *E, IrFn *f, bool decl) {
  fprintf(E->out, "static %svoid f_%s(rt_ctx *ctx", E->p->main ? "" : "__attribute__((unused)) ", f->cname);
  if (ir_uses_tape(f))
    fputs(", tape_t *tape", E->out);
  for (int i = 0; i < f->nparams; i++)
    fprintf(E->out, ", %s%s%s", ctype_of(f->values[f->params[i]].type),
            decl || is_tensor(E, f->params[i]) ? "" : " ", decl ? "" : vname(E, f->params[i]));
  for (int i = 0; i < f->nret; i++)
    fprintf(E->out, ", %s%s*ret%d", ctype_of(f->ret_types[i]), f->ret_types[i]->kind == TY_TENSOR ? "" : " ", i);
  fputs(decl ? ");\n" : ") {\n", E->out);
}

/* value_and_grad: forward with a tape, seed 1.0, backward. */
static void emit_vjp(Emitter *E, IrFn *w) {
  emit_signature(E, w, false);
  out(E, 1, "rt_trace_begin(ctx, %s);\n",
      c_string(E, arena_sprintf(&E->c->arena, "value_and_grad(%s)", w->fn ? w->fn->name : w->cname)));
  out(E, 1, "tape_t tape_ = {0};\n");
  out(E, 1, "rt_tensor *value_ = NULL;\n");
  out(E, 1, "f_%s(ctx, &tape_", w->vjp_fwd->cname);
  for (int i = 0; i < w->nparams; i++)
    fprintf(E->out, ", %s", vname(E, w->params[i]));
  fputs(", &value_);\n", E->out);
  out(E, 1, "rt_tensor *seed_ = rt_full(ctx, value_->dtype, value_->ndim, value_->shape, 1.0);\n");
  out(E, 1, "f_%s(ctx, &tape_, seed_", w->vjp_bwd->cname);
  for (int i = 0; i < w->vjp_ngrads; i++)
    fprintf(E->out, ", ret%d", i + 1);
  fputs(");\n", E->out);
  out(E, 1, "rt_free(ctx, seed_);\n");
  out(E, 1, "RT_CHECK(ctx, tape_.n == 0, \"internal error: autodiff tape not empty\");\n");
  out(E, 1, "free(tape_.t);\n");
  out(E, 1, "free(tape_.h);\n");
  out(E, 1, "if (ret0)\n");
  out(E, 2, "*ret0 = value_;\n");
  out(E, 1, "else\n");
  out(E, 2, "rt_free(ctx, value_);\n");
  out(E, 1, "rt_trace_end(ctx);\n");
  fputs("}\n\n", E->out);
}

static void emit_fn(Emitter *E, IrFn *f) {
  E->f = f;
  if (f->vjp_fwd) {
    emit_vjp(E, f);
    return;
  }
  E->started = false;
  analyse_fn(E, f);
  int line, col;
  source_position(E->c, f->span, &line, &col);
  fprintf(E->out, "/* %s:%d: %s */\n", source_file(E->c, f->span.file)->path, line, f->fn ? f->fn->name : f->cname);
  emit_signature(E, f, false);
  for (int v = 0; v < f->nvalues; v++) {
    if (is_param(E, v) || (is_tensor(E, v) && !E->defs[v] && !E->nuses[v]))
      continue; /* (a value a rewrite left without definition or use: attention_layout.c) */
    const char *ct = ctype_of(f->values[v].type);
    out(E, 1, "%s%s%s = %s;\n", ct, ct[strlen(ct) - 1] == '*' ? "" : " ", vname(E, v),
        f->values[v].type->kind == TY_TENSOR || f->values[v].type->kind >= TY_AXES ? "NULL" : "0");
  }
  for (int s = 0; s < f->nvars; s++) {
    const char *ct = ctype_of(f->vars[s].type);
    out(E, 1, "%s%s%s = %s;\n", ct, ct[strlen(ct) - 1] == '*' ? "" : " ", varname(E, s),
        f->vars[s].type->kind == TY_TENSOR ? "NULL" : "0");
  }
  out(E, 1, "(void)ctx;\n");
  out(E, 1, "rt_trace_begin(ctx, %s); /* a region in --trace output */\n", c_string(E, trace_label(E, f)));
  for (int i = 0; i < f->nparams; i++)
    out(E, 1, "(void)%s;\n", vname(E, f->params[i]));
  if (ir_uses_tape(f))
    out(E, 1, "(void)tape;\n");
  emit_block(E, &f->body, 1);
  if (E->started)
    out(E, 1, "rt_flush(ctx); /* start the bucketed small gradients before returning */\n");
  for (int s = 0; s < f->nvars; s++)
    if (f->vars[s].type->kind == TY_TENSOR)
      out(E, 1, "rt_free(ctx, %s);\n", varname(E, s));
    else
      out(E, 1, "(void)%s;\n", varname(E, s));
  out(E, 1, "rt_trace_end(ctx);\n");
  /* values that are never read still need no cleanup: each was freed */
  for (int v = 0; v < f->nvalues; v++)
    if (!is_tensor(E, v))
      out(E, 1, "(void)%s;\n", vname(E, v));
  fputs("}\n\n", E->out);
}

static const char prelude[] =
    "#include <math.h>\n"
    "#include <stdbool.h>\n"
    "#include <stdint.h>\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "#include \"spmdrt.h\"\n"
    "\n"
    "/* The tape of a differentiated function: the residuals its backward\n"
    " * needs, pushed by the forward and popped in reverse by the backward. */\n"
    "typedef struct tape_t {\n"
    "  rt_tensor **t;\n"
    "  double *h;\n"
    "  size_t n, cap;\n"
    "} tape_t;\n"
    "\n"
    "static __attribute__((unused)) void tape_push(rt_ctx *ctx, tape_t *tp, rt_tensor *t, double h) {\n"
    "  if (tp->n == tp->cap) {\n"
    "    tp->cap = tp->cap ? 2 * tp->cap : 64;\n"
    "    tp->t = realloc(tp->t, tp->cap * sizeof *tp->t);\n"
    "    tp->h = realloc(tp->h, tp->cap * sizeof *tp->h);\n"
    "    RT_CHECK(ctx, tp->t && tp->h, \"out of memory for the autodiff tape\");\n"
    "  }\n"
    "  tp->t[tp->n] = t;\n"
    "  tp->h[tp->n++] = h;\n"
    "  if (t)\n"
    "    rt_mem_tape(ctx, t, 1); /* counted as a residual while on the tape */\n"
    "}\n"
    "\n"
    "static __attribute__((unused)) rt_tensor *tape_pop(rt_ctx *ctx, tape_t *tp, double *h) {\n"
    "  tp->n--;\n"
    "  if (h)\n"
    "    *h = tp->h[tp->n];\n"
    "  if (tp->t[tp->n])\n"
    "    rt_mem_tape(ctx, tp->t[tp->n], -1);\n"
    "  return tp->t[tp->n];\n"
    "}\n\n";

static void mark_reachable(IrFn *f);

bool ir_has_exports(IrProgram *p) {
  for (IrFn *f = p->fns; f; f = f->next)
    if (f->exported)
      return true;
  return false;
}

static const char *param_decls(Emitter *E, IrFn *f, bool names) {
  StrBuf sb;
  sb_init(&sb, &E->c->arena);
  for (int i = 0; i < f->nparams; i++)
    sb_printf(&sb, ", const rt_tensor *%s", names ? f->values[f->params[i]].hint : "");
  return sb.data;
}

static const char *grad_decls(IrFn *f, Compiler *c, bool names) {
  StrBuf sb;
  sb_init(&sb, &c->arena);
  for (int i = 0; i < f->nparams; i++)
    if (f->exp_mask[i])
      sb_printf(&sb, ", rt_tensor **%s%s", names ? "d_" : "", names ? f->values[f->params[i]].hint : "");
  return sb.data;
}

/* Result r of an export fn: its C out-parameter's name (out for a single
 * result, else out_ and its path: out_0, out_1_w1) and its path in the
 * source's tuple or record ("", "0", "1.w1"). */
static const char *result_name(Compiler *c, IrFn *f, int r) {
  if (f->nret == 1)
    return "out";
  return arena_sprintf(&c->arena, "out_%s", type_leaf_path(c, f->inst->ret, r, "_"));
}

static const char *result_path(Compiler *c, IrFn *f, int r) {
  return f->inst->ret ? type_leaf_path(c, f->inst->ret, r, ".") : "";
}

/* Parameter leaf i's path: the parameter's name and the field path of a
 * record parameter's leaf ("x", "m.blocks.w1"). */
static const char *param_path(Compiler *c, IrFn *f, int leaf) {
  int i = 0;
  for (Param *p = f->fn->params; p; p = p->next, i++) {
    if (p->type && p->type->is_axis)
      continue;
    const Type *t = f->inst->args[i];
    int nl = type_nleaves(t);
    if (leaf < nl) {
      const char *sub = type_leaf_path(c, t, leaf, ".");
      return *sub ? arena_sprintf(&c->arena, "%s.%s", p->name->name, sub) : p->name->name;
    }
    leaf -= nl;
  }
  return "";
}

static const char *result_decls(Emitter *E, IrFn *f, bool names) {
  StrBuf sb;
  sb_init(&sb, &E->c->arena);
  for (int r = 0; r < f->nret; r++)
    sb_printf(&sb, ", rt_tensor **%s", names ? result_name(E->c, f, r) : "");
  return sb.data;
}

/* The C prototypes of an export fn, for the header and the definitions. */
static void export_protos(Emitter *E, IrFn *f, bool names, const char *end) {
  const char *n = f->fn->name;
  fprintf(E->out, "void %s(rt_ctx *ctx%s%s)%s", n, param_decls(E, f, names), result_decls(E, f, names), end);
  if (f->exp_fwd)
    fprintf(E->out, "void %s_vjp(rt_ctx *ctx%s, const rt_tensor *%s%s)%s", n, param_decls(E, f, names),
            names ? "dout" : "", grad_decls(f, E->c, names), end);
}

static void emit_arg_info(Emitter *E, const Type *t, const char *name, bool diff, const char *path) {
  Mesh *m = E->p->mesh;
  fprintf(E->out, "{\"%s\", %s, %d, {", name, dtype_c(t->dtype), t->ndim);
  for (int d = 0; d < t->ndim; d++) {
    long long v = 0;
    if (!size_is_int(t->shape[d], &v))
      v = -1;
    fprintf(E->out, "%s%lld", d ? ", " : "", v);
  }
  fputs("}, {", E->out);
  for (int d = 0; d < t->ndim; d++) {
    int n = 0;
    while (n < MAX_MESH_AXES && t->spec[d][n] >= 0)
      n++;
    fprintf(E->out, "%s{.n = %d, .idx = {", d ? ", " : "", n);
    for (int k = 0; k < n; k++)
      fprintf(E->out, "%s%d", k ? ", " : "", t->spec[d][k]);
    fputs("}}", E->out);
  }
  fputs("}, {", E->out);
  static const char *const lt[] = {"RT_R", "RT_R", "RT_I", "RT_V", "RT_P"};
  for (int a = 0; a < m->naxes; a++)
    fprintf(E->out, "%s%s", a ? ", " : "", lt[t->lt[a]]);
  fprintf(E->out, "}, %s, \"%s\"}", diff ? "true" : "false", path);
}

/* The errors the emitter would find in p, found before anything is
 * written: spmdc runs this after autodiff in every mode that goes past the
 * checker (--check included), so a program --check accepts is one -S
 * accepts.  An export fn's C entry points take its parameters' sizes as
 * integers (signatures name tensor types only: no host numbers). */
bool emit_check(Compiler *c, IrProgram *p) {
  int before = c->nerrors;
  for (IrFn *f = p->fns; f; f = f->next) {
    if (!f->exported)
      continue;
    int bad = -1, dim = 0;
    for (int i = 0; i < f->nparams && bad < 0; i++) {
      const Type *t = f->values[f->params[i]].type;
      for (int d = 0; d < t->ndim && bad < 0; d++) {
        long long v;
        if (!size_is_int(t->shape[d], &v))
          bad = i, dim = d;
      }
    }
    if (bad >= 0) {
      error_at(c, f->fn->name_span, "export fn '%s': the sizes of its parameters must be integers", f->fn->name);
      help(c, "dim %d of parameter %d is %s: give it a whole number of elements", dim, bad + 1,
           size_str(c, p->mesh, f->values[f->params[bad]].type->shape[dim]));
    }
  }
  return c->nerrors == before;
}

static void emit_exports(Emitter *E) {
  FILE *fp = E->out;
  int nexp = 0;
  for (IrFn *f = E->p->fns; f; f = f->next) {
    if (!f->exported)
      continue;
    nexp++;
    E->f = f;
    const char *n = f->fn->name;
    fprintf(fp, "/* export fn %s */\n", n);
    fprintf(fp, "void %s(rt_ctx *ctx%s%s) {\n", n, param_decls(E, f, true), result_decls(E, f, true));
    fprintf(fp, "  f_%s(ctx", f->cname);
    for (int i = 0; i < f->nparams; i++)
      fprintf(fp, ", (rt_tensor *)%s", f->values[f->params[i]].hint);
    for (int r = 0; r < f->nret; r++)
      fprintf(fp, ", %s", result_name(E->c, f, r));
    fputs(");\n}\n\n", fp);
    if (f->exp_fwd) {
      fprintf(fp, "void %s_vjp(rt_ctx *ctx%s, const rt_tensor *dout%s) {\n", n, param_decls(E, f, true),
              grad_decls(f, E->c, true));
      fputs("  tape_t tape_ = {0};\n  rt_tensor *value_ = NULL;\n", fp);
      fprintf(fp, "  f_%s(ctx, &tape_", f->exp_fwd->cname);
      for (int i = 0; i < f->nparams; i++)
        fprintf(fp, ", (rt_tensor *)%s", f->values[f->params[i]].hint);
      fputs(", &value_);\n  rt_free(ctx, value_);\n", fp);
      fprintf(fp, "  f_%s(ctx, &tape_, (rt_tensor *)dout", f->exp_bwd->cname);
      for (int i = 0; i < f->nparams; i++)
        if (f->exp_mask[i])
          fprintf(fp, ", d_%s", f->values[f->params[i]].hint);
      fputs(");\n", fp);
      for (int i = 0; i < f->nparams; i++) /* gradients leave complete */
        if (f->exp_mask[i])
          fprintf(fp, "  if (d_%s)\n    rt_wait(ctx, *d_%s);\n", f->values[f->params[i]].hint,
                  f->values[f->params[i]].hint);
      fputs("  RT_CHECK(ctx, tape_.n == 0, \"internal error: autodiff tape not empty\");\n", fp);
      fputs("  free(tape_.t);\n  free(tape_.h);\n}\n\n", fp);
    }
    fprintf(fp, "static void %s_a(rt_ctx *ctx, const rt_tensor *const *args, rt_tensor **out) {\n", n);
    if (!f->nparams)
      fputs("  (void)args;\n", fp);
    fprintf(fp, "  %s(ctx", n);
    for (int i = 0; i < f->nparams; i++)
      fprintf(fp, ", args[%d]", i);
    if (f->nret == 1)
      fputs(", out", fp);
    else
      for (int r = 0; r < f->nret; r++)
        fprintf(fp, ", &out[%d]", r);
    fputs(");\n}\n\n", fp);
    if (f->exp_fwd) {
      fprintf(fp, "static void %s_vjp_a(rt_ctx *ctx, const rt_tensor *const *args, const rt_tensor *dout, rt_tensor **grads) {\n  %s_vjp(ctx", n, n);
      for (int i = 0; i < f->nparams; i++)
        fprintf(fp, ", args[%d]", i);
      fputs(", dout", fp);
      for (int i = 0; i < f->nparams; i++)
        if (f->exp_mask[i])
          fprintf(fp, ", &grads[%d]", i);
      fputs(");\n}\n\n", fp);
    }
    fprintf(fp, "static const spmd_export_arg %s_args[] = {", n);
    for (int i = 0; i < f->nparams; i++) {
      fputs(i ? ",\n  " : "\n  ", fp);
      emit_arg_info(E, f->values[f->params[i]].type, f->values[f->params[i]].hint, f->exp_mask && f->exp_mask[i],
                    param_path(E->c, f, i));
    }
    fprintf(fp, "%s};\n", f->nparams ? "" : "{0}");
    fprintf(fp, "static const spmd_export_arg %s_results[] = {", n);
    for (int r = 0; r < f->nret; r++) {
      fputs(r ? ",\n  " : "\n  ", fp);
      emit_arg_info(E, f->ret_types[r], f->nret == 1 ? "result" : result_name(E->c, f, r) + 4, false,
                    result_path(E->c, f, r));
    }
    fprintf(fp, "%s};\n", f->nret ? "" : "{0}");
    fprintf(fp, "const spmd_export_info %s_info = {\"%s\", %d, %s_args,\n  ", n, n, f->nparams, n);
    if (f->nret)
      emit_arg_info(E, f->ret_types[0], f->nret == 1 ? "result" : result_name(E->c, f, 0) + 4, false,
                    result_path(E->c, f, 0));
    else
      fputs("{0}", fp);
    if (f->exp_fwd)
      fprintf(fp, ",\n  %s_a, %s_vjp_a, %d, %s_results};\n\n", n, n, f->nret, n);
    else
      fprintf(fp, ",\n  %s_a, NULL, %d, %s_results};\n\n", n, f->nret, n);
  }
  if (!nexp)
    return;
  Mesh *m = E->p->mesh;
  fputs("const spmd_export_info *const spmd_exports[] = {", fp);
  for (IrFn *f = E->p->fns; f; f = f->next)
    if (f->exported)
      fprintf(fp, "&%s_info, ", f->fn->name);
  fputs("NULL};\n", fp);
  fprintf(fp, "const int spmd_mesh_naxes = %d;\nconst char *const spmd_mesh_names[] = {", m->naxes);
  for (int i = 0; i < m->naxes; i++)
    fprintf(fp, "\"%s\", ", m->axes[i].name);
  fputs("NULL};\nconst int spmd_mesh_sizes[] = {", fp);
  for (int i = 0; i < m->naxes; i++)
    fprintf(fp, "%lld, ", m->axes[i].size ? m->axes[i].size : -1);
  fputs("0};\n\n", fp);
}

static const char export_types[] =
    "#ifndef SPMD_EXPORT_TYPES_H\n"
    "#define SPMD_EXPORT_TYPES_H\n"
    "/* One parameter or result of an export fn: its global shape, the mesh\n"
    " * axes sharding each dim, and its local SPMD type on each mesh axis;\n"
    " * path is its place in the source (\"x\", \"m.blocks.w1\" of a record\n"
    " * parameter; a tuple or record result's \"0\", \"1.w1\"). */\n"
    "typedef struct spmd_export_arg {\n"
    "  const char *name;\n"
    "  rt_dtype dtype;\n"
    "  int ndim;\n"
    "  int64_t global[RT_MAX_DIMS];\n"
    "  rt_axes dim_axes[RT_MAX_DIMS];\n"
    "  rt_ltype ltype[RT_MAX_AXES];\n"
    "  bool differentiable;\n"
    "  const char *path;\n"
    "} spmd_export_arg;\n"
    "\n"
    "/* An export fn, for generic hosts: its signature and array-form entry\n"
    " * points.  fn writes out[0..nresults-1] (a tuple or record result is one\n"
    " * tensor per leaf; result is results[0]); vjp is NULL unless there is\n"
    " * one result (grads[i] is left NULL for a parameter without gradient). */\n"
    "typedef struct spmd_export_info {\n"
    "  const char *name;\n"
    "  int nargs;\n"
    "  const spmd_export_arg *args;  /* nargs of them */\n"
    "  spmd_export_arg result;\n"
    "  void (*fn)(rt_ctx *ctx, const rt_tensor *const *args, rt_tensor **out);\n"
    "  void (*vjp)(rt_ctx *ctx, const rt_tensor *const *args, const rt_tensor *dout, rt_tensor **grads);\n"
    "  int nresults;\n"
    "  const spmd_export_arg *results;  /* nresults of them */\n"
    "} spmd_export_info;\n"
    "#endif\n\n";

bool emit_header(Compiler *c, IrProgram *p, FILE *fp, const char *source_path, const char *guard) {
  Emitter E = {.c = c, .p = p, .out = fp, .tgt = &target_cpu};
  fprintf(fp, "/* Generated by spmdc %s from %s: the C entry points of its export fns.\n", SPMDC_VERSION, source_path);
  fputs(" * Arguments are this rank's blocks, borrowed; results and gradients are\n"
        " * new references the caller frees with rt_free.  Call rt_init first with\n"
        " * spmd_mesh_names and spmd_mesh_sizes. */\n", fp);
  fprintf(fp, "#ifndef %s\n#define %s\n\n#include <stdbool.h>\n#include \"spmdrt.h\"\n\n", guard, guard);
  fputs(export_types, fp);
  for (IrFn *f = p->fns; f; f = f->next) {
    if (!f->exported)
      continue;
    E.f = f;
    int line, col;
    source_position(c, f->fn->span, &line, &col);
    fprintf(fp, "/* %s:%d: export fn %s */\n", source_file(c, f->fn->span.file)->path, line, f->fn->name);
    export_protos(&E, f, true, ";\n");
    fprintf(fp, "extern const spmd_export_info %s_info;\n\n", f->fn->name);
  }
  fputs("/* every export fn, NULL-terminated; the program's mesh */\n", fp);
  fputs("extern const spmd_export_info *const spmd_exports[];\n", fp);
  fputs("extern const int spmd_mesh_naxes;\nextern const char *const spmd_mesh_names[];\nextern const int spmd_mesh_sizes[];\n", fp);
  fprintf(fp, "\n#endif\n");
  return true;
}

static void mark_block(IrBlock *b) {
  for (IrInst *in = b->head; in; in = in->next) {
    if (in->callee)
      mark_reachable(in->callee);
    mark_block(&in->body);
    mark_block(&in->els);
  }
}

/* Only functions that main can reach are emitted (all, for a library). */
static void mark_reachable(IrFn *f) {
  if (f->emitted)
    return;
  f->emitted = true;
  if (f->exp_fwd) {
    mark_reachable(f->exp_fwd);
    mark_reachable(f->exp_bwd);
  }
  if (f->vjp_fwd) {
    mark_reachable(f->vjp_fwd);
    mark_reachable(f->vjp_bwd);
  }
  mark_block(&f->body);
}

/* The host program of any target (and with cu, the CUDA target's kernels). */
static FILE *region_report; /* emit_regions: where emit_program describes them */

bool emit_program(Compiler *c, IrProgram *p, const Target *tgt, FILE *fp, FILE *cu, const char *source_path) {
  Emitter E = {.c = c, .p = p, .out = fp, .tgt = tgt, .cu = cu,
               .slot_kind = p->main ? mem_slot_kinds(c, p->main) : NULL, .region_report = region_report};
  for (IrFn *f = p->fns; f; f = f->next)
    f->emitted = !p->main;
  if (p->main)
    mark_reachable(p->main);
  for (IrFn *f = p->fns; f; f = f->next)
    if (f->exported)
      mark_reachable(f);
  fprintf(fp, "/* Generated by spmdc %s from %s.  Do not edit. */\n", SPMDC_VERSION, source_path);
  fputs(prelude, fp);
  /* the CUDA target: the functions first, so that the prototypes of the
   * kernels' launchers they call can go before them */
  char *body = NULL, *protos = NULL;
  size_t nbody = 0, nprotos = 0;
  char *fills = NULL, *fprotos = NULL;
  size_t nfills = 0, nfprotos = 0;
  if (cu) {
    E.out = open_memstream(&body, &nbody);
    E.protos = open_memstream(&protos, &nprotos);
    E.fills = open_memstream(&fills, &nfills);
    E.fill_protos = open_memstream(&fprotos, &nfprotos);
    if (!E.out || !E.protos || !E.fills || !E.fill_protos)
      diag_fatal(c, "out of memory");
    cuda_begin(&E, source_path);
  }
  if (ir_has_exports(p))
    fputs(export_types, E.out);
  for (IrFn *f = p->fns; f; f = f->next) {
    E.f = f;
    if (f->emitted)
      emit_signature(&E, f, true);
  }
  fputc('\n', E.out);
  for (IrFn *f = p->fns; f; f = f->next)
    if (f->emitted)
      emit_fn(&E, f);
  emit_exports(&E);
  if (p->main) {
    Mesh *m = p->mesh;
    FILE *o = E.out;
    fputs("int main(int argc, char **argv) {\n", o);
    fprintf(o, "  static const char *const axis_names[] = {");
    for (int i = 0; i < m->naxes; i++)
      fprintf(o, "%s\"%s\"", i ? ", " : "", m->axes[i].name);
    fprintf(o, "%s};\n  static const int axis_sizes[] = {", m->naxes ? "" : "NULL");
    for (int i = 0; i < m->naxes; i++)
      fprintf(o, "%s%lld", i ? ", " : "", m->axes[i].size ? m->axes[i].size : -1);
    fprintf(o, "%s};\n", m->naxes ? "" : "0");
    fprintf(o, "  rt_ctx *ctx = rt_init(&argc, &argv, %d, axis_names, axis_sizes);\n", m->naxes);
    fprintf(o, "  f_%s(ctx);\n", p->main->cname);
    fputs("  return rt_finalize(ctx);\n}\n", o);
  }
  if (cu) {
    while (E.nfill_done < E.nfill_fns) /* the fills the regions' fills call, and theirs */
      emit_fill_fn(&E, E.fill_fns[E.nfill_done++]);
    fclose(E.out);
    fclose(E.protos);
    fclose(E.fills);
    fclose(E.fill_protos);
    fputs("#include \"spmdrt_kernels.h\"\n\n", fp);
    if (nprotos)
      fprintf(fp, "/* the fused elementwise regions' kernels, in %s's companion .cu */\n%s\n", source_path, protos);
    if (nfills)
      fprintf(fp, "/* graph regions' fills (runtime/graph.c): the host numbers of a region's device work, without\n"
                  " * it, run before each replay; slots refreshed, guards compared */\n%s\n%s", fprotos, fills);
    fwrite(body, 1, nbody, fp);
    free(body);
    free(protos);
    free(fills);
    free(fprotos);
  }
  return true;
}

bool emit_regions(Compiler *c, IrProgram *p, FILE *report, const char *source_path) {
  char *b1 = NULL, *b2 = NULL;
  size_t n1 = 0, n2 = 0;
  FILE *o = open_memstream(&b1, &n1), *cu = open_memstream(&b2, &n2);
  if (!o || !cu)
    diag_fatal(c, "out of memory");
  fprintf(report, "graph regions of %s: the CUDA target runs each once, captures it as a CUDA graph, then replays it "
                  "(docs/runtime.md \"Graph regions\")\n", source_path);
  region_report = report;
  bool ok = emit_program(c, p, &target_cuda, o, cu, source_path);
  region_report = NULL;
  fclose(o);
  fclose(cu);
  free(b1);
  free(b2);
  return ok;
}

bool emit_c(Compiler *c, IrProgram *p, FILE *fp, const char *source_path) {
  return emit_program(c, p, &target_cpu, fp, NULL, source_path);
}
