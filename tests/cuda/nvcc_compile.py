#!/usr/bin/python3
"""nvcc_compile.py SPMDC DIR...: the CUDA target compiles.  For every
program under the DIRs that `spmdc --check` accepts (with the -I/-D options
of its `// ARGS:` line), `spmdc --target=cuda -S` writes the host C and the
kernels; nvcc compiles the kernels with the flags spmdc uses (--print-paths:
-fmad=false, sm_90 and PTX), and the host C must compile with
-Wall -Wextra -Werror and never read a tensor's data (`->data`: the host
holds device pointers only).  Programs are compiled in parallel, one nvcc
per program.  Exit 77 (skipped) when spmdc was configured without nvcc."""
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
import time


def options(text):
    m = re.match(r'// ARGS:(.*)', text)
    words, keep = (m.group(1).split() if m else []), []
    for i, w in enumerate(words):
        if w in ('-I', '-D') and i + 1 < len(words):
            keep += [w, words[i + 1]]
    return keep


def main():
    spmdc, dirs = os.path.abspath(sys.argv[1]), sys.argv[2:]
    paths = dict(l.split(': ', 1) for l in subprocess.run([spmdc, '--print-paths'], capture_output=True,
                                                           text=True).stdout.splitlines() if ': ' in l)
    if 'nvcc' not in paths:
        print('SKIP: this spmdc has no nvcc (configured with SPMD_CUDA=OFF or without CUDA)')
        sys.exit(77)
    nvcc, flags, rtinc = paths['nvcc'], paths['nvcc flags'].split(), paths['runtime include']
    files = sorted(os.path.join(r, f) for d in dirs for r, _, fs in os.walk(d) for f in fs if f.endswith('.spmd'))
    tmp = tempfile.mkdtemp(prefix='nvcc_compile_')

    def one(k, path):
        text = open(path, encoding='utf-8', errors='replace').read()
        if '// ERROR' in text:
            return None
        cwd, base, opts = os.path.dirname(path), os.path.basename(path), options(text)
        run = lambda args: subprocess.run([spmdc, '--color=never'] + opts + args + [base], capture_output=True,
                                          text=True, cwd=cwd, timeout=300)
        if run(['--check']).returncode != 0:
            return None
        c = os.path.join(tmp, '%d_%s.c' % (k, os.path.splitext(base)[0]))
        gen = run(['--target=cuda', '-S', '-o', c])
        if gen.returncode != 0:
            return 'FAIL %s: spmdc --target=cuda -S exited %d\n%s' % (path, gen.returncode, gen.stderr[-2000:])
        host = open(c).read()
        bad = [l for l in host.splitlines() if '->data' in l]
        if bad:
            return 'FAIL %s: the CUDA target\'s host C reads tensor data:\n  %s' % (path, '\n  '.join(bad[:5]))
        cc = subprocess.run(['mpicc', '-std=c17', '-Wall', '-Wextra', '-Werror', '-fsyntax-only', '-I' + rtinc, c],
                            capture_output=True, text=True)
        if cc.returncode != 0:
            return 'FAIL %s: the host C does not compile cleanly\n%s' % (path, cc.stderr[-2000:])
        cu = c[:-2] + '.cu'
        nv = subprocess.run([nvcc, '-c', '-O2'] + flags + ['-I' + rtinc, cu, '-o', cu + '.o'],
                            capture_output=True, text=True)
        if nv.returncode != 0:
            return 'FAIL %s: nvcc failed on its kernels (exit %d)\n%s' % (path, nv.returncode, nv.stderr[-3000:])
        return 'ok %s' % path

    start = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        results = [r for r in ex.map(lambda a: one(*a), enumerate(files)) if r]
    failed = [r for r in results if not r.startswith('ok')]
    for r in failed:
        print(r)
    print('%d programs: kernels compiled by nvcc, host C clean and without ->data; %d failed (%.0f s)'
          % (len(results), len(failed), time.time() - start))
    subprocess.run(['rm', '-rf', tmp])
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
