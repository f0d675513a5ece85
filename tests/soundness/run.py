#!/usr/bin/env python3
"""run.py: property-based soundness test of spmdc (tests/README.md).

  run.py SPMDC RUNTIME_INCLUDE RUNTIME_LIB BLAS_LIB [--seed S] [--count N]
         [--batch K] [--no-shrink] [--keep DIR]

Generates N random well-typed global-SPMD programs (gen.py) from seed S and
checks, for each:
  1. spmdc accepts it;
  2. its loss and every gradient element agree on 1 rank and on the meshes
     dp=1,tp=2  dp=2,tp=1  dp=2,tp=2 (tests/gradcheck/gradcheck.c with
     SPMD_GRADCHECK_DUMP), and its gradients match central finite
     differences (on 1 rank; so on every mesh, since they agree);
  3. every mutant (a collective removed, src/dst swapped, out_partial_axes
     dropped, a shard dim changed) that the generator's typing model rejects
     is rejected by `spmdc --check`.  An accepted mutant is run like a
     program: if its results differ across meshes or from finite
     differences it is a soundness bug, else the model is stricter than the
     rules (a generator bug: an equivalent mutant).
First, every program in regress/ (a failure once found, shrunk) is run as in
2.  Programs are compiled K to a file.  A failing program is shrunk (statements
removed while the model accepts it and it still fails) and printed.
Exit 0 when everything holds, 1 otherwise.
"""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GRADCHECK = os.path.join(HERE, '..', 'gradcheck', 'gradcheck.c')
MESHES = [('dp=1,tp=1', 1), ('dp=1,tp=2', 2), ('dp=2,tp=1', 2), ('dp=2,tp=2', 4)]
RTOL, ATOL = 1e-9, 1e-11


