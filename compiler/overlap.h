/* overlap.h: which collectives the generated C starts non-blocking, and
 * where their results are waited for (overlap.c). Shared by emit_c.c and
 * comm_report.c so that the report says what the code does. */
#ifndef SPMDC_OVERLAP_H
#define SPMDC_OVERLAP_H

#include "ir.h"

/* A generated backward function (f_NAME_bwd). */
bool overlap_is_backward(const IrFn *f);

/* Whether the all_reduce `in`, an instruction of block b of f, starts
 * non-blocking (rt_all_reduce_start): a backward's all_reduce whose result
 * leaves the function (a gradient for the caller), or is first read after
 * some other work; *first receives the instruction of its first read in b
 * (NULL: none in b, or only the return). */
bool overlap_starts_early(const IrFn *f, const IrBlock *b, const IrInst *in, const IrInst **first);

/* Whether a call of f may return results that are still pending: backward
 * functions and value_and_grad wrappers; the caller waits before using them. */
bool overlap_may_return_pending(const IrFn *f);

/* Whether instruction `in` (or one nested in it) reads value v. */
bool overlap_reads(const IrInst *in, int v);

#endif
