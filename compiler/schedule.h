/* schedule.h: the target-independent schedule of a block (schedule.c). */
#ifndef SPMDC_SCHEDULE_H
#define SPMDC_SCHEDULE_H

#include "ir.h"

typedef struct Schedule {
  IrInst **insts;       /* the block's instructions in the order they run */
  int n;
  int blk;              /* the block's number (defblk) */
  int *free_after;      /* per instruction: the first value freed after it (-1: none) */
  int *next_free;       /* per value: the next one freed after the same instruction */
  int *wait_head;       /* per instruction: the first value waited for before it (-1: none) */
  int *wait_next;       /* per value: the next one waited for before the same instruction */
  bool *special;        /* per instruction: a var read that moves the var's reference, or an
                         * all_reduce that starts non-blocking (overlap.c) */
} Schedule;

/* Orders block b for fusion and computes its schedule.  lastuse, defblk:
 * per value of f, updated for the values b defines (blk: b's number). */
void schedule_block(Compiler *c, IrFn *f, IrBlock *b, int blk, int *lastuse, int *defblk, Schedule *s);

/* Whether `in` can be a member of a fused elementwise region. */
bool sched_fusable(const IrFn *f, const IrInst *in);
/* Instructions that may sit between a region's members: pure host work and var reads. */
bool sched_transparent(const IrInst *in);
/* A member's C operator (+ - * /), NULL for the unary ones. */
const char *sched_fused_op(const IrInst *in);
/* The same dtype and local shape: the same global shape and partition spec. */
bool sched_same_shape(const Type *a, const Type *b);
bool sched_is_param(const IrFn *f, int v);

#endif
