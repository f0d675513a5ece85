/* schedule.c: the target-independent schedule of a block, which the host
 * printer (emit_c.c) follows for every target: the order of its
 * instructions (elementwise operations of one shape pulled together, so that
 * they fuse), which instructions can be members of a fused elementwise
 * region, the values that die after each instruction (frees), the
 * all-reduces that start early (overlap.c) and where they are waited for,
 * and the var reads that move the var's reference. */
#include <math.h>
#include <string.h>

#include "overlap.h"
#include "schedule.h"

static void uses(IrInst *in, int j, int *lastuse) {
  for (int i = 0; i < in->nargs; i++)
    lastuse[in->args[i]] = j;
  for (IrInst *x = in->body.head; x; x = x->next)
    uses(x, j, lastuse);
  for (IrInst *x = in->els.head; x; x = x->next)
    uses(x, j, lastuse);
}

bool sched_is_param(const IrFn *f, int v) {
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i] == v)
      return true;
  return false;
}

static bool block_reads(const IrBlock *b, int v) {
  for (const IrInst *in = b->head; in; in = in->next) {
    for (int i = 0; i < in->nargs; i++)
      if (in->args[i] == v)
        return true;
    if (block_reads(&in->body, v) || block_reads(&in->els, v))
      return true;
  }
  return false;
}

/* Owned parameters (the donor rule for a callee's parameters): a plain
 * function (not main, not an export's entry point, not a value_and_grad
 * wrapper nor a generated forward or backward, which other C code calls)
 * takes a reference to each tensor parameter that its body could write
 * over (an operand of an elementwise operation of its shape, or an
 * argument of a call that owns it in turn).  Each call site
 * hands over its own reference where the argument dies at the call (the
 * caller's block owns it and reads it for the last time there, once), and
 * adds one otherwise; the callee frees the parameter after its last use
 * and may write over it (rt_reuse, refs == 1) like any value it owns.  A
 * parameter whose caller keeps the value alive has two references, so
 * rt_reuse never hands its buffer out. */
static bool owned_at(const Compiler *c, const IrFn *f, int i, int depth);

/* Whether the body of f (its top block) could write over v: v is an
 * operand of an elementwise instruction of its shape (a fused region's
 * donor), or an argument of a call that owns it in turn. */
static bool may_write_over(const Compiler *c, const IrFn *f, int v, int depth) {
  const Type *t = f->values[v].type;
  for (const IrInst *in = f->body.head; in; in = in->next)
    for (int a = 0; a < in->nargs; a++) {
      if (in->args[a] != v)
        continue;
      if (sched_fusable(c, f, in) && sched_same_shape(f->values[in->dst[0]].type, t))
        return true;
      if (in->op == IR_CALL && depth < 16 && owned_at(c, in->callee, a, depth + 1))
        return true;
    }
  return false;
}

static bool owned_at(const Compiler *c, const IrFn *f, int i, int depth) {
  if (f->role != IRFN_PLAIN || f->is_main || f->exported || f->vjp_fwd || i < 0 || i >= f->nparams)
    return false;
  int v = f->params[i];
  return f->values[v].type->kind == TY_TENSOR && block_reads(&f->body, v) && may_write_over(c, f, v, depth);
}

bool sched_param_owned(const Compiler *c, const IrFn *f, int i) { return owned_at(c, f, i, 0); }

bool sched_owned_value(const Compiler *c, const IrFn *f, int v) {
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i] == v)
      return sched_param_owned(c, f, i);
  return true;
}

/* ---- elementwise fusion: which instructions can be members of a region.
 * A run of consecutive elementwise instructions (binary ops and
 * comparisons, the unary ops below, where, gradient accumulation) on
 * tensors of one shape and dtype (f32 or f64; 0-d too), with operands of
 * that shape, 0-d tensors, host scalars and tensors of its trailing dims
 * (a bias [N] onto [.., N]), becomes one loop (a kernel): intermediates
 * live in registers, only values used after the run are stored (emit_c.c,
 * emit_cuda.c).  Each member computes the runtime kernel's formula with
 * the kernel's roundings, so fusion changes no bits. */

/* The code generator's column of the binary ops (the runtime's X-list
 * RT_BINARY_OPS has their formulas): the C operator inside a fused loop
 * for + - * / (in the dtype: the same bits as the kernel's double rounded
 * to it); the others compute the X-list's formula in double, as the
 * kernels do (sched_binary_formula). */
static const char *const binary_fused[BIN_COUNT] = {
    [BIN_ADD] = "+", [BIN_SUB] = "-", [BIN_MUL] = "*", [BIN_DIV] = "/",
};

#define SCHED_BIN_FORMULA_(NAME, name, kind, f, da, db) [BIN_##NAME] = #f,
static const char *const binary_formula[BIN_COUNT] = {RT_BINARY_OPS(SCHED_BIN_FORMULA_)};
#undef SCHED_BIN_FORMULA_

const char *sched_fused_op(const IrInst *in) {
  if (in->op == IR_ACCUM)
    return "+";
  return in->op == IR_BINARY || in->op == IR_BINARY_SCALAR ? binary_fused[in->binop] : NULL;
}

const char *sched_binary_formula(IrBinary b) { return binary_formula[b]; }

/* The code generator's columns of the unary ops (the runtime's X-list
 * RT_UNARY_OPS has their formulas and derivatives):
 *   fused: the C spelling inside a fused loop on every target, for f64
 *     and f32, X standing for the operand: the X-list's formula as the
 *     kernels round it ((T)(f) with x a T; tgmath's float functions);
 *     NULL: only the CUDA target fuses it (sched_unary_fusable);
 *   gemm_act: a GEMM epilogue's activation (rt_matmul_bias_act: oneDNN's
 *     and cuBLASLt's post-ops).
 * The ops without a spelling are those with vector kernels on the CPU
 * (the X-list's VEC: SLEEF's exp, tanh, erf, ..., runtime/vmath_isa.h),
 * whose bits a scalar loop does not reproduce; the CUDA target's kernels
 * (runtime/cuda/elementwise.cu) compute the X-list's formula in the
 * tensor's precision, and so does its fused loop (the formula itself,
 * sched_unary_formula), on the device and in the simulation. */
static const struct {
  const char *fused[2];
  bool gemm_act;
} unary_codegen[UN_COUNT] = {
    [UN_NEG] = {{"-X", "-X"}, false},
    [UN_SQRT] = {{"sqrt(X)", "sqrtf(X)"}, false},
    [UN_RSQRT] = {{"1.0 / sqrt(X)", "(float)(1.0 / sqrtf(X))"}, false},
    [UN_SQUARE] = {{"X * X", "X * X"}, false},
    [UN_ABS] = {{"fabs(X)", "fabsf(X)"}, false},
    [UN_RELU] = {{"(X > 0 ? X : 0.0)", "(X > 0 ? X : 0.0f)"}, true},
    [UN_GELU] = {{NULL, NULL}, true},
    [UN_GELU_TANH] = {{NULL, NULL}, true},
};

#define SCHED_UN_FORMULA_(NAME, name, vec, f, d) [UN_##NAME] = #f,
static const char *const unary_formula[UN_COUNT] = {RT_UNARY_OPS(SCHED_UN_FORMULA_)};
#undef SCHED_UN_FORMULA_

