/* schedule.h: the target-independent schedule of a block (schedule.c). */
#ifndef SPMDC_SCHEDULE_H
#define SPMDC_SCHEDULE_H

#include "ir.h"

typedef struct Schedule {
  IrInst **insts;       /* the block's instructions in the order they run */
  int n;
  int blk;              /* the block's number (defblk) */
  int *free_after;      /* per instruction: the first value freed after it (-1: none) */
  int *next_free;       /* per value: the next one freed after the same instruction */
  int *wait_head;       /* per instruction: the first value waited for before it (-1: none) */
  int *wait_next;       /* per value: the next one waited for before the same instruction */
  bool *special;        /* per instruction: a var read that moves the var's reference, or an
                         * all_reduce that starts non-blocking (overlap.c) */
  int *run_end;         /* per instruction: where the region starting at it ends (insts[j..run_end[j])
                         * run as one: a fused elementwise loop, or a GEMM with its epilogue); 0: none */
  bool *gemm;           /* per instruction: the region starting there is a GEMM with its epilogue */
  int *out;             /* per member of a fused region: where its value goes, SCHED_IN_REGISTER,
                         * SCHED_NEW_BUFFER, or the operand (a value) whose buffer it takes (rt_reuse) */
  int *bgrad;           /* per instruction (sched_bias_grad_gemm): at an add's BINARY_BWD, the
                         * MATMUL_BWD / EINSUM_BWD (> j) whose dW GEMM computes its bias gradient;
                         * at that one, the BINARY_BWD (< j); -1: none */
  int *acc;             /* per instruction (sched_gemm_accumulate): at a gradient sum (ACCUM), the
                         * MATMUL_BWD / EINSUM_BWD (< j) whose dX GEMM adds its result to the
                         * sum's other operand (a buffer of its own) in place of the sum; at
                         * that one, the ACCUM (> j); -1: none */
  int *hscalar;         /* per instruction (sched_host_div_grad): at a SCALAR, the BINARY_BWD (> j)
                         * that reads its host number instead; at that one, the SCALAR; -1: none */
} Schedule;

enum {
  SCHED_IN_REGISTER = -2, /* read only inside its region: never stored, no tensor */
  SCHED_NEW_BUFFER = -1,  /* stored into a new tensor */
};

/* Orders block b for fusion and computes its schedule.  nuses: per value of
 * f, how many instruction operands read it (sched_count_uses); lastuse,
 * defblk: per value of f, updated for the values b defines (blk: b's
 * number). */
void schedule_block(Compiler *c, IrFn *f, IrBlock *b, int blk, int *nuses, int *lastuse, int *defblk,
                    Schedule *s);

/* Adds to nuses[v] the operand reads of v in b and its nested blocks. */
void sched_count_uses(IrBlock *b, int *nuses);

/* A bf16 matmul at insts[j] (on the CUDA target also f32) whose result only
 * feeds `+ bias` and/or an activation (gelu, gelu_tanh, relu), done as one
 * GEMM with post-ops: how many instructions it covers (0: none; the saves
 * of a differentiated forward between the matmul and the add included),
 * the bias value (-1: none) and the activation (-1: none).  In a
 * differentiated forward (f32, CUDA) the add's save of the matmul's result
 * is rewritten to save the sum (nuses updated). */
int sched_gemm_epilogue(const Compiler *c, const IrFn *f, IrInst **insts, int j, int n, int *nuses, int *bias,
                        int *act);

/* Whether an einsum spec over operands of na and nb dims is a matmul of
 * a [..., k] by b [k, n...] ("btd,dhe->bthe"). */
bool sched_einsum_matmul(const char *spec, int na, int nb);

/* On the CUDA target, an add's backward at insts[j] whose bias gradient
 * the dW GEMM of the MATMUL_BWD / EINSUM_BWD it returns (k > j; 0: none)
 * computes in its epilogue (rt_matmul_bwd_bias): the bias exactly the
 * weight's trailing dims, dy's leading dims exactly the GEMM's K, only tape
 * pops between. */
int sched_bias_grad_gemm(const Compiler *c, const IrFn *f, IrInst **insts, int j, int n, const int *nuses);

/* On the CUDA target (not in main), the gradient sums (ACCUM) of block
 * insts[0..n) that a dX GEMM does itself (cuBLASLt's beta = 1: its f32
 * result added to C, rounded once, the add's bits): a sum p + g (either
 * order) whose g is the dX (dst 0) of a MATMUL_BWD / EINSUM_BWD of a
 * matmul's form (a [..., k] @ w [k, n...]: one GEMM dy w^T) read only by
 * the sum, and whose p, read only by the sum too, is a buffer of its own
 * ready before that GEMM: another such dX, or an earlier sum done so.  The
 * GEMM writes into p's buffer and its result is the sum's; nothing else
 * changes (the sums keep their order).  Fills acc (Schedule.acc). */
