/* overlap.c: communication overlap in the generated C.
 *
 * A gradient all_reduce of a backward function -- the `dp` all-reduce that
 * convert(w, dp, src=I, dst=R) puts in the backward, typically -- is needed
 * by nobody until the optimizer, so it starts non-blocking as soon as the
 * gradient is final (rt_all_reduce_start) and the program waits for it
 * (rt_wait) right before the first instruction that reads it: later in the
 * same function, or in a caller, after the value was returned.  Backward
 * functions call rt_flush before they return, so that small gradients,
 * bucketed by the runtime into one collective, are on their way.  An
 * all_reduce read by the very next instruction stays blocking: there is
 * nothing to overlap with.  docs/codegen.md has the rules; the runtime's
 * SPMD_OVERLAP=0 gives the blocking schedule with the same binary. */
#include <string.h>

#include "overlap.h"

bool overlap_is_backward(const IrFn *f) { return f->role == IRFN_BACKWARD; }

bool overlap_may_return_pending(const IrFn *f) { return f && (f->vjp_bwd || overlap_is_backward(f)); }

bool overlap_reads(const IrInst *in, int v) {
  for (int i = 0; i < in->nargs; i++)
    if (in->args[i] == v)
      return true;
  for (const IrInst *x = in->body.head; x; x = x->next)
    if (overlap_reads(x, v))
      return true;
  for (const IrInst *x = in->els.head; x; x = x->next)
    if (overlap_reads(x, v))
      return true;
  return false;
}

/* bookkeeping that does no work worth overlapping with (IRF_TRIVIAL) */
static bool trivial(IrOp op) { return ir_has(op, IRF_TRIVIAL); }

bool overlap_starts_early(const IrFn *f, const IrBlock *b, const IrInst *in, const IrInst **first) {
  if (first)
    *first = NULL;
  if (in->op != IR_ALL_REDUCE || !overlap_is_backward(f) || in->ndst < 1 || in->dst[0] < 0 ||
      f->values[in->dst[0]].type->kind != TY_TENSOR)
    return false;
  if (in->wire != DT_NONE && in->wire != f->values[in->args[0]].type->dtype)
    return false; /* dtype= on the wire: converted around a blocking all_reduce */
  (void)b;
  int v = in->dst[0];
  bool work = false;
  for (const IrInst *x = in->next; x; x = x->next) {
    if (x->op != IR_FREE && overlap_reads(x, v)) {
      if (x->op == IR_RETURN)
        return true; /* a gradient for the caller */
      if (first)
        *first = x;
      return work;
    }
    work = work || !trivial(x->op);
  }
  return true; /* never read here: freed (rt_free waits) */
}
