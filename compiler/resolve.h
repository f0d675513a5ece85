/* resolve.h: symbols and name resolution.  resolve_program() loads every
 * imported module, binds each name in the program to a Symbol (mesh axes,
 * constants, functions, modules, built-ins, parameters, locals, shape
 * variables), evaluates constants, and reports undefined and duplicate
 * names.  Symbols live in the Compiler's arena. */
#ifndef SPMDC_RESOLVE_H
#define SPMDC_RESOLVE_H

#include "ast.h"

typedef enum {
  OPC_NONLINEAR, OPC_LINEAR, OPC_MULTILINEAR, OPC_COLLECTIVE,
  OPC_CREATE, OPC_EFFECT, OPC_AUTODIFF,
  OPC_HOST      /* host values from tensors and the mesh: item, axis_size, axis_index */
} OpClass;

/* ops.def's flags column */
enum {
  OPF_RECORDS = 1 << 0,     /* applied to a record field by field (SPEC 13) */
  OPF_KEEPS_SHAPE = 1 << 1, /* a reduction over dim= (default: the last) that keeps the shape */
};

typedef enum {
#define OP(id, name, ...) BI_##id,
#include "ops.def"
#undef OP
  BI_COUNT
} Builtin;

/* ops.def's columns that every phase reads */
extern const char *const builtin_name[BI_COUNT];
extern const OpClass builtin_class[BI_COUNT];
extern const char *const builtin_named_args[BI_COUNT];
extern const signed char builtin_min_args[BI_COUNT]; /* positional arguments; -1: the rule counts them */
extern const signed char builtin_max_args[BI_COUNT];
extern const unsigned builtin_flags[BI_COUNT];        /* OPF_* */
extern const double builtin_default[BI_COUNT];        /* the default of its float option (eps=) */

typedef enum {
  SYM_AXIS,       /* a mesh axis; index: its position in the mesh */
  SYM_AXIS_PARAM, /* an `ax: axis` parameter */
  SYM_CONST,      /* const NAME = value; ival/fval after evaluation */
  SYM_FN,         /* fn */
  SYM_MODULE,     /* import */
  SYM_BUILTIN,    /* index: a Builtin */
  SYM_PARAM,      /* a tensor parameter */
  SYM_LET,        /* let (immutable) */
  SYM_VAR,        /* var (mutable) */
  SYM_LOOP,       /* for i in ...: a host integer */
  SYM_SHAPEVAR,   /* a size name bound by a signature (also `..Rest`) */
  SYM_STRUCT      /* struct NAME { ... }: st */
} SymKind;

struct Symbol {
  SymKind kind;
  Name name;
  Span span;          /* where it is defined (0 for built-ins) */
  int index;
  Item *item;         /* SYM_CONST, SYM_FN, SYM_MODULE, SYM_STRUCT */
  StructDecl *st;     /* SYM_STRUCT */
  FnDecl *fn;         /* SYM_FN; for locals: the enclosing function */
  Module *module;     /* SYM_MODULE: the imported module; others: owner */
  bool is_rest;       /* SYM_SHAPEVAR from `..Name` */
  /* constants */
  bool evaluated, evaluating, is_float;
  bool eval_failed;   /* its error is reported; uses of it stay quiet */
  long long ival;
  double fval;
  int lm_level;       /* locals: how many local_map blocks enclose it */
  Symbol *outer;      /* a local_map rebinding: the variable it rebinds */
  Symbol *grad_of;    /* a gradient from value_and_grad/grad: its parameter */
  struct Expr *def;   /* let with one target: the value it is bound to */
  void *info;         /* for later phases (types of locals, ...) */
  Symbol *next;       /* next in its scope */
};

/* The mesh of the program (the main module's `mesh` declaration). */
typedef struct MeshAxis {
  Name name;
  Span span;
  long long size;     /* declared size, or 0 when omitted */
} MeshAxis;

enum { MAX_MESH_AXES = 8 };

typedef struct Mesh {
  MeshAxis axes[MAX_MESH_AXES];
  int naxes;
  Span span;
  bool declared;
} Mesh;

/* Loads `path` as the main module and everything it imports, and resolves
 * all names.  Returns false if any error was reported. */
bool resolve_program(Compiler *c, const char *path, Mesh *mesh);
/* The same for a main module already added with source_add() (in-process
 * drivers: unit tests, the fuzzer). */
bool resolve_source(Compiler *c, int file, Mesh *mesh);
Symbol *module_lookup(Module *m, Name name);

#endif
