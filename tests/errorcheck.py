#!/usr/bin/python3
"""errorcheck.py SPMDC FILE...: the `// ERROR "regex"` test convention.

Each line of a test file may end with `// ERROR "re" ["re" ...]`: every regex
must match the message of an error that spmdc reports on that line, and every
error spmdc reports must be matched by a regex on its line.  `// ERROR@+N` and
`// ERROR@-N` put the expectation on the line N below or above, for lines
that cannot hold a comment (an unterminated string swallows it).  A file without
ERROR comments must be accepted (exit 0).  A first line `// ARGS: ...` adds
command-line arguments (default: --check).  Any exit status other than 0
or 1, and any sanitizer report, fails the test.
"""
import os
import re
import shlex
import subprocess
import sys

ERROR_RE = re.compile(r'//\s*ERROR(?:@(?P<off>[+-]\d+))?\s+(?P<res>(?:"(?:[^"\\]|\\.)*"\s*)+)\s*$')
DIAG_RE = re.compile(r'^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.*)$')
SANITIZER_RE = re.compile(r'AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer')


def expectations(path):
    want = {}
    args = ['--check']
    with open(path, encoding='utf-8', errors='replace') as f:
        for n, line in enumerate(f, 1):
            if n == 1 and line.startswith('// ARGS:'):
                args = shlex.split(line[len('// ARGS:'):])
            m = ERROR_RE.search(line)
            if m:
                regs = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group('res'))
                at = n + int(m.group('off') or 0)
                want.setdefault(at, []).extend(re.compile(r.replace('\\"', '"')) for r in regs)
    return args, want


def check(spmdc, path):
    args, want = expectations(path)
    env = dict(os.environ)
    env['ASAN_OPTIONS'] = 'exitcode=99:detect_leaks=1'  # spmdc itself must not leak
    env.setdefault('UBSAN_OPTIONS', 'halt_on_error=1:exitcode=98:print_stacktrace=1')
    name = os.path.basename(path)
    cwd = os.path.dirname(os.path.abspath(path))
    proc = subprocess.run([spmdc, '--color=never', '--max-errors=0'] + args + [name],
                          cwd=cwd, capture_output=True, text=True, errors='replace', env=env,
                          timeout=60)
    problems = []
    out = proc.stdout + proc.stderr
    if proc.returncode not in (0, 1) or SANITIZER_RE.search(out):
        problems.append('spmdc exited with status %d' % proc.returncode)
    got = {}
    for line in proc.stderr.splitlines():
        m = DIAG_RE.match(line)
        if m and m.group('file') == name:
            got.setdefault(int(m.group('line')), []).append(m.group('msg'))
        elif m:
            problems.append('error reported in another file: %s' % line)
    for line, msgs in sorted(got.items()):
        regs = want.get(line, [])
        for msg in msgs:
            if not any(r.search(msg) for r in regs):
                problems.append('%s:%d: unexpected error: %s' % (name, line, msg))
    for line, regs in sorted(want.items()):
        for r in regs:
            if not any(r.search(msg) for msg in got.get(line, [])):
                problems.append('%s:%d: no error matching "%s"' % (name, line, r.pattern))
    if not want and proc.returncode != 0 and not problems:
        problems.append('%s: expected to be accepted, exit status %d' % (name, proc.returncode))
    if want and proc.returncode != 1:
        problems.append('%s: expected exit status 1, got %d' % (name, proc.returncode))
    if problems:
        sys.stdout.write('FAIL %s\n  %s\n--- spmdc output ---\n%s\n' % (path, '\n  '.join(problems), out))
        return False
    return True


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    ok = all([check(sys.argv[1], p) for p in sys.argv[2:]])
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
