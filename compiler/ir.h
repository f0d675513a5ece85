/* ir.h: the typed intermediate representation between the checker and C
 * emission.  One IrFn per checked function instance (and per generated
 * forward/backward of a differentiated one).  Values are numbered; each has
 * the checker's Type (tensors carry their local SPMD types and partition
 * specs, host values are TY_INT/TY_FLOAT/TY_BOOL).  Control flow stays
 * structured (FOR and IF hold blocks); mutable `var`s are slots.  Every
 * instruction keeps the Span of the source it came from. */
#ifndef SPMDC_IR_H
#define SPMDC_IR_H

#include "check.h"
#include "spmdrt.h" /* RT_UNARY_OPS, RT_BINARY_OPS: the elementwise ops and their formulas */

/* ---- the IR's vocabulary: the operands of its instructions that are not
 * values, named here once; emitters map them to each target's spelling ---- */

/* Elementwise ops: the runtime's X-lists, which also hold each op's formula
 * and derivative, so the IR, the runtime's kernels and the generated loops
 * name one set of ops (UN_EXP is RT_EXP, BIN_ADD is RT_ADD). */
#define IR_UNARY_ENUM_(NAME, name, vec, f, d) UN_##NAME,
#define IR_BINARY_ENUM_(NAME, name, kind, f, da, db) BIN_##NAME,
typedef enum { RT_UNARY_OPS(IR_UNARY_ENUM_) UN_COUNT } IrUnary;
typedef enum { RT_BINARY_OPS(IR_BINARY_ENUM_) BIN_COUNT } IrBinary;
#undef IR_UNARY_ENUM_
#undef IR_BINARY_ENUM_
extern const char *const ir_unary_name[UN_COUNT];   /* "EXP" */
extern const char *const ir_binary_name[BIN_COUNT]; /* "ADD" */
/* the X-list's kind column is CMP (EQ NE LT LE GT GE): a 0/1 result with no gradient */
bool ir_binary_is_comparison(IrBinary op);

/* all_reduce's op= (the runtime's rt_reduce_op) */
typedef enum { RED_SUM, RED_AVG, RED_MAX, RED_MIN } IrReduceOp;
/* cross_entropy's reduction= (rt_ce_reduction) */
typedef enum { CE_MEAN, CE_SUM, CE_NONE } IrCeReduction;
/* the local types of a cast, convert(src=, dst=) and reinterpret (rt_ltype);
 * S(i) is LTY_V with the dim beside it */
typedef enum { LTY_R, LTY_I, LTY_V, LTY_P } IrLType;
/* a reduction's dim when it reduces every dim (sum(x): rt_sum_all): the
 * runtime's own constant, which the backward kernels take */
#define IR_ALL_DIMS RT_ALL
/* a collective's dim for the V (stacked) form instead of S(i) */
#define IR_STACK (-1)

/* ---- an instruction's integer operands (IrInst.imm), named ----
 * irops.def's format column (IRI(...)) lists each op's, in slot order.
 * IR_I(in, DIM) reads or writes one; an op that does not declare it stops
 * the compiler (an internal error, ir_imm).  ir_verify checks that the
 * slots an op does not declare are 0 and each declared one is in range.
 *   X(NAME, range, width): range is what ir_verify checks (IRR_*), width
 *   the slots it takes (PERM: one per dim, IR_PERM(in, k)). */
