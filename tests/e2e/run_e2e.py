#!/usr/bin/python3
"""run_e2e.py [options] SPMDC FILE.spmd: an end-to-end test (SPEC section 12).

The test file is a .spmd program whose comments say how to run it:

  // ARGS: -D STEPS=5                 spmdc flags for compiling it (optional)
  // E2E: meshes=1,dp=2:tp=1,dp=2:tp=2 rtol=1e-5
  // E2E: expect-output="^step 0 loss"
  // E2E: expect-fail="is not divisible by axis 'dp'"

The program is compiled once (`spmdc ARGS FILE -o TMP/prog`, in the file's
directory) and run under mpirun on every mesh: `dp=2:tp=1` runs 2 ranks with
`--mesh dp=2,tp=1`; `1` is one rank with every axis of the file's `mesh (...)`
line set to 1; axes a mesh does not name are 1. Each run has its own scratch
working directory and a timeout. Then:

* normally every run must exit 0 and print something, and rank 0's output
  (the program's standard output) must be the same on every mesh as on the
  first: the same lines with the same words, and every number within `rtol`
  relative to max(|a|, |b|, 1e-30) (or within `atol`, default 0);
* `expect-output="REGEX"` (repeatable): must match (re.search, MULTILINE)
  the output of every run;
* `expect-fail="REGEX"`: every run must instead exit non-zero (not time out)
  with REGEX matching its standard error and output, and without an internal
  error of Open MPI (`ORTE_ERROR_LOG`: the job must end cleanly);
* `close=A:B:RTOL` (repeatable): on every line where the word A and the word
  B are each followed by a number, the two numbers agree to RTOL (for
  gradients against finite differences); at least one such line is needed;
* `outputs=f.npy,...`: files the program writes (in its working directory)
  that must also agree across meshes (numerically with NumPy, else bytewise);
* `files=a.npy,...`: files next to the test copied into every run directory;
* `args="..."`: extra program arguments; `timeout=S`: per run (60 s);
* `pin="LINE"` (repeatable; every test but an expect-fail one has one):
  the first output line with LINE's words and integers must have LINE's
  other numbers within `pin-rtol` (default: the larger of rtol and
  target-rtol, as a GPU's run is compared) on every run: the values
  themselves, from an independent reference where one exists
  (tests/e2e/reference.py), not only their agreement across meshes;
  NaN agrees with nothing, itself included, anywhere in the comparisons;
* `target-rtol=R`: the tolerance against another target's output
  (--reference) where it may legitimately differ by more than rtol (a
  fusion that rounds differently on one target); rtol by default.

Exit status: 0 pass, 1 fail, 2 a malformed test, 77 skipped because spmdc
reports that compiling to an executable is not implemented yet (set
SPMD_E2E_NO_SKIP=1 to fail instead). Options: --mpirun PATH (or $MPIRUN),
--keep (keep the temporary directory), -v (print every run's output).

--cuda-sim: the CUDA target's simulation build instead (SPMDC_CUDA_SIM=1
spmdc --target=cuda: the kernels compiled by the host C++ compiler and
launched as loops over the same per-element bodies, on the CPU runtime), run
on the first and the last mesh only; besides the checks above, each run must
print exactly what the CPU target's program prints on that mesh.
--sim-runtime LIB (with --cuda-sim): link the simulation with LIB, the CUDA
runtime's simulation build (libspmdrt_cudasim.so: its kernels as host loops
on guarded device memory), instead of the CPU runtime.  A file whose kernels
differ there in the last bits (attention: runtime/cuda/attention.cu is its
own kernel) sets `sim-runtime-atol=A`: then the simulation's output need
only match the CPU's within target-rtol relatively or A absolutely (the
same lines and words), not byte for byte.

For a machine with a GPU but without our compiler (tests/gpu/bundle.sh
prepares, tests/gpu/run.sh runs):
  --compile-only OUT    compile the program (with --spmdc-flag FLAG, repeatable,
                        before the file's ARGS) to OUT and stop
  --save-outputs DIR    after the checks, keep each mesh's rank-0 output as
                        DIR/MESH.out and its `outputs=` files as DIR/MESH/NAME
  --prebuilt PROG       run PROG instead of compiling (SPMDC is not used)
  --reference DIR       besides the checks above, each mesh's output must
                        match DIR/MESH.out (and the `outputs=` files) within
                        rtol/atol; meshes without a reference are skipped
  --ends                run the first and the last mesh only
"""
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
DEFAULT_TIMEOUT = 60.0
# Open MPI's own errors, which an expected runtime error must not cause: the
# runtime ends a job that failed on every rank without MPI_Abort, and one
# that failed on some ranks with a single rank's MPI_Abort
MPI_INTERNAL_ERRORS = ('ORTE_ERROR_LOG', 'PMIX_ERROR')

