/* emit.h: code generation's parts.  emit_c.c prints the host program (the
 * rt_* calls, ownership, the schedule of fused regions, frees and waits),
 * which is the same C for every target; a Target says how a fused
 * elementwise region runs: the CPU's as an inline C loop (emit_c.c), the
 * CUDA target's as a kernel in a companion .cu file (emit_cuda.c). */
#ifndef SPMDC_EMIT_H
#define SPMDC_EMIT_H

#include <stdio.h>

#include "ir.h"
#include "schedule.h"

typedef struct Target Target;

typedef struct Emitter {
  Compiler *c;
  IrProgram *p;
  FILE *out;
  const Target *tgt;
  FILE *cu;         /* the CUDA target: the kernels (FILE.cu) */
  FILE *protos;     /* the CUDA target: the launchers' prototypes for the host C */
  int nregions;     /* fused regions emitted so far in the program */
  const char *kprefix; /* the CUDA target: the kernels' names start with it */
  IrFn *f;
  int *lastuse;     /* per value: index of its last use in the current block */
  int *nuses;       /* per value: how many instruction operands read it */
  int *defblk;      /* per value: the number of the block that defines it */
  bool *moved;      /* per value: read from a var by a move (emit_at) */
  bool *dying;      /* per value: freed right after the instruction being emitted */
  int curblk;       /* the number of the block whose instruction is being emitted */
  bool started;     /* the function started a collective early (then rt_flush) */
  int nblocks;      /* blocks numbered so far in the current function */
  const char *slot_kind; /* per var slot of main: a MemSlot (memory_report.h) */
  uint32_t at_file;  /* the .spmd line the program last told the runtime (rt_at), */
  int at_line;       /* or at_line 0: none known here */
  int loop_depth;    /* main's loops around the block being emitted */
  const Type *fuse_t; /* emitting a fused region: its members' type (operands of its trailing dims) */
  bool in_region;    /* emitting a graph region's body (emit_c.c): its host work was hoisted */
  int ngraphs;       /* graph regions emitted so far */
  FILE *region_report; /* --regions: where the regions and what stops them are described */
  /* the CUDA target's graph regions' fills (runtime/graph.c): the host
   * arithmetic of a region and of the functions it calls, without the
   * device work, calling rt_slot_f/rt_slot_i/rt_guard as the real code does */
  bool fill;        /* emitting a fill: only host work, slots and guards */
  IrInst **defs;    /* per value of f: its defining instruction */
  FILE *fills;      /* their C (placed before the functions) */
  FILE *fill_protos; /* and their prototypes */
  IrFn **fill_fns;  /* functions whose fill a fill calls; nfill_done emitted */
  int nfill_fns, capfill_fns, nfill_done;
} Emitter;

/* A fused elementwise region, its outputs allocated by the host program:
 * insts[j..end) are its members (each computes one value per element) and
 * transparent host instructions already emitted before it. */
typedef struct FusedRegion {
  IrInst **insts;
  int j, end;
  int members;
  const Type *t;       /* every member's dtype and local shape */
  const int *out;      /* per instruction: where a member's value goes (Schedule.out: SCHED_IN_REGISTER, ...) */
  const char **reg;    /* scratch, per value */
  const char *first;   /* a tensor operand of the region's shape (n_ = first->numel) */
  Span span;           /* the first member's */
} FusedRegion;

struct Target {
  const char *name;
  bool typed_host;  /* the host code of a region names the element type T_ */
  /* Prints, in the host program, what runs the region over its n_
   * elements: a loop (CPU), a kernel launch (CUDA; the kernel to E->cu). */
  void (*fused)(Emitter *E, const FusedRegion *r, int ind);
  /* How the per-element body reads a value computed outside the region
   * (a tensor of the region's shape, a 0-d tensor or a host number), and
   * where it stores member v. */
  const char *(*operand)(Emitter *E, int v);
  const char *(*store)(Emitter *E, int v);
};

extern const Target target_cpu, target_cuda;

/* emit_c.c: the host program of target tgt; with cu, the kernel file */
bool emit_program(Compiler *c, IrProgram *p, const Target *tgt, FILE *out, FILE *cu, const char *source_path);

/* emit_c.c, for the targets */
void emit_out(Emitter *E, int indent, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *emit_vname(Emitter *E, int v);
const char *emit_ctype(const Type *t);
const char *emit_dtype_c(DType d);
/* The per-element body of a region: each member's value in a register
 * r<N>_, then the stores of those used after the region. */
void emit_fused_body(Emitter *E, const FusedRegion *r, int ind);
/* Whether tensor v, read by a fused region over E->fuse_t, is of its
 * trailing dims (read at i_ % its size, named emit_trailing_n). */
bool emit_trailing(Emitter *E, int v);
/* Whether operand v of the fused region is a value per row of its shape
 * (sched_row_operand: read at i_ / its row's length, named emit_row_n). */
bool emit_row(Emitter *E, int v);
const char *emit_row_n(Emitter *E, int v);
/* Whether the fused region being emitted is bf16 (computed in f32, T_). */
bool emit_fuse_bf16(Emitter *E);
const char *emit_trailing_n(Emitter *E, int v);
/* Whether member insts[k] of a region is a transparent host instruction. */
bool emit_transparent(const IrInst *in);

/* emit_cuda.c: the .cu's prelude */
void cuda_begin(Emitter *E, const char *source_path);
/* emit_cuda.c: a fused region's host numbers, in its launcher's order, as
 * rt_slot_f/rt_slot_i calls: in the real code, into hs_<name> (what the
 * launch passes); in a fill (E->fill), for their values alone */
void cuda_fused_slots(Emitter *E, const FusedRegion *r, int ind);
/* emit_cuda.c: a multi-tensor launch of regions rs[0..nr) with one body
 * (emit_c.c's emit_horizontal): the table's declaration, region i's row
 * (after its n_ and stored tensors), and the launch */
void cuda_multi_table(Emitter *E, const FusedRegion *rs, int nr, int ind);
void cuda_multi_field(Emitter *E, const FusedRegion *rs, int i, int ind);
void cuda_multi_launch(Emitter *E, const FusedRegion *rs, int nr, int ind);

#endif