#define IR_OPERANDS(X)                                                                                      \
  X(VALUE, IRR_ANY, 1)          /* HOST_CONST: the int or bool literal (a float's is f) */                  \
  X(HOST_OP, IRR_HOST_OP, 1)    /* HOST_BINARY: the OpKind */                                               \
  X(SCALAR_LEFT, IRR_BOOL, 1)   /* BINARY_SCALAR: the host scalar is the left operand */                    \
  X(DIM, IRR_DIM, 1)            /* a dim of the first argument (IOTA: of t), IR_ALL_DIMS, IR_STACK */       \
  X(KEEPDIM, IRR_BOOL, 1)       /* SUM MEAN AMAX ARGMAX ARGMIN: keepdim= */                                 \
  X(K, IRR_ANY, 1)              /* TOPK: how many */                                                        \
  X(DIM0, IRR_DIM, 1)           /* TRANSPOSE: the two dims */                                               \
  X(DIM1, IRR_DIM, 1)                                                                                       \
  X(PERM, IRR_PERM, MAX_DIMS)   /* PERMUTE: the permutation, as long as the argument's rank */              \
  X(START, IRR_ANY, 1)          /* SLICE: the range along DIM */                                            \
  X(END, IRR_ANY, 1)                                                                                        \
  X(DTYPE, IRR_DTYPE, 1)        /* ASTYPE: the DType */                                                     \
  X(DETACH, IRR_BOOL, 1)        /* COPY: detach(x), no gradient flows through */                            \
  X(MEAN_GIVEN, IRR_BOOL, 1)    /* RANDN: mean= was given (args[2]) */                                      \
  X(CE_REDUCTION, IRR_CE, 1)    /* CROSS_ENTROPY(_VP)(_BWD): the IrCeReduction */                                \
  X(CAUSAL, IRR_BOOL, 1)        /* ATTENTION(_BWD): causal=, query i sees keys j <= i + S - T */            \
  X(LAYOUT, IRR_ANY, 1)         /* ATTENTION(_BWD): the token-major operands (RT_ATTN_*: attention_layout.c) */ \
  X(REDUCE, IRR_REDUCE, 1)      /* ALL_REDUCE: the IrReduceOp */                                            \
  X(SRC_DIM, IRR_DIM, 1)        /* ALL_TO_ALL: the dims split and joined */                                 \
  X(DST_DIM, IRR_DIM, 1)                                                                                    \
  X(SRC, IRR_LTYPE, 1)          /* CONVERT, REINTERPRET: the IrLTypes, S(i) as V with DIM */                \
  X(DST, IRR_LTYPE, 1)                                                                                      \
  X(SHIFT, IRR_ANY, 1)          /* PPERMUTE: the shift along axes[0] */                                     \
  X(FWD_OP, IRR_REDUCTION, 1)   /* REDUCE_BWD: the forward's IrOp (SUM MEAN AMAX) */                        \
  X(HAS_WEIGHT, IRR_BOOL, 1)    /* LAYER_NORM_BWD, RMS_NORM_BWD: args[1] is w (else x again) */             \
  X(SLOT, IRR_SLOT, 1)          /* VAR_SET, VAR_GET, INDEX_ADD_SLOT: the var slot */                        \
  X(NITEMS, IRR_ANY, 1)         /* PRINT: strs' length (literals and values) */                             \
  X(REMAT, IRR_BOOL, 1)         /* CALL: under remat() (SPEC 15) */                                         \
  X(VALUE_WANTED, IRR_BOOL, 1)  /* VJP_CALL: value_and_grad (1) or grad (0) */                              \
  X(BACKWARDS, IRR_BOOL, 1)     /* FOR: runs from hi - 1 down to lo (a backward's loop) */ \
  X(EXTENT, IRR_BOOL, 1)        /* SHARD_RANGE: the block's extent (1) or offset (0) */
/* What ir_verify checks of an operand: nothing, 0 or 1, an enum's range,
 * a dim of the first argument (IR_ALL_DIMS for a reduction, IR_STACK for a
 * collective or a cast), a permutation of its dims, a var slot of the fn. */
typedef enum {
  IRR_ANY, IRR_BOOL, IRR_HOST_OP, IRR_DTYPE, IRR_CE, IRR_REDUCE, IRR_LTYPE, IRR_REDUCTION, IRR_DIM, IRR_PERM, IRR_SLOT
} IrRange;
typedef enum {
  IRO_NONE,
#define IR_OPERAND_ENUM_(NAME, range, width) IRO_##NAME,
  IR_OPERANDS(IR_OPERAND_ENUM_)
#undef IR_OPERAND_ENUM_
  IRO_COUNT
} IrOperand;
/* irops.def's format column: IRI(DIM, KEEPDIM) is {IRO_DIM, IRO_KEEPDIM};
 * IRI() (IRO_ ## nothing) is {IRO_NONE} */
#define IRI(...) {IRI_PICK_(__VA_ARGS__, IRI3_, IRI2_, IRI1_, ~)(__VA_ARGS__)}
#define IRI_PICK_(a, b, c, pick, ...) pick
#define IRI1_(a) IRO_##a
#define IRI2_(a, b) IRO_##a, IRO_##b
#define IRI3_(a, b, c) IRO_##a, IRO_##b, IRO_##c
#define IRO_ IRO_NONE
extern const char *const ir_operand_name[IRO_COUNT]; /* "DIM" */
extern const IrRange ir_operand_range[IRO_COUNT];
extern const int ir_operand_width[IRO_COUNT];
enum { IR_NIMM = 8 };   /* IrInst.imm's slots */