const char *sched_fused_unary(IrUnary u, DType dt) { return unary_codegen[u].fused[dt == DT_F64 ? 0 : 1]; }
const char *sched_unary_formula(IrUnary u) { return unary_formula[u]; }

bool sched_unary_fusable(const Compiler *c, IrUnary u, DType dt) {
  return sched_fused_unary(u, dt) || c->cuda_target;
}

/* The same dtype and local shape: the same global shape and partition spec
 * (an S(0) value and an R one of one global shape differ in size per rank). */
static bool same_dim(const Type *a, int da, const Type *b, int db) {
  if (!size_eq(a->shape[da], b->shape[db]) || a->shape[da].unknown)
    return false;
  for (int k = 0; k < MAX_MESH_AXES && (a->spec[da][k] >= 0 || b->spec[db][k] >= 0); k++)
    if (a->spec[da][k] != b->spec[db][k])
      return false;
  return true;
}

bool sched_same_layout(const Type *a, const Type *b) {
  if (a->ndim != b->ndim)
    return false;
  for (int d = 0; d < a->ndim; d++)
    if (!same_dim(a, d, b, d))
      return false;
  return true;
}

bool sched_same_shape(const Type *a, const Type *b) {
  if (a->ndim != b->ndim || a->dtype != b->dtype)
    return false;
  for (int d = 0; d < a->ndim; d++)
    if (!same_dim(a, d, b, d))
      return false;
  return true;
}

bool sched_trailing(const Type *a, const Type *t) {
  if (a->kind != TY_TENSOR || a->dtype != t->dtype || a->ndim < 1 || a->ndim >= t->ndim)
    return false;
  for (int d = 0; d < a->ndim; d++)
    if (!same_dim(a, d, t, t->ndim - a->ndim + d))
      return false;
  return true;
}

/* A tensor operand a loop over t reads: of t's shape, 0-d, or t's trailing
 * dims (element i_ % its size: each of t's rows reads it whole), of t's dtype */
static bool fused_operand_ok(const Type *a, const Type *t) {
  if (a->kind != TY_TENSOR || a->dtype != t->dtype)
    return false;
  return a->ndim == 0 || sched_same_shape(a, t) || sched_trailing(a, t);
}

bool sched_row_operand(const Type *a, const Type *t) {
  long long one;
  if (a->kind != TY_TENSOR || t->kind != TY_TENSOR || a->ndim != t->ndim || a->ndim < 1 ||
      !size_is_int(a->shape[a->ndim - 1], &one) || one != 1 || a->spec[a->ndim - 1][0] >= 0 ||
      sched_same_layout(a, t))
    return false;
  for (int d = 0; d < a->ndim - 1; d++)
    if (!same_dim(a, d, t, d))
      return false;
  return true;
}

/* A where's condition in a fused loop over t on the CUDA target: a tensor
 * of another dtype (i32 ids' masks in an f32 loop; f32 or f64 in an i32
 * one), read in its own type and tested != 0 as the kernel's rt_ld does
 * (no bf16: its kernel reads it widened), of t's shape or of t's with a
 * last dim of 1 (a mask per row, reshape(mine, [B, S, 1]): read at
 * i_ / t's last dim). */
static bool other_condition(const Compiler *c, const Type *a, const Type *t) {
  return c->cuda_target && a->kind == TY_TENSOR && a->dtype != DT_BF16 &&
         ((a->dtype != t->dtype && sched_same_layout(a, t)) || sched_row_operand(a, t));
}

/* Whether `in` can be a member of a fused loop.  i32 results (ids' masks
 * and offsets: vocab_parallel_embedding's) fuse on the CUDA target: +, -,
 * *, the comparisons (the kernel's formula in double, cast to int32_t as
 * rt_binary's i32 kernel stores it) and where. */
bool sched_fusable(const Compiler *c, const IrFn *f, const IrInst *in) {
  if (in->ndst != 1 || in->dst[0] < 0)
    return false;
  const Type *t = f->values[in->dst[0]].type;
  bool i32 = t->kind == TY_TENSOR && t->dtype == DT_I32 && c->cuda_target;
  if (t->kind != TY_TENSOR || (t->dtype != DT_F32 && t->dtype != DT_F64 && t->dtype != DT_BF16 && !i32))
    return false;
  if (i32 && in->op != IR_BINARY && in->op != IR_BINARY_SCALAR && in->op != IR_WHERE)
    return false;
  if (i32 && (in->op == IR_BINARY || in->op == IR_BINARY_SCALAR) &&
      (in->binop == BIN_DIV || in->binop == BIN_POW)) /* the runtime refuses them on i32 */
    return false;
  switch (in->op) {
  case IR_BINARY:
  case IR_ACCUM:
    if (in->nargs != 2)
      return false;
    for (int i = 0; i < 2; i++)
      if (!fused_operand_ok(f->values[in->args[i]].type, t))
        return false;
    return true;
  case IR_BINARY_SCALAR: return sched_same_shape(f->values[in->args[0]].type, t);
  case IR_UNARY:
    return sched_unary_fusable(c, in->unop, t->dtype) && sched_same_shape(f->values[in->args[0]].type, t);
  case IR_WHERE: /* not bf16: the kernel copies a NaN's bits, a loop through f32 would not */
    if (in->nargs != 3 || t->dtype == DT_BF16)
      return false;
    for (int i = 0; i < 3; i++) {
      const Type *a = f->values[in->args[i]].type;
      if (i > 0 && a->kind != TY_TENSOR) /* a host number (sched_host_scalars) */
        continue;
      if (!fused_operand_ok(a, t) && !(i == 0 && other_condition(c, a, t)))
        return false;
    }
    return true;
  default: return false;
  }
}

bool sched_transparent(const IrInst *in) { return ir_has(in->op, IRF_FUSE_THROUGH); }

/* Whether an instruction (or one nested in it) reads or writes var `slot`. */
static void slots_touched(IrInst *in, bool *touched) {
  if (in->op == IR_VAR_GET || in->op == IR_VAR_SET || in->op == IR_INDEX_ADD_SLOT)
    touched[IR_I(in, SLOT)] = true;
  for (IrInst *x = in->body.head; x; x = x->next)
    slots_touched(x, touched);
  for (IrInst *x = in->els.head; x; x = x->next)
    slots_touched(x, touched);
}

/* move[j]: insts[j] reads a tensor var whose next access in this block is
 * an assignment at this level, so the read can take the var's reference
 * (the old value is dead after it) instead of adding one.  A value with one
 * reference can be updated in place (rt_reuse).  In the body of a
 * generated backward, the end of the body counts as an assignment: its
 * vars (adjoints) are dead there (the read of `var x = ...`'s adjoint,
 * which is not zeroed after it: autodiff.c, first_contribution_sets). */
