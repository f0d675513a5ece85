#!/usr/bin/python3
"""codegen_corpus.py SPMDC RUNTIME_INCLUDE DIR...: every program under the
DIRs that `spmdc --check` accepts must also lower to C (`spmdc -S`) without
an error, a crash or a sanitizer report, and the C must compile with
`-Wall -Wextra -Werror`.  A program the code generator does not support yet
must say so ("not supported by the code generator"), never crash."""
import os
import re
import subprocess
import sys
import tempfile

SANITIZER_RE = re.compile(r'AddressSanitizer|LeakSanitizer|runtime error:')


def main():
    spmdc, rtinc, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
    env = dict(os.environ)
    env['ASAN_OPTIONS'] = 'exitcode=99:detect_leaks=1'
    files = sorted(os.path.join(r, f) for d in dirs for r, _, fs in os.walk(d) for f in fs if f.endswith('.spmd'))
    ok, accepted = True, 0
    # with OMPI_CC=clang (the clang build in scripts/test.sh), -fsyntax-only
    # makes mpicc's -lmpi an unused argument, which is not the program's fault
    cc_name = subprocess.run(['mpicc', '--showme:command'], capture_output=True, text=True).stdout
    quiet = ['-Wno-unused-command-line-argument'] if 'clang' in cc_name else []
    with tempfile.TemporaryDirectory() as tmp:
        cfile = os.path.join(tmp, 'prog.c')
        for path in files:
            run = lambda args: subprocess.run([spmdc, '--color=never'] + args, capture_output=True, text=True,
                                              errors='replace', env=env, timeout=120, cwd=os.path.dirname(path))
            with open(path, encoding='utf-8', errors='replace') as f:
                if '// ERROR' in f.read():
                    continue  # an expected error, checked by errorcheck.py
            chk = run(['--check', os.path.basename(path)])
            if chk.returncode != 0:
                continue
            accepted += 1
            gen = run(['-S', os.path.basename(path), '-o', cfile])
            out = gen.stdout + gen.stderr
            if SANITIZER_RE.search(out) or gen.returncode not in (0, 1) or \
                    (gen.returncode == 1 and 'not supported by the code generator' not in out):
                print('FAIL %s: spmdc -S exited %d\n%s' % (path, gen.returncode, out[-2000:]))
                ok = False
                continue
            if gen.returncode != 0:
                continue
            cc = subprocess.run(['mpicc', '-std=c17', '-Wall', '-Wextra', '-Werror', '-fsyntax-only'] + quiet +
                                ['-I' + rtinc, cfile], capture_output=True, text=True)
            if cc.returncode != 0:
                print('FAIL %s: the generated C does not compile cleanly\n%s' % (path, cc.stderr[-2000:]))
                ok = False
    print('%d accepted programs lowered' % accepted)
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