typedef enum {
#define IROP(id, name, ...) IR_##id,
#include "irops.def"
#undef IROP
  IR_COUNT
} IrOp;
extern const char *const ir_op_name[IR_COUNT];

typedef struct IrInst IrInst;

/* irops.def's columns: argument sets and properties of each op */
#define IRA(i) (1u << (i))  /* argument i */
#define IRA_ALL 0xffffffffu /* every argument */
enum {
  IRF_STOPS_GRAD = 1 << 0,   /* stops its active operands' gradients by design */
  IRF_PURE_HOST = 1 << 1,    /* host arithmetic without effects */
  IRF_FUSE_THROUGH = 1 << 2, /* may sit between the members of a fused loop */
  IRF_BARRIER = 1 << 3,      /* the fusion scheduler moves nothing across it */
  IRF_TRIVIAL = 1 << 4,      /* bookkeeping: no work to overlap a collective with */
  IRF_RES_RESULT = 1 << 5,   /* its backward needs its result (pushed on the tape) */
  IRF_EFFECT = 1 << 6,       /* an effect or a clock read: a recomputed forward (remat) may not run it again */
  IRF_COMM = 1 << 7,         /* communicates: the reports price it, the scheduler overlaps it */
};
typedef struct IrOpInfo {
  int min_args, max_args; /* max_args -1: any number */
  unsigned diff;          /* the arguments that carry a gradient */
  unsigned res;           /* the arguments its backward needs */
  unsigned flags;         /* IRF_* */
  unsigned char format[IR_NIMM]; /* its integer operands (IrOperand) in slot order; IRO_NONE ends */
} IrOpInfo;
extern const IrOpInfo ir_op_info[IR_COUNT];
static inline bool ir_has(IrOp op, unsigned flag) { return (ir_op_info[op].flags & flag) != 0; }
/* Whether op declares operand o (irops.def's format column). */
bool ir_declares(IrOp op, IrOperand o);
/* Slot k of operand o of `in` (k < its width), an internal error (abort)
 * if in's op does not declare it; IR_I and IR_PERM are lvalues of it. */
long long *ir_imm(IrInst *in, IrOperand o, int k);
#define IR_I(in, NAME) (*ir_imm((in), IRO_##NAME, 0))
#define IR_PERM(in, k) (*ir_imm((in), IRO_PERM, (k)))
/* Whether argument i is in an argument set of irops.def. */
static inline bool ir_arg_in(unsigned set, int i) { return set == IRA_ALL || (i < 32 && (set >> i) & 1u); }

typedef struct IrFn IrFn;
/* What a function is: the lowering of a source function, or the forward
 * (pushes residuals on the tape) or backward (pops them) that autodiff
 * generated from one. */
typedef enum { IRFN_PLAIN, IRFN_FORWARD, IRFN_BACKWARD } IrFnRole;

typedef struct IrBlock {
  IrInst *head, *tail;
} IrBlock;

struct IrInst {
  IrOp op;
  Span span;
  int *dst;              /* results (-1: not wanted); room for capdst (ir_reserve_dst) */
  int ndst, capdst;
  int *args;
  int nargs;
  long long imm[IR_NIMM]; /* integer operands, named by irops.def's format: IR_I(in, DIM) */
  IrUnary unop;          /* UNARY, UNARY_GRAD, UNARY_BWD, HOST_MATH with one argument */
  IrBinary binop;        /* BINARY, BINARY_SCALAR, BINARY_BWD, HOST_MATH with two */
  const char *wrt;       /* VJP_CALL: per argument, 1 if differentiated */
  double f, f2;
  const char *s;          /* EINSUM: subscripts; LOAD, SAVE, EXISTS: a path; a redistribute's step: its note */
  bool redistribute;     /* a step of a redistribute()'s plan (lower_collective) */
  const char **strs;     /* PRINT: a label per arg (NULL for values) */
  Type *t;
  Size size;             /* HOST_SIZE */
  int axes[MAX_MESH_AXES];
  int naxes;
  /* collectives: the dtype on the wire (dtype=) and that of the backward's
   * collective (bwd_dtype=, default dtype=); DT_NONE: the operand's own */
  DType wire, bwd_wire;
  IrBlock body, els;
  IrFn *callee;
  IrInst *next;
};

typedef struct IrValue {
  Type *type;
  Name hint;             /* the source variable it came from, if any */
  int tape_of;           /* a backward's value popped off the tape: 1 + the
                            forward's value pushed (its tape_fwd's); 0: none */
} IrValue;

