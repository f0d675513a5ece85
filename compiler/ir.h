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

typedef enum {
#define IROP(id, name) IR_##id,
#include "irops.def"
#undef IROP
  IR_COUNT
} IrOp;
extern const char *const ir_op_name[IR_COUNT];

typedef struct IrInst IrInst;
typedef struct IrFn IrFn;

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
  long long i[8];        /* small integer operands (dims, ops; at most MAX_DIMS used) */
  const char *wrt;       /* VJP_CALL: per argument, 1 if differentiated */
  double f, f2;
  const char *s;
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
  bool uses_tape;        /* a generated forward or backward: takes the tape */
  /* a value_and_grad wrapper: runs vjp_fwd, seeds 1.0, runs vjp_bwd */
  IrFn *vjp_fwd, *vjp_bwd;
  int vjp_ngrads;
  /* an export fn: its forward and backward for NAME_vjp */
  IrFn *exp_fwd, *exp_bwd;
  const char *exp_mask;  /* per parameter: 1 if NAME_vjp gives its gradient */
  IrFn *next;
};

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

/* autodiff.c */
void ad_differentiate(Compiler *c, IrProgram *p);

/* emit_c.c */
bool emit_c(Compiler *c, IrProgram *p, FILE *out, const char *source_path);
/* The header of the program's export fns; false if it has none. */
bool emit_header(Compiler *c, IrProgram *p, FILE *out, const char *source_path, const char *guard);
bool ir_has_exports(IrProgram *p);

#endif
