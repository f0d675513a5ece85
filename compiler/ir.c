/* ir.c: building, printing (--dump-ir) and verifying the IR. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

const char *const ir_op_name[IR_COUNT] = {
#define IROP(id, name, ...) [IR_##id] = name,
#include "irops.def"
#undef IROP
};

const IrOpInfo ir_op_info[IR_COUNT] = {
#define IROP(id, name, min, max, format, diff, res, flags) [IR_##id] = {min, max, diff, res, flags, format},
#include "irops.def"
#undef IROP
};

#define IR_OPERAND_NAME_(NAME, range, width) [IRO_##NAME] = #NAME,
#define IR_OPERAND_RANGE_(NAME, range, width) [IRO_##NAME] = range,
#define IR_OPERAND_WIDTH_(NAME, range, width) [IRO_##NAME] = width,
const char *const ir_operand_name[IRO_COUNT] = {[IRO_NONE] = "NONE", IR_OPERANDS(IR_OPERAND_NAME_)};
const IrRange ir_operand_range[IRO_COUNT] = {IR_OPERANDS(IR_OPERAND_RANGE_)};
const int ir_operand_width[IRO_COUNT] = {IR_OPERANDS(IR_OPERAND_WIDTH_)};
#undef IR_OPERAND_NAME_
#undef IR_OPERAND_RANGE_
#undef IR_OPERAND_WIDTH_
_Static_assert((int)MAX_DIMS <= (int)IR_NIMM, "PERM takes a slot per dim");

/* The first slot of operand o of op, or -1. */
static int operand_slot(IrOp op, IrOperand o) {
  const unsigned char *fmt = ir_op_info[op].format;
  for (int j = 0, s = 0; j < IR_NIMM && fmt[j] != IRO_NONE && s < IR_NIMM; s += ir_operand_width[fmt[j++]])
    if (fmt[j] == o)
      return s;
  return -1;
}

bool ir_declares(IrOp op, IrOperand o) { return o != IRO_NONE && operand_slot(op, o) >= 0; }

long long *ir_imm(IrInst *in, IrOperand o, int k) {
  int s = o == IRO_NONE ? -1 : operand_slot(in->op, o);
  if (s < 0 || k < 0 || k >= ir_operand_width[o] || s + k >= IR_NIMM) {
    fprintf(stderr, "spmdc: internal error: IR %s has no operand %s", ir_op_name[in->op], ir_operand_name[o]);
    fprintf(stderr, k ? "[%d] (irops.def's format)\n" : " (irops.def's format)\n", k);
    abort();
  }
  return &in->imm[s + k];
}

#define IR_UNARY_NAME_(NAME, name, vec, f, d) [UN_##NAME] = #NAME,
#define IR_BINARY_NAME_(NAME, name, kind, f, da, db) [BIN_##NAME] = #NAME,
const char *const ir_unary_name[UN_COUNT] = {RT_UNARY_OPS(IR_UNARY_NAME_)};
const char *const ir_binary_name[BIN_COUNT] = {RT_BINARY_OPS(IR_BINARY_NAME_)};
#undef IR_UNARY_NAME_
#undef IR_BINARY_NAME_

/* the X-list's kind column */
#define IR_KIND_ARITH false
#define IR_KIND_CMP true
#define IR_BINARY_CMP_(NAME, name, kind, f, da, db) [BIN_##NAME] = IR_KIND_##kind,
static const bool binary_is_comparison[BIN_COUNT] = {RT_BINARY_OPS(IR_BINARY_CMP_)};
#undef IR_BINARY_CMP_
#undef IR_KIND_ARITH
#undef IR_KIND_CMP

bool ir_binary_is_comparison(IrBinary op) { return binary_is_comparison[op]; }

IrFn *ir_fn_new(Compiler *c, const char *cname) {
  IrFn *f = arena_alloc(&c->arena, sizeof(IrFn));
  f->cname = cname;
  return f;
}

int ir_value(Compiler *c, IrFn *f, Type *t, Name hint) {
  ARENA_RESERVE(&c->arena, f->values, f->nvalues, f->capvalues, 32);
  f->values[f->nvalues] = (IrValue){t, hint, 0};
  return f->nvalues++;
}

int ir_var(Compiler *c, IrFn *f, Type *t, Name name) {
  ARENA_RESERVE(&c->arena, f->vars, f->nvars, f->capvars, 8);
  f->vars[f->nvars] = (IrVar){t, name};
  return f->nvars++;
}

IrInst *ir_emit(Compiler *c, IrBlock *b, IrOp op, Span sp) {
  IrInst *in = arena_alloc(&c->arena, sizeof(IrInst));
  in->op = op;
  in->span = sp;
  in->capdst = 4;
  in->dst = arena_alloc(&c->arena, sizeof(int) * 4);
  if (b->tail)
    b->tail->next = in;
  else
    b->head = in;
  b->tail = in;
  return in;
}

void ir_unlink(IrBlock *b, IrInst *prev, IrInst *in) {
  if (prev)
    prev->next = in->next;
  else
    b->head = in->next;
  if (b->tail == in)
    b->tail = prev;
  in->next = NULL;
}

