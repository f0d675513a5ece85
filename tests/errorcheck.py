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

Each regex must be anchored: it starts with `^` and, when it spells the whole
message, ends with `$`; `lint` fails one that does not, that starts with a
wildcard, or that pins too little (fewer than MIN_FULL literal characters in
a `^...$` regex, fewer than MIN_PREFIX in one that pins only a prefix).
`errorcheck.py --selftest SPMDC` checks the lint itself (ctest errorcheck/selftest).
"""
import os
import re
import shlex
import subprocess
import sys

ERROR_RE = re.compile(r'//\s*ERROR(?:@(?P<off>[+-]\d+))?\s+(?P<res>(?:"(?:[^"\\]|\\.)*"\s*)+)\s*$')
DIAG_RE = re.compile(r'^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.*)$')
SANITIZER_RE = re.compile(r'AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer')
MIN_FULL = 12     # literal characters of a ^...$ regex
MIN_PREFIX = 40   # literal characters of a regex anchored only at ^


def literal_chars(pattern):
    """The characters a regex matches literally: escapes resolved, wildcards,
    classes, groups' syntax and quantifiers left out."""
    p = re.sub(r'\\[dDwWsSbB]|\[(?:[^\]\\]|\\.)*\]\S?|\.[*+?]?|\(\?:|\{\d+(?:,\d*)?\}', '', pattern)
    p = re.sub(r'(?<!\\)[*+?()|]', '', p)
    return len(re.sub(r'\\(.)', r'\1', p))


def lint(pattern):
    """Why an ERROR regex pins too little, or None when it is anchored and
    long enough."""
    if not pattern.startswith('^'):
        return 'is not anchored: start it with ^ (and end it with $ when it spells the whole message)'
    if re.match(r'\^(?:\.[*+?]|\(|\[)', pattern):
        return 'starts with a wildcard, a group or a class after ^: spell the message\'s first words'
    body = pattern[1:]
    full = body.endswith('$') and not re.search(r'(?<!\\)(?:\\\\)*\\\$$', body)
    if full:
        body = body[:-1]
    n = literal_chars(body)
    if full and n < MIN_FULL:
        return 'pins %d literal characters (at least %d): spell the message' % (n, MIN_FULL)
    if not full and n < MIN_PREFIX:
        return 'pins only a prefix of %d literal characters: end it with $ and spell the whole message, ' \
               'or spell at least %d characters' % (n, MIN_PREFIX)
    return None


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
    problems = ['%s:%d: regex "%s" %s' % (name, line, r.pattern, lint(r.pattern))
                for line, regs in sorted(want.items()) for r in regs if lint(r.pattern)]
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


def selftest(spmdc):
    """The lint on regexes that must fail and ones that must pass, then a
    file whose error is pinned by an unanchored regex, which must fail."""
    bad = ["on mesh axis 'tp'$", "mixes P with V", "^.*mesh axis 'tp'$",
           "^(mixes|adds) .*$", "^is not linear", "^[a-z]+ is not linear on mesh axis$",
           "^the local_map block returns", "^unknown size\\$", ""]
    good = ["^unknown size 'N'$", "^'\\+' mixes I with R on mesh axis 'tp'$",
            "^expected '\\)', ',' or '\\[' after 'f32', found name 'y'$",
            "^the V \\(stacked\\) form of convert\\(\\) is local-only: in global",
            "^max\\(\\) is not linear, but '[ab]' is P \\(a pending sum\\) on mesh axis 'tp'$"]
    fails = ['lint accepts "%s"' % p for p in bad if lint(p) is None]
    fails += ['lint rejects "%s": %s' % (p, lint(p)) for p in good if lint(p) is not None]
    import contextlib
    import io
    import tempfile
    spmdc = os.path.abspath(spmdc)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, 'lint.spmd')
        for regex, ok in (("undefined name 'y'$", False), ("^undefined name 'y'$", True)):
            with open(path, 'w') as f:
                f.write('mesh (dp);\nfn f() -> f32 {\n  return y;   // ERROR "%s"\n}\n' % regex)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                passed = check(spmdc, path)
            if passed != ok:
                sys.stdout.write(out.getvalue())
                fails.append('check() %s a file pinning its error with "%s"' % ('fails' if ok else 'passes', regex))
    for f in fails:
        print('FAIL', f)
    print('errorcheck lint: %d bad and %d good regexes, %d wrong' % (len(bad), len(good), len(fails)))
    return not fails


def main():
    if len(sys.argv) == 3 and sys.argv[1] == '--selftest':
        sys.exit(0 if selftest(sys.argv[2]) else 1)
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    spmdc = os.path.abspath(sys.argv[1]) if os.sep in sys.argv[1] else sys.argv[1]  # spmdc runs in the file's directory
    ok = all([check(spmdc, p) for p in sys.argv[2:]])
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
