#!/usr/bin/python3
"""run.py SPMDC SIMLIB MPIRUN CASE...: graph regions on and off in the CUDA
simulation (docs/runtime.md "Graph regions").

Each CASE is FILE.spmd[:OPTIONS], OPTIONS comma-separated (FILE `gpt`:
examples/gpt.spmd at tests/gpt/run_gpt.py's small size on its sample text,
the timing columns of its output masked):
  np=N          ranks (mpirun -np N)
  mesh=A=N;B=M  the program's --mesh (default on one rank: every axis 1)
  D=NAME=V      spmdc -D NAME=V (repeatable)
  captured=N    at least N regions are captured
  expect=replay some region is captured and replayed
  expect=eager  no region is replayed, and rank 0 says why (note=RE, a
                regular expression its note must match)
  eager=N       the region replayed most ran N iterations eagerly (0: after
                its warm-up and capture, every iteration a replay)
  inplace=N     the region replayed most updates at least N of its inputs in
                place (owned parameters: parameters, moments)
  copied=N      and copied at most N of its inputs into the captured buffers
                per replay
  args=A;B      program arguments
  env=K=V       an environment variable of the runs (repeatable)
  fail=RE       both runs exit non-zero with RE in their standard error

The program is compiled once for the CUDA target against the simulation
runtime SIMLIB (libspmdrt_cudasim) and run twice, with SPMD_GRAPHS=1 and
SPMD_GRAPHS=0, each in its own directory. Its standard output and every
file it writes (checkpoints, .npy) must be the same bytes both ways; with
SPMD_GRAPHS_VERBOSE=1 the runtime's summary says how often each region was
replayed, which expect= checks.
"""
import filecmp
import os
import re
import shlex
import subprocess
import sys
import tempfile


def files_of(d):
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, d)
            if rel != 'prog' and not rel.startswith('data' + os.sep):
                out[rel] = p
    return out


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TIMING = re.compile(r' ms/step \S+ tok/s \S+')


def gpt_case(tmp):
    """examples/gpt.spmd's path, its -D flags and its data directory"""
    sys.path.insert(0, os.path.join(ROOT, 'tests', 'gpt'))
    import run_gpt  # noqa: E402 (its sizes)
    data = os.path.join(tmp, 'data')
    if not os.path.exists(data):
        subprocess.run(['/usr/bin/python3', os.path.join(ROOT, 'scripts', 'gpt_data.py'), data, '--text',
                        os.path.join(ROOT, 'tests', 'gpt', 'gettysburg.txt')], check=True, capture_output=True)
    sizes = dict(line.split('=') for line in open(os.path.join(data, 'sizes.sh')).read().split())
    consts = dict(run_gpt.SMALL, **sizes)
    return os.path.join(ROOT, 'examples', 'gpt.spmd'), ['%s=%s' % kv for kv in consts.items()], data


