/* emit_cuda.c: the CUDA target's kernels (SPEC 14).  The host program is
 * emit_c.c's, the same rt_* calls as the CPU target's; each fused
 * elementwise region becomes, in the companion FILE.cu,
 *   - its per-element body, the very text of the CPU's loop body
 *     (emit_fused_body), in a __host__ __device__ function,
 *   - a grid-stride kernel that calls it for each element, and
 *   - an extern "C" launcher, which the host program calls with the
 *     tensors' device pointers (rt_device_data: the host never reads
 *     through them) and its host numbers.
 * Compiled by nvcc (-fmad=false: each operation rounds as the CPU's, whose
 * C is compiled with -ffp-contract=off), the launcher starts the kernel on
 * the rank's stream.  Compiled by the host C++ compiler with
 * -DSPMD_CUDA_SIM, the launcher runs the same body as a plain loop: the
 * simulation build, which links against the CPU runtime (and the CUDA
 * runtime's simulation library).  runtime/spmdrt_kernels.h is the ABI
 * between the two. */
#include <string.h>

#include "emit.h"

static Arena *ar(Emitter *E) { return &E->c->arena; }

/* the type a region computes in (T_): bf16 computes in f32; i32 (ids'
 * masks and offsets) in int32_t, each op's formula in double */
static const char *elem_type(const Type *t) {
  return t->dtype == DT_F64 ? "double" : t->dtype == DT_I32 ? "int32_t" : "float";
}
/* the type of its tensors' elements (bf16: uint16_t) */
static const char *store_type(const Type *t) { return t->dtype == DT_BF16 ? "uint16_t" : elem_type(t); }

/* Operands read by the body: host numbers as kernel arguments of their C
 * type, converted to the element type in the body as the CPU's loop does;
 * tensors through their device pointers. */
static const char *cuda_operand(Emitter *E, int v) {
  const Type *t = E->f->values[v].type;
  const char *n = emit_vname(E, v);
  if (t->kind != TY_TENSOR && emit_fuse_bf16(E)) /* rounded to bf16 first, as the kernels' scalar */
    return arena_sprintf(ar(E), "rt_k_bf16_round((float)%s)", n);
  if (t->kind != TY_TENSOR)
    return arena_sprintf(ar(E), "((%s)%s)", elem_type(E->fuse_t && E->fuse_t->dtype == DT_I32 ? E->fuse_t : t), n);
  const char *x = t->ndim == 0          ? arena_sprintf(ar(E), "(*%s)", n)
                  : emit_trailing(E, v) ? arena_sprintf(ar(E), "%s[i_ %% %s]", n, emit_trailing_n(E, v))
                  : emit_row(E, v)      ? arena_sprintf(ar(E), "%s[i_ / %s]", n, emit_row_n(E, v))
                                        : arena_sprintf(ar(E), "%s[i_]", n);
  return emit_fuse_bf16(E) ? arena_sprintf(ar(E), "rt_k_bf16_to_f32(%s)", x) : x;
}

static const char *cuda_store(Emitter *E, int v) { return arena_sprintf(ar(E), "%s[i_]", emit_vname(E, v)); }

/* The region's kernel arguments, in order: the values it reads from
 * outside (first use first), then its stored results. */
typedef struct Kargs {
  int *v;
  bool *out;
  int n;
} Kargs;

static void add_arg(Kargs *k, int v, bool out) {
  for (int i = 0; i < k->n; i++)
    if (k->v[i] == v)
      return;
  k->v[k->n] = v;
  k->out[k->n++] = out;
}

static Kargs kernel_args(Emitter *E, const FusedRegion *r) {
  int cap = 3 * (r->end - r->j) + 1;
  Kargs k = {arena_alloc(ar(E), sizeof(int) * (size_t)cap), arena_alloc(ar(E), sizeof(bool) * (size_t)cap), 0};
  bool *member = arena_alloc(ar(E), sizeof(bool) * (size_t)(E->f->nvalues + 1));
  for (int i = r->j; i < r->end; i++) {
    IrInst *in = r->insts[i];
    if (emit_transparent(in))
      continue;
    for (int a = 0; a < in->nargs; a++)
      if (!member[in->args[a]])
        add_arg(&k, in->args[a], false);
    member[in->dst[0]] = true;
  }
  for (int i = r->j; i < r->end; i++) {
    IrInst *in = r->insts[i];
    if (!emit_transparent(in) && r->out[i] != SCHED_IN_REGISTER)
      add_arg(&k, in->dst[0], true);
  }
  return k;
}

