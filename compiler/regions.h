/* regions.h: capturable regions (regions.c, docs/codegen.md "Graph regions").
 *
 * In each block of main that runs inside a loop, a region is a maximal
 * stretch of the block's schedule with only device work and host arithmetic:
 * no host effect (print, item, save, load, exists, wall_time, token_batch),
 * no host `if` or `for` of main (their blocks would be captured one way), and
 * no call that returns a host number computed from anything but host numbers.
 * Shapes are static in the language.  The CUDA target emits each region
 * between rt_region_begin and rt_region_end: the runtime captures it once as
 * a CUDA graph and replays it (runtime/graph.c).  Host arithmetic inside the
 * stretch is hoisted before it: it runs every iteration. */
#ifndef SPMDC_REGIONS_H
#define SPMDC_REGIONS_H

#include "ir.h"
#include "schedule.h"

/* What a unit of the schedule (an instruction, or a fused run) is to a
 * region: device work, host work hoisted before the region, or a stop. */
typedef enum { RGN_DEVICE, RGN_HOST, RGN_STOP } RegionKind;

/* insts[j] of f (a unit of main's loop body); on RGN_STOP, *why says what
 * stops a region ("`print` (a host effect)") and *where the instruction
 * that does it (inside a callee: that instruction). */
RegionKind region_kind(Compiler *c, IrFn *f, IrInst *in, const char **why, Span *where);

/* The device operations a unit runs (callees counted once per call). */
int region_device_ops(Compiler *c, IrInst *in);

/* Whether in (a member of a region of main) is host work hoisted before it. */
bool region_hoisted(Compiler *c, IrFn *f, IrInst *in);

/* The CUDA target's graph numbers (emit_c.c, runtime/graph.c): 'f' or 'i'
 * when argument a of in is read by its kernel through a slot of the
 * region's table, 0 when it is taken by value (a guard if a host number). */
int region_slot_of(IrInst *in, int a);
/* Whether in is host work or control flow, not a device operation. */
bool region_host_work(IrOp op);

/* Where host value v of main (a host scalar of a region, insts[a..b) of
 * main's schedule, hoisted units skipped) reaches, through host arithmetic,
 * calls, vars, returns and the autodiff tape: *slot, a number a kernel reads
 * from the slot table; *guard, a number taken by value or an `if`/`for` of
 * a callee (a replay is refused when it differs). */
void region_scalar_reach(Compiler *c, IrFn *main, IrInst **insts, int a, int b, int v, bool *slot, bool *guard);

/* A region needs at least this many device operations to be captured: a
 * graph of one kernel saves nothing. */
enum { REGION_MIN_OPS = 2 };

#endif