def run_case(spmdc, simlib, mpirun, case, tmp):
    path, _, opts = case.partition(':')
    o = {'np': '1', 'D': [], 'env': [], 'fail': None, 'expect': None, 'note': None, 'mesh': None, 'args': '', 'captured': '0',
         'eager': None, 'inplace': None, 'copied': None}
    data = None
    if path == 'gpt':
        path, o['D'], data = gpt_case(tmp)
    for item in filter(None, opts.split(',')):
        k, _, v = item.partition('=')
        if k in ('D', 'env'):
            o[k].append(v)
        else:
            o[k] = v
    name = os.path.basename(path) + (':' + opts if opts else '')
    work = tempfile.mkdtemp(dir=tmp)
    env = dict(os.environ, SPMDC_CUDA_SIM='1', SPMDC_RT_LIB=simlib,
               SPMDC_CFLAGS='-Wl,-rpath,' + os.path.dirname(simlib))
    cmd = [spmdc, '--target=cuda', os.path.abspath(path), '-o', os.path.join(work, 'prog')]
    for d in o['D']:
        cmd[1:1] = ['-D', d]
    c = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=os.path.dirname(os.path.abspath(path)))
    if c.returncode != 0:
        return 'compiling failed:\n' + c.stdout + c.stderr
    outs = {}
    for graphs in ('1', '0'):
        d = os.path.join(work, 'graphs' + graphs)
        os.mkdir(d)
        if data:
            os.symlink(data, os.path.join(d, 'data'))
        argv = [os.path.join(work, 'prog')]
        mesh = o['mesh'].replace(';', ',') if o['mesh'] else None
        if not mesh and o['np'] == '1':  # one rank: every axis of the file's mesh line 1
            with open(path) as f:
                m = re.search(r'^mesh\s*\(([^)]*)\)', f.read(), re.M)
            axes = [a.split(':')[0].strip() for a in m.group(1).split(',')] if m else []
            mesh = ','.join(a + '=1' for a in axes if a)
        if mesh:
            argv += ['--mesh', mesh]
        argv += [a for a in o['args'].split(';') if a]
        if o['np'] != '1':
            argv = [mpirun, '--allow-run-as-root', '--oversubscribe', '-np', o['np']] + argv
        r = subprocess.run(argv, capture_output=True, text=True, cwd=d, timeout=300,
                           env=dict(os.environ, SPMD_GRAPHS=graphs, SPMD_GRAPHS_VERBOSE='1',
                                    OPENBLAS_NUM_THREADS='1', **dict(e.split('=', 1) for e in o['env'])))
        if o['fail']:
            if r.returncode == 0 or not re.search(o['fail'], r.stderr):
                return 'SPMD_GRAPHS=%s: exit %d, not a failure matching %r:\n%s%s' % (
                    graphs, r.returncode, o['fail'], r.stdout, r.stderr)
        elif r.returncode != 0:
            return 'SPMD_GRAPHS=%s: exit %d\n%s%s' % (graphs, r.returncode, r.stdout, r.stderr)
        outs[graphs] = (TIMING.sub('', r.stdout), r.stderr, d)
    (out1, err1, d1), (out0, err0, d0) = outs['1'], outs['0']
    if out1 != out0:
        return 'the output differs with graphs on and off:\n--- on\n%s--- off\n%s' % (out1, out0)
    f1, f0 = files_of(d1), files_of(d0)
    if sorted(f1) != sorted(f0):
        return 'different files: on %s, off %s' % (sorted(f1), sorted(f0))
    for rel in f1:
        if not filecmp.cmp(f1[rel], f0[rel], shallow=False):
            return '%s differs with graphs on and off' % rel
    if o['fail']:
        return 'ok: %s: both runs stop with %r' % (name, o['fail'])
    summary = re.findall(r'^spmd: graph region .*: (?:captured|not captured), (\d+) replays, (\d+) eager', err1, re.M)
    replays = [int(n) for n, _ in summary]
    captured = len(re.findall(r'^spmd: graph region .*: captured, ', err1, re.M))
    if captured < int(o['captured']):
        return '%d regions captured, not at least %s:\n%s' % (captured, o['captured'], err1)
    if re.search(r'^spmd: graph region', err0, re.M):
        return 'SPMD_GRAPHS=0 still ran graph regions:\n' + err0
    if o['expect'] == 'replay' and not any(replays):
        return 'no region was replayed:\n' + err1
    if o['eager'] is not None:
        most = max(summary, key=lambda s: int(s[0]))
        if int(most[1]) != int(o['eager']):
            return 'the region replayed most ran %s iterations eagerly, not %s:\n%s' % (most[1], o['eager'], err1)
    if o['inplace'] is not None or o['copied'] is not None:
        io = re.findall(r'^spmd: graph region .*: captured, (\d+) replays, .*; (\d+) of its (\d+) inputs copied '
                        r'into the captured buffers over its replays \((\d+) updated in place\)', err1, re.M)
        if not io:
            return 'no summary of the replays\' input copies:\n' + err1
        most = max(io, key=lambda s: int(s[0]))
        if o['inplace'] is not None and int(most[3]) < int(o['inplace']):
            return 'the region updates %s inputs in place, not at least %s:\n%s' % (most[3], o['inplace'], err1)
        if o['copied'] is not None and int(most[1]) > int(o['copied']) * int(most[0]):
            return '%s inputs copied over %s replays: more than %s per replay:\n%s' % (most[1], most[0], o['copied'], err1)
    if o['expect'] == 'eager':
        if any(replays):
            return 'a region was replayed:\n' + err1
        if o['note'] and not re.search(o['note'], err1):
            return 'no note matching %r:\n%s' % (o['note'], err1)
    lines = re.findall(r'^spmd: graph region .*$', err1, re.M)
    return 'ok: %s, %d files the same with graphs on and off; %d regions captured, replays per region: %s\n  %s' % (
        name, len(f1), captured, replays or 'no region', '\n  '.join(lines))


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    spmdc, simlib, mpirun = (os.path.abspath(a) if os.path.exists(a) else a for a in sys.argv[1:4])
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in sys.argv[4:]:
            msg = run_case(spmdc, simlib, mpirun, case, tmp)
            print(('' if msg.startswith('ok') else 'FAIL %s: ' % case) + msg, flush=True)
            bad += not msg.startswith('ok')
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