static bool *var_moves(Compiler *c, IrFn *f, IrInst **insts, int n, bool backward_body) {
  bool *move = arena_alloc(&c->arena, sizeof(bool) * (size_t)(n ? n : 1));
  int nv = f->nvars;
  bool *next_set = arena_alloc(&c->arena, sizeof(bool) * (size_t)(nv ? nv : 1));
  bool *touched = arena_alloc(&c->arena, sizeof(bool) * (size_t)(nv ? nv : 1));
  for (int s = 0; backward_body && s < nv; s++)
    next_set[s] = true;
  for (int k = n - 1; k >= 0; k--) {
    IrInst *in = insts[k];
    if (in->op == IR_VAR_GET) {
      move[k] = next_set[IR_I(in, SLOT)] && (f->values[in->dst[0]].type->kind == TY_TENSOR);
      next_set[IR_I(in, SLOT)] = false;
    } else if (in->op == IR_VAR_SET) {
      next_set[IR_I(in, SLOT)] = true;
    } else if (in->body.head || in->els.head || in->op == IR_INDEX_ADD_SLOT) {
      memset(touched, 0, sizeof(bool) * (size_t)(nv ? nv : 1));
      slots_touched(in, touched);
      for (int s = 0; s < nv; s++)
        if (touched[s])
          next_set[s] = false;
    }
  }
  return move;
}

/* ---- scheduling for fusion
 * Arithmetic on records goes field by field, one operation at a time: the
 * AdamW update of a record is `beta1 * m` for every field, then
 * `(1 - beta1) * g` for every field, and so on, so consecutive instructions
 * alternate between the fields' shapes and no run of one shape forms.
 * Before a block is emitted, each elementwise instruction that can start a
 * run pulls up the later elementwise instructions of its shape, and the
 * host arithmetic they need, whose operands are already computed; the scan
 * stops at communication, calls, control flow and anything else with an
 * effect (those keep their order relative to all the rest).  Only pure
 * instructions move, and each still computes the same value from the same
 * operands, so the results are the same bits; a record's update becomes one
 * loop per field. */

static bool pure_host(const IrInst *in) { return ir_has(in->op, IRF_PURE_HOST); }

/* Instructions that nothing is moved across: IRF_BARRIER (communication,
 * calls, effects, host reads of tensors, var writes, the tape) and any
 * instruction that holds a block. */
static bool schedule_barrier(const IrInst *in) { return in->body.head || in->els.head || ir_has(in->op, IRF_BARRIER); }

/* A save of a differentiated forward (tensors only): a fusable op after it
 * may move before it (it reads nothing the op writes; the saves keep their
 * order, so the tape's), so that an op's saves between two elementwise ops
 * do not keep them out of one loop (issue 26) */
static bool push_of_tensors(const IrFn *f, const IrInst *in) {
  if (in->op != IR_PUSH)
    return false;
  for (int i = 0; i < in->nargs; i++)
    if (f->values[in->args[i]].type->kind != TY_TENSOR)
      return false;
  return true;
}

static void schedule_for_fusion(Compiler *c, IrFn *f, IrBlock *b) {
  int n = 0;
  for (IrInst *in = b->head; in; in = in->next)
    n++;
  if (n < 3)
    return;
  IrInst **insts = arena_alloc(&c->arena, sizeof(IrInst *) * (size_t)n);
  IrInst **order = arena_alloc(&c->arena, sizeof(IrInst *) * (size_t)n);
  bool *placed = arena_alloc(&c->arena, sizeof(bool) * (size_t)n);
  int nv = f->nvalues + 1;
  char *pending = arena_alloc(&c->arena, (size_t)nv); /* defined in this block, not yet placed */
  memset(placed, 0, sizeof(bool) * (size_t)n);
  memset(pending, 0, (size_t)nv);
  int j = 0;
  for (IrInst *in = b->head; in; in = in->next) {
    insts[j++] = in;
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] >= 0)
        pending[in->dst[d]] = 1;
  }
  int m = 0;
  bool moved = false;
#define PLACE_(k)                                                                                                   \
  do {                                                                                                              \
    placed[k] = true;                                                                                               \
    order[m++] = insts[k];                                                                                          \
    for (int d_ = 0; d_ < insts[k]->ndst; d_++)                                                                     \
      if (insts[k]->dst[d_] >= 0)                                                                                   \
        pending[insts[k]->dst[d_]] = 0;                                                                             \
  } while (0)
  for (j = 0; j < n; j++) {
    if (placed[j])
      continue;
    PLACE_(j);
    if (!sched_fusable(c, f, insts[j]))
      continue;
    const Type *t = f->values[insts[j]->dst[0]].type;
    for (int k = j + 1; k < n && (!schedule_barrier(insts[k]) || push_of_tensors(f, insts[k])); k++) {
      IrInst *in = insts[k];
      if (placed[k] ||
          !(pure_host(in) || (sched_fusable(c, f, in) && sched_same_shape(f->values[in->dst[0]].type, t))))
        continue;
      bool ready = true;
      for (int a = 0; a < in->nargs && ready; a++)
        ready = !pending[in->args[a]];
      if (!ready)
        continue;
      for (int i = j + 1; i < k && !moved; i++)
        moved = !placed[i];
      PLACE_(k);
    }
  }
#undef PLACE_
  if (!moved)
    return;
  b->head = order[0];
  for (j = 0; j + 1 < n; j++)
    order[j]->next = order[j + 1];
  order[n - 1]->next = NULL;
  b->tail = order[n - 1];
}

void sched_count_uses(IrBlock *b, int *nuses) {
  for (IrInst *in = b->head; in; in = in->next) {
    for (int i = 0; i < in->nargs; i++)
      nuses[in->args[i]]++;
    sched_count_uses(&in->body, nuses);
    sched_count_uses(&in->els, nuses);
  }
}

/* ---- regions: which instructions run as one, and where their values go */

/* A push of tensors only (the saves of a differentiated forward), none of
 * them v */
static bool push_without(const IrFn *f, const IrInst *in, int v) {
  if (in->op != IR_PUSH)
    return false;
  for (int i = 0; i < in->nargs; i++)
    if (in->args[i] == v || f->values[in->args[i]].type->kind != TY_TENSOR)
      return false;
  return true;
}

/* Whether an einsum spec over operands of na and nb dims is a matmul of
 * a [..., k] by b [k, n...]: a's last label is b's first and no other,
 * and the result is a's other labels, then b's, in order ("btd,dhe->bthe",
 * "bd,dn->bn"): row-major, its GEMM is [rows, k] x [k, N] with no copy. */
