#!/usr/bin/python3
"""codegen_corpus_selftest.py RUNTIME_INCLUDE: codegen_corpus.py fed a fake
spmdc that gives each case's wrong answer must fail, naming the case, and
pass on the right ones: --check accepting what -S rejects, -S accepting what
--check rejects, the two reporting different errors, a crash, C that does
not compile, C written for a rejected program, and a program whose `// ARGS:`/`// RUN:`/`// F64_IMPORTS:`
options do not reach spmdc."""
import os
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# The fake spmdc: the behaviour is the file's stem; `--check` and `-S` are told
# apart, and -S writes the C given on the file's `// C:` line.
FAKE = r'''#!/usr/bin/python3
import os, re, sys
args = sys.argv[1:]
name = args[-1]
stem = name[:-5]
text = open(name).read()
mode = 'S' if '-S' in args else 'check'
opts = [a for a in args[:-1] if a not in ('--color=never', '--max-errors=0', '--check', '-S')]
if '-o' in opts:
    out = opts[opts.index('-o') + 1]
    del opts[opts.index('-o'):opts.index('-o') + 2]
def accept():
    if mode == 'S':
        c = [l[len('// C: '):] for l in text.splitlines() if l.startswith('// C: ')]
        open(out, 'w').write(c[0] + '\n' if c else 'int main(void) { return 0; }\n')
    sys.exit(0)
def reject(msg):
    sys.stderr.write('%s:1:1: error: %s\n' % (name, msg))
    sys.exit(1)
if stem == 'check_only':
    accept() if mode == 'check' else reject('no gradient')
if stem == 's_only':
    accept() if mode == 'S' else reject('no gradient')
if stem == 'differ':
    reject('one thing' if mode == 'check' else 'another')
if stem == 'both_reject':
    reject('the same thing')
if stem == 'writes_rejected':
    if mode == 'S':
        open(out, 'w').write('int main(void) { return 0; }\n')
    reject('the same thing')
if stem == 'crash':
    os.kill(os.getpid(), 11)
if stem in ('args_ok', 'args_run'):
    want = ['-I', 'lib', '-D', 'N=3', '--target=cpu']
    accept() if opts == want else reject('options %r, not %r' % (opts, want))
if stem == 'f64':
    t = open(os.path.join(opts[1], 'nn.spmd')).read() if len(opts) == 2 and opts[0] == '-I' else ''
    ok = 'f64' in t and re.search(r'\bf32\b', t) is None
    accept() if ok else reject('options %r: no f64 twin of nn' % opts)
accept()
'''

CASES = {
    # name: (file text, must the corpus pass?, a string its output must have)
    'good': ('mesh (dp);\n', True, '1 accepted by --check and -S (1 lowered'),
    'both_reject': ('mesh (dp);\n', True, '1 rejected by both'),
    'writes_rejected': ('mesh (dp);\n', False, 'rejected it (exit 1) but wrote its C'),
    'check_only': ('mesh (dp);\n', False, 'FAIL: --check accepts what -S rejects: '),
    's_only': ('mesh (dp);\n', False, 'FAIL: -S accepts what --check rejects: '),
    'differ': ('mesh (dp);\n', False, 'FAIL: --check and -S report different errors: '),
    'crash': ('mesh (dp);\n', False, 'exited -11'),
    'bad_c': ('// C: int main(void) { int unused; return 0; }\nmesh (dp);\n', False,
              'the generated C does not compile cleanly'),
    'args_ok': ('// ARGS: --check -I lib --max-errors=3 -o x.c -D N=3 --target=cpu\n', True, '1 lowered'),
    'args_run': ('// RUN: --dump-ast -I lib -D N=3 --diagnostics-format=text --target=cpu %s\n', True, '1 lowered'),
    'f64': ('// F64_IMPORTS: nn\n', True, '1 lowered'),
}


def main():
    rtinc = sys.argv[1]
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        fake = os.path.join(tmp, 'spmdc')
        with open(fake, 'w') as f:
            f.write(FAKE)
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
        for name, (text, should_pass, want) in CASES.items():
            d = os.path.join(tmp, name)
            os.makedirs(d)
            with open(os.path.join(d, name + '.spmd'), 'w') as f:
                f.write(text)
            p = subprocess.run([sys.executable, os.path.join(HERE, 'codegen_corpus.py'), fake, rtinc, d],
                               capture_output=True, text=True, timeout=120)
            out = p.stdout + p.stderr
            passed = p.returncode == 0
            if passed != should_pass or want not in out:
                print('FAIL %s: the corpus %s (exit %d), expected it to %s with %r\n%s' %
                      (name, 'passed' if passed else 'failed', p.returncode, 'pass' if should_pass else 'fail',
                       want, out[-1500:]))
                fails += 1
            else:
                print('ok %s: %s' % (name, 'passed' if passed else 'failed as it should'))
    print('%d cases, %d failed' % (len(CASES), fails))
    sys.exit(1 if fails else 0)


if __name__ == '__main__':
    main()
