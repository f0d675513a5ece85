/* test_ir.c: unit tests of the IR's vocabulary and properties (ir.h,
 * irops.def) and of ir_verify, in-process. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct Fixture {
  Compiler c;
  char *diag;
  size_t diag_len;
  Span sp;
} Fixture;

static void setup(Fixture *f) {
  compiler_init(&f->c);
  f->c.err = open_memstream(&f->diag, &f->diag_len);
  int file = source_add(&f->c, "t.spmd", "fn main() {}\n", 13);
  f->sp = (Span){.file = (uint32_t)file, .begin = 0, .end = 2};
}

static void done(Fixture *f) {
  fclose(f->c.err);
  free(f->diag);
  compiler_free(&f->c);
}

/* A function of two f32 parameters whose body is `%2 = OP %0 [, %1]`. */
static IrFn *one_inst(Fixture *f, IrOp op, int nargs) {
  IrFn *fn = ir_fn_new(&f->c, "t");
  Type *t = type_new(&f->c, TY_FLOAT);
  fn->params = arena_alloc(&f->c.arena, sizeof(int) * 2);
  fn->params[0] = ir_value(&f->c, fn, t, NULL);
  fn->params[1] = ir_value(&f->c, fn, t, NULL);
  fn->nparams = 2;
  IrInst *in = ir_emit(&f->c, &fn->body, op, f->sp);
  ir_set_args(&f->c, in, nargs, fn->params);
  in->dst[0] = ir_value(&f->c, fn, t, NULL);
  in->ndst = 1;
  return fn;
}

Test(ir, verify_checks_the_number_of_arguments) {
  Fixture f;
  setup(&f);
  cr_assert(ir_verify(&f.c, one_inst(&f, IR_HOST_BINARY, 2)));
  cr_assert(ir_verify(&f.c, one_inst(&f, IR_HOST_MATH, 1))); /* 1 or 2 */
  cr_assert(!ir_verify(&f.c, one_inst(&f, IR_HOST_BINARY, 1)));
  cr_assert(!ir_verify(&f.c, one_inst(&f, IR_HOST_NEG, 2)));
  fflush(f.c.err);
  cr_assert(strstr(f.diag, "internal error: IR host_binary in t has 1 arguments"), "%s", f.diag);
  cr_assert(strstr(f.diag, "internal error: IR host_neg in t has 2 arguments"), "%s", f.diag);
  done(&f);
}

Test(ir, every_op_has_a_consistent_line_in_irops_def) {
  for (int op = 0; op < IR_COUNT; op++) {
    const IrOpInfo *info = &ir_op_info[op];
    cr_assert(ir_op_name[op] && *ir_op_name[op], "op %d has no name", op);
    cr_assert(info->min_args >= 0 && (info->max_args < 0 || info->max_args >= info->min_args), "%s", ir_op_name[op]);
    for (int o = 0; o < op; o++)
      cr_assert(strcmp(ir_op_name[o], ir_op_name[op]), "two ops are named %s", ir_op_name[op]);
    /* an op that stops gradients has no gradient to give */
    if (info->flags & IRF_STOPS_GRAD)
      cr_assert(info->diff == 0 || op == IR_WHERE || op == IR_TAKE_ALONG_DIM, "%s", ir_op_name[op]);
    /* what the scheduler moves is never a barrier */
    cr_assert(!((info->flags & IRF_PURE_HOST) && (info->flags & IRF_BARRIER)), "%s", ir_op_name[op]);
  }
  cr_assert(ir_arg_in(ir_op_info[IR_WHERE].diff, 1) && ir_arg_in(ir_op_info[IR_WHERE].diff, 2) &&
            !ir_arg_in(ir_op_info[IR_WHERE].diff, 0));
  cr_assert(ir_arg_in(ir_op_info[IR_CALL].diff, 40)); /* IRA_ALL: any argument, however many */
  cr_assert(ir_has(IR_SOFTMAX, IRF_RES_RESULT) && !ir_has(IR_SOFTMAX, IRF_BARRIER));
}