bool sched_einsum_matmul(const char *spec, int na, int nb) {
  char in[3][16];
  int len[3] = {0, 0, 0}, part = 0;
  if (!spec || na < 2 || nb < 2)
    return false;
  for (const char *p = spec; *p; p++) {
    if (*p == ' ')
      continue;
    if (*p == ',' && part == 0) {
      part = 1;
    } else if (*p == '-' && p[1] == '>' && part == 1) {
      part = 2;
      p++;
    } else if (((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) && len[part] < 15) {
      in[part][len[part]++] = *p;
    } else {
      return false; /* an ellipsis, a third operand, too many labels */
    }
  }
  if (part != 2 || len[0] != na || len[1] != nb || len[2] != na + nb - 2 || in[0][na - 1] != in[1][0])
    return false;
  for (int i = 0; i < len[2]; i++) {
    char want = i < na - 1 ? in[0][i] : in[1][i - (na - 1) + 1];
    if (in[2][i] != want || want == in[1][0])
      return false;
    for (int q = 0; q < i; q++)
      if (in[2][q] == want)
        return false; /* a label of both operands' free dims: not a plain product */
  }
  return true;
}

/* Whether bias (a type) is exactly the last nn dims of y (size and
 * partition), so that `y + bias` adds it to each of y's rows of those dims */
static bool bias_of_rows(const Type *bias, const Type *y, int nn) {
  if (!bias || bias->kind != TY_TENSOR || bias->dtype != y->dtype || bias->ndim != nn || nn >= y->ndim)
    return false;
  for (int d = 0; d < nn; d++)
    if (!same_dim(bias, d, y, y->ndim - nn + d))
      return false;
  return true;
}

int sched_gemm_epilogue(const Compiler *c, const IrFn *f, IrInst **insts, int j, int n, int *nuses, int *bias,
                        int *act) {
  IrInst *mm = insts[j];
  *bias = *act = -1;
  /* an einsum of a matmul's form (sched_einsum_matmul): f32 on the CUDA
   * target, as nn.attention_heads projects q, k and v */
  bool einsum = mm->op == IR_EINSUM && c->cuda_target;
  if ((mm->op != IR_MATMUL && !einsum) || mm->nargs != 2)
    return 0;
  const Type *a = f->values[mm->args[0]].type, *b = f->values[mm->args[1]].type;
  const Type *y = f->values[mm->dst[0]].type;
  /* bf16 on every target (oneDNN's post-ops, cuBLASLt's epilogue); f32 on
   * the CUDA target, where the epilogue's bias add (to the f32
   * accumulator, rounded once) and relu give the bits of the separate
   * kernels */
  bool f32 = y->dtype == DT_F32 && c->cuda_target;
  if (einsum && (!f32 || a->kind != TY_TENSOR || b->kind != TY_TENSOR ||
                 !sched_einsum_matmul(mm->s, a->ndim, b->ndim)))
    return 0;
  if ((y->dtype != DT_BF16 && !f32) || a->ndim < 2 || (!einsum && b->ndim != 2) || a->dtype != y->dtype ||
      b->dtype != y->dtype)
    return 0;
  int k = j + 1, cur = mm->dst[0];
  /* a differentiated forward: the matmul's saves (its operands) before the add */
  while (f32 && k < n && push_without(f, insts[k], cur))
    k++;
  if (k < n && insts[k]->op == IR_BINARY && insts[k]->binop == BIN_ADD) {
    IrInst *add = insts[k];
    int other = add->args[0] == cur ? add->args[1] : add->args[1] == cur ? add->args[0] : -1;
    const Type *bt = other >= 0 ? f->values[other].type : NULL;
    bool ok = (einsum ? bias_of_rows(bt, y, b->ndim - 1)
                      : bt && bt->kind == TY_TENSOR && bt->dtype == y->dtype && bt->ndim == 1 &&
                            size_eq(bt->shape[0], y->shape[y->ndim - 1]) && !bt->shape[0].unknown) &&
              sched_same_shape(f->values[add->dst[0]].type, y);
    /* The add's own saves right after it (its operands, for its backward,
     * which reads only their shapes: the gradients are dy and dy summed to
     * the bias's shape): the matmul's result is saved as the sum instead,
     * which has its shape, so that the matmul's result is not needed.
     * Rewritten once; a later schedule of the block finds it done. */
    if (ok && f32 && nuses[cur] == 2 && k + 1 < n && insts[k + 1]->op == IR_PUSH && insts[k + 1]->nargs == 2 &&
        ((insts[k + 1]->args[0] == cur && insts[k + 1]->args[1] == other) ||
         (insts[k + 1]->args[1] == cur && insts[k + 1]->args[0] == other))) {
      IrInst *save = insts[k + 1];
      save->args[save->args[0] == cur ? 0 : 1] = add->dst[0];
      nuses[cur]--;
      nuses[add->dst[0]]++;
    }
    if (ok && nuses[cur] == 1) {
      *bias = other;
      cur = add->dst[0];
      k++;
    }
  }
  if (*bias < 0 && k > j + 1) /* no bias after the saves: nothing fused */
    return 0;
  if (k < n && insts[k]->op == IR_UNARY && insts[k]->args[0] == cur && nuses[cur] == 1 &&
      unary_codegen[insts[k]->unop].gemm_act && (!f32 || insts[k]->unop != UN_GELU_TANH)) {
    *act = (int)insts[k]->unop;
    k++;
  }
  if (*bias < 0 && *act < 0)
    return 0;
  return k - j;
}

/* Whether mb is the backward of a matmul's form, x [..., k] @ w [k, n...]
 * (a matmul of a 2-d w, or an einsum "btd,dhe->bthe"), dy (args[2]) x's
 * rows by w's trailing dims, all of one dtype: rt_matmul_bwd_bias's GEMMs
 * (dX = dy w^T over all rows, dW = x^T dy). */
static bool matmul_form_bwd(const IrFn *f, const IrInst *mb) {
  if ((mb->op != IR_MATMUL_BWD && mb->op != IR_EINSUM_BWD) || mb->nargs != 3)
    return false;
  const Type *x = f->values[mb->args[0]].type, *w = f->values[mb->args[1]].type, *dy = f->values[mb->args[2]].type;
  if (x->kind != TY_TENSOR || w->kind != TY_TENSOR || dy->kind != TY_TENSOR || x->dtype != dy->dtype ||
      w->dtype != dy->dtype || x->ndim < 2 || w->ndim < 2 || dy->ndim != x->ndim + w->ndim - 2 ||
      (mb->op == IR_MATMUL_BWD ? w->ndim != 2 : !sched_einsum_matmul(mb->s, x->ndim, w->ndim)))
    return false;
  for (int d = 0; d < dy->ndim; d++) /* dy is x's rows by w's trailing dims */
    if (d < x->ndim - 1 ? !same_dim(dy, d, x, d) : !same_dim(dy, d, w, d - (x->ndim - 1) + 1))
      return false;
  return true;
}

/* The bias gradient of `x @ w + b` (a matmul, or an einsum of its form)
 * from its dW GEMM's epilogue, on the CUDA target: insts[j] is the add's
 * backward (a BINARY_BWD of +) whose full-size operand's gradient (dy
 * itself) feeds only the MATMUL_BWD or EINSUM_BWD at insts[k], with only
 * tape pops between (they read nothing), and whose other operand, the
 * bias, is exactly w's trailing dims: its gradient, dy summed over its
 * leading dims, reduces exactly the dW GEMM's K (x's rows).  Where dW is
 * not wanted, or anything else differs, the separate reduction stays.
 * k, or 0: none.  f32 only (the epilogue's bf16 bias-gradient type aside,
 * a bf16 bias gradient is rt_binary_bwd's f32 sum, rounded once). */
int sched_bias_grad_gemm(const Compiler *c, const IrFn *f, IrInst **insts, int j, int n, const int *nuses) {
  IrInst *in = insts[j];
  if (!c->cuda_target || in->op != IR_BINARY_BWD || in->binop != BIN_ADD || in->nargs != 3 || in->ndst < 2 ||
      in->dst[0] < 0 || in->dst[1] < 0)
    return 0;
  const Type *dy = f->values[in->args[2]].type;
  if (dy->kind != TY_TENSOR || dy->dtype != DT_F32)
    return 0;
  int full = sched_same_shape(f->values[in->args[0]].type, dy) ? 0 : 1;
  int ds = in->dst[full], db = in->dst[1 - full];
  if (!sched_same_shape(f->values[in->args[full]].type, dy) || nuses[ds] != 1 || nuses[db] < 1)
    return 0;
  int k = j + 1;
  while (k < n && insts[k]->op == IR_POP)
    k++;
  if (k >= n)
    return 0;
  IrInst *mb = insts[k];
  if (!matmul_form_bwd(f, mb) || mb->args[2] != ds || mb->ndst < 2 || mb->dst[1] < 0)
    return 0;
  const Type *w = f->values[mb->args[1]].type;
  if (!bias_of_rows(f->values[in->args[1 - full]].type, dy, w->ndim - 1) ||
      !sched_same_shape(f->values[db].type, f->values[in->args[1 - full]].type))
    return 0;
  return k;
}

/* A gradient's sum done by a dX GEMM (schedule.h): the CUDA target's
 * cuBLASLt adds the GEMM's f32 result to C and rounds once (beta = 1), the
 * bits of the add (rt_binary, a fused loop's `+`); the CPU's GEMMs add
 * block by block of K (other bits): the CPU target keeps the add.  Each
 * sum is one of the adjoint's contributions added to the running sum, in
 * the order autodiff.c adds them ((c1 + c2) + c3: c2's GEMM adds into c1's
 * buffer, c3's into that): the order stays, one launch and one buffer
 * fewer per sum. */
void sched_gemm_accumulate(Compiler *c, const IrFn *f, IrInst **insts, int n, const int *nuses, int *acc) {
  for (int j = 0; j < n; j++)
    acc[j] = -1;
  if (!c->cuda_target || f->is_main || n < 3)
    return;
  int *def = arena_alloc(&c->arena, sizeof(int) * (size_t)(f->nvalues + 1));
  int *ready = arena_alloc(&c->arena, sizeof(int) * (size_t)(f->nvalues + 1));
  for (int v = 0; v <= f->nvalues; v++)
    def[v] = ready[v] = -1;
  for (int j = 0; j < n; j++) {
    IrInst *in = insts[j];
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] >= 0)
        def[in->dst[d]] = j;
    if (matmul_form_bwd(f, in) && in->ndst >= 1 && in->dst[0] >= 0)
      ready[in->dst[0]] = j; /* a dX GEMM's result: a new buffer */
  }
  for (int a = 0; a < n; a++) {
    IrInst *in = insts[a];
    if (in->op != IR_ACCUM || in->nargs != 2 || in->ndst != 1 || in->dst[0] < 0)
      continue;
    const Type *t = f->values[in->dst[0]].type;
    if (t->kind != TY_TENSOR || (t->dtype != DT_F32 && t->dtype != DT_F64))
      continue;
    for (int side = 1; side >= 0; side--) { /* the contribution is args[1] as autodiff.c adds */
      int gv = in->args[side], pv = in->args[1 - side], gi = def[gv];
      if (gv == pv || gi < 0 || gi >= a || acc[gi] >= 0 || insts[gi]->dst[0] != gv || !matmul_form_bwd(f, insts[gi]) ||
          nuses[gv] != 1 || nuses[pv] != 1 || ready[pv] < 0 || ready[pv] >= gi ||
          !sched_same_shape(f->values[gv].type, t) || !sched_same_shape(f->values[pv].type, t))
        continue;
      acc[a] = gi;
      acc[gi] = a;
      ready[in->dst[0]] = gi; /* p's buffer, holding the sum from the GEMM on */
      break;
    }
  }
}