KNOWN_KEYS = {'meshes', 'rtol', 'atol', 'expect-output', 'expect-fail', 'close', 'outputs',
              'files', 'args', 'timeout', 'target-rtol', 'pin', 'pin-rtol', 'sim-runtime-atol'}
REPEATABLE = {'expect-output', 'close', 'pin'}
INTEGER = re.compile(r'[-+]?\d+')

# a sanitizer's report (tests/README.md: the harnesses fail a test on any);
# the sanitizer build also compiles every program with
# -fno-sanitize-recover=undefined, so undefined behaviour stops it
SANITIZER = re.compile(r'runtime error:|ERROR: (?:Address|Leak|Thread|Memory|UndefinedBehavior)Sanitizer|'
                       r'SUMMARY: (?:Address|UndefinedBehavior)Sanitizer')

NUMBER = re.compile(r'(?<![\w.])[-+]?(?:(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)'
                    r'(?![\w.])', re.IGNORECASE)


class TestError(Exception):
    """The test file itself is malformed (exit 2)."""


# ------------------------------------------------------------------ parsing

def strip_comments(text):
    return re.sub(r'//[^\n]*', '', text)


def mesh_axes(text):
    """Axis names of the file's `mesh (a[: n], ...)` declaration, [] if none."""
    m = re.search(r'^\s*mesh\s*\(([^)]*)\)', strip_comments(text), re.MULTILINE)
    if not m:
        return []
    axes = []
    for part in m.group(1).split(','):
        name = part.split(':')[0].strip()
        if not re.fullmatch(r'[A-Za-z_]\w*', name):
            raise TestError('cannot read the mesh declaration: %r' % m.group(0).strip())
        axes.append(name)
    return axes


def parse_header(text):
    """The // E2E: settings and // ARGS: flags of a test file."""
    opts = {k: [] for k in REPEATABLE}
    spmdc_args = []
    for lineno, line in enumerate(text.splitlines(), 1):
        m = re.match(r'\s*//\s*(E2E|ARGS):(.*)$', line)
        if not m:
            continue
        try:
            words = shlex.split(m.group(2))
        except ValueError as e:
            raise TestError('line %d: %s' % (lineno, e))
        if m.group(1) == 'ARGS':
            spmdc_args += words
            continue
        for w in words:
            key, eq, value = w.partition('=')
            if not eq or key not in KNOWN_KEYS:
                raise TestError('line %d: unknown E2E setting %r (known: %s)'
                                % (lineno, w, ', '.join(sorted(KNOWN_KEYS))))
            if key in REPEATABLE:
                opts[key].append(value)
            elif key in opts:
                raise TestError('line %d: %s given twice' % (lineno, key))
            else:
                opts[key] = value
    if not any(re.match(r'\s*//\s*E2E:', l) for l in text.splitlines()):
        raise TestError('no `// E2E:` line: an e2e test says how to run it, e.g. '
                        '`// E2E: meshes=1,dp=2:tp=1 rtol=1e-5`')
    if 'expect-fail' not in opts and not opts['pin']:
        raise TestError('no `pin=`: an e2e test pins values of its output (the first and the last), '
                        'not only their agreement across meshes, e.g. `// E2E: pin="step 0 loss 0.917"`')
    return opts, spmdc_args


def parse_float(opts, key, default):
    if key not in opts:
        return default
    try:
        v = float(opts[key])
    except ValueError:
        raise TestError('%s=%r is not a number' % (key, opts[key]))
    if not v >= 0:
        raise TestError('%s must be >= 0' % key)
    return v