void ir_set_args(Compiler *c, IrInst *in, int n, const int *args) {
  in->args = arena_alloc(&c->arena, sizeof(int) * (size_t)(n ? n : 1));
  if (n)
    memcpy(in->args, args, sizeof(int) * (size_t)n);
  in->nargs = n;
}

void ir_reserve_dst(Compiler *c, IrInst *in, int n) {
  if (n <= in->capdst)
    return;
  int cap = in->capdst ? in->capdst : 4;
  while (cap < n)
    cap *= 2;
  int *d = arena_alloc(&c->arena, sizeof(int) * (size_t)cap);
  if (in->ndst)
    memcpy(d, in->dst, sizeof(int) * (size_t)in->ndst);
  in->dst = d;
  in->capdst = cap;
}

void ir_add_dst(Compiler *c, IrInst *in, int v) {
  ir_reserve_dst(c, in, in->ndst + 1);
  in->dst[in->ndst++] = v;
}

IrInst *ir_clone_inst(Compiler *c, const IrInst *in) {
  IrInst *n = arena_alloc(&c->arena, sizeof(IrInst));
  *n = *in;
  n->next = NULL;
  n->dst = arena_alloc(&c->arena, sizeof(int) * (size_t)(in->capdst ? in->capdst : 1));
  if (in->ndst)
    memcpy(n->dst, in->dst, sizeof(int) * (size_t)in->ndst);
  if (in->nargs) {
    n->args = arena_alloc(&c->arena, sizeof(int) * (size_t)in->nargs);
    memcpy(n->args, in->args, sizeof(int) * (size_t)in->nargs);
  }
  return n;
}

bool ir_is_host(const Type *t) { return t->kind == TY_INT || t->kind == TY_FLOAT || t->kind == TY_BOOL; }

static void dump_block(Compiler *c, IrProgram *p, IrFn *f, IrBlock *b, int indent, FILE *out) {
  for (IrInst *in = b->head; in; in = in->next) {
    fprintf(out, "%*s", indent * 2, "");
    for (int i = 0; i < in->ndst; i++)
      fprintf(out, "%s%%%d", i ? ", " : "", in->dst[i]);
    if (in->ndst)
      fputs(" = ", out);
    fputs(ir_op_name[in->op], out);
    if (in->callee)
      fprintf(out, " @%s", in->callee->cname);
    for (int i = 0; i < in->nargs; i++)
      fprintf(out, "%s%%%d", i ? ", " : " ", in->args[i]);
    if (in->naxes) {
      fputs(" axes(", out);
      for (int i = 0; i < in->naxes; i++)
        fprintf(out, "%s%s", i ? "," : "", p->mesh->axes[in->axes[i]].name);
      fputc(')', out);
    }
    if (in->op == IR_VAR_SET || in->op == IR_VAR_GET)
      fprintf(out, " $%s", f->vars[IR_I(in, SLOT)].name);
    if ((in->op == IR_ATTENTION || in->op == IR_ATTENTION_BWD) && IR_I(in, LAYOUT)) {
      static const char *const tok[] = {"q", "k", "v", "out"}; /* attention_layout.c */
      const char *sep = " token_major(";
      for (int i = 0; i < 4; i++)
        if (IR_I(in, LAYOUT) >> i & 1)
          fprintf(out, "%s%s", sep, tok[i]), sep = ",";
      fputc(')', out);
    }
    int line, col;
    source_position(c, in->span, &line, &col);
    if (in->ndst && in->dst[0] >= 0 && in->dst[0] < f->nvalues)
      fprintf(out, "  : %s", type_str(c, p->mesh, f->values[in->dst[0]].type));
    fprintf(out, "  @%d:%d\n", line, col);
    if (in->body.head || in->op == IR_FOR || in->op == IR_IF)
      dump_block(c, p, f, &in->body, indent + 1, out);
    if (in->els.head) {
      fprintf(out, "%*selse\n", indent * 2, "");
      dump_block(c, p, f, &in->els, indent + 1, out);
    }
  }
}

void ir_dump(Compiler *c, IrProgram *p, FILE *out) {
  for (IrFn *f = p->fns; f; f = f->next) {
    fprintf(out, "fn %s(", f->cname);
    for (int i = 0; i < f->nparams; i++)
      fprintf(out, "%s%%%d: %s", i ? ", " : "", f->params[i], type_str(c, p->mesh, f->values[f->params[i]].type));
    fputs(") {\n", out);
    dump_block(c, p, f, &f->body, 1, out);
    fputs("}\n", out);
  }
}

/* The rank of the tensor an instruction's dims index: its first
 * argument's, or (IOTA) its type's; -1 if neither is a tensor. */
static int dims_rank(IrFn *f, const IrInst *in) {
  const Type *t = in->t;
  if (in->nargs)
    t = in->args[0] >= 0 && in->args[0] < f->nvalues ? f->values[in->args[0]].type : NULL;
  return t && t->kind == TY_TENSOR ? t->ndim : -1;
}

/* Whether v is in the range of operand o of `in` (irops.def's format; ir.h's
 * IR_OPERANDS): slot k of it, which starts at at[0]. */