typedef struct IrVar {
  Type *type;
  Name name;
} IrVar;

struct IrFn {
  const char *cname;     /* the C function's name */
  Instance *inst;
  FnDecl *fn;
  Span span;
  int *params;
  int nparams;
  IrValue *values;
  int nvalues, capvalues;
  IrVar *vars;
  int nvars, capvars;
  IrBlock body;
  int nret;              /* number of results */
  Type **ret_types;
  bool is_main;
  bool emitted;          /* reachable from main: emit_c writes it */
  IrFnRole role;         /* a generated forward or backward takes the tape */
  IrFn *tape_fwd;        /* a backward: the forward whose pushes it pops */
  /* a value_and_grad wrapper: runs vjp_fwd, seeds 1.0, runs vjp_bwd */
  IrFn *vjp_fwd, *vjp_bwd;
  int vjp_ngrads;
  /* an export fn: C entry points NAME (and NAME_vjp when exp_fwd: a
   * single result); exp_fwd and exp_bwd are its forward and backward */
  bool exported;
  IrFn *exp_fwd, *exp_bwd;
  const char *exp_mask;  /* per parameter: 1 if NAME_vjp gives its gradient */
  IrFn *next;
};

static inline bool ir_uses_tape(const IrFn *f) { return f->role != IRFN_PLAIN; }

typedef struct IrProgram {
  IrFn *fns;             /* in dependency order: callees first */
  IrFn *main;
  Mesh *mesh;
} IrProgram;

/* ir.c */
IrFn *ir_fn_new(Compiler *c, const char *cname);
int ir_value(Compiler *c, IrFn *f, Type *t, Name hint);
int ir_var(Compiler *c, IrFn *f, Type *t, Name name);
IrInst *ir_emit(Compiler *c, IrBlock *b, IrOp op, Span sp);
/* in (after prev; NULL: b's head) out of b; in->next becomes NULL */
void ir_unlink(IrBlock *b, IrInst *prev, IrInst *in);
void ir_set_args(Compiler *c, IrInst *in, int n, const int *args);
/* Makes room for n results (dst[0..n-1]); existing ones are kept. */
void ir_reserve_dst(Compiler *c, IrInst *in, int n);
/* Appends a result. */
void ir_add_dst(Compiler *c, IrInst *in, int v);
/* A copy of `in` that shares nothing mutable with it (dst, args). */
IrInst *ir_clone_inst(Compiler *c, const IrInst *in);
void ir_dump(Compiler *c, IrProgram *p, FILE *out);
bool ir_verify(Compiler *c, IrFn *f);
bool ir_is_host(const Type *t);

/* lower.c: check the program and lower every instance to IR */
bool lower_program(Compiler *c, Mesh *mesh, IrProgram *out);
/* attention reads and writes the token-major layout where the program
 * permutes to and from it (attention_layout.c; before autodiff) */
void attention_layouts(Compiler *c, IrProgram *prog);

/* autodiff.c */
void ad_differentiate(Compiler *c, IrProgram *p);
/* callfuse.c: a gradient sum with layer_norm's dx (in the function or
 * returned by a call's callee) folded into the layer_norm_bwd; the last
 * step of ad_differentiate */
void callfuse(Compiler *c, IrProgram *p);
/* callfuse.c: dropout with p = 0 (a constant through the calls) folded, a
 * call of a one-op function that op, a residual's add into the callee's
 * last op (before autodiff: the first step of ad_differentiate) */
void callfuse_forward(Compiler *c, IrProgram *p);

/* emit_c.c: the errors emitting p would meet, before any C is written
 * (every mode after autodiff runs it, --check included) */
bool emit_check(Compiler *c, IrProgram *p);
/* emit_c.c: the C of the CPU target */
bool emit_c(Compiler *c, IrProgram *p, FILE *out, const char *source_path);
/* --regions: the graph regions of main's loops and what stops them */
bool emit_regions(Compiler *c, IrProgram *p, FILE *report, const char *source_path);
/* --target=cuda: the host C (out) and the kernels (cu, CUDA C++) */
bool emit_cuda(Compiler *c, IrProgram *p, FILE *out, FILE *cu, const char *source_path);
/* The header of the program's export fns; false if it has none. */
bool emit_header(Compiler *c, IrProgram *p, FILE *out, const char *source_path, const char *guard);
bool ir_has_exports(IrProgram *p);

#endif