def parse_meshes(spec, axes):
    """[(label, nranks, '--mesh' value or None)]"""
    meshes = []
    for item in spec.split(','):
        item = item.strip()
        if not item:
            raise TestError('empty mesh in meshes=%s' % spec)
        sizes = {a: 1 for a in axes}
        if item != '1':
            for part in item.split(':'):
                name, eq, n = part.partition('=')
                if not eq or not n.isdigit() or int(n) < 1:
                    raise TestError('mesh %r: expected AXIS=N[:AXIS=N...] or 1' % item)
                if name not in sizes:
                    raise TestError('mesh %r: no axis %r in the mesh declaration (axes: %s)'
                                    % (item, name, ', '.join(axes) or 'none'))
                sizes[name] = int(n)
        nranks = 1
        for a in axes:
            nranks *= sizes[a]
        flag = ','.join('%s=%d' % (a, sizes[a]) for a in axes) if axes else None
        meshes.append(('1' if item == '1' else flag, nranks, flag))
    return meshes


def parse_close(items):
    out = []
    for c in items:
        parts = c.split(':')
        if len(parts) != 3:
            raise TestError('close=%r: expected A:B:RTOL' % c)
        try:
            tol = float(parts[2])
        except ValueError:
            raise TestError('close=%r: RTOL is not a number' % c)
        out.append((parts[0], parts[1], tol))
    return out


def list_opt(opts, key):
    return [f.strip() for f in opts.get(key, '').split(',') if f.strip()]


# --------------------------------------------------------------- comparing

def tokenize(line):
    """(words with numbers replaced by #, [numbers as text])"""
    nums = NUMBER.findall(line)
    return NUMBER.sub('#', line).split(), nums


def num_close(a, b, rtol, atol):
    """(a and b agree, their relative difference); NaN agrees with nothing,
    itself included: a run that diverges the same way on every mesh fails"""
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return False, float('nan')
    if math.isinf(x) or math.isinf(y):
        return x == y, 0.0 if x == y else float('inf')
    diff = abs(x - y)
    rel = diff / max(abs(x), abs(y), 1e-30)
    return rel <= rtol or diff <= atol, rel


def compare_outputs(ref_label, ref, label, out, rtol, atol):
    """[] when out matches ref, else lines describing the differences."""
    a, b = ref.splitlines(), out.splitlines()
    w = max(len(ref_label), len(label)) + 6
    shape_ok = len(a) == len(b) and all(tokenize(x)[0] == tokenize(y)[0] for x, y in zip(a, b))
    if not shape_ok:
        import difflib
        msg = ['the output has different lines or words (%d lines vs %d):' % (len(a), len(b))]
        diff = list(difflib.unified_diff(a, b, 'mesh ' + ref_label, 'mesh ' + label, lineterm=''))
        msg += ['  ' + d for d in diff[:60]]
        if len(diff) > 60:
            msg.append('  ... (%d more diff lines)' % (len(diff) - 60))
        return msg
    msg, shown = [], 0
    for i, (x, y) in enumerate(zip(a, b), 1):
        bad = []
        for k, (p, q) in enumerate(zip(tokenize(x)[1], tokenize(y)[1]), 1):
            ok, rel = num_close(p, q, rtol, atol)
            if not ok:
                bad.append('number %d: %s vs %s (relative difference %.3g > rtol %g)'
                           % (k, p, q, rel, rtol))
        if bad:
            if shown < 10:
                msg.append('line %d: %s' % (i, '; '.join(bad)))
                msg.append('  %-*s %s' % (w, 'mesh ' + ref_label + ':', x))
                msg.append('  %-*s %s' % (w, 'mesh ' + label + ':', y))
            shown += 1
    if shown > 10:
        msg.append('... %d more lines differ' % (shown - 10))
    return msg


def check_close(out, close):
    msg = []
    for a, b, tol in close:
        pat_a = re.compile(r'(?<!\S)%s\s+(%s)' % (re.escape(a), NUMBER.pattern), re.IGNORECASE)
        pat_b = re.compile(r'(?<!\S)%s\s+(%s)' % (re.escape(b), NUMBER.pattern), re.IGNORECASE)
        seen = 0
        for line in out.splitlines():
            ma, mb = pat_a.search(line), pat_b.search(line)
            if not (ma and mb):
                continue
            seen += 1
            ok, rel = num_close(ma.group(1), mb.group(1), tol, 0.0)
            if not ok:
                msg.append('close=%s:%s:%g: %s vs %s (relative difference %.3g) in: %s'
                           % (a, b, tol, ma.group(1), mb.group(1), rel, line))
        if not seen:
            msg.append('close=%s:%s:%g: no output line has both `%s NUMBER` and `%s NUMBER`'
                       % (a, b, tol, a, b))
    return msg