class Runner:
    def __init__(self, args, work):
        self.a = args
        self.work = work
        self.n = 0
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',
                        OMPI_MCA_rmaps_base_oversubscribe='1', OPENBLAS_NUM_THREADS='1')

    def path(self, name):
        self.n += 1
        return os.path.join(self.work, '%d_%s' % (self.n, name))

    def check(self, text):
        """spmdc --check: (exit status, diagnostics)."""
        f = self.path('check.spmd')
        with open(f, 'w') as fp:
            fp.write(text)
        r = subprocess.run([self.a.spmdc, '--check', '--color=never', '--max-errors=0', f],
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stderr

    def run(self, text):
        """Compiles `text` with gradcheck.c and runs it on every mesh.
        Returns (problems, values): problems is a list of strings keyed by
        export fn name ({fn: [..]}); values {mesh: {fn: {key: [floats]}}}."""
        base = self.path('prog')
        with open(base + '.spmd', 'w') as fp:
            fp.write(text)
        problems = {}
        r = subprocess.run([self.a.spmdc, '-S', base + '.spmd', '-o', base + '.c'],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            problems.setdefault('*', []).append('spmdc -S failed:\n' + r.stderr[-3000:])
            return problems, {}
        cc = ['mpicc', '-std=c17', '-O1', '-Wall', '-Wextra', '-Werror'] + \
            os.environ.get('SPMD_RT_CFLAGS', '').split() + \
            ['-I' + self.a.rtinc, '-include', base + '.h', base + '.c', GRADCHECK, '-o', base,
             self.a.rtlib, self.a.blas] + os.environ.get('SPMD_RT_LIBS', '').split() + ['-lm']
        r = subprocess.run(cc, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            problems.setdefault('*', []).append('the generated C does not compile:\n' + r.stderr[-3000:])
            return problems, {}
        values = {}
        # the values on every mesh (SPMD_GRADCHECK_DUMP), then finite
        # differences on one rank: the values agree across meshes, so the
        # gradients on every mesh are checked
        for mesh, n, dump in [(m, k, True) for m, k in MESHES] + [(MESHES[0][0], MESHES[0][1], False)]:
            vf = base + '.%s.values' % mesh.replace(',', '_').replace('=', '')
            env = dict(self.env, SPMD_GRADCHECK_DUMP=vf if dump else '')
            try:
                r = subprocess.run(['mpirun', '--oversubscribe', '-np', str(n), base, '--mesh', mesh],
                                   capture_output=True, text=True, timeout=120, env=env)
            except subprocess.TimeoutExpired:
                problems.setdefault('*', []).append('mesh %s: timed out' % mesh)
                continue
            for line in r.stdout.splitlines():
                m = re.match(r'FAIL (\w+)', line)
                if m:
                    problems.setdefault(m.group(1).rstrip(':'), []).append(
                        'mesh %s: finite differences: %s' % (mesh, line))
            if r.returncode != 0 and not any(l.startswith('FAIL') for l in r.stdout.splitlines()):
                problems.setdefault('*', []).append('mesh %s: exit %d\n%s%s' % (
                    mesh, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
            if dump:
                values[mesh] = read_values(vf)
        ref = values.get(MESHES[0][0], {})
        for mesh, vals in values.items():
            for fn, keys in ref.items():
                for key, xs in keys.items():
                    ys = vals.get(fn, {}).get(key)
                    bad = differs(xs, ys)
                    if bad:
                        problems.setdefault(fn, []).append(
                            'mesh %s: %s %s differs from 1 rank: %s' % (mesh, fn, key, bad))
        return problems, values


def read_values(path):
    """gradcheck.c's SPMD_GRADCHECK_DUMP file: {fn: {'loss': [v], 'd/dARG': [...]}}."""
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        w = line.split()
        if w[0] == 'value':
            out.setdefault(w[1], {})['loss'] = [float(w[2])]
        elif w[0] == 'grad':
            out.setdefault(w[1], {}).setdefault('d/d' + w[2], []).append(float(w[4]))
    return out


def differs(xs, ys):
    if ys is None:
        return 'missing'
    if len(xs) != len(ys):
        return '%d values, %d on 1 rank' % (len(ys), len(xs))
    for i, (x, y) in enumerate(zip(xs, ys)):
        if abs(x - y) > ATOL + RTOL * max(abs(x), abs(y)):
            return 'element %d: %.17g here, %.17g on 1 rank' % (i, y, x)
    return None


def header():
    return 'mesh (dp, tp: 2);\n\n'


class Failure:
    def __init__(self, kind, program, detail, mutant=None):
        self.kind, self.program, self.detail, self.mutant = kind, program, detail, mutant


def check_program(rn, p):
    """The failures of one program alone (used by the shrinker)."""
    rc, err = rn.check(header() + p.text())
    if rc != 0:
        return 'rejected: ' + first_error(err)
    probs, _ = rn.run(header() + p.text())
    if probs:
        return '; '.join(x.splitlines()[0] for v in probs.values() for x in v)
    return None


def first_error(err):
    for line in err.splitlines():
        if 'error:' in line:
            return line.split('error:', 1)[1].strip()
    return err.strip()[:200]


def shrink(rn, p, still_fails):
    """Removes body statements (their uses take the statement's first
    operand) and unused parameters while the model accepts the program and
    `still_fails` holds.  Returns the smallest program found."""
    progress = True
    tries = 0
    while progress and tries < 200:
        progress = False
        for i in range(len(p.body) - 1, -1, -1):
            st = p.body[i]
            for repl in dict.fromkeys(st.args):
                q = p.copy()
                del q.body[i]
                for s in q.body:
                    s.args = [repl if a == st.name else a for a in s.args]
                used = {a for s in q.body for a in s.args}
                q.params = [(n, t) for n, t in q.params if n in used or not q.body]
                if not q.params:
                    continue
                try:
                    q.typecheck()
                except (gen.Reject, IndexError, KeyError):
                    continue
                tries += 1
                if still_fails(q):
                    p = q
                    progress = True
                    break
            if progress:
                break
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('spmdc')
    ap.add_argument('rtinc')
    ap.add_argument('rtlib')
    ap.add_argument('blas')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--count', type=int, default=50)
    ap.add_argument('--batch', type=int, default=10)
    ap.add_argument('--no-shrink', action='store_true')
    ap.add_argument('--keep')
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix='soundness-')
    os.makedirs(work, exist_ok=True)
    rn = Runner(a, work)
    t0 = time.time()
    failures = []
    nmut = 0
    kinds = {}
    nregress_failed = []
    # 0. the regressions: programs these checks once found wrong
    regress = os.path.join(HERE, 'regress')
    for f in sorted(os.listdir(regress)) if os.path.isdir(regress) else []:
        if f.endswith('.spmd'):
            probs, _ = rn.run(open(os.path.join(regress, f)).read())
            for why in probs.values():
                print('FAIL regress/%s: %s' % (f, '; '.join(why)))
                nregress_failed.append(f)
    for b0 in range(0, a.count, a.batch):
        progs = [gen.generate('%d:%d' % (a.seed, i), 'p%d' % i) for i in range(b0, min(a.count, b0 + a.batch))]
        by_name = {p.name: p for p in progs}
        # 1. accepted
        rc, err = rn.check(gen.render(progs, header()))
        if rc != 0:
            ok = []
            for p in progs:
                rc1, err1 = rn.check(header() + p.text())
                if rc1 != 0:
                    failures.append(Failure('rejected', p, first_error(err1)))
                else:
                    ok.append(p)
            progs = ok
        # 2. the same numbers on every mesh, and finite differences
        if progs:
            probs, _ = rn.run(gen.render(progs, header()))
            if '*' in probs:   # a whole-file problem: find the programs that have it
                for p in progs:
                    why = check_program(rn, p)
                    if why:
                        failures.append(Failure('run', p, why))
            else:
                for fn, why in probs.items():
                    failures.append(Failure('run', by_name[fn], '; '.join(why)))
        # 3. mutants
        for p in progs:
            rng = random.Random('%d:%s:mutants' % (a.seed, p.name))
            for kind, desc, sts in gen.mutants(p, rng):
                nmut += 1
                kinds[kind] = kinds.get(kind, 0) + 1
                text = header() + p.text(sts)
                rc, err = rn.check(text)
                if rc == 1:
                    continue
                if rc != 0:
                    failures.append(Failure('mutant-crash', p, 'spmdc exit %d on mutant (%s):\n%s' % (rc, desc, err[-2000:]), text))
                    continue
                probs, _ = rn.run(text)
                if probs:
                    failures.append(Failure('SOUNDNESS BUG', p, 'mutant accepted and wrong (%s): %s' % (
                        desc, '; '.join(x.splitlines()[0] for v in probs.values() for x in v)), text))
                else:
                    failures.append(Failure('equivalent mutant', p,
                                            'the model rejects it but spmdc accepts it and it computes the same on every mesh (%s)' % desc, text))
        done = min(a.count, b0 + a.batch)
        print('soundness: %d programs, %d mutants, %d failures, %.0f s' % (done, nmut, len(failures), time.time() - t0),
              flush=True)
    for f in failures:
        print('\n==== %s: %s (seed %d)' % (f.kind, f.program.name, a.seed))
        print(f.detail)
        if f.mutant:
            print('-- mutant:\n' + f.mutant)
        print('-- program:\n' + header() + f.program.text())
        if f.kind in ('rejected', 'run') and not a.no_shrink:
            def still_fails(q, kind=f.kind):
                why = check_program(rn, q)
                return why is not None and (why.startswith('rejected') == (kind == 'rejected'))
            small = shrink(rn, f.program, still_fails)
            print('-- shrunk to:\n' + header() + small.text())
            print('-- which fails with: %s' % check_program(rn, small))
    print('soundness: seed %d: %d programs, %d mutants (%s) checked in %.0f s; %d failures' % (
        a.seed, a.count, nmut, ', '.join('%s %d' % kv for kv in sorted(kinds.items())), time.time() - t0,
        len(failures)))
    if not a.keep and not failures:
        shutil.rmtree(work, ignore_errors=True)
    elif not a.keep:
        print('files kept in %s' % work)
    return 1 if failures or nregress_failed else 0


if __name__ == '__main__':
    sys.exit(main())