void sched_host_div_grad(Compiler *c, const IrFn *f, IrInst **insts, int n, const int *nuses, int *hscalar) {
  for (int j = 0; j < n; j++)
    hscalar[j] = -1;
  if (!c->cuda_target || f->is_main)
    return;
  for (int k = 0; k < n; k++) {
    IrInst *in = insts[k];
    if (in->op != IR_BINARY_BWD || in->binop != BIN_DIV || in->nargs != 3 || in->ndst < 1 || in->dst[0] < 0 ||
        (in->ndst > 1 && in->dst[1] >= 0) || nuses[in->args[1]] != 1)
      continue;
    const Type *a = f->values[in->args[0]].type, *b = f->values[in->args[1]].type, *dy = f->values[in->args[2]].type;
    if (a->kind != TY_TENSOR || (a->dtype != DT_F32 && a->dtype != DT_F64) || b->kind != TY_TENSOR || b->ndim != 0 ||
        b->dtype != a->dtype || !sched_same_shape(a, dy))
      continue;
    for (int i = 0; i < k; i++)
      if (insts[i]->op == IR_SCALAR && insts[i]->ndst == 1 && insts[i]->dst[0] == in->args[1] && hscalar[i] < 0) {
        hscalar[i] = k;
        hscalar[k] = i;
        break;
      }
  }
}

/* The fused elementwise region that starts at insts[j], if one is worth
 * fusing (two members, or one that can write over a dying operand): its
 * end (0: none), and per member out[k] (Schedule.out).  A stored member
 * (one read after the region) takes the buffer of a donor, an operand of
 * the region's shape that this block owns (defblk == blk) and reads for
 * the last time in the region, in order: first the donors read from a var
 * by a move (moved: `w = w - LR * g` updates w's buffer), then the others;
 * the rest of the stored members get new tensors. */
/* Whether value v is computed by a member of the region insts[j..end). */
static bool region_member(IrInst **insts, int j, int end, int v) {
  for (int k = j; k < end; k++)
    if (!sched_transparent(insts[k]) && insts[k]->dst[0] == v)
      return true;
  return false;
}

/* Whether member insts[k] reads value v, itself (depth 1) or through at
 * most depth - 1 members whose values it reads. */
static bool member_reads(IrInst **insts, int j, int k, int v, int depth) {
  for (int a = 0; a < insts[k]->nargs; a++) {
    int x = insts[k]->args[a];
    if (x == v)
      return true;
    if (depth > 1)
      for (int m = j; m < k; m++)
        if (!sched_transparent(insts[m]) && insts[m]->dst[0] == x && member_reads(insts, j, m, v, depth - 1))
          return true;
  }
  return false;
}

