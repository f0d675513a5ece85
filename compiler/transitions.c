/* transitions.c: lookups in the seed's state-transition table
 * (collectives.def). */
#include "transitions.h"

static const Transition table[] = {
#define COLL(op, s, d, allowed, redist, bwd, bs, bd) \
  {BI_##op, LT_##s, LT_##d, TR_##allowed, redist, IR_##bwd, LT_##bs, LT_##bd},
#define TR_YES false
#define TR_EXPERT true
#include "collectives.def"
#undef TR_YES
#undef TR_EXPERT
#undef COLL
};

#define NROWS (sizeof table / sizeof table[0])

const Transition *transition(Builtin op, LTypeKind src, LTypeKind dst) {
  for (size_t i = 0; i < NROWS; i++)
    if (table[i].op == op && table[i].src == src && table[i].dst == dst)
      return &table[i];
  return NULL;
}

const Transition *transition_redistribute(LTypeKind src, LTypeKind dst) {
  for (size_t i = 0; i < NROWS; i++)
    if (table[i].redistribute && table[i].src == src && table[i].dst == dst)
      return &table[i];
  return NULL;
}

const Transition *transition_of_ir(IrOp op, LTypeKind src, LTypeKind dst) {
  for (size_t i = 0; i < NROWS; i++)
    if (transition_ir_op(table[i].op) == op && table[i].op != BI_REDISTRIBUTE && table[i].src == src &&
        table[i].dst == dst)
      return &table[i];
  return NULL;
}

bool transition_bwd_reduces(const Transition *t) {
  return t && (t->bwd == IR_ALL_REDUCE || t->bwd == IR_REDUCE_SCATTER);
}

IrLType transition_ir_ltype(LTypeKind k) {
  return k == LT_R ? LTY_R : k == LT_I ? LTY_I : k == LT_P ? LTY_P : LTY_V;
}

LTypeKind transition_ltype(IrLType t) {
  return t == LTY_R ? LT_R : t == LTY_I ? LT_I : t == LTY_P ? LT_P : LT_V;
}
