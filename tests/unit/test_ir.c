/* test_ir.c: unit tests of the IR's vocabulary and properties (ir.h,
 * irops.def) and of ir_verify, in-process. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
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
