/* redistribute.h: the planner of `redistribute(x, T)` (SPEC section 8) and
 * the byte-cost model that it and `--comm-report` share.  The checker calls
 * rs_plan() to validate a request, the lowering to get the steps; the
 * report (comm_report.c) prices every IR collective with comm_bytes(). */
#ifndef SPMDC_REDISTRIBUTE_H
#define SPMDC_REDISTRIBUTE_H

#include "types.h"

/* ---- cost model ----
 * Bytes each rank sends in one collective over a group of n ranks (the
 * product of its axes' sizes), N being the local buffer in bytes:
 *   all_reduce      2*(n-1)/n * N        (ring: reduce-scatter + all-gather)
 *   all_gather        (n-1)/n * N        N of the gathered result
 *   reduce_scatter    (n-1)/n * N        N of the input
 *   all_to_all        (n-1)/n * N
 *   ppermute               N when n > 1  (one MPI_Sendrecv of the whole block)
 *   convert, reinterpret   0             (local)
 * A cost is a sum of terms mult * (n-1)/n * N, with N and n symbolic Sizes,
 * and of point-to-point terms mult * (n>1) * N. */
typedef struct CommTerm {
  double mult;   /* 2 for all_reduce, 1 otherwise; times repetitions */
  Size group;    /* n */
  Size bytes;    /* N */
  const char *bytes_text; /* N as written per dim ("4*16/n_dp*32"), or NULL */
  bool p2p;      /* (n>1) instead of (n-1)/n: ppermute */
  double uneven; /* > 0: the largest rank's N over N's equal blocks at the
                  * report's sizes (uneven shards, SPEC 4), applied to the
                  * value only (comm_cost_eval), not to the formula */
} CommTerm;

typedef struct CommCost {
  CommTerm *t;
  int n, cap;
} CommCost;

/* The local bytes of a tensor of type t (global shapes are divided by the
 * sizes of the axes sharding each dim). */
Size comm_local_bytes(const Type *t);
/* The same, written dtype size times each local dim: "4*16/n_dp*32". */
const char *comm_local_bytes_text(Compiler *c, const Mesh *m, const Type *t);
/* A size written with n_AXIS for axis sizes: "16/n_dp". */
const char *comm_size_text(Compiler *c, const Mesh *m, Size s);
/* The local shape "f32[16/n_dp, 32]". */
const char *comm_local_type_text(Compiler *c, const Mesh *m, const Type *t);
void comm_cost_add(Compiler *c, CommCost *cost, double mult, Size group, Size bytes, const char *bytes_text);
void comm_cost_add_p2p(Compiler *c, CommCost *cost, double mult, Size group, Size bytes, const char *bytes_text);
void comm_cost_addall(Compiler *c, CommCost *cost, const CommCost *more, double times);
/* One term as a formula: "2*(n_tp-1)/n_tp * 4*16/n_dp*32". */
const char *comm_term_text(Compiler *c, const Mesh *m, const CommTerm *t);
/* The whole sum, terms of equal N and n merged; "0" when empty. */
const char *comm_cost_text(Compiler *c, const Mesh *m, const CommCost *cost);
/* The value at the mesh's declared sizes: a number when every axis it
 * uses is declared ("1024"), else what is left ("1024/n_dp"), else "?". */
const char *comm_cost_value(Compiler *c, const Mesh *m, const CommCost *cost);
bool comm_cost_eval(const Mesh *m, const CommCost *cost, const long long *sizes, double *out);

/* How cost a compares with cost b for every mesh size (each axis >= 1);
 * CMP_UNKNOWN when either has a point-to-point term. */
typedef enum {
  CMP_UNKNOWN,  /* not decided symbolically */
  CMP_EQUAL,    /* a == b at every size */
  CMP_LESS,     /* a <= b at every size, a < b when every axis has size > 1 */
  CMP_GREATER   /* b <= a at every size (and not equal) */
} CommCmp;
CommCmp comm_cost_compare(const CommCost *a, const CommCost *b);

/* ---- the planner ---- */
typedef enum { RS_ALL_REDUCE, RS_ALL_GATHER, RS_REDUCE_SCATTER, RS_ALL_TO_ALL, RS_CONVERT } RsOp;

/* One step: a collective or a local convert over one axis or a tuple of
 * axes (one flattened communicator, major to minor). */
typedef struct RsStep {
  RsOp op;
  int axes[MAX_MESH_AXES];
  int naxes;
  LTypeKind src, dst;   /* the letters before and after (V for a layout) */
  int src_dim, dst_dim; /* the dim an S side reads or writes, -1 if none */
  Type *in, *out;       /* the types before and after */
} RsStep;

typedef struct RsPlan {
  RsStep *steps;
  int nsteps;
  int ncollectives;     /* steps that communicate */
  CommCost cost;        /* bytes per rank of the forward steps */
} RsPlan;

/* Plans from `from` to `to` (full global types of the same dtype and global
 * shape).  grouped=false gives the axis-by-axis plan the planned one is
 * measured against.  On failure returns false with *why (one sentence) and
 * *fix (source text or advice, naming the value as x_text) set. */
bool rs_plan(Compiler *c, const Mesh *m, const Type *from, const Type *to, bool grouped, RsPlan *out,
             const char *x_text, const char **why, const char **fix);
/* "plan: 1 collective, 96 bytes; axis by axis: 2 collectives, 128 bytes (fewer at every mesh size)" */
const char *rs_plan_note(Compiler *c, const Mesh *m, const Type *from, const Type *to);
const char *rs_op_name(RsOp op);

#endif
