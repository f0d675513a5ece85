/* ast.h: the syntax tree the parser builds and later phases annotate.
 * Every node carries the Span of the source it came from.  Lists are linked
 * through `next` fields (each node is in at most one list).  All nodes live
 * in the Compiler's arena. */
#ifndef SPMDC_AST_H
#define SPMDC_AST_H

#include "spmdc.h"

typedef struct Expr Expr;
typedef struct Arg Arg;
typedef struct Stmt Stmt;
typedef struct TypeExpr TypeExpr;
typedef struct Dim Dim;
typedef struct AxisRef AxisRef;
typedef struct AxisEntry AxisEntry;
typedef struct Param Param;
typedef struct FnDecl FnDecl;
typedef struct Item Item;
typedef struct Symbol Symbol;
typedef struct StructDecl StructDecl;
typedef struct LeafMap LeafMap;
typedef struct StructField StructField;

typedef enum { DT_NONE, DT_F32, DT_F64, DT_I32, DT_BF16 } DType;

/* The local SPMD type letters, as written in types and in src=/dst=. */
typedef enum { LT_NONE, LT_R, LT_I, LT_V, LT_P, LT_S } LTypeKind;

typedef struct LType {
  LTypeKind kind;
  int sdim; /* for LT_S: the tensor dim (may be negative: counts from the end) */
} LType;

/* A mesh axis as written: a name, or in an `axis` parameter's body the
 * parameter's name.  Resolution sets `sym`. */
struct AxisRef {
  Span span;
  Name name;
  Symbol *sym;
  TypeExpr *type; /* a local_map variable's `x: T`: the type it is redistributed to (NULL: none) */
  struct Type *ty; /* that type, set by the checker (for the instance checked last) */
  AxisRef *next;
};

/* One tensor dim: `size`, `size@axis`, `size@(a, b)`, or `..Rest`. */
struct Dim {
  Span span;
  Expr *size;      /* a size expression (ints, names, * / + -, parens) */
  bool rest;       /* `..Name`: any number of dims; size is the EX_NAME */
  AxisRef *axes;   /* sharding axes, major to minor; NULL if none */
  Dim *next;
};

/* One brace entry: `axis: ltype` or `*: ltype` (axis == NULL). */
struct AxisEntry {
  Span span;
  AxisRef *axis;
  LType lt;
  AxisEntry *next;
};

/* A written type: `f32`, `f32[dims]`, `f32[dims]{entries}`, the kind
 * `axis` of a parameter, or a struct's name (`Model`, `nn.Model`).  Return
 * tuples link types through `next`. */
struct TypeExpr {
  Span span;
  DType dtype;
  bool is_axis;       /* the `axis` kind of a parameter */
  /* a struct's name: `module.name` when module is set; resolution sets sym */
  Name struct_name, struct_module;
  Symbol *sym;
  bool has_dims;      /* `[...]` was written (`f32[]` is a 0-d tensor too) */
  Dim *dims;
  AxisEntry *entries;
  TypeExpr *next;
};

typedef enum {
  EX_INT,      /* ival */
  EX_FLOAT,    /* fval */
  EX_STRING,   /* str, slen (escapes decoded) */
  EX_BOOL,     /* ival */
  EX_NAME,     /* name; resolution sets sym */
  EX_LTYPE,    /* R I V P or S(arg): lt, with S's dim expression in lhs */
  EX_TYPE,     /* a type used as a value: zeros(f32[4]), astype(x, f64) */
  EX_UNARY,    /* op lhs */
  EX_BINARY,   /* lhs op rhs */
  EX_CALL,     /* callee(args) */
  EX_INDEX,    /* lhs[rhs] */
  EX_FIELD,    /* lhs.name: a member of an imported module */
  EX_TUPLE,    /* (elems, ...) */
  EX_LIST,     /* [elems, ...] */
  EX_LOCAL_MAP, /* local_map (vars) over (axes) { body } */
  EX_LEAF,      /* made by the checker: leaf `ival` of the value of lhs (-1:
                   the whole value), its type preset; str: its text */
  EX_ERROR      /* stands in for an expression that was rejected while parsing */
} ExprKind;

/* Operators, with the spelling used in messages and dumps. */
#define BINARY_OPS(X)                                                          \
  X(OP_ADD, "+") X(OP_SUB, "-") X(OP_MUL, "*") X(OP_DIV, "/") X(OP_MOD, "%")   \
  X(OP_MATMUL, "@") X(OP_LT, "<") X(OP_LE, "<=") X(OP_GT, ">") X(OP_GE, ">=")  \
  X(OP_EQ, "==") X(OP_NE, "!=") X(OP_AND, "&&") X(OP_OR, "||")                 \
  X(OP_NEG, "-") X(OP_NOT, "!")
typedef enum {
#define X(op, s) op,
  BINARY_OPS(X)
#undef X
  OP_COUNT
} OpKind;
extern const char *const op_spelling[OP_COUNT];