def check_pins(out, pins, rtol):
    """Each pin is a line the output must have: the first output line with
    the same words (numbers masked) and the same integers has every other
    number within rtol of the pin's (NaN matches nothing)."""
    msg = []
    lines = [(l, tokenize(l)) for l in out.splitlines()]
    for pin in pins:
        words, nums = tokenize(pin)
        ints = [(k, int(n)) for k, n in enumerate(nums) if INTEGER.fullmatch(n)]
        line = next((l for l, (w, n) in lines if w == words and all(INTEGER.fullmatch(n[k]) and int(n[k]) == v
                                                                     for k, v in ints)), None)
        if line is None:
            msg.append('pin=%r: no output line like it' % pin)
            continue
        bad = [(p, q, rel) for p, q in zip(nums, tokenize(line)[1])
               for ok, rel in [num_close(p, q, rtol, 0.0)] if not ok]
        if bad:
            msg.append('pin=%r: the output says %r (%s; pin-rtol %g)'
                       % (pin, line, ', '.join('%s, not %s: relative difference %.3g' % (q, p, rel)
                                               for p, q, rel in bad), rtol))
    return msg


def compare_files(ref_dir, ref_label, run_dir, label, names, rtol, atol):
    msg = []
    for name in names:
        p, q = os.path.join(ref_dir, name), os.path.join(run_dir, name)
        missing = [l for l, f in ((ref_label, p), (label, q)) if not os.path.isfile(f)]
        if missing:
            msg.append('output file %s was not written on mesh %s' % (name, ', '.join(missing)))
            continue
        if name.endswith('.npy'):
            try:
                import numpy as np
            except ImportError:
                np = None
            if np is not None:
                x, y = np.load(p), np.load(q)
                if x.dtype != y.dtype or x.shape != y.shape:
                    msg.append('%s: %s %s on mesh %s, %s %s on mesh %s'
                               % (name, x.dtype, x.shape, ref_label, y.dtype, y.shape, label))
                    continue
                x64, y64 = x.astype(np.float64), y.astype(np.float64)
                diff = np.abs(x64 - y64)
                scale = np.maximum(np.maximum(np.abs(x64), np.abs(y64)), 1e-30)
                # (NaN agrees with nothing, not even NaN)
                bad = ~((diff <= rtol * scale) | (diff <= atol) | (x64 == y64))
                if bad.any():
                    idx = np.argwhere(bad)[0]
                    msg.append('%s: %d elements differ beyond rtol %g; first at %s: %r (mesh %s) '
                               'vs %r (mesh %s)' % (name, int(bad.sum()), rtol, tuple(int(i) for i in idx),
                                                    float(x64[tuple(idx)]), ref_label,
                                                    float(y64[tuple(idx)]), label))
                continue
        with open(p, 'rb') as f1, open(q, 'rb') as f2:
            if f1.read() != f2.read():
                msg.append('%s differs bytewise between mesh %s and mesh %s' % (name, ref_label, label))
    return msg


# ------------------------------------------------------------------ running