/* The IR's elementwise ops are the runtime's X-lists: the same names in
 * the same order, so the IR value is the runtime's enum value. */
Test(ir, elementwise_ops_are_the_runtimes) {
  cr_assert_eq((int)UN_COUNT, (int)RT_NUNARY);
  cr_assert_eq((int)BIN_COUNT, (int)RT_NBINARY);
  cr_assert_eq((int)UN_GELU, (int)RT_GELU);
  cr_assert_eq((int)BIN_DIV, (int)RT_DIV);
  cr_assert_str_eq(ir_unary_name[UN_GELU_TANH], "GELU_TANH");
  cr_assert_str_eq(ir_binary_name[BIN_GE], "GE");
  cr_assert(ir_binary_is_comparison(BIN_NE) && !ir_binary_is_comparison(BIN_MAX));
}

/* A function of one f32[4, 4] parameter whose body is `%1 = OP %0`. */
static IrInst *one_tensor_inst(Fixture *f, IrFn **fn, IrOp op) {
  *fn = ir_fn_new(&f->c, "t");
  Type *t = type_new(&f->c, TY_TENSOR);
  t->dtype = DT_F32;
  t->ndim = 2;
  (*fn)->params = arena_alloc(&f->c.arena, sizeof(int));
  (*fn)->params[0] = ir_value(&f->c, *fn, t, NULL);
  (*fn)->nparams = 1;
  IrInst *in = ir_emit(&f->c, &(*fn)->body, op, f->sp);
  ir_set_args(&f->c, in, 1, (*fn)->params);
  in->dst[0] = ir_value(&f->c, *fn, t, NULL);
  in->ndst = 1;
  return in;
}

/* irops.def's format column: each op's integer operands fit IrInst.imm,
 * none twice, and every name of IR_OPERANDS is some op's. */
Test(ir, every_format_fits_and_every_operand_is_used) {
  bool used[IRO_COUNT] = {0};
  for (int op = 0; op < IR_COUNT; op++) {
    const unsigned char *fmt = ir_op_info[op].format;
    int slots = 0;
    for (int j = 0; j < IR_NIMM && fmt[j] != IRO_NONE; j++) {
      cr_assert(fmt[j] < IRO_COUNT, "%s", ir_op_name[op]);
      for (int k = 0; k < j; k++)
        cr_assert_neq(fmt[k], fmt[j], "%s declares %s twice", ir_op_name[op], ir_operand_name[fmt[j]]);
      slots += ir_operand_width[fmt[j]];
      used[fmt[j]] = true;
      cr_assert(ir_declares((IrOp)op, (IrOperand)fmt[j]));
    }
    cr_assert_leq(slots, IR_NIMM, "%s", ir_op_name[op]);
  }
  for (int o = IRO_NONE + 1; o < IRO_COUNT; o++)
    cr_assert(used[o], "no op declares %s", ir_operand_name[o]);
  cr_assert(ir_declares(IR_SUM, IRO_KEEPDIM) && !ir_declares(IR_SOFTMAX, IRO_KEEPDIM));
  cr_assert(!ir_declares(IR_MATMUL, IRO_NONE));
}

/* The accessors name the slots: CONVERT's DIM is its third. */
Test(ir, named_operands_are_the_formats_slots) {
  Fixture f;
  setup(&f);
  IrFn *fn;
  IrInst *in = one_tensor_inst(&f, &fn, IR_CONVERT);
  IR_I(in, SRC) = LTY_P;
  IR_I(in, DST) = LTY_V;
  IR_I(in, DIM) = 1;
  cr_assert(in->imm[0] == LTY_P && in->imm[1] == LTY_V && in->imm[2] == 1);
  in = one_tensor_inst(&f, &fn, IR_PERMUTE);
  IR_PERM(in, 0) = 1;
  cr_assert_eq(in->imm[0], 1);
  cr_assert(ir_verify(&f.c, fn)); /* {1, 0} */
  done(&f);
}

