#!/usr/bin/python3
"""robust.py SPMDC [--cuts N] DIR...: spmdc must never crash, whatever the input.

Feeds spmdc --check with N truncations (default 6) of every .spmd file under the DIRs,
binary files, deeply nested and very long input, and a generated 100k-line
program (which must be accepted).  Passes when every run exits 0 or 1 with no
sanitizer report.  Inputs with bytes outside printable ASCII are also run with
--diagnostics-format=sarif, whose output must be one JSON document in UTF-8.
"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

SANITIZER_RE = re.compile(r'AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer')
QUOTED_RE = re.compile(r'^ *[0-9]* \| ')


def run(spmdc, path, expect_ok=False, sarif=False):
    env = dict(os.environ)
    env['ASAN_OPTIONS'] = 'exitcode=99:detect_leaks=1'  # spmdc itself must not leak
    env.setdefault('UBSAN_OPTIONS', 'halt_on_error=1:exitcode=98:print_stacktrace=1')
    proc = subprocess.run([spmdc, '--check', '--color=never'] + (['--diagnostics-format=sarif'] if sarif else [])
                          + [path], capture_output=True, env=env, timeout=120)
    err = proc.stderr.decode('utf-8', 'replace')
    # a diagnostic quotes the input's line ("  12 | text"): a sanitizer's
    # words there are the input's (tests/e2e/selftest/ub_report.spmd with
    # its "//" flipped), not a report
    own = '\n'.join(l for l in err.splitlines() if not QUOTED_RE.match(l))
    bad = proc.returncode not in (0, 1) or SANITIZER_RE.search(own)
    if expect_ok and proc.returncode != 0:
        bad = True
    if sarif and not bad:
        try:
            json.loads(proc.stdout.decode('utf-8'))
        except ValueError as e:
            bad = True
            err = 'SARIF output is not JSON in UTF-8: %s\n%s' % (e, err)
    if bad:
        print('FAIL %s: exit %d\n%s' % (path, proc.returncode, err[-3000:]))
    return not bad


def generated_program(lines):
    out = ['mesh (dp, tp: 2);', 'const D = 8;']
    n = 0
    while n < lines:
        out.append('fn f%d(x: f32[4@dp, D]{tp: R}) -> f32[4@dp, D]{tp: R} {' % n)
        body = min(200, lines - n)
        out.append('  var y = x;')
        for i in range(body):
            out.append('  y = relu(y * 2.0 + y) - y; // step %d' % i)
        out.append('  return y;')
        out.append('}')
        n += body + 4
    return '\n'.join(out) + '\n'


def main():
    spmdc, dirs = sys.argv[1], sys.argv[2:]
    ncuts = 6
    if dirs[:1] == ['--cuts']:
        ncuts, dirs = int(dirs[1]), dirs[2:]
    rng = random.Random(1234)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for d in dirs:
            for root, _, files in os.walk(d):
                for f in sorted(files):
                    if f.endswith('.spmd'):
                        cases.append(open(os.path.join(root, f), 'rb').read())
        inputs = []
        for data in cases:
            cuts = sorted(set(rng.randrange(len(data) + 1) for _ in range(ncuts)))
            inputs += [data[:c] for c in cuts]
            if data:
                flip = bytearray(data)
                for _ in range(4):
                    flip[rng.randrange(len(flip))] = rng.randrange(256)
                inputs.append(bytes(flip))
        inputs.append(bytes(rng.randrange(256) for _ in range(4096)))
        inputs.append(b'\x00' * 100)
        inputs.append(b'fn f() { let x = ' + b'(' * 20000 + b'1' + b')' * 20000 + b'; }')
        inputs.append(b'fn f() { let x = ' + b'1 + ' * 50000 + b'1; }')
        inputs.append(b'fn f() { let x = g' + b'(1)' * 5000 + b'; }')
        inputs.append(b'fn f() { ' + b'if true { ' * 20000 + b'}' * 20000 + b' }')
        inputs.append(b'fn f() { let x = "' + b'a' * 100000)
        inputs.append(b'/*' + b'x' * 1000)
        inputs.append(b'const A = B; const B = A;')
        inputs.append(b'mesh (' + b'a, ' * 100 + b'z);')
        inputs.append(b'\xef\xbb\xbfconst \xc3\xa9 = 1;')
        for i, data in enumerate(inputs):
            path = os.path.join(tmp, 'case%d.spmd' % i)
            with open(path, 'wb') as f:
                f.write(data)
            ok &= run(spmdc, path)
            if re.search(rb'[^\t\n\r\x20-\x7e]', data):
                ok &= run(spmdc, path, sarif=True)
        big = os.path.join(tmp, 'big.spmd')
        with open(big, 'w') as f:
            f.write(generated_program(100000))
        ok &= run(spmdc, big, expect_ok=True)
        print('%d inputs checked' % (len(inputs) + 1))
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
