#!/usr/bin/python3
"""mutate.py [--scratch DIR] [--only NAME,...] [--list] [--check] [--no-baseline]:
the mutation run of the suite (tests/mutate.sh; on demand, not a ctest).

Each defect below is one small edit planted in a scratch copy of the tree
(never this one): the checker with a typing rule relaxed, autodiff with a
backward rule's sign or scale wrong, the CPU runtime with a kernel off by
one, a collective's reduce op or a checkpoint's offset wrong, the CUDA
runtime's simulation build (libspmdrt_cudasim) likewise, the emitter with
a fused loop's bound wrong.  For each: apply the edit (its text must occur
exactly once), build the scratch tree (`cmake --build -j2`: only what the
edit touches is rebuilt), run the defect's ctest subset, restore the file
and rebuild.  The subsets pass on the unmutated copy first (the baseline:
a failure there would be no catch).  The table at the end says which tests
failed under each defect; a defect no test fails is NOT CAUGHT and the run
exits 1: it names a missing test.

The scratch copy (default /tmp/spmd-mutate, or $MUTATE_DIR) holds src/ (the
tracked and untracked, not ignored, files of this tree: only the files that
differ are rewritten, so a second run rebuilds little) and build/ (Debug,
SPMD_CUDA=OFF: the simulation build needs no nvcc).  --check only checks
that every defect's text occurs once in this tree (no build).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Defect:
    def __init__(self, name, area, path, old, new, tests, what):
        self.name, self.area, self.path, self.old, self.new = name, area, path, old, new
        self.tests, self.what = tests, what


D = Defect
DEFECTS = [
    # ---- the checker: a typing rule relaxed
    D('check_linear_p_plus_r', 'checker', 'compiler/check_rules.c',
      'if (nr || nlit) {', 'if (nlit) {',
      r'^check/(linear_add_sub|lattice_pairs_linear|lattice_basic)$',
      'the linear rule accepts P + R (only a literal added to P is rejected)'),
    D('check_two_p_factors', 'checker', 'compiler/check_rules.c',
      'if (np > 1) {', 'if (np > 2) {',
      r'^check/(multilinear_mul|lattice_pairs_multilinear)$',
      'the multilinear rule accepts two P factors (p * p)'),
    D('check_i_mixes_r', 'checker', 'compiler/check_rules.c',
      'if (ni && ni != ntensor) {', 'if (ni && ni != ntensor && nr == 0) {',
      r'^check/(lattice_i_mix|lattice_pairs_linear)$',
      'I combined with R is accepted (and typed I)'),
    D('check_avg_of_p', 'checker', 'compiler/check_collectives.c',
      'if (strcmp(o, "sum") && ltype_base(src) == LT_P',
      'if (strcmp(o, "sum") && strcmp(o, "avg") && ltype_base(src) == LT_P',
      r'^check/coll_allreduce_op_of_p$',
      'all_reduce(src=P, op=avg) accepted'),
    # ---- autodiff: a backward rule's sign or scale
    D('ad_avg_bwd_scale', 'autodiff', 'compiler/autodiff.c',
      'b->binop = BIN_DIV;', 'b->binop = BIN_MUL;',
      r'^gradcheck/collectives$',
      "all_reduce(op=avg)'s backward multiplies the cotangent by the axis size instead of dividing"),
    D('ad_ppermute_bwd_sign', 'autodiff', 'compiler/autodiff.c',
      'IR_I(b, SHIFT) = -IR_I(in, SHIFT);', 'IR_I(b, SHIFT) = IR_I(in, SHIFT);',
      r'^gradcheck/ppermute$',
      "ppermute's backward shifts by +K, not -K"),
    D('ad_sub_bwd_sign', 'autodiff', 'runtime/composite.c',
      ': op == RT_SUB ? rt_unary(ctx, RT_NEG, dy) : rt_retain((rt_tensor *)dy);',
      ': rt_retain((rt_tensor *)dy);',
      r'^(gradcheck/elementwise|runtime/test_kernels)$',
      "a - b's gradient of b is +dy (same-shape path of rt_binary_bwd)"),
    D('ad_ce_mean_bwd_scale', 'autodiff', 'runtime/kernels_nn.c',
      'rt_cross_entropy_bwd_check(ctx, targets, dy, red);\n    int64_t n = targets->numel, c = logits->shape[logits->ndim - 1];\n'
      '    double scale = red == RT_CE_NONE ? 1.0\n                 : red == RT_CE_SUM  ? rt_item(ctx, dy)\n'
      '                 : kept              ? rt_item(ctx, dy) / (double)kept',
      'rt_cross_entropy_bwd_check(ctx, targets, dy, red);\n    int64_t n = targets->numel, c = logits->shape[logits->ndim - 1];\n'
      '    double scale = red == RT_CE_NONE ? 1.0\n                 : red == RT_CE_SUM  ? rt_item(ctx, dy)\n'
      '                 : kept              ? rt_item(ctx, dy) / (double)(kept + 1)',
      r'^(gradcheck/(select|reductions)|runtime/test_kernels)$',
      "cross_entropy(mean)'s backward divides by the kept rows + 1"),
    # ---- the CPU runtime
    D('rt_cumsum_last_row', 'runtime', 'runtime/kernels.c',
      'for (int64_t jj = 0; jj < d; jj++) {', 'for (int64_t jj = 0; jj < d - 1; jj++) {',
      r'^(runtime/test_kernels|gradcheck/reductions)$',
      'cumsum (and its backward) skips the last row: off by one'),
    D('rt_allreduce_max_is_sum', 'runtime', 'runtime/comm.c',
      'case RT_RED_MAX: return MPI_MAX;', 'case RT_RED_MAX: return MPI_SUM;',
      r'^runtime/collectives_(np2|2x2)$',
      "all_reduce(op=max)'s MPI op is MPI_SUM"),
    D('rt_ring_block_len', 'runtime', 'runtime/ring.c',
      'return n / p + (k < n % p);', 'return n / p + (k + 1 < n % p);',
      r'^runtime/collectives_ring_(np3|2x2)$',
      "the ring all-reduce's blocks miss one element when p does not divide n: off by one"),
    D('rt_ckpt_data_offset', 'runtime', 'runtime/checkpoint.c',
      'MPI_File_set_view(fh, (MPI_Offset)hl,', 'MPI_File_set_view(fh, (MPI_Offset)hl + 4,',
      r'^(runtime/ckpt_(save_2x2|load_2x2_on_np1|numpy_reads_it)|checkpoint/resume)$',
      "save writes the data 4 bytes past the .npy header"),
    # ---- the CUDA runtime's simulation build (libspmdrt_cudasim)
    D('sim_softmax_bwd_sign', 'cuda sim', 'runtime/cuda/nn.cu',
      'rt_ld(A, dt, off + j) * (rt_ld(B, dt, off + j) - s)',
      'rt_ld(A, dt, off + j) * (rt_ld(B, dt, off + j) + s)',
      r'^gpu/kernels_sim_np1$',
      "softmax's backward (a warp per row) adds sum(dy * y) instead of subtracting it"),
    D('sim_ce_mean_bwd_scale', 'cuda sim', 'runtime/cuda/nn.cu',
      ': CK[0] != 0        ? rt_ld(DY, ddt, 0) / CK[0]\n                                      : 0.0;\n        int64_t off = r * c;',
      ': CK[0] != 0        ? rt_ld(DY, ddt, 0) / (CK[0] + 1)\n                                      : 0.0;\n        int64_t off = r * c;',
      r'^(gpu/kernels_sim_np1|cuda_simrt/masks_meshes)$',
      "cross_entropy(mean)'s backward divides by the kept rows + 1"),
    D('sim_sum_to_shape_off_by_one', 'cuda sim', 'runtime/cuda/elementwise.cu',
      'for (int64_t k = 0; k < nred; k++) {', 'for (int64_t k = 0; k < nred - 1; k++) {',
      r'^gpu/kernels_sim_np1$',
      'sum_to_shape (the general path) skips the last reduced element'),
    D('sim_last_block_counter_kept', 'cuda sim', 'runtime/cuda/dev.h',
      '                fin(blk);\n                *T = 0;', '                fin(blk);',
      r'^gpu/kernels_sim_np1$',
      "rt_launch_last's last block does not set the block counter back: the next launch never adds its blocks' sums"),
    D('sim_allreduce_op', 'cuda sim', 'runtime/cuda/collectives.cu',
      'MPI_Op mop = rt_mpi_op(ctx, op, dt);', 'MPI_Op mop = rt_mpi_op(ctx, op == RT_RED_MIN ? RT_RED_MAX : op, dt);',
      r'^gpu/kernels_sim_np2$',
      "the simulation's all_reduce (its stand-in for NCCL, through host_mpi) takes the max for op=min"),
    # ---- the emitter
    D('emit_fused_tail_bound', 'emitter', 'compiler/emit_c.c',
      'for (int64_t i_ = b_; i_ < n_; i_++) {', 'for (int64_t i_ = b_; i_ < n_ - 1; i_++) {',
      r'^(e2e/host_math|gradcheck/elementwise)$',
      "a fused elementwise loop's tail stops one element short"),
    D('emit_cuda_sim_fused_bound', 'emitter', 'compiler/emit_cuda.c',
      'for (int64_t i_ = 0; i_ < n_; i_++)\\n', 'for (int64_t i_ = 1; i_ < n_; i_++)\\n',
      r'^cuda_sim/(host_math|block_sp_meshes)$',
      "the CUDA target's fused kernel (simulation loop) starts at element 1"),
    D('emit_cuda_multi_chunk_rows', 'emitter', 'compiler/emit_cuda.c',
      'tab_.p[f_][a_] = mp_[(int64_t)(c_ + f_) * %d + a_];', 'tab_.p[f_][a_] = mp_[(int64_t)f_ * %d + a_];',
      r'^cuda_sim/multi_tensor$',
      "a multi-tensor launch's later chunks take the first chunk's rows' pointers"),
    D('emit_fused_scalar_left', 'emitter', 'compiler/emit_c.c',
      'if (in->op == IR_BINARY_SCALAR && IR_I(in, SCALAR_LEFT)) {',
      'if (in->op == IR_BINARY_SCALAR && IR_I(in, SCALAR_LEFT) && 0) {',
      r'^(gradcheck/elementwise|e2e/host_math)$',
      'a fused s - x (scalar on the left) is emitted as x - s'),
    D('emit_cumsum_bwd_scan', 'emitter', 'compiler/emit_c.c',
      'case IR_CUMSUM_BWD: out(E, ind, "%s = rt_cumsum_bwd(ctx,', 'case IR_CUMSUM_BWD: out(E, ind, "%s = rt_cumsum(ctx,',
      r'^(gradcheck/reductions|codegen_corpus)$',
      "cumsum's backward is emitted as a forward scan (rt_cumsum), not the reversed one"),
]


def log(msg):
    sys.stdout.write(msg + '\n')
    sys.stdout.flush()


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors='replace', **kw)


def tree_files():
    out = subprocess.run(['git', 'ls-files', '-z', '-co', '--exclude-standard'], cwd=ROOT, check=True,
                         stdout=subprocess.PIPE).stdout
    return [p for p in out.decode('utf-8', 'surrogateescape').split('\0') if p and os.path.isfile(os.path.join(ROOT, p))]


def sync(src):
    """src := this tree's files; only the differing ones are rewritten (a new
    mtime, so the build sees them), files not in the tree are removed."""
    files = tree_files()
    keep = set(files)
    n = 0
    for p in files:
        a, b = os.path.join(ROOT, p), os.path.join(src, p)
        with open(a, 'rb') as f:
            data = f.read()
        try:
            with open(b, 'rb') as f:
                same = f.read() == data
        except OSError:
            same = False
        if not same:
            os.makedirs(os.path.dirname(b), exist_ok=True)
            if os.path.lexists(b):
                os.remove(b)
            with open(b, 'wb') as f:
                f.write(data)
            shutil.copymode(a, b)
            n += 1
    gone = 0
    for d, dirs, names in os.walk(src):
        dirs[:] = [x for x in dirs if x != '__pycache__']
        for name in names:
            rel = os.path.relpath(os.path.join(d, name), src)
            if rel not in keep:
                os.remove(os.path.join(d, name))
                gone += 1
    log('scratch %s: %d files, %d rewritten, %d removed' % (src, len(files), n, gone))


def build(bld):
    t = time.time()
    p = run(['cmake', '--build', bld, '-j2'])
    if p.returncode != 0:
        log(p.stdout[-4000:])
    return p.returncode == 0, time.time() - t


def ctest(bld, regex, timeout):
    t = time.time()
    p = run(['ctest', '-R', regex, '-j2', '--timeout', str(timeout), '--output-on-failure'], cwd=bld)
    ran = re.findall(r'Test +#\d+: (\S+) \.', p.stdout)
    failed = re.findall(r'^\s*\d+ - (\S+) \(', p.stdout.split('The following tests FAILED:')[-1], re.M) \
        if 'The following tests FAILED:' in p.stdout else []
    if not ran:
        failed = ['(no test matched %s)' % regex]
    return ran, failed, p.stdout, time.time() - t


def write(path, text):
    os.remove(path)  # a new inode and mtime: the build recompiles it
    with open(path, 'w') as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--scratch', default=os.environ.get('MUTATE_DIR', '/tmp/spmd-mutate'))
    ap.add_argument('--only', help='comma-separated defect names')
    ap.add_argument('--list', action='store_true')
    ap.add_argument('--check', action='store_true', help="check the defects' texts against this tree, no build")
    ap.add_argument('--no-baseline', action='store_true')
    ap.add_argument('--timeout', type=int, default=600, help='per test, seconds')
    ap.add_argument('--keep-going', action='store_true', help='do not stop at a broken baseline')
    a = ap.parse_args()
    defects = DEFECTS
    if a.only:
        names = a.only.split(',')
        unknown = [n for n in names if n not in {d.name for d in DEFECTS}]
        if unknown:
            sys.exit('mutate: no defect %s' % ', '.join(unknown))
        defects = [d for d in DEFECTS if d.name in names]
    if a.list:
        for d in defects:
            log('%-28s %-9s %-30s %s' % (d.name, d.area, d.path, d.what))
        return 0
    bad = []
    for d in defects:
        with open(os.path.join(ROOT, d.path)) as f:
            n = f.read().count(d.old)
        if n != 1:
            bad.append('%s: %s holds its text %d times (not once): %r' % (d.name, d.path, n, d.old))
    for b in bad:
        log('mutate: ' + b)
    if bad or a.check:
        log('mutate: %d defects, %d texts not found once' % (len(defects), len(bad)))
        return 1 if bad else 0
    scratch = os.path.abspath(a.scratch)
    if scratch == ROOT or scratch.startswith(ROOT + os.sep):
        sys.exit('mutate: the scratch directory must be outside the tree')
    src, bld = os.path.join(scratch, 'src'), os.path.join(scratch, 'build')
    os.makedirs(src, exist_ok=True)
    sync(src)
    if not os.path.exists(os.path.join(bld, 'CMakeCache.txt')):
        p = run(['cmake', '-S', src, '-B', bld, '-DCMAKE_BUILD_TYPE=Debug', '-DSPMD_CUDA=OFF'])
        if p.returncode != 0:
            log(p.stdout)
            return 1
    ok, secs = build(bld)
    log('build of the unmutated copy: %s, %.0f s' % ('ok' if ok else 'FAILED', secs))
    if not ok:
        return 1
    if not a.no_baseline:
        names = set()
        for d in defects:  # CMake's regexes take at most 9 groups: one alternation of the names
            names |= set(re.findall(r'Test +#\d+: (\S+)', run(['ctest', '-N', '-R', d.tests], cwd=bld).stdout))
        ran, failed, out, secs = ctest(bld, '^(%s)$' % '|'.join(sorted(names)), a.timeout)
        log('baseline: %d tests, %d failed, %.0f s%s' % (len(ran), len(failed), secs,
                                                        ': ' + ' '.join(failed) if failed else ''))
        if failed and not a.keep_going:
            log(out[-6000:])
            log('mutate: the subsets fail without a defect: fix that first (or --keep-going)')
            return 1
    rows = []
    for d in defects:
        path = os.path.join(src, d.path)
        with open(path) as f:
            orig = f.read()
        write(path, orig.replace(d.old, d.new, 1))
        try:
            ok, bsecs = build(bld)
            if ok:
                ran, failed, out, tsecs = ctest(bld, d.tests, a.timeout)
            else:
                ran, failed, out, tsecs = [], [], '', 0.0
        finally:
            write(path, orig)
        verdict = 'BUILD FAILED' if not ok else ', '.join(failed) if failed else 'NOT CAUGHT'
        rows.append((d, ran, failed, ok, verdict))
        log('%-28s build %3.0f s, %d tests %3.0f s: %s' % (d.name, bsecs, len(ran), tsecs, verdict))
        ok2, _ = build(bld)
        if not ok2:
            log('mutate: the restored copy does not build')
            return 1
    log('')
    log('| defect | area | what | tests run | failed (caught) |')
    log('|---|---|---|---|---|')
    for d, ran, failed, ok, verdict in rows:
        log('| `%s` | %s | %s | %s | %s |' % (d.name, d.area, d.what, ' '.join(ran) or '-', verdict))
    missed = [r[0].name for r in rows if not r[2]]
    log('')
    log('mutate: %d defects, %d caught%s' % (len(rows), len(rows) - len(missed),
                                            ', not caught: ' + ' '.join(missed) if missed else ''))
    return 1 if missed else 0


if __name__ == '__main__':
    sys.exit(main())