/* "const float *x_5", "double lr_3", "float *y_7"; slot: a host number as
 * the launcher and the kernel take it, "rt_hf lr_3_s" (spmdrt_kernels.h) */
static const char *param(Emitter *E, const FusedRegion *r, const Kargs *k, int i, bool slot) {
  const Type *t = E->f->values[k->v[i]].type;
  const char *n = emit_vname(E, k->v[i]);
  if (t->kind != TY_TENSOR) {
    if (slot)
      return arena_sprintf(ar(E), "%s %s_s", t->kind == TY_FLOAT ? "rt_hf" : "rt_hi", n);
    const char *ct = emit_ctype(t);
    return arena_sprintf(ar(E), "%s %s", ct, n);
  }
  if (emit_trailing(E, k->v[i])) /* and its size */
    return arena_sprintf(ar(E), "const %s *%s, int64_t %s", store_type(r->t), n, emit_trailing_n(E, k->v[i]));
  /* a where's condition of another dtype (sched_fusable) in its own; per row: and its row's length */
  if (emit_row(E, k->v[i]))
    return arena_sprintf(ar(E), "const %s *%s, int64_t %s", store_type(t), n, emit_row_n(E, k->v[i]));
  return arena_sprintf(ar(E), "%s%s *%s", k->out[i] ? "" : "const ", store_type(t->dtype != r->t->dtype ? t : r->t), n);
}

static const char *params(Emitter *E, const FusedRegion *r, const Kargs *k, bool slot) {
  StrBuf sb;
  sb_init(&sb, ar(E));
  for (int i = 0; i < k->n; i++)
    sb_printf(&sb, ", %s", param(E, r, k, i, slot));
  return sb.data;
}

static bool is_host(Emitter *E, int v) { return E->f->values[v].type->kind != TY_TENSOR; }

static const char *names(Emitter *E, const Kargs *k, bool slot) {
  StrBuf sb;
  sb_init(&sb, ar(E));
  for (int i = 0; i < k->n; i++) {
    sb_printf(&sb, ", %s%s", emit_vname(E, k->v[i]), slot && is_host(E, k->v[i]) ? "_s" : "");
    if (emit_trailing(E, k->v[i]))
      sb_printf(&sb, ", %s", emit_trailing_n(E, k->v[i]));
    else if (emit_row(E, k->v[i]))
      sb_printf(&sb, ", %s", emit_row_n(E, k->v[i]));
  }
  return sb.data;
}

/* in the kernel (the simulation: the closure), when it runs: each host
 * number from its slot or its value */
static void read_host_numbers(Emitter *E, const Kargs *k, int ind) {
  for (int i = 0; i < k->n; i++) {
    if (!is_host(E, k->v[i]))
      continue;
    const Type *t = E->f->values[k->v[i]].type;
    const char *n = emit_vname(E, k->v[i]);
    emit_out(E, ind, "const %s %s = (%s)%s(%s_s);\n", emit_ctype(t), n, emit_ctype(t),
             t->kind == TY_FLOAT ? "rt_hf_get" : "rt_hi_get", n);
  }
}

void cuda_fused_slots(Emitter *E, const FusedRegion *r, int ind) {
  Kargs k = kernel_args(E, r);
  for (int i = 0; i < k.n; i++) {
    if (!is_host(E, k.v[i]))
      continue;
    const Type *t = E->f->values[k.v[i]].type;
    const char *n = emit_vname(E, k.v[i]);
    bool f = t->kind == TY_FLOAT;
    if (E->fill)
      emit_out(E, ind, "(void)rt_slot_%s(ctx, %s%s);\n", f ? "f" : "i", f ? "" : "(int64_t)", n);
    else
      emit_out(E, ind, "const %s hs_%s = rt_slot_%s(ctx, %s%s);\n", f ? "rt_hf" : "rt_hi", n, f ? "f" : "i",
                f ? "" : "(int64_t)", n);
  }
}

/* The prefix of the program's kernels: spmd_<file stem>_ (launchers are
 * extern "C", so two programs linked together must not share names). */
