#!/usr/bin/python3
"""codegen_identical.py dump SPMDC OUTDIR [ROOT]
   codegen_identical.py compare DIR_A DIR_B

A refactoring of the compiler's back end must not change what it generates.
`dump` writes, for every program under ROOT's tests/, examples/, stdlib/ and
docs/ that `spmdc --check` accepts (with the -I/-D options of its `// ARGS:`
line), the output of `-S` (the C, and with `--target=cuda` the C and the
CUDA kernels when the compiler has that target) and of `--dump-ir` into
OUTDIR, one file per program and output.  `compare` says which files differ
between two dumps and exits 1 if any does.  tests/codegen_identical.sh runs
both for a git revision and the working tree.

Every compiler runs with SPMDC_STDLIB set to ROOT/stdlib, so two compilers
built from different trees import the same standard library files."""
import concurrent.futures
import filecmp
import os
import re
import subprocess
import sys
import tempfile

DIRS = ['tests', 'examples', 'stdlib', 'docs']


def programs(root):
    for d in DIRS:
        for r, _, fs in os.walk(os.path.join(root, d)):
            for f in sorted(fs):
                if f.endswith('.spmd'):
                    yield os.path.join(r, f)


def options(text):
    """The -I and -D options of a `// ARGS:` first line."""
    m = re.match(r'// ARGS:(.*)', text)
    if not m:
        return []
    words, keep = m.group(1).split(), []
    for i, w in enumerate(words):
        if w in ('-I', '-D') and i + 1 < len(words):
            keep += [w, words[i + 1]]
    return keep


def has_target(spmdc):
    h = subprocess.run([spmdc, '--help'], capture_output=True, text=True)
    return '--target' in h.stdout + h.stderr


def dump_one(spmdc, root, outdir, path, cuda, env):
    rel = os.path.relpath(path, root)
    with open(path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    if '// ERROR' in text:
        return None
    cwd, base = os.path.dirname(path), os.path.basename(path)
    opts = options(text)
    run = lambda args: subprocess.run([spmdc, '--color=never'] + opts + args + [base], capture_output=True,
                                      env=env, cwd=cwd, timeout=300)
    if run(['--check']).returncode != 0:
        return None
    dest = os.path.join(outdir, rel)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    for name, args in [('ir', ['--dump-ir']), ('c', ['-S', '-o', '-'])]:
        r = run(args)
        with open(dest + '.' + name, 'wb') as f:
            f.write(b'exit %d\n' % r.returncode + r.stdout + b'--- stderr\n' + r.stderr)
    if cuda:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, 'prog.c')
            r = run(['--target=cuda', '-S', '-o', out])
            for ext in ('c', 'cu'):
                p = os.path.join(tmp, 'prog.' + ext)
                data = open(p, 'rb').read() if os.path.exists(p) else b''
                with open(dest + '.cuda.' + ext, 'wb') as f:
                    f.write(b'exit %d\n' % r.returncode + data)
    return rel


def dump(spmdc, outdir, root):
    env = dict(os.environ, SPMDC_STDLIB=os.path.join(root, 'stdlib'))
    cuda = has_target(spmdc)
    files = list(programs(root))
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        done = [r for r in ex.map(lambda p: dump_one(spmdc, root, outdir, p, cuda, env), files) if r]
    print('%d accepted programs dumped (%s-S, --dump-ir) to %s' % (len(done), '--target=cuda -S, ' if cuda else '',
                                                                    outdir))


def compare(a, b):
    differ, only, same = [], [], 0
    for r, _, fs in os.walk(a):
        for f in fs:
            pa = os.path.join(r, f)
            pb = os.path.join(b, os.path.relpath(pa, a))
            if not os.path.exists(pb):
                if '.cuda.' not in f:  # a compiler without --target=cuda
                    only.append(os.path.relpath(pa, a))
            elif filecmp.cmp(pa, pb, shallow=False):
                same += 1
            else:
                differ.append(os.path.relpath(pa, a))
    for r, _, fs in os.walk(b):
        for f in fs:
            pb = os.path.join(r, f)
            if not os.path.exists(os.path.join(a, os.path.relpath(pb, b))) and '.cuda.' not in f:
                only.append(os.path.relpath(pb, b))
    for f in sorted(differ):
        print('DIFFERS %s' % f)
    for f in sorted(only):
        print('ONLY IN ONE %s' % f)
    print('%d files identical, %d differ, %d in one dump only' % (same, len(differ), len(only)))
    return not differ and not only


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == 'dump':
        root = sys.argv[4] if len(sys.argv) > 4 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        dump(os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3]), os.path.abspath(root))
    elif len(sys.argv) == 4 and sys.argv[1] == 'compare':
        sys.exit(0 if compare(sys.argv[2], sys.argv[3]) else 1)
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