struct Expr {
  ExprKind kind;
  Span span;
  int depth;            /* nesting depth, bounded by the parser */
  OpKind op;
  long long ival;
  double fval;
  const char *str;
  size_t slen;
  Name name;
  LType lt;
  Expr *lhs, *rhs;
  Expr *elems;          /* tuple and list elements */
  Arg *args;            /* call arguments */
  TypeExpr *type;       /* EX_TYPE */
  /* EX_LOCAL_MAP */
  AxisRef *lm_vars;     /* the rebound variables (AxisRef used as a name+span, and `x: T`'s T) */
  AxisRef *lm_over;     /* the axes taken local; NULL: every axis */
  bool lm_has_over;
  TypeExpr *lm_ret;     /* `-> T`: the global type of the block's result (NULL: the binding's) */
  struct Type *lm_out;  /* set by the checker: the block's global result type, before `ty` (redistributed) */
  Stmt *body;
  Symbol *sym;          /* EX_NAME after resolution */
  /* Set by the checker for the function instance checked last: the
   * expression's type, and for a call of a user fn, the callee's instance. */
  struct Type *ty;
  struct Instance *inst;
  LeafMap *map;         /* set by the checker for an op applied to records field by field */
  Expr *next;
};

/* An op on records, applied field by field: the same op on each leaf
 * (depth-first), whose operands are EX_LEAF nodes of the original
 * operands `ops`.  The lowering lowers each operand once, then each leaf. */
struct LeafMap {
  Expr **leaf;
  int nleaf;
  Expr **ops;
  int nops;
};

/* A call argument, positional (name == NULL) or named (`name=value`). */
struct Arg {
  Span span;
  Name name;
  Span name_span;
  Expr *value;
  Arg *next;
};

typedef enum { ST_LET, ST_VAR, ST_ASSIGN, ST_RETURN, ST_FOR, ST_IF, ST_EXPR, ST_BLOCK } StmtKind;

/* A bound name (let/var/for/param targets) with its own span. */
typedef struct Binding {
  Span span;
  Name name;
  Symbol *sym;
  struct Binding *next;
} Binding;

struct Stmt {
  StmtKind kind;
  Span span;
  Binding *targets;     /* let/var/assign: names (a, b = e); for: the index */
  TypeExpr *type;       /* let/var annotation */
  Expr *value;          /* let/var/assign/expr; return: values linked by next */
  Expr *lo, *hi;        /* for i in lo..hi */
  Expr *cond;           /* if */
  Stmt *then, *els;     /* if: blocks (els may be another ST_IF); for: then */
  Stmt *body;           /* ST_BLOCK: statements */
  Stmt *next;
};

struct Param {
  Span span;
  Binding *name;
  TypeExpr *type;       /* type->is_axis for `ax: axis`; NULL: generic (the argument's type) */
  Param *next;
};

/* struct NAME { field: TYPE, ... } */
struct StructField {
  Span span;
  Name name;
  Span name_span;
  TypeExpr *type;       /* a tensor type or a struct's name */
  StructField *next;
};

struct StructDecl {
  Span span;
  Name name;
  Span name_span;
  StructField *fields;
  int nfields;
  Module *module;
  int state;            /* resolution: 0 new, 1 being checked for cycles, 2 done */
};

enum { FN_LOCAL = 1, FN_EXPORT = 2 };

struct FnDecl {
  Span span;            /* the signature, for messages */
  Span name_span;
  Name name;
  int flags;
  Param *params;
  TypeExpr *ret;        /* NULL: no result; a list when ret_tuple */
  bool ret_tuple;
  Stmt *body;           /* an ST_BLOCK */
  Module *module;
  bool symbolic_failed; /* its check with symbolic shapes reported errors */
};

typedef enum { IT_IMPORT, IT_MESH, IT_CONST, IT_FN, IT_STRUCT } ItemKind;

typedef struct MeshAxisDecl {
  Span span;
  Name name;
  Expr *size;           /* NULL when omitted */
  struct MeshAxisDecl *next;
} MeshAxisDecl;

struct Item {
  ItemKind kind;
  Span span;
  Name name;            /* import, const */
  Span name_span;
  MeshAxisDecl *axes;   /* mesh */
  Expr *value;          /* const */
  FnDecl *fn;
  StructDecl *st;       /* struct */
  Item *next;
};

/* One parsed file.  Imports are loaded once each. */
struct Module {
  Name name;            /* file stem: `nn` for nn.spmd */
  int file;
  Item *items;
  Symbol *scope;        /* module-level symbols, filled by resolve.c */
  bool scope_has_mesh;  /* the module declares a mesh */
  Module *next;
};

/* ---- ast.c ---- */
Expr *ast_expr(Compiler *c, ExprKind kind, Span sp);
Expr *ast_binary(Compiler *c, OpKind op, Expr *l, Expr *r, Span sp);
Expr *ast_unary(Compiler *c, OpKind op, Expr *e, Span sp);
Expr *ast_bound(Compiler *c, Expr *e);
Arg *call_arg(Expr *call, int pos); /* the positional argument pos of a call, or NULL */
void ast_dump_module(Compiler *c, Module *m, FILE *out);
const char *ast_type_str(Compiler *c, TypeExpr *t);
const char *ast_ltype_str(LType lt);
const char *dtype_name(DType dt);

/* The deepest expression the compiler accepts; deeper input is an error,
 * never a stack overflow in a later phase. */
enum { MAX_EXPR_DEPTH = 1000 };

/* ---- parse (grammar/parser.y, grammar/lexer.re) ---- */
Module *parse_file(Compiler *c, int file, Name module_name);

#endif