static const char *kernel_prefix(Emitter *E, const char *source_path) {
  const char *base = strrchr(source_path, '/') ? strrchr(source_path, '/') + 1 : source_path;
  const char *dot = strrchr(base, '.');
  StrBuf sb;
  sb_init(&sb, ar(E));
  sb_puts(&sb, "spmd_");
  for (const char *p = base; *p && p != dot; p++)
    sb_putc(&sb, (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ? *p : '_');
  sb_putc(&sb, '_');
  return sb.data;
}

void cuda_begin(Emitter *E, const char *source_path) {
  E->kprefix = kernel_prefix(E, source_path);
  fprintf(E->cu, "/* Generated by spmdc %s from %s (--target=cuda): the kernels of its fused\n", SPMDC_VERSION,
          source_path);
  fputs(" * elementwise regions, which the host program (the .c) launches.  Do not edit.\n"
        " * nvcc -fmad=false (no fast math): each operation rounds as the CPU target's.\n"
        " * The simulation build: c++ -x c++ -DSPMD_CUDA_SIM, each launch a loop on the host. */\n"
        "#include <math.h>\n"
        "#include <stdint.h>\n"
        "#include \"spmdrt_kernels.h\"\n"
        "/* the helpers of the runtime's formulas (rt_sigmoid_, rt_gelu_, ...), as its kernels have them */\n"
        "#define RT_EW_QUAL static RT_HD inline\n"
        "#include \"elementwise_formulas.h\"\n\n",
        E->cu);
}

static void cuda_fused(Emitter *E, const FusedRegion *r, int ind) {
  Kargs k = kernel_args(E, r);
  const char *name = arena_sprintf(ar(E), "%sfused_%d", E->kprefix, E->nregions++);
  const char *ps = params(E, r, &k, false), *ns = names(E, &k, false);
  const char *pss = params(E, r, &k, true), *nss = names(E, &k, true);
  int line, col;
  source_position(E->c, r->span, &line, &col);
  const char *where = arena_sprintf(ar(E), "%s:%d", source_file(E->c, r->span.file)->path, line);
  /* the host: its host numbers (a graph region's slots), the launch, with device pointers */
  cuda_fused_slots(E, r, ind);
  emit_out(E, ind, "%s(ctx, n_", name);
  for (int i = 0; i < k.n; i++) {
    const char *n = emit_vname(E, k.v[i]);
    if (emit_trailing(E, k.v[i]))
      fprintf(E->out, ", rt_device_data(%s), %s", n, emit_trailing_n(E, k.v[i]));
    else if (emit_row(E, k.v[i]))
      fprintf(E->out, ", rt_device_data(%s), %s", n, emit_row_n(E, k.v[i]));
    else if (E->f->values[k.v[i]].type->kind == TY_TENSOR)
      fprintf(E->out, ", rt_device_data(%s)", n);
    else
      fprintf(E->out, ", hs_%s", n);
  }
  fputs(");\n", E->out);
  fprintf(E->protos, "void %s(rt_ctx *ctx, int64_t n_%s); /* %s */\n", name, pss, where);
  /* the kernel file: body, kernel, launcher */
  FILE *host = E->out;
  E->out = E->cu;
  fprintf(E->cu, "/* %s: %d elementwise operation%s (%s) */\n", where, r->members, r->members > 1 ? "s" : "",
          E->f->cname);
  fprintf(E->cu, "static RT_HD inline void %s_body(int64_t i_%s) {\n", name, ps);
  emit_out(E, 1, "typedef %s T_;\n", elem_type(r->t));
  emit_fused_body(E, r, 1);
  fputs("}\n\n", E->cu);
  fputs("#ifdef SPMD_CUDA_DEVICE\n", E->cu);
  fprintf(E->cu, "__global__ void %s_kernel(int64_t n_%s) {\n", name, pss);
  read_host_numbers(E, &k, 1);
  fputs("  for (int64_t i_ = RT_GRID_FIRST; i_ < n_; i_ += RT_GRID_STRIDE)\n", E->cu);
  fprintf(E->cu, "    %s_body(i_%s);\n}\n#endif\n\n", name, ns);
  fprintf(E->cu, "SPMD_EXTERN_C void %s(rt_ctx *ctx, int64_t n_%s) {\n", name, pss);
  fputs("  if (n_ <= 0) /* no launch: none counted either (--profile) */\n    return;\n", E->cu);
  fputs("#ifdef SPMD_CUDA_DEVICE\n", E->cu);
  fprintf(E->cu, "  %s_kernel<<<rt_grid_blocks(n_), RT_BLOCK_THREADS, 0, rt_kernel_stream(ctx)>>>(n_%s);\n", name, nss);
  fprintf(E->cu, "  rt_kernel_launched(ctx, \"fused (%s)\");\n", where);
  fputs("#else /* the simulation: the same body, a loop on the host (recorded in a graph's capture; its\n"
        "       * host numbers read when it runs) */\n", E->cu);
  fputs("  rt_sim_kernel(ctx, [=]() {\n", E->cu);
  fputs("    rt_sim_launch_begin(ctx);\n", E->cu);
  read_host_numbers(E, &k, 2);
  fprintf(E->cu, "    for (int64_t i_ = 0; i_ < n_; i_++)\n      %s_body(i_%s);\n", name, ns);
  fputs("    rt_sim_launch_end(ctx);\n  });\n#endif\n}\n\n", E->cu);
  E->out = host;
}

/* ---- the multi-tensor launch (issue 26): fused regions with one body
 * (sched_horizontal_group), each over its own tensors and size.  The host
 * program fills a table, per region, of its size (mn_) and its tensors'
 * device pointers (mp_, in the kernel's argument order); the launcher
 * launches the kernel once per chunk of regions, the chunk's sizes and
 * pointers in the kernel's parameters (a struct by value, within CUDA's
 * 4 KiB of parameters: as many chunks as it takes, no limit on the
 * regions), blockIdx.y choosing the region.  The simulation runs each
 * chunk as one launch too: the body over each region's elements in turn,
 * the bits of the separate loops. */
static int tensor_args(Emitter *E, const Kargs *k) {
  int n = 0;
  for (int i = 0; i < k->n; i++)
    n += !is_host(E, k->v[i]);
  return n;
}

void cuda_multi_table(Emitter *E, const FusedRegion *rs, int nr, int ind) {
  Kargs k = kernel_args(E, &rs[0]);
  emit_out(E, ind, "int64_t mn_[%d]; /* per region: its size and device pointers */\n", nr);
  emit_out(E, ind, "void *mp_[%d];\n", nr * tensor_args(E, &k));
}

void cuda_multi_field(Emitter *E, const FusedRegion *rs, int i, int ind) {
  Kargs k = kernel_args(E, &rs[i]);
  int nt = tensor_args(E, &k), a = 0;
  emit_out(E, ind, "mn_[%d] = n_;\n", i);
  for (int x = 0; x < k.n; x++)
    if (!is_host(E, k.v[x]))
      emit_out(E, ind, "mp_[%d] = rt_device_data(%s);\n", i * nt + a++, emit_vname(E, k.v[x]));
}

/* the kernel's (the simulation's) locals: region f_'s size and pointers */
static void multi_locals(Emitter *E, const FusedRegion *r, const Kargs *k, int ind) {
  emit_out(E, ind, "const int64_t n_ = tab_.n[f_];\n");
  int a = 0;
  for (int i = 0; i < k->n; i++)
    if (!is_host(E, k->v[i]))
      emit_out(E, ind, "%s%s *%s = (%s%s *)tab_.p[f_][%d];\n", k->out[i] ? "" : "const ", store_type(r->t),
               emit_vname(E, k->v[i]), k->out[i] ? "" : "const ", store_type(r->t), a++);
}

void cuda_multi_launch(Emitter *E, const FusedRegion *rs, int nr, int ind) {
  const FusedRegion *r = &rs[0];
  Kargs k = kernel_args(E, r);
  int nt = tensor_args(E, &k), nh = k.n - nt;
  const char *name = arena_sprintf(ar(E), "%sfused_%d", E->kprefix, E->nregions++);
  StrBuf hp, hn; /* the host numbers alone: parameters (slots) and names */
  sb_init(&hp, ar(E));
  sb_init(&hn, ar(E));
  for (int i = 0; i < k.n; i++)
    if (is_host(E, k.v[i])) {
      sb_printf(&hp, ", %s", param(E, r, &k, i, true));
      sb_printf(&hn, ", %s_s", emit_vname(E, k.v[i]));
    }
  int line, col;
  source_position(E->c, r->span, &line, &col);
  const char *where = arena_sprintf(ar(E), "%s:%d", source_file(E->c, r->span.file)->path, line);
  cuda_fused_slots(E, r, ind);
  emit_out(E, ind, "%s(ctx, %d, mn_, mp_", name, nr);
  for (int i = 0; i < k.n; i++)
    if (is_host(E, k.v[i]))
      fprintf(E->out, ", hs_%s", emit_vname(E, k.v[i]));
  fputs(");\n", E->out);
  fprintf(E->protos, "void %s(rt_ctx *ctx, int nf_, const int64_t *mn_, void *const *mp_%s); /* %s */\n", name,
          hp.data, where);
  FILE *host = E->out;
  E->out = E->cu;
  fprintf(E->cu, "/* %s: %d elementwise operation%s (%s), over %d regions' tensors in one launch */\n", where,
          r->members, r->members > 1 ? "s" : "", E->f->cname, nr);
  fprintf(E->cu, "static RT_HD inline void %s_body(int64_t i_%s) {\n", name, params(E, r, &k, false));
  emit_out(E, 1, "typedef %s T_;\n", elem_type(r->t));
  emit_fused_body(E, r, 1);
  fputs("}\n\n", E->cu);
  /* the chunk: its sizes and pointers, and the host numbers' slots, in
   * 3 KiB of the kernel's 4 KiB of parameters (SPMD_MULTI_FIELDS: a test's
   * smaller chunk) */
  fputs("#ifdef SPMD_MULTI_FIELDS\n", E->cu);
  fprintf(E->cu, "#define %s_FIELDS SPMD_MULTI_FIELDS\n#else\n", name);
  int fields = (3072 - 16 * nh) / (8 * (nt + 1));
  fprintf(E->cu, "#define %s_FIELDS %d\n#endif\n", name, fields > 1 ? fields : 1);
  fprintf(E->cu, "typedef struct {\n  int64_t n[%s_FIELDS];\n  void *p[%s_FIELDS][%d];\n} %s_tab;\n\n", name, name,
          nt > 0 ? nt : 1, name);
  const char *ns = names(E, &k, false);
  fputs("#ifdef SPMD_CUDA_DEVICE\n", E->cu);
  fprintf(E->cu, "__global__ void %s_kernel(%s_tab tab_%s) {\n", name, name, hp.data);
  read_host_numbers(E, &k, 1);
  emit_out(E, 1, "const int f_ = (int)blockIdx.y;\n");
  multi_locals(E, r, &k, 1);
  fputs("  for (int64_t i_ = RT_GRID_FIRST; i_ < n_; i_ += RT_GRID_STRIDE)\n", E->cu);
  fprintf(E->cu, "    %s_body(i_%s);\n}\n#endif\n\n", name, ns);
  fprintf(E->cu, "SPMD_EXTERN_C void %s(rt_ctx *ctx, int nf_, const int64_t *mn_, void *const *mp_%s) {\n", name,
          hp.data);
  fprintf(E->cu, "  for (int c_ = 0; c_ < nf_; c_ += %s_FIELDS) {\n", name);
  fprintf(E->cu, "    const int m_ = nf_ - c_ < %s_FIELDS ? nf_ - c_ : %s_FIELDS;\n", name, name);
  fprintf(E->cu, "    %s_tab tab_;\n    memset(&tab_, 0, sizeof tab_);\n    int64_t most_ = 0;\n", name);
  fputs("    for (int f_ = 0; f_ < m_; f_++) {\n      tab_.n[f_] = mn_[c_ + f_];\n"
        "      most_ = tab_.n[f_] > most_ ? tab_.n[f_] : most_;\n", E->cu);
  fprintf(E->cu, "      for (int a_ = 0; a_ < %d; a_++)\n        tab_.p[f_][a_] = mp_[(int64_t)(c_ + f_) * %d + a_];\n",
          nt, nt);
  fputs("    }\n    if (most_ <= 0) /* no launch: none counted either (--profile) */\n      continue;\n", E->cu);
  fputs("#ifdef SPMD_CUDA_DEVICE\n", E->cu);
  fprintf(E->cu,
          "    %s_kernel<<<dim3(rt_grid_blocks(most_), (unsigned)m_), RT_BLOCK_THREADS, 0, rt_kernel_stream(ctx)>>>(tab_%s);\n",
          name, hn.data);
  fprintf(E->cu, "    rt_kernel_launched(ctx, \"fused, multi-tensor (%s)\");\n", where);
  fputs("#else /* the simulation: the same body, region by region, one launch per chunk */\n", E->cu);
  fputs("    rt_sim_kernel(ctx, [=]() {\n", E->cu);
  fputs("      rt_sim_launch_begin(ctx);\n", E->cu);
  read_host_numbers(E, &k, 3);
  fputs("      for (int f_ = 0; f_ < m_; f_++) {\n", E->cu);
  multi_locals(E, r, &k, 4);
  fprintf(E->cu, "        for (int64_t e_ = 0; e_ < n_; e_++)\n          %s_body(e_%s);\n      }\n", name, ns);
  fputs("      rt_sim_launch_end(ctx);\n    });\n#endif\n  }\n}\n\n", E->cu);
  E->out = host;
}

const Target target_cuda = {"cuda", false, cuda_fused, cuda_operand, cuda_store};

bool emit_cuda(Compiler *c, IrProgram *p, FILE *out, FILE *cu, const char *source_path) {
  return emit_program(c, p, &target_cuda, out, cu, source_path);
}
