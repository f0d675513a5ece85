/* types.h: the types of the checker.  A tensor type is a dtype, a symbolic
 * shape, the mesh axes that shard each dim (the partition spec, major to
 * minor), and one local SPMD type (R, I, V or P) per mesh axis.  Sizes are
 * monomials over mesh-axis sizes with a rational coefficient, so that
 * `16 / tp * tp` and `16` compare equal.  Types live in the arena and are
 * never mutated once built (copy with type_clone first). */
#ifndef SPMDC_TYPES_H
#define SPMDC_TYPES_H

#include "resolve.h"

enum { MAX_DIMS = 8, MAX_FACTORS = 6 };

/* A Size factor whose `axis` is SIZE_SYM0 + i is not a mesh axis but the
 * shape variable c->size_syms[i], a symbol: a function whose signature
 * names every mesh axis is checked on its own with its shape variables as
 * symbols (SPEC section 3).  Such sizes are never lowered. */
enum { SIZE_SYM0 = 64 };

/* num/den * prod(n_axis ^ exp): the size of a dim. */
typedef struct Size {
  long long num, den;
  int nf;
  struct {
    int axis;   /* mesh axis index */
    int exp;
  } f[MAX_FACTORS];
  bool unknown; /* not representable: compared by nothing, printed as '?' */
} Size;

typedef enum {
  TY_ERROR,    /* an error was reported; silences follow-on errors */
  TY_VOID,     /* a statement-like call (print, save) */
  TY_TENSOR,
  TY_INT,      /* a host integer (constants, loop indices, sizes) */
  TY_FLOAT,    /* a host float (constants, literals) */
  TY_BOOL,     /* a host boolean */
  TY_STRING,
  TY_AXES,     /* a mesh axis or a tuple of them */
  TY_LTYPE,    /* R I V P S(i) as a value (src=, dst=) */
  TY_DTYPE,    /* a type as a value: f32, f32[4]{dp: R} */
  TY_TUPLE,    /* several results */
  TY_RECORD    /* a record: named fields (elems), of a struct or anonymous */
} TypeKind;

typedef struct Type Type;
struct Type {
  TypeKind kind;
  /* TY_TENSOR */
  DType dtype;
  int ndim;
  Size shape[MAX_DIMS];
  int8_t spec[MAX_DIMS][MAX_MESH_AXES]; /* axes sharding each dim, -1 ends */
  LTypeKind lt[MAX_MESH_AXES];          /* LT_NONE: not determined */
  bool local;       /* shapes are per-rank (local fn, local_map body) */
  /* TY_TENSOR scalars written as literals, and host numbers, adopt */
  bool literal;
  /* TY_AXES: a mask of mesh axes in order given */
  int axes[MAX_MESH_AXES];
  int naxes;
  /* TY_LTYPE */
  LType ltv;
  /* TY_DTYPE: the written type, converted */
  Type *of;
  /* TY_TUPLE: the parts; TY_RECORD: the fields, in declaration order */
  Type **elems;
  int nelems;
  /* TY_RECORD: the fields' names, and the struct (NULL for the anonymous
   * record that r[i] gives) */
  Name *fields;
  StructDecl *st;
};

typedef struct Checker Checker;

/* sizes */
long long size_gcd(long long a, long long b); /* >= 1 */
Size size_int(long long v);
Size size_axis(int axis);
Size size_mul(Size a, Size b);
Size size_div(Size a, Size b);
bool size_eq(Size a, Size b);
bool size_is_int(Size a, long long *v);
Size size_symbol(Compiler *c, const char *name); /* a new symbol named `name` */
bool size_has_symbol(Size a);
bool type_has_symbol(const Type *t);            /* in a dim of t (or of a field) */
const char *size_str(Compiler *c, const Mesh *m, Size s);
const char *size_text(Compiler *c, const Mesh *m, Size s, const char *prefix);

/* types */
Type *type_new(Compiler *c, TypeKind kind);
Type *type_clone(Compiler *c, const Type *t);
Type *type_error(void);
Type *type_scalar(Compiler *c, DType dt, int naxes, LTypeKind lt);
bool type_same(const Type *a, const Type *b, int naxes);
bool type_spec_has(const Type *t, int axis, int *dim);
/* The form of t on one axis, as src= writes it: S(d) when the axis shards
 * dim d (global code), else its letter. */
LType ltype_on(const Type *t, int axis);
void type_spec_remove(Type *t, int axis);
void type_spec_add(Type *t, int dim, int axis);
const char *type_str(Compiler *c, const Mesh *m, const Type *t);
const char *lt_name(LTypeKind k);
Type *type_dual(Compiler *c, const Type *t, int naxes);

/* Records and tuples as their leaves (tensors and host values), depth
 * first: what the lowering turns a record into. */
int type_nleaves(const Type *t);
Type *type_leaf(const Type *t, int i);
/* The field path of leaf i, its names joined by sep: "attn.wo". */
const char *type_leaf_path(Compiler *c, const Type *t, int i, const char *sep);
/* The index of field `name` in record t, or -1. */
int type_field(const Type *t, Name name);
/* Whether two records have the same struct (or, anonymous, the same field
 * names), so that field-by-field operations pair them up. */
bool type_same_struct(const Type *a, const Type *b);

#endif