static bool operand_ok(IrFn *f, const IrInst *in, IrOperand o, int k, const long long *at) {
  long long v = at[k];
  int rank = dims_rank(f, in);
  switch (ir_operand_range[o]) {
  case IRR_ANY: return true;
  case IRR_BOOL: return v == 0 || v == 1;
  case IRR_HOST_OP: return v >= 0 && v < OP_COUNT;
  case IRR_DTYPE: return v > DT_NONE && v <= DT_BF16;
  case IRR_CE: return v >= CE_MEAN && v <= CE_NONE;
  case IRR_REDUCE: return v >= RED_SUM && v <= RED_MIN;
  case IRR_LTYPE: return v >= LTY_R && v <= LTY_P;
  case IRR_REDUCTION: return v == IR_SUM || v == IR_MEAN || v == IR_AMAX;
  case IRR_DIM: /* every dim: a reduction's (it has keepdim) and its backward's; the stacked form: a collective's or a cast's */
    if (v == IR_ALL_DIMS)
      return ir_declares(in->op, IRO_KEEPDIM) || ir_declares(in->op, IRO_FWD_OP);
    if (v == IR_STACK)
      return ir_has(in->op, IRF_COMM) || ir_declares(in->op, IRO_SRC);
    return rank < 0 || (v >= 0 && v < rank);
  case IRR_PERM: /* a permutation of the rank's dims, 0 after them */
    if (rank < 0)
      return true;
    if (k >= rank)
      return v == 0;
    for (int j = 0; j < k; j++)
      if (at[j] == v)
        return false;
    return v >= 0 && v < rank;
  case IRR_SLOT: return v >= 0 && v < f->nvars;
  }
  return false;
}

/* The integer operands against the op's format: each declared one in its
 * range, the slots after them 0. */
static bool verify_operands(Compiler *c, IrFn *f, const IrInst *in) {
  const unsigned char *fmt = ir_op_info[in->op].format;
  bool ok = true;
  int s = 0;
  for (int j = 0; j < IR_NIMM && fmt[j] != IRO_NONE && s < IR_NIMM; s += ir_operand_width[fmt[j++]])
    for (int k = 0; k < ir_operand_width[fmt[j]] && s + k < IR_NIMM; k++)
      if (!operand_ok(f, in, fmt[j], k, &in->imm[s])) {
        error_at(c, in->span, "internal error: IR %s in %s has %s%s = %lld, out of its range", ir_op_name[in->op],
                 f->cname, ir_operand_name[fmt[j]], ir_operand_width[fmt[j]] > 1 ? arena_sprintf(&c->arena, "[%d]", k) : "",
                 in->imm[s + k]);
        ok = false;
      }
  for (; s < IR_NIMM; s++)
    if (in->imm[s] != 0) {
      error_at(c, in->span, "internal error: IR %s in %s has %lld in integer slot %d, which its format does not declare",
               ir_op_name[in->op], f->cname, in->imm[s], s);
      ok = false;
    }
  return ok;
}

/* Each value is defined once, before it is used, in an enclosing block;
 * each instruction has as many arguments as irops.def says, and integer
 * operands as its format says. */
static bool verify_block(Compiler *c, IrFn *f, IrBlock *b, char *defined) {
  bool ok = true;
  for (IrInst *in = b->head; in; in = in->next) {
    const IrOpInfo *info = &ir_op_info[in->op];
    if (in->nargs < info->min_args || (info->max_args >= 0 && in->nargs > info->max_args)) {
      error_at(c, in->span, "internal error: IR %s in %s has %d arguments", ir_op_name[in->op], f->cname, in->nargs);
      ok = false;
    }
    ok &= verify_operands(c, f, in);
    for (int i = 0; i < in->nargs; i++)
      if (in->args[i] < 0 || in->args[i] >= f->nvalues || !defined[in->args[i]]) {
        error_at(c, in->span, "internal error: IR %s in %s uses %%%d before it is defined", ir_op_name[in->op],
                 f->cname, in->args[i]);
        ok = false;
      }
    if (in->op == IR_FOR && in->ndst)
      defined[in->dst[0]] = 1;
    if (in->body.head)
      ok &= verify_block(c, f, &in->body, defined);
    if (in->els.head)
      ok &= verify_block(c, f, &in->els, defined);
    for (int i = 0; i < in->ndst; i++) {
      int d = in->dst[i];
      if (d < 0)
        continue;
      if (d >= f->nvalues || (defined[d] && in->op != IR_FOR)) {
        error_at(c, in->span, "internal error: IR %s in %s defines %%%d twice", ir_op_name[in->op], f->cname, d);
        ok = false;
      }
      if (d < f->nvalues)
        defined[d] = 1;
    }
  }
  return ok;
}

bool ir_verify(Compiler *c, IrFn *f) {
  char *defined = arena_alloc(&c->arena, (size_t)f->nvalues + 1);
  for (int i = 0; i < f->nparams; i++)
    defined[f->params[i]] = 1;
  return verify_block(c, f, &f->body, defined);
}
