/* transitions.h: the seed's state-transition table of collectives and casts
 * (collectives.def), read by the checker (what is allowed, what needs
 * expert=true, which backwards sum), the lowering (which op a redistribute
 * is) and autodiff (each one's backward). */
#ifndef SPMDC_TRANSITIONS_H
#define SPMDC_TRANSITIONS_H

#include "ir.h"

typedef struct Transition {
  Builtin op;            /* BI_ALL_REDUCE ... BI_CONVERT */
  LTypeKind src, dst;    /* R I V P; V stands for S(i) too */
  bool expert;           /* needs expert=true */
  bool redistribute;     /* redistribute(src -> dst) lowers to this op */
  IrOp bwd;              /* the backward's op on the cotangent (IR_COPY: none) */
  LTypeKind bwd_src, bwd_dst; /* a cast backward's src and dst */
} Transition;

/* The row of op from src to dst (S(i) given as V); NULL: not allowed. */
const Transition *transition(Builtin op, LTypeKind src, LTypeKind dst);
/* The row that redistribute(src -> dst) lowers to; NULL: none (src == dst
 * other than V). */
const Transition *transition_redistribute(LTypeKind src, LTypeKind dst);
/* The row of an IR collective or cast whose result is dst (an all_reduce's
 * src, P or V, gives the same backward). */
const Transition *transition_of_ir(IrOp op, LTypeKind src, LTypeKind dst);
/* Whether the backward sums over the axes (an all-reduce or a reduce-scatter). */
bool transition_bwd_reduces(const Transition *t);
/* ops.def's lowers column as an IR op (defined in lower.c, beside its table) */
IrOp transition_ir_op(Builtin op);
/* The IR's cast types and the checker's letters. */
IrLType transition_ir_ltype(LTypeKind k);
LTypeKind transition_ltype(IrLType t);

#endif