def run_command(cmd, cwd, env, timeout):
    """(returncode or None on timeout, stdout, stderr, seconds); kills the
    whole process group (mpirun and its ranks) on timeout."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        rc = None
        for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                out, err = proc.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                out, err = b'', b''
    finally:
        # ranks that left mpirun's process group behind
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return (rc, out.decode('utf-8', 'replace'), err.decode('utf-8', 'replace'),
            time.monotonic() - t0)


def indent(text, limit=40):
    lines = text.rstrip('\n').splitlines()
    if len(lines) > limit:
        lines = lines[:limit // 2] + ['... (%d lines)' % (len(lines) - limit)] + lines[-limit // 2:]
    return ''.join('    | %s\n' % l for l in lines) if lines else '    | (nothing)\n'


def main(argv):
    mpirun = os.environ.get('MPIRUN', 'mpirun')
    keep = verbose = cuda_sim = ends = False
    compile_only = save_outputs = prebuilt = reference = sim_runtime = None
    spmdc_flags = []
    pos = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == '--mpirun' and i + 1 < len(argv):
            mpirun = argv[i + 1]
            i += 1
        elif a.startswith('--mpirun='):
            mpirun = a.split('=', 1)[1]
        elif a == '--keep':
            keep = True
        elif a == '--cuda-sim':
            cuda_sim = True
        elif a == '--sim-runtime' and i + 1 < len(argv):
            sim_runtime = os.path.abspath(argv[i + 1])
            i += 1
        elif a == '--ends':
            ends = True
        elif a in ('--compile-only', '--save-outputs', '--prebuilt', '--reference',
                   '--spmdc-flag') and i + 1 < len(argv):
            v = argv[i + 1]
            i += 1
            if a == '--compile-only':
                compile_only = os.path.abspath(v)
            elif a == '--save-outputs':
                save_outputs = os.path.abspath(v)
            elif a == '--prebuilt':
                prebuilt = os.path.abspath(v)
            elif a == '--reference':
                reference = os.path.abspath(v)
            else:
                spmdc_flags.append(v)
        elif a == '-v':
            verbose = True
        elif a in ('-h', '--help'):
            print(__doc__)
            return 0
        else:
            pos.append(a)
        i += 1
    if len(pos) != 2:
        sys.stderr.write('usage: run_e2e.py [--mpirun PATH] [--keep] [-v] SPMDC FILE.spmd\n')
        return 2
    spmdc, path = os.path.abspath(pos[0]), os.path.abspath(pos[1])
    name = os.path.basename(path)
    srcdir = os.path.dirname(path)

    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            text = f.read()
        opts, spmdc_args = parse_header(text)
        axes = mesh_axes(text)
        meshes = parse_meshes(opts.get('meshes', '1'), axes)
        rtol = parse_float(opts, 'rtol', 1e-5)
        target_rtol = parse_float(opts, 'target-rtol', rtol)
        atol = parse_float(opts, 'atol', 0.0)
        sim_atol = parse_float(opts, 'sim-runtime-atol', None) if sim_runtime else None
        timeout = parse_float(opts, 'timeout', DEFAULT_TIMEOUT)
        close = parse_close(opts['close'])
        expect_output = [re.compile(r, re.MULTILINE) for r in opts['expect-output']]
        expect_fail = re.compile(opts['expect-fail'], re.MULTILINE) if 'expect-fail' in opts else None
        files, outputs = list_opt(opts, 'files'), list_opt(opts, 'outputs')
        prog_args = shlex.split(opts.get('args', ''))
        pins, pin_rtol = opts['pin'], parse_float(opts, 'pin-rtol', max(rtol, target_rtol))
        if cuda_sim or ends:
            meshes = meshes[:1] + meshes[-1:] if len(meshes) > 1 else meshes
    except (TestError, re.error, OSError) as e:
        print('ERROR %s: %s' % (name, e))
        return 2

    tmp = tempfile.mkdtemp(prefix='e2e_%s_' % os.path.splitext(name)[0])
    try:
        if compile_only:
            return compile_program(spmdc, spmdc_flags + spmdc_args, path, name, srcdir, tmp,
                                   compile_only)
        return run_test(spmdc, path, name, srcdir, tmp, spmdc_flags + spmdc_args, meshes, rtol,
                        atol, timeout, close, expect_output, expect_fail, files, outputs,
                        prog_args, mpirun, verbose, cuda_sim, prebuilt, save_outputs, reference,
                        target_rtol, sim_runtime, pins, pin_rtol, sim_atol)
    finally:
        if keep:
            print('kept %s' % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def test_env():
    env = dict(os.environ)
    env.update({'OPENBLAS_NUM_THREADS': '1', 'OMPI_MCA_rmaps_base_oversubscribe': '1'})
    env.setdefault('ASAN_OPTIONS', 'detect_leaks=0')
    env.setdefault('UBSAN_OPTIONS', 'halt_on_error=1:exitcode=98:print_stacktrace=1')
    return env


def sanitizer_report(*texts):
    """The first line of a sanitizer's report in texts, else None"""
    for t in texts:
        m = SANITIZER.search(t)
        if m:
            return t[t.rfind('\n', 0, m.start()) + 1:].split('\n', 1)[0]
    return None


def compile_program(spmdc, spmdc_args, path, name, srcdir, tmp, out_path):
    """--compile-only: the program for another machine (0, or 1 on failure)"""
    cmd = [spmdc] + [a.replace('%S', srcdir).replace('%t', tmp) for a in spmdc_args]
    cmd += [path, '-o', out_path]
    rc, out, err, secs = run_command(cmd, srcdir, test_env(), 600)
    if rc != 0 or not os.path.isfile(out_path):
        print('FAIL %s: compiling failed: %s\n%s' % (name, ' '.join(shlex.quote(c) for c in cmd),
                                                     ''.join(indent(t) for t in (out, err))))
        return 1
    print('compiled %s in %.1f s: %s' % (name, secs, out_path))
    return 0


