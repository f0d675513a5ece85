#!/usr/bin/python3
"""golden.py SPMDC FILE... [--update]: golden-output tests.

A golden test is a .spmd file whose first line is `// RUN: ARGS` (spmdc's
arguments; %s stands for the file).  spmdc runs in the file's directory and
its exit status, standard output and standard error are compared with the
sibling file NAME.out, where the directory's file: URI (in SARIF logs) reads
file://$DIR/.  With --update (or SPMD_UPDATE_GOLDEN=1), NAME.out is
rewritten instead: review the diff before committing it.
"""
import difflib
import os
import pathlib
import shlex
import subprocess
import sys


def run(spmdc, path):
    with open(path, encoding='utf-8', errors='replace') as f:
        first = f.readline()
    if not first.startswith('// RUN:'):
        return None, 'first line must be // RUN: ARGS'
    name = os.path.basename(path)
    args = [a.replace('%s', name) for a in shlex.split(first[len('// RUN:'):])]
    env = dict(os.environ)
    env['ASAN_OPTIONS'] = 'exitcode=99:detect_leaks=1'  # spmdc itself must not leak
    env.setdefault('UBSAN_OPTIONS', 'halt_on_error=1:exitcode=98:print_stacktrace=1')
    proc = subprocess.run([spmdc, '--color=never'] + args, cwd=os.path.dirname(os.path.abspath(path)),
                          capture_output=True, text=True, errors='replace', env=env, timeout=60)
    text = 'exit %d\n--- stdout\n%s--- stderr\n%s' % (proc.returncode, proc.stdout, proc.stderr)
    text = text.replace(pathlib.Path(os.path.dirname(os.path.realpath(path))).as_uri() + '/', 'file://$DIR/')
    return text, None


def main():
    args = [a for a in sys.argv[1:] if a != '--update']
    update = '--update' in sys.argv or os.environ.get('SPMD_UPDATE_GOLDEN') == '1'
    if len(args) < 2:
        sys.exit(__doc__)
    ok = True
    for path in args[1:]:
        text, err = run(args[0], path)
        out_path = os.path.splitext(path)[0] + '.out'
        if err:
            print('FAIL %s: %s' % (path, err))
            ok = False
        elif update:
            with open(out_path + '.tmp', 'w') as f:
                f.write(text)
            os.replace(out_path + '.tmp', out_path)
            print('updated %s' % out_path)
        else:
            try:
                with open(out_path) as f:
                    want = f.read()
            except FileNotFoundError:
                want = ''
            if text != want:
                ok = False
                print('FAIL %s: output differs from %s' % (path, out_path))
                sys.stdout.writelines(difflib.unified_diff(
                    want.splitlines(True), text.splitlines(True), out_path, 'actual'))
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