/* ir_verify holds each instruction to its format: a slot the op does not
 * declare stays 0, and an operand with a range is in it. */
Test(ir, verify_checks_the_integer_operands) {
  Fixture f;
  setup(&f);
  IrFn *fn;
  IrInst *in = one_tensor_inst(&f, &fn, IR_ALL_REDUCE);
  IR_I(in, REDUCE) = RED_MIN;
  cr_assert(ir_verify(&f.c, fn));
  IR_I(in, REDUCE) = 7; /* no IrReduceOp */
  cr_assert(!ir_verify(&f.c, fn));
  in = one_tensor_inst(&f, &fn, IR_SUM);
  IR_I(in, DIM) = IR_ALL_DIMS;
  cr_assert(ir_verify(&f.c, fn));
  in->imm[2] = 1; /* SUM declares DIM, KEEPDIM only */
  cr_assert(!ir_verify(&f.c, fn));
  in = one_tensor_inst(&f, &fn, IR_SUM);
  IR_I(in, DIM) = 2; /* the argument has 2 dims */
  cr_assert(!ir_verify(&f.c, fn));
  in = one_tensor_inst(&f, &fn, IR_SUM);
  IR_I(in, DIM) = IR_STACK; /* a collective's */
  cr_assert(!ir_verify(&f.c, fn));
  in = one_tensor_inst(&f, &fn, IR_ALL_GATHER);
  IR_I(in, DIM) = IR_STACK;
  cr_assert(ir_verify(&f.c, fn));
  in = one_tensor_inst(&f, &fn, IR_PERMUTE);
  IR_PERM(in, 0) = 1;
  IR_PERM(in, 1) = 1; /* not a permutation */
  cr_assert(!ir_verify(&f.c, fn));
  in = one_tensor_inst(&f, &fn, IR_COPY);
  IR_I(in, DETACH) = 2;
  cr_assert(!ir_verify(&f.c, fn));
  in = one_tensor_inst(&f, &fn, IR_UNARY);
  in->imm[0] = 3; /* UNARY has none */
  cr_assert(!ir_verify(&f.c, fn));
  fflush(f.c.err);
  cr_assert(strstr(f.diag, "internal error: IR all_reduce in t has REDUCE = 7, out of its range"), "%s", f.diag);
  cr_assert(strstr(f.diag, "internal error: IR sum in t has 1 in integer slot 2, which its format does not declare"),
            "%s", f.diag);
  cr_assert(strstr(f.diag, "IR sum in t has DIM = 2, out of its range"), "%s", f.diag);
  cr_assert(strstr(f.diag, "IR permute in t has PERM[1] = 1, out of its range"), "%s", f.diag);
  cr_assert(strstr(f.diag, "IR unary in t has 3 in integer slot 0"), "%s", f.diag);
  done(&f);
}

/* A var slot is one of the fn's. */
Test(ir, verify_checks_var_slots) {
  Fixture f;
  setup(&f);
  IrFn *fn = ir_fn_new(&f.c, "t");
  int s = ir_var(&f.c, fn, type_new(&f.c, TY_INT), NULL);
  IrInst *in = ir_emit(&f.c, &fn->body, IR_VAR_GET, f.sp);
  in->dst[0] = ir_value(&f.c, fn, type_new(&f.c, TY_INT), NULL);
  in->ndst = 1;
  IR_I(in, SLOT) = s;
  cr_assert(ir_verify(&f.c, fn));
  IR_I(in, SLOT) = s + 1;
  cr_assert(!ir_verify(&f.c, fn));
  done(&f);
}

/* An operand the op does not declare is an internal error, not another
 * op's slot read by accident. */
Test(ir, an_undeclared_operand_stops_the_compiler, .signal = SIGABRT) {
  Fixture f;
  setup(&f);
  IrFn *fn;
  IrInst *in = one_tensor_inst(&f, &fn, IR_SOFTMAX);
  IR_I(in, KEEPDIM) = 1;
}