def mesh_file(label):
    return re.sub(r'[^\w=]', '_', label)


def run_test(spmdc, path, name, srcdir, tmp, spmdc_args, meshes, rtol, atol, timeout, close,
             expect_output, expect_fail, files, outputs, prog_args, mpirun, verbose, cuda_sim=False,
             prebuilt=None, save_outputs=None, reference=None, target_rtol=None,
             sim_runtime=None, pins=(), pin_rtol=1e-5, sim_atol=None):
    def subst(a, rundir=''):
        return a.replace('%S', srcdir).replace('%t', rundir or tmp)

    env = test_env()
    if reference:  # only the meshes the reference machine ran
        meshes = [m for m in meshes if os.path.isfile(os.path.join(reference, mesh_file(m[0]) + '.out'))]
        if not meshes:
            print('FAIL %s: no reference output in %s' % (name, reference))
            return 1

    # --- compile once
    prog = prebuilt or os.path.join(tmp, 'prog')
    cmd = [spmdc] + [subst(a) for a in spmdc_args] + [path, '-o', prog]
    rc, out, err, secs = (0, '', '', 0.0) if prebuilt else run_command(cmd, srcdir, env, 300)
    if rc != 0 or not os.path.isfile(prog):
        if rc is not None and 'not implemented' in err and os.environ.get('SPMD_E2E_NO_SKIP') != '1':
            print('SKIP %s: spmdc cannot compile to an executable yet:\n%s' % (name, indent(err)))
            return SKIP
        what = 'timed out' if rc is None else 'exited %d' % rc if rc else 'wrote no program'
        print('FAIL %s: compiling failed (%s): %s\n%s'
              % (name, what, ' '.join(shlex.quote(c) for c in cmd),
                 ''.join(indent(t) for t in (out, err) if t.strip()) or indent('')))
        return 1
    report = sanitizer_report(out, err)
    if report:
        print('FAIL %s: a sanitizer report while compiling: %s\n%s' % (name, report, indent(err)))
        return 1
    if not prebuilt:
        print('compiled %s in %.1f s' % (name, secs))
    ref_prog = None
    if cuda_sim:  # prog becomes the simulation; the CPU's is the reference
        ref_prog, prog = prog, os.path.join(tmp, 'prog_sim')
        cmd = [spmdc, '--target=cuda'] + [subst(a) for a in spmdc_args] + [path, '-o', prog]
        sim_env = dict(env, SPMDC_CUDA_SIM='1')
        if sim_runtime:  # the CUDA runtime's simulation build instead of the CPU's
            sim_env.update(SPMDC_RT_LIB=sim_runtime,
                           SPMDC_CFLAGS='-Wl,-rpath,' + os.path.dirname(sim_runtime))
        rc, out, err, secs = run_command(cmd, srcdir, sim_env, 300)
        if rc != 0 or not os.path.isfile(prog):
            print('FAIL %s: the simulation build failed: %s\n%s'
                  % (name, ' '.join(shlex.quote(c) for c in cmd), ''.join(indent(t) for t in (out, err))))
            return 1
        print('compiled the CUDA target (simulation) in %.1f s' % secs)

    # --- run on every mesh
    failures, results = [], []
    for label, nranks, flag in meshes:
        rundir = os.path.join(tmp, 'mesh_' + mesh_file(label))
        os.makedirs(rundir)
        for f in files:
            shutil.copy(os.path.join(srcdir, f), rundir)
        cmd = [mpirun, '--allow-run-as-root', '--oversubscribe', '-np', str(nranks), prog]
        cmd += (['--mesh', flag] if flag else []) + [subst(a, rundir) for a in prog_args]
        rc, out, err, secs = run_command(cmd, rundir, env, timeout)
        head = 'mesh %s (%d rank%s)' % (label, nranks, '' if nranks == 1 else 's')
        problems = []
        report = sanitizer_report(err, out)
        if report:
            problems.append('a sanitizer report: %s' % report)
        if rc is None:
            problems.append('timed out after %g s (killed)' % timeout)
        elif expect_fail is not None:
            if rc == 0:
                problems.append('exited 0, expected a failure matching %r' % expect_fail.pattern)
            elif not expect_fail.search(err + out):
                problems.append('failed (exit %d) but nothing matches %r' % (rc, expect_fail.pattern))
            for noise in MPI_INTERNAL_ERRORS:  # the job must end cleanly (issue 32)
                if noise in err + out:
                    problems.append('an internal error of the MPI library after the failure: %r' % noise)
        elif rc != 0:
            problems.append('exited %d' % rc)
        elif not out.strip():
            problems.append('printed nothing (an e2e test compares what rank 0 prints)')
        if rc is not None and (expect_fail is None or rc != 0):
            for r in expect_output:
                if not r.search(out):
                    problems.append('no output line matches expect-output %r' % r.pattern)
            if expect_fail is None and rc == 0:
                problems += check_close(out, close)
                problems += check_pins(out, pins, pin_rtol)
        if ref_prog and rc is not None:  # the CPU target's run on the same mesh
            refdir = rundir + '_cpu'
            os.makedirs(refdir)
            for f in files:
                shutil.copy(os.path.join(srcdir, f), refdir)
            rcmd = [mpirun, '--allow-run-as-root', '--oversubscribe', '-np', str(nranks), ref_prog]
            rcmd += (['--mesh', flag] if flag else []) + [subst(a, refdir) for a in prog_args]
            rrc, rout, _, _ = run_command(rcmd, refdir, env, timeout)
            if sim_atol is not None and rrc == rc == 0:  # a kernel of its own that rounds differently
                diff = compare_outputs('the CPU target', rout, 'the simulation', out, target_rtol, sim_atol)
                if diff:
                    problems.append('the simulation differs from the CPU target by more than rtol %g, atol %g '
                                    '(sim-runtime-atol):\n      %s' % (target_rtol, sim_atol, '\n      '.join(diff)))
            elif rrc != rc or rout != out:
                problems.append('the simulation (exit %s) does not print what the CPU target prints (exit %s):\n%s'
                                % (rc, rrc, indent(rout)))
        if reference and rc is not None and expect_fail is None:  # another machine's run
            with open(os.path.join(reference, mesh_file(label) + '.out'), encoding='utf-8',
                      errors='replace') as f:
                ref_out = f.read()
            trtol = rtol if target_rtol is None else target_rtol
            diff = compare_outputs('reference ' + label, ref_out, label, out, trtol, atol)
            diff += compare_files(os.path.join(reference, mesh_file(label)), 'reference ' + label,
                                  rundir, label, outputs, trtol, atol)
            if diff:
                problems.append('differs from the reference output %s (rtol %g):\n      %s'
                                % (os.path.join(reference, mesh_file(label) + '.out'), trtol,
                                   '\n      '.join(diff)))
        status = 'FAILED' if problems else ('failed as expected' if expect_fail else 'ok')
        print('  %-32s %-18s %6.2f s  %d lines' % (head, status, secs, len(out.splitlines())))
        if problems or verbose:
            for p in problems:
                print('    ' + p)
            print('    $ ' + ' '.join(shlex.quote(c) for c in cmd))
            print('    stdout:\n' + indent(out) + '    stderr:\n' + indent(err))
        if problems:
            failures.append(head)
        else:
            results.append((label, out, rundir))

    # --- the same output on every mesh
    if expect_fail is None and results:
        ref_label, ref_out, ref_dir = results[0]
        for label, out, rundir in results[1:]:
            msg = compare_outputs(ref_label, ref_out, label, out, rtol, atol)
            msg += compare_files(ref_dir, ref_label, rundir, label, outputs, rtol, atol)
            if msg:
                print('  mesh %s differs from mesh %s (rtol %g):' % (label, ref_label, rtol))
                for m in msg:
                    print('    ' + m)
                failures.append('mesh %s vs mesh %s' % (label, ref_label))
        if len(results) == len(meshes) and not failures and len(results) > 1:
            print('  the same output on all %d meshes (rtol %g)' % (len(results), rtol))
    if failures:
        print('FAIL %s: %s' % (name, '; '.join(failures)))
        return 1
    if save_outputs:
        os.makedirs(save_outputs, exist_ok=True)
        for label, out, rundir in results:
            with open(os.path.join(save_outputs, mesh_file(label) + '.out'), 'w', encoding='utf-8') as f:
                f.write(out)
            if outputs:
                os.makedirs(os.path.join(save_outputs, mesh_file(label)), exist_ok=True)
                for o in outputs:
                    dest = os.path.join(save_outputs, mesh_file(label), o)
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    shutil.copy(os.path.join(rundir, o), dest)
    print('PASS %s' % name)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
