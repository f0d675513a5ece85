/* check.h: the type checker (SPEC sections 4-7, 9, 10, 13).  check_program()
 * checks `main`, every function whose signature fixes every mesh axis, and
 * every function instance reachable from those (functions are checked per
 * call site, with the caller's types on the axes their signature leaves
 * open).  Internal to the checker: the Checker context, and the checker's
 * layers, each calling only those below it (but for the rules' calls of
 * check_expr(), the expression checker's recursion):
 *   check.c            the driver: expressions, statements, functions and
 *                      their instances, local_map blocks, the program
 *   check_<family>.c   the built-in rules, found by the op's name in
 *                      ops.def's rule column: check_elementwise.c,
 *                      check_nn.c, check_create.c, check_select.c,
 *                      check_record.c (and records), check_io.c,
 *                      check_collectives.c, check_autodiff.c
 *   check_rules.c      the rules' shared helpers: arguments, written types,
 *                      combine() (the R/I/V/P rules), elementwise(),
 *                      out_partial_axes=
 *   shardprop.c        the global shard-propagation rules (shardprop.h)
 *   check_diag.c       the messages: check_error(), notes, help lines */
#ifndef SPMDC_CHECK_H
#define SPMDC_CHECK_H

#include "types.h"

typedef struct Instance Instance;

bool check_program(Compiler *c, Mesh *mesh, FILE *dump_types);
/* Checks, calling lower(k, inst, arg) for every instance that checked. */
bool check_and_lower(Compiler *c, Mesh *mesh, void (*lower)(Checker *, Instance *, void *), void *arg,
                     Instance **instances);

/* A function checked with particular argument types: the unit the lowering
 * turns into one C function.  Calls with equal argument types share one. */
struct Instance {
  FnDecl *fn;
  int nargs;
  Type **args;         /* argument types; TY_AXES for axis parameters */
  Type *ret;           /* NULL: no result */
  bool ok;             /* the body checked without errors */
  int id;              /* 0, 1, ... per function, for C names */
  void *ir;            /* the lowering's result */
  unsigned local_mask; /* the axes with local semantics where it was checked */
  Instance *next;
};

/* One function instance being checked: the call chain for messages. */
typedef struct Inst {
  FnDecl *fn;
  Span call;
  Expr *call_expr;     /* the call (NULL for a fn checked on its own, a local_map block) */
  struct Inst *parent;
  Type *ret;           /* the type the body returned */
  bool returned;
} Inst;

typedef struct LocalBinding {
  Symbol *outer;       /* the variable a local_map rebinds */
  Type *type;          /* its type inside the block */
} LocalBinding;

struct Checker {
  Compiler *c;
  Type *literal_scalar; /* the type of a number used as a tensor */
  Mesh *mesh;
  int naxes;
  Inst *inst;
  int local_depth;     /* > 0 inside a local fn or local_map body */
  /* axes with local semantics right now (all of them in a local fn, the
   * `over` axes of the enclosing local_map blocks); the others are global:
   * their partition specs and shard propagation rules apply */
  bool local_axis[MAX_MESH_AXES];
  LocalBinding *lm;    /* the local_map rebindings in force (growable) */
  int nlm, caplm;
  int lm_level;        /* local_map blocks around the current point */
  FILE *dump;          /* --dump-types output, or NULL */
  Instance *instances; /* every instance, in the order they were checked */
  Instance *current;   /* the instance whose body is being checked */
  /* called after each instance's body is checked, while the body's
   * expressions carry that instance's types (Expr.ty) */
  void (*lower)(Checker *k, Instance *inst, void *arg);
  void *lower_arg;
  struct { uint32_t file, begin; uint64_t hash; } *seen; /* reported errors */
  size_t nseen, capseen;
  int nfailed;          /* errors found, also those reported already (a duplicate
                         * from another instance, a call of a failed instance) */
  int dump_indent;
  Inst *chain;         /* the call chain of the last error, noted after its help */
  /* the field an op on records is being checked for ("m.attn.wo"): errors
   * then name it */
  const char *field_path;
  /* checking a function on its own with its shape variables as symbols
   * (SPEC 3): nothing is lowered, and value_dependent records that some
   * rule needed a symbol's value (the errors then wait for a call) */
  bool symbolic, value_dependent;
  /* an expression already checked (its Expr.ty is set) whose next check
   * returns that type at once: a built-in's first argument, looked at
   * first to see whether it is a record */
  Expr *pre;
};