static int fused_region(Compiler *c, IrFn *f, IrInst **insts, int j, int n, int blk, const int *nuses,
                        const int *lastuse, const int *defblk, const bool *moved, const int *acc, int *out) {
  if (!sched_fusable(c, f, insts[j]) || acc[j] >= 0)
    return 0;
  const Type *t = f->values[insts[j]->dst[0]].type;
  int end = j, members = 0;
  for (int k = j; k < n; k++) {
    if (sched_fusable(c, f, insts[k]) && acc[k] < 0 && sched_same_shape(f->values[insts[k]->dst[0]].type, t)) {
      end = k + 1;
      members++;
    } else if (!sched_transparent(insts[k])) {
      break;
    }
  }
  int ndonors = 0, *d = arena_alloc(&c->arena, sizeof(int) * (size_t)(2 * (end - j) + 1));
  for (int pass = 0; pass < 2; pass++) {
    for (int k = j; k < end; k++) {
      if (sched_transparent(insts[k]))
        continue;
      for (int a = 0; a < insts[k]->nargs; a++) {
        int v = insts[k]->args[a];
        bool dup = false;
        for (int e = 0; e < ndonors; e++)
          dup = dup || d[e] == v;
        const Type *vt = f->values[v].type;
        if (!dup && !region_member(insts, j, end, v) && moved[v] == !pass && vt->kind == TY_TENSOR && sched_same_shape(vt, t) &&
            defblk[v] == blk && sched_owned_value(c, f, v) && lastuse[v] >= j && lastuse[v] < end)
          d[ndonors++] = v;
      }
    }
  }
  int stored = 0, used = 0;
  for (int k = j; k < end; k++) {
    if (sched_transparent(insts[k]))
      continue;
    int v = insts[k]->dst[0], inside = 0;
    for (int m = j; m < end; m++)
      for (int a = 0; a < insts[m]->nargs; a++)
        inside += insts[m]->args[a] == v;
    out[k] = nuses[v] > inside ? SCHED_NEW_BUFFER : SCHED_IN_REGISTER;
    stored += out[k] != SCHED_IN_REGISTER;
  }
  /* one member is a loop of its own only where it saves something: a
   * donor's buffer, or the device scalar a where's host number would need
   * (sched_host_scalars) */
  bool host_where = false;
  for (int k = j; k < end; k++)
    if (insts[k]->op == IR_WHERE)
      for (int a = 1; a < 3; a++)
        host_where = host_where || f->values[insts[k]->args[a]].type->kind != TY_TENSOR;
  if (members < 2 && (ndonors == 0 || stored == 0) && !host_where)
    return 0;
  /* each stored member takes, by preference, a donor it reads itself, then
   * the nearest one it reads through the region's other members, then any:
   * AdamW's new parameter takes the decayed one's buffer and each moment its
   * old one's, so a loop's state stays in the same buffers step after step */
  bool *taken = arena_alloc(&c->arena, sizeof(bool) * (size_t)(ndonors + 1));
  memset(taken, 0, sizeof(bool) * (size_t)(ndonors + 1));
  for (int depth = 1; depth <= end - j + 1 && used < ndonors; depth++)
    for (int k = j; k < end && used < ndonors; k++) {
      if (sched_transparent(insts[k]) || out[k] != SCHED_NEW_BUFFER)
        continue;
      for (int e = 0; e < ndonors; e++)
        if (!taken[e] && (depth > end - j || member_reads(insts, j, k, d[e], depth))) {
          out[k] = d[e];
          taken[e] = true;
          used++;
          break;
        }
    }
  return end;
}

void schedule_block(Compiler *c, IrFn *f, IrBlock *b, int blk, int *nuses, int *lastuse, int *defblk,
                    Schedule *S) {
  schedule_for_fusion(c, f, b);
  int n = 0;
  for (IrInst *in = b->head; in; in = in->next)
    n++;
  IrInst **insts = arena_alloc(&c->arena, sizeof(IrInst *) * (size_t)(n ? n : 1));
  int j = 0;
  for (IrInst *in = b->head; in; in = in->next)
    insts[j++] = in;
  /* free lists: values to free after instruction j */
  /* the GEMM epilogues' rewrites of a forward's saves (sched_gemm_epilogue),
   * before anything reads the uses */
  for (j = 0; j < n; j++) {
    int bias, act;
    (void)sched_gemm_epilogue(c, f, insts, j, n, nuses, &bias, &act);
  }
  int *free_after = arena_alloc(&c->arena, sizeof(int) * (size_t)(n ? n : 1));
  int *next_free = arena_alloc(&c->arena, sizeof(int) * (size_t)(f->nvalues + 1));
  for (j = 0; j < n; j++)
    free_after[j] = -1;
  for (j = 0; j < n; j++)
    for (int d = 0; d < insts[j]->ndst; d++)
      if (insts[j]->dst[d] >= 0) {
        lastuse[insts[j]->dst[d]] = -1;
        defblk[insts[j]->dst[d]] = blk;
      }
  if (b == &f->body) /* owned parameters: the function's body defines them */
    for (int i = 0; i < f->nparams; i++)
      if (sched_param_owned(c, f, i)) {
        lastuse[f->params[i]] = -1;
        defblk[f->params[i]] = blk;
      }
  bool *special = var_moves(c, f, insts, n, b == &f->body && f->role == IRFN_BACKWARD);
  /* all_reduces that start non-blocking; values that may be pending (those,
   * and results of backward calls) are waited for right before the first
   * instruction that reads them, unless that is the return of a function
   * whose callers wait (overlap.c) */
  int *wait_head = arena_alloc(&c->arena, sizeof(int) * (size_t)(n ? n : 1));
  int *wait_next = arena_alloc(&c->arena, sizeof(int) * (size_t)(f->nvalues + 1));
  for (j = 0; j < n; j++)
    wait_head[j] = -1;
  for (j = 0; j < n; j++) {
    IrInst *in = insts[j];
    bool early = overlap_starts_early(f, b, in, NULL);
    if (early)
      special[j] = true;
    bool calls = (in->op == IR_CALL || in->op == IR_VJP_CALL) && overlap_may_return_pending(in->callee);
    if (!early && !calls)
      continue;
    for (int d = 0; d < in->ndst; d++) {
      int v = in->dst[d];
      if (v < 0 || !(f->values[v].type->kind == TY_TENSOR))
        continue;
      for (int k = j + 1; k < n; k++) {
        if (insts[k]->op == IR_FREE || !overlap_reads(insts[k], v))
          continue;
        if (insts[k]->op != IR_RETURN || !overlap_may_return_pending(f)) {
          wait_next[v] = wait_head[k];
          wait_head[k] = v;
        }
        break;
      }
    }
  }
  for (j = 0; j < n; j++)
    uses(insts[j], j, lastuse);
  for (j = 0; j < n; j++)
    for (int d = 0; d < insts[j]->ndst; d++) {
      int v = insts[j]->dst[d];
      if (v < 0 || !(f->values[v].type->kind == TY_TENSOR) || sched_is_param(f, v) || insts[j]->op == IR_FOR)
        continue;
      int last = lastuse[v] > j ? lastuse[v] : j;
      next_free[v] = free_after[last];
      free_after[last] = v;
    }
  if (b == &f->body)
    for (int i = 0; i < f->nparams; i++) {
      int v = f->params[i];
      bool dup = false; /* a value passed twice is one parameter's twice */
      for (int k = 0; k < i; k++)
        dup = dup || f->params[k] == v;
      if (!dup && sched_param_owned(c, f, i) && lastuse[v] >= 0) {
        next_free[v] = free_after[lastuse[v]];
        free_after[lastuse[v]] = v;
      }
    }
  /* regions, in the order the host program runs them: a var read inside a
   * region moves the var's reference only after the region's donors are
   * chosen */
  int *run_end = arena_alloc(&c->arena, sizeof(int) * (size_t)(n ? n : 1));
  bool *gemm = arena_alloc(&c->arena, sizeof(bool) * (size_t)(n ? n : 1));
  int *out = arena_alloc(&c->arena, sizeof(int) * (size_t)(n ? n : 1));
  bool *moved = arena_alloc(&c->arena, sizeof(bool) * (size_t)(f->nvalues + 1));
  /* gradient sums a dX GEMM does (sched_gemm_accumulate): not in a region */
  int *acc = arena_alloc(&c->arena, sizeof(int) * (size_t)(n ? n : 1));
  sched_gemm_accumulate(c, f, insts, n, nuses, acc);
  for (j = 0; j < n;) {
    int bias, act, end = j + sched_gemm_epilogue(c, f, insts, j, n, nuses, &bias, &act);
    gemm[j] = end > j;
    if (!gemm[j])
      end = fused_region(c, f, insts, j, n, blk, nuses, lastuse, defblk, moved, acc, out);
    run_end[j] = end > j ? end : 0;
    if (end <= j)
      end = j + 1;
    for (; j < end; j++)
      if (special[j] && insts[j]->op == IR_VAR_GET)
        moved[insts[j]->dst[0]] = true;
  }
  /* bias gradients from the dW GEMMs' epilogues (sched_bias_grad_gemm) */
  int *bgrad = arena_alloc(&c->arena, sizeof(int) * (size_t)(n ? n : 1));
  for (j = 0; j < n; j++)
    bgrad[j] = -1;
  for (j = 0; j < n; j++) {
    int k = run_end[j] ? 0 : sched_bias_grad_gemm(c, f, insts, j, n, nuses);
    if (k > j && !run_end[k] && bgrad[k] < 0) {
      bgrad[j] = k;
      bgrad[k] = j;
    }
  }
  int *hscalar = arena_alloc(&c->arena, sizeof(int) * (size_t)(n ? n : 1));
  sched_host_div_grad(c, f, insts, n, nuses, hscalar);
  *S = (Schedule){insts, n, blk, free_after, next_free, wait_head, wait_next, special, run_end, gemm, out, bgrad, acc,
                  hscalar};
}