void sched_gemm_accumulate(Compiler *c, const IrFn *f, IrInst **insts, int n, const int *nuses, int *acc);

/* On the CUDA target, the backward of `x / s` for a host number s (the
 * loss's mean: a BINARY_BWD of / whose divisor is a SCALAR read by it
 * alone, only dx wanted, f32 or f64): rt_div_scalar_grad_h with the
 * number, not a device scalar filled for it (one launch fewer; the same
 * bits).  Fills hscalar (Schedule.hscalar). */
void sched_host_div_grad(Compiler *c, const IrFn *f, IrInst **insts, int n, const int *nuses, int *hscalar);

/* Whether `in` can be a member of a fused elementwise region (on c's target). */
bool sched_fusable(const Compiler *c, const IrFn *f, const IrInst *in);
/* Instructions that may sit between a region's members: pure host work and var reads. */
bool sched_transparent(const IrInst *in);
/* A member's C operator (+ - * /); NULL for the others. */
const char *sched_fused_op(const IrInst *in);
/* A binary op's formula (RT_BINARY_OPS), of doubles a and b. */
const char *sched_binary_formula(IrBinary b);
/* A unary op's C spelling in a fused loop for dtype dt on every target, X
 * standing for the operand; NULL: none (the CUDA target alone fuses it,
 * with its formula). */
const char *sched_fused_unary(IrUnary u, DType dt);
/* A unary op's formula (RT_UNARY_OPS), of x in the tensor's precision. */
const char *sched_unary_formula(IrUnary u);
/* Whether unary op u of dtype dt fuses on c's target. */
bool sched_unary_fusable(const Compiler *c, IrUnary u, DType dt);
/* Whether a is a tensor of t's dtype whose dims are t's last a->ndim (fewer
 * than t's): a fused loop over t reads its element i_ % a's size. */
bool sched_trailing(const Type *a, const Type *t);
/* The same dtype and local shape: the same global shape and partition spec. */
bool sched_same_shape(const Type *a, const Type *b);
/* The same local shape (sched_same_shape), of any dtype. */
bool sched_same_layout(const Type *a, const Type *b);
/* Whether a (any dtype) is t's shape with a last dim of 1 where t's is
 * not: a value per row of t (a fused where's condition on the CUDA target,
 * read at i_ / t's last dim). */
bool sched_row_operand(const Type *a, const Type *t);
/* The CUDA target's device scalars made from host numbers (IR_SCALAR) that
 * an elementwise op reads: `x - s` becomes x minus the host number
 * (BINARY_SCALAR: rt_binary_scalar_h, or a fused loop's kernel argument),
 * where(c, a, s) reads the number, and a scalar no one else reads is not
 * made (no rt_full launch per call).  After autodiff, before emission. */
void sched_host_scalars(Compiler *c, IrProgram *p);
bool sched_is_param(const IrFn *f, int v);
/* Whether f owns its i-th parameter (a reference its callers hand over or
 * add: f frees it after its last use and may write over it). */
bool sched_param_owned(const Compiler *c, const IrFn *f, int i);
/* Whether f owns value v: any value but a parameter it borrows. */
bool sched_owned_value(const Compiler *c, const IrFn *f, int v);
/* A layer's stacked-gradient adds (INDEX_ADD_SLOT of one index value into
 * distinct vars), global_norm's sums of squares or zero fills starting at
 * S->insts[j], run as one
 * multi-tensor call (issue 26): where the group ends, 0 if none (fewer
 * than 2).  Its members' frees come after the group; a zero fill's or a
 * sum of squares' group ends at the first member that frees a value. */
int sched_multi_group(const IrFn *f, const Schedule *S, int j);
bool sched_zero_fill(const IrFn *f, const IrInst *in);
/* Fused regions starting at S->insts[j] (the first may hold host work)
 * whose rows (sched_region_rows) all have one per-element body over
 * tensors of their own sizes, independent of each other (none reads what
 * another computes or writes over), the regions after the first storing
 * only into their donors: where the run ends, 0 if fewer than 2 regions
 * (issue 26: the CUDA target's multi-tensor launch, a row each). */
int sched_horizontal_group(Compiler *c, const IrFn *f, const Schedule *S, int j);
/* The independent copies of a computation that fused region [j, je) holds
 * (its members connected by what they read of each other): comp[k - j] is
 * member k's row, numbered by first member, -1 for host work; returns how
 * many. */
int sched_region_rows(const IrFn *f, const Schedule *S, int j, int je, int *comp);
bool sched_same_index(const IrFn *f, int a, int b);

#endif