/* An operand of an op: its expression (for messages) and its type. */
typedef struct Operand {
  Expr *e;
  const Type *t;
} Operand;

static inline const char *axis_name(const Checker *k, int a) { return k->mesh->axes[a].name; }

/* ---- check_diag.c: messages ---- */
void check_error(Checker *k, Span sp, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* check_error for a message with no words of its own in fmt ("%s"). */
void check_error_rule(Checker *k, const char *rule, Span sp, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* note: the call chain of the last error, after its own notes and help. */
void check_flush_chain(Checker *k);
const char *ck_type(Checker *k, const Type *t);     /* a record: its struct's name */
const char *ck_type_vs(Checker *k, const Type *t, const Type *other); /* and the field where they differ */
const char *src_text(Checker *k, Expr *e); /* an expression's source, for help lines */
bool src_exact(Checker *k, Expr *e);        /* src_text is e's own text, usable in a fix */
/* A help line msg whose code replaces expression e (a fix), when the code was
 * built from e's exact text; else a plain help line. */
void help_wrap(Checker *k, Expr *e, const char *code, const char *msg);
/* An error at `at` in a library function checked for the user's call: the
 * help names the call's arguments (not an edit of the library); true if given. */
bool help_library_call(Checker *k, Span at);
/* note: the operands and their types, after a rule was broken. */
void note_operands(Checker *k, const Operand *ops, int n);
/* note: where the pending sum (P on axis a) that expression pe holds was made, if known. */
void note_p_origin(Checker *k, Expr *pe, int a);
/* A P operand pe (on axis a) of an error in a library function checked for
 * the user's call: notes tracing it to the user's argument and a help line
 * there; false when it cannot be traced (the caller gives its own help). */
bool explain_at_user(Checker *k, Expr *pe, int a);
Expr *final_return(Stmt *block); /* a block's last statement, a return of one value: that value */
Symbol *gradient_in(Expr *e);    /* the gradient variable (Symbol.grad_of) an expression reads */
/* The text of a src=/dst= argument: S(d), or the letter. */
const char *ltype_text(Compiler *c, LType lt);
/* The call that moves the value written `x` on axes `ax` from src to dst
 * (the seed's state-transition table), as source text for help lines. */
const char *transition_fix(Checker *k, const char *x, const char *ax, LType src, LType dst);
/* The letter for rules: S(i) is V. */
static inline LTypeKind ltype_base(LType lt) { return lt.kind == LT_S ? LT_V : lt.kind; }

/* ---- check_rules.c: the rules' shared helpers ---- */
/* A host value's type (int, float, bool, string, void): shared, never mutated. */
Type *check_host_type(TypeKind kind);
/* Whether mesh axis a has local semantics at this point (SPEC 7: local fn,
 * local_map ... over (axes)); every other axis is global. */
bool check_axis_local(const Checker *k, int a);
/* Whether every axis is local here (types then print and lay out as local). */
bool check_all_local(const Checker *k);
/* A call's arguments (call_arg, the positional ones, is in ast.c). */
Arg *call_named(Checker *k, Expr *call, const char *name);
/* ops.def's named-argument and arity columns for built-in op. */
bool check_named_args(Checker *k, Expr *call, Builtin op);
bool want_args(Checker *k, Expr *call, Builtin op, int lo, int hi);
bool host_int(Checker *k, Expr *e, long long *v); /* an integer constant */
/* its value without a message (the lowering reads it again) */
bool const_int_expr(const Expr *e, long long *v, bool *symbolic);
bool named_int(Checker *k, Expr *call, const char *name, long long *v, bool *given);
/* A dim argument, negative counting from the end as in PyTorch. */
bool check_norm_dim(Checker *k, Span sp, long long d, int ndim, int *out);
Type *arg_tensor(Checker *k, Expr *call, int pos); /* positional argument pos, checked, as a tensor */
/* Written types: a size, a mesh axis (-1: none), a tensor type (named[a]
 * set for the axes it names; NULL after an error). */
bool size_of(Checker *k, Expr *e, Size *out);
int axis_of(AxisRef *a);
Type *check_type_expr(Checker *k, TypeExpr *te, bool named[MAX_MESH_AXES]);
/* A type that makes a value must determine every mesh axis. */
bool determines_all(Checker *k, Span sp, const bool named[MAX_MESH_AXES], const char *what);
/* Whether `actual` fits the written tensor type `want` on the axes it
 * names (named[]) and in shape; reports why not, naming `what`, with the
 * value's source text xtext in the fix. */
bool check_fits(Checker *k, Span sp, const Type *want, const bool named[MAX_MESH_AXES], const Type *actual,
                const char *what, const char *xtext, Expr *fix_at);
/* The local R/I/V/P rules of an op's class (SPEC 5), for combine(). */
typedef enum { RULE_NONLINEAR, RULE_LINEAR, RULE_MULTILINEAR, RULE_DIVIDE } Rule;
/* The result's letter on each axis of an op of rule `rule` over ops, or
 * false after reporting why not (literals adopt, except beside P). */
bool combine(Checker *k, Rule rule, const char *opname, Span sp, Operand *ops, int n, LTypeKind out[MAX_MESH_AXES]);
bool is_scalar_like(const Type *t);
/* A host number used as a tensor: a scalar literal. */
Type *check_as_tensor(Checker *k, Expr *e, Type *t);
/* Shapes, then combine(), then the layouts (shard_broadcast). */
Type *elementwise(Checker *k, Span sp, const char *opname, Rule rule, Operand *ops, int n);
/* out_partial_axes= of a reduction or contraction: the listed axes become P. */
bool apply_out_partial(Checker *k, Expr *call, Type *r, const bool contracted[MAX_MESH_AXES]);

/* ---- check.c: the driver ---- */
Type *check_expr(Checker *k, Expr *e);

/* ---- the built-in rules: ops.def's rule column, Type *rule(Checker *,
 * Expr *call, Builtin op), each in the file of its family (see above) ---- */
#define OP(id, name, cls, named, lo, hi, rule, lowers, flags, dflt) Type *rule(Checker *k, Expr *call, Builtin op);
#include "ops.def"
#undef OP
/* check_nn.c: matmul's rule, which '@' shares. */
Type *check_matmul(Checker *k, Expr *call, Expr *ea, Expr *eb, const char *opname);

/* check_record.c: records (SPEC 13) */
/* A written type: a tensor type, or a struct's declared type (a record of
 * its fields' written types; NULL after an error). */
Type *check_written_type(Checker *k, TypeExpr *te, bool named[MAX_MESH_AXES]);
Type *record_written(Checker *k, StructDecl *st);
/* check_fits(), also for records: the struct (nominal) and every field. */
bool check_fits_any(Checker *k, Span sp, const Type *want, const bool named[MAX_MESH_AXES], const Type *actual,
                    const char *what, const char *xtext, Expr *fix_at);
/* The type a value takes where it meets a written type: its own, except
 * that a literal takes the written type (R on the axes it leaves open). */
Type *check_bound_type(Checker *k, const Type *want, const bool named[MAX_MESH_AXES], Type *actual);
Type *check_struct_new(Checker *k, Expr *call, StructDecl *st);
Type *check_field(Checker *k, Expr *e);
Type *check_record_index(Checker *k, Expr *e);
/* e applied field by field: *slots[i] are its operands (checked; records
 * of one struct, or scalars that go with every field).  Sets e->map. */
Type *record_map(Checker *k, Expr *e, Expr **slots[], int n, const char *opname);

/* check_io.c: save, load and exists */
bool check_io_path(Checker *k, Expr *call, Builtin op); /* the path: a string literal, first */
Type *check_load_record(Checker *k, Expr *call, StructDecl *st);
/* map= and .safetensors paths (a record, never a tensor) */
bool check_io_safetensors(Checker *k, Expr *call, Builtin op, bool is_record);

/* check_collectives.c */
struct RsPlan;
Type *redistribute_target(Checker *k, Span sp, const char *xs, const Type *x, TypeExpr *te, const char *what,
                          struct RsPlan *plan);

#endif