/* ---- multi-tensor groups (issue 26; autodiff.c makes them consecutive) */
bool sched_zero_fill(const IrFn *f, const IrInst *in) {
  return in->op == IR_FILL && in->nargs == 0 && in->f == 0.0 && !signbit(in->f) && in->ndst == 1 &&
         in->dst[0] >= 0 && f->values[in->dst[0]].type->kind == TY_TENSOR;
}

/* Whether host values a and b are the same index: one value, or values of
 * a backward popped off the tape for the same forward value (a layer's
 * index, pushed once per use: popped in the same iteration, the same
 * number). */
bool sched_same_index(const IrFn *f, int a, int b) {
  return a == b || (a >= 0 && b >= 0 && f->values[a].tape_of && f->values[a].tape_of == f->values[b].tape_of);
}

int sched_multi_group(const IrFn *f, const Schedule *S, int j) {
  IrInst *x = S->insts[j];
  int k = j + 1;
  if (x->op == IR_INDEX_ADD_SLOT) {
    for (; k < S->n && S->insts[k]->op == IR_INDEX_ADD_SLOT && sched_same_index(f, S->insts[k]->args[1], x->args[1]); k++) {
      bool dup = false;
      for (int m = j; m < k; m++)
        dup = dup || IR_I(S->insts[m], SLOT) == IR_I(S->insts[k], SLOT);
      if (dup)
        break;
    }
  } else if (x->op == IR_SUM_SQUARES) { /* global_norm's placement groups: each member's frees after the
                                         * group, so it ends at the first member that frees one */
    if (S->free_after[j] >= 0)
      return 0;
    for (; k < S->n && S->insts[k]->op == IR_SUM_SQUARES && !S->run_end[k]; k++)
      if (S->free_after[k] >= 0) {
        k++;
        break;
      }
  } else if (sched_zero_fill(f, x)) {
    if (S->free_after[j] >= 0)
      return 0;
    for (; k < S->n && sched_zero_fill(f, S->insts[k]) && !S->run_end[k]; k++)
      if (S->free_after[k] >= 0) {
        k++;
        break;
      }
  } else {
    return 0;
  }
  return k - j >= 2 ? k : 0;
}

/* ---- horizontal fusion (issue 26): fused loops with one body.
 * Records' arithmetic is lifted field by field, so AdamW over a record of
 * parameters, or the clipped gradient's scale_by, is the same per-element
 * computation once per field, over tensors of the field's size: a fused
 * region per field, or per shape where fields share one (the region then
 * holds several independent copies of the computation).  Each copy (a
 * row) of a run of such regions runs in one multi-tensor launch on the
 * CUDA target (emit_cuda.c): this finds the rows. */

/* The rows of region [j, je): per instruction k, comp[k - j] is the index
 * of its row (the members connected by what they read of each other,
 * numbered in the order of their first members), -1 for host work.
 * Returns the number of rows. */
int sched_region_rows(const IrFn *f, const Schedule *S, int j, int je, int *comp) {
  int n = 0;
  for (int k = j; k < je; k++) {
    comp[k - j] = -1;
    if (sched_transparent(S->insts[k]))
      continue;
    int c = -1;
    for (int a = 0; a < S->insts[k]->nargs; a++)
      for (int m = j; m < k; m++) {
        if (comp[m - j] < 0 || S->insts[m]->dst[0] != S->insts[k]->args[a])
          continue;
        int d = comp[m - j];
        if (c < 0 || d == c) {
          c = d;
          continue;
        }
        /* joins two rows: renumber the later one into the earlier */
        int lo = c < d ? c : d, hi = c < d ? d : c;
        for (int x = j; x < k; x++)
          comp[x - j] = comp[x - j] == hi ? lo : comp[x - j] > hi ? comp[x - j] - 1 : comp[x - j];
        n--;
        c = lo;
      }
    comp[k - j] = c >= 0 ? c : n++;
  }
  (void)f;
  return n;
}

/* Whether the members mx[0..n) are the members my[0..ny) with other
 * operands: the same ops, immediates and dtypes, the same ones stored,
 * each operand the same member or an outside value of the same kind (a
 * tensor of the row's shape, a 0-d tensor; a host number the very same
 * value), one outside value of mx standing for one of my (map). */
static bool same_body(const IrFn *f, const Schedule *S, const int *mx, int n, const int *my, int ny, int *map) {
  if (n != ny)
    return false;
  const Type *t = f->values[S->insts[mx[0]]->dst[0]].type, *u = f->values[S->insts[my[0]]->dst[0]].type;
  if (t->dtype != u->dtype)
    return false;
  for (int k = 0; k < n; k++) {
    const IrInst *x = S->insts[mx[k]], *y = S->insts[my[k]];
    if (x->op != y->op || x->nargs != y->nargs || x->unop != y->unop || x->binop != y->binop || x->f != y->f ||
        x->f2 != y->f2 || memcmp(x->imm, y->imm, sizeof x->imm) != 0 || x->ndst != 1 || y->ndst != 1 ||
        (S->out[mx[k]] == SCHED_IN_REGISTER) != (S->out[my[k]] == SCHED_IN_REGISTER) ||
        f->values[x->dst[0]].type->dtype != f->values[y->dst[0]].type->dtype)
      return false;
    for (int i = 0; i < x->nargs; i++) {
      int v = x->args[i], w = y->args[i], mv = -1, mw = -1;
      for (int m = 0; m < k; m++) {
        mv = S->insts[mx[m]]->dst[0] == v ? m : mv;
        mw = S->insts[my[m]]->dst[0] == w ? m : mw;
      }
      if (mv != mw)
        return false;
      if (mv >= 0)
        continue;
      const Type *vt = f->values[v].type, *wt = f->values[w].type;
      if (vt->kind != TY_TENSOR || wt->kind != TY_TENSOR) {
        if (v != w)
          return false;
        continue;
      }
      bool vfull = sched_same_shape(vt, t), wfull = sched_same_shape(wt, u);
      if (vfull != wfull || vt->dtype != wt->dtype || (!vfull && (vt->ndim != 0 || wt->ndim != 0)))
        return false; /* operands of the trailing dims: not here */
      if (map[v] == -1)
        map[v] = w;
      else if (map[v] != w)
        return false;
    }
  }
  /* one outside value each: no two of mx's for one of my's */
  for (int k = 0; k < n; k++)
    for (int i = 0; i < S->insts[mx[k]]->nargs; i++)
      for (int k2 = 0; k2 < n; k2++)
        for (int i2 = 0; i2 < S->insts[mx[k2]]->nargs; i2++) {
          int v = S->insts[mx[k]]->args[i], v2 = S->insts[mx[k2]]->args[i2];
          if (v != v2 && map[v] >= 0 && map[v] == map[v2])
            return false;
        }
  return true;
}

int sched_horizontal_group(Compiler *c, const IrFn *f, const Schedule *S, int j) {
  if (S->gemm[j] || !S->run_end[j])
    return 0;
  Arena *ar = &c->arena;
  int nv = f->nvalues + 1, cap = S->n + 1;
  int *map = arena_alloc(ar, sizeof(int) * (size_t)nv);
  int *owner = arena_alloc(ar, sizeof(int) * (size_t)nv); /* per value: the row that computes or writes over it */
  int *comp = arena_alloc(ar, sizeof(int) * (size_t)cap);
  int *body = arena_alloc(ar, sizeof(int) * (size_t)cap), *row = arena_alloc(ar, sizeof(int) * (size_t)cap);
  int nbody = 0, nrows = 0, e = j, count = 0;
  for (int v = 0; v < nv; v++)
    owner[v] = -1;
  while (e < S->n && S->run_end[e] && !S->gemm[e]) {
    int ae = S->run_end[e], nr = sched_region_rows(f, S, e, ae, comp);
    bool ok = nr > 0;
    for (int k = e; k < ae && ok && e > j; k++) /* host work: the first region's alone (run before) */
      ok = !sched_transparent(S->insts[k]);
    /* new tensors, if any, are the first region's alone: the others write
     * over their donors, so running them after the first region's
     * allocations changes no peak (--memory-report) */
    for (int k = e; k < ae && ok && e > j; k++)
      ok = S->out[k] != SCHED_NEW_BUFFER;
    for (int pass = 0; pass < 2; pass++)
      for (int r = 0; r < nr && ok; r++) {
        int n = 0;
        for (int k = e; k < ae; k++)
          if (comp[k - e] == r)
            row[n++] = k;
        if (pass == 0) { /* the body (the first row's), and what each row computes or writes over */
          if (nbody == 0) {
            memcpy(body, row, sizeof(int) * (size_t)n);
            nbody = n;
          }
          for (int v = 0; v < nv; v++)
            map[v] = -1;
          ok = same_body(f, S, body, nbody, row, n, map);
          for (int k = 0; k < n; k++) {
            owner[S->insts[row[k]]->dst[0]] = nrows + r;
            if (S->out[row[k]] >= 0)
              owner[S->out[row[k]]] = nrows + r;
          }
        } else { /* independent rows: none reads what another computes or writes over */
          for (int k = 0; k < n && ok; k++)
            for (int a = 0; a < S->insts[row[k]]->nargs && ok; a++) {
              int v = S->insts[row[k]]->args[a];
              ok = owner[v] < 0 || owner[v] == nrows + r;
            }
        }
      }
    /* nor an earlier region's rows what this one writes over */
    for (int k = j; k < e && ok; k++)
      for (int a = 0; a < S->insts[k]->nargs && ok && !sched_transparent(S->insts[k]); a++)
        for (int m = e; m < ae && ok; m++)
          ok = S->out[m] != S->insts[k]->args[a];
    if (!ok)
      break;
    nrows += nr;
    e = ae;
    count++;
  }
  return count >= 2 ? e : 0;
}

/* ---- device scalars read as host numbers (the CUDA target) */

static void scalar_defs(IrBlock *b, IrInst **defs) {
  for (IrInst *in = b->head; in; in = in->next) {
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] >= 0)
        defs[in->dst[d]] = in;
    scalar_defs(&in->body, defs);
    scalar_defs(&in->els, defs);
  }
}

/* The host number device scalar v was made from (IR_SCALAR), or -1.  Not
 * bf16: a fused bf16 loop rounds a host number through f32 first, the
 * scalar is rounded once. */
static int scalar_host(const IrFn *f, IrInst **defs, int v) {
  const IrInst *d = v >= 0 ? defs[v] : NULL;
  if (!d || d->op != IR_SCALAR || d->nargs != 1)
    return -1;
  const Type *t = f->values[v].type, *h = f->values[d->args[0]].type;
  if (t->kind != TY_TENSOR || t->ndim != 0 || t->dtype == DT_BF16 || (h->kind != TY_INT && h->kind != TY_FLOAT))
    return -1;
  return d->args[0];
}

static void scalars_read_as_host(Compiler *c, IrFn *f, IrBlock *b, IrInst **defs, const int *nuses) {
  for (IrInst *in = b->head; in; in = in->next) {
    scalars_read_as_host(c, f, &in->body, defs, nuses);
    scalars_read_as_host(c, f, &in->els, defs, nuses);
    if (in->op == IR_BINARY && in->nargs == 2 && in->ndst == 1) {
      for (int i = 1; i >= 0; i--) { /* the kernel rounds the number to the dtype, as rt_scalar did */
        int h = scalar_host(f, defs, in->args[i]);
        if (h < 0 || f->values[in->args[1 - i]].type->kind != TY_TENSOR)
          continue;
        int args[2] = {in->args[1 - i], h};
        in->op = IR_BINARY_SCALAR;
        ir_set_args(c, in, 2, args);
        IR_I(in, SCALAR_LEFT) = i == 0;
        break;
      }
    } else if (in->op == IR_WHERE && in->nargs == 3) {
      for (int i = 1; i < 3; i++) { /* only where no one else reads the scalar: else it is made twice */
        int h = scalar_host(f, defs, in->args[i]);
        if (h >= 0 && nuses[in->args[i]] == 1)
          in->args[i] = h;
      }
    }
  }
}

static void drop_unread_scalars(IrBlock *b, const int *nuses) {
  IrInst *prev = NULL;
  for (IrInst *in = b->head; in;) {
    IrInst *next = in->next;
    drop_unread_scalars(&in->body, nuses);
    drop_unread_scalars(&in->els, nuses);
    if (in->op == IR_SCALAR && in->ndst == 1 && (in->dst[0] < 0 || nuses[in->dst[0]] == 0)) {
      ir_unlink(b, prev, in);
    } else {
      prev = in;
    }
    in = next;
  }
}

void sched_host_scalars(Compiler *c, IrProgram *p) {
  for (IrFn *f = p->fns; f; f = f->next) {
    size_t nv = (size_t)f->nvalues + 1;
    IrInst **defs = arena_alloc(&c->arena, sizeof(IrInst *) * nv);
    memset(defs, 0, sizeof(IrInst *) * nv);
    scalar_defs(&f->body, defs);
    int *nuses = arena_alloc(&c->arena, sizeof(int) * nv);
    memset(nuses, 0, sizeof(int) * nv);
    sched_count_uses(&f->body, nuses);
    scalars_read_as_host(c, f, &f->body, defs, nuses);
    memset(nuses, 0, sizeof(int) * nv);
    sched_count_uses(&f->body, nuses);
    drop_unread_scalars(&f->body, nuses);
  }
}
