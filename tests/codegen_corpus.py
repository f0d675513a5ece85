#!/usr/bin/python3
"""codegen_corpus.py SPMDC RUNTIME_INCLUDE DIR...: every `.spmd` file under
the DIRs, accepted or rejected, is run through `spmdc --check` and through
`spmdc -S`, each with the program's own options, and

* the two must agree: the same exit status and the same diagnostics, word
  for word (`--check` runs every check `-S` runs, and writes nothing; issue
  28).  A program `-S` rejects but `--check` accepts fails, and so does the
  reverse; both are listed;
* neither may crash or print a sanitizer report (exit 0, 1 or 2: a usage
  error, such as `-D` naming no constant, in both);
* the C of a program `-S` accepts must compile with `-Wall -Wextra -Werror`;
  a program it rejects leaves no C behind.

A program's options are those of its first line, in the conventions of the
tests that run it: `// ARGS: ...` (errorcheck.py, run_e2e.py) or
`// RUN: ...` (golden.py).  Of them, the ones that change the program are
kept: `-I DIR`, `-D NAME=VALUE` and `--target=T`; the mode and the output
options (`--check`, `-S`, `-o FILE`, `--dump-*`, `--diagnostics-format=`,
...) are the test's own.  A `// F64_IMPORTS: m ...` line (gradcheck's
f64 twins) imports those standard library modules with every f32 made f64,
as gradcheck/run.sh does (not in a `// BF16:` program of gradcheck/bf16,
which imports them as they are).  At the end it prints how many programs
both modes accepted, rejected and lowered, and how many disagreed.

--no-cc (the sanitizer build's run, tests/CMakeLists.txt): the C of an
accepted program is not compiled.  spmdc writes the same C in every build
(the sanitizers change how spmdc runs, not what it writes), so the normal
and the clang builds' runs compile it; a sanitized spmdc still runs --check
and -S on every program, and the C must still be written."""
import os
import re
import shlex
import subprocess
import sys
import tempfile

SANITIZER_RE = re.compile(r'AddressSanitizer|LeakSanitizer|runtime error:')
STDLIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'stdlib')
# options of spmdc that take the next word as their value
TAKES_VALUE = {'-o', '-I', '-D', '--mesh', '-n', '--depfile'}


def program_options(path):
    """The -I, -D and --target options of the file's ARGS or RUN line, and
    the modules of its F64_IMPORTS line."""
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().splitlines()
    first = lines[0] if lines else ''
    words = []
    for tag in ('// ARGS:', '// RUN:'):
        if first.startswith(tag):
            words = shlex.split(first[len(tag):])
    opts = []
    i = 0
    while i < len(words):
        w = words[i]
        if w in TAKES_VALUE and i + 1 < len(words):
            if w in ('-I', '-D'):
                opts += [w, words[i + 1]]
            i += 2
            continue
        if (w.startswith('-I') or w.startswith('-D')) and len(w) > 2 or w.startswith('--target='):
            opts.append(w)
        i += 1
    f64 = [m for line in lines if line.startswith('// F64_IMPORTS:') for m in line.split(':', 1)[1].split()]
    if any(line.startswith('// BF16:') for line in lines):
        f64 = []  # gradcheck/bf16: the program imports the modules as they are, its f64 twin their twins
    return opts, f64


def f64_twins(tmp, modules):
    """gradcheck/run.sh's f64 twins of standard library modules, in a
    directory of their own; its -I option."""
    d = os.path.join(tmp, 'f64_' + '_'.join(modules))
    os.makedirs(d, exist_ok=True)
    for m in modules:
        with open(os.path.join(STDLIB, m + '.spmd'), encoding='utf-8') as f:
            text = re.sub(r'\bf32\b', 'f64', f.read())
        with open(os.path.join(d, m + '.spmd'), 'w', encoding='utf-8') as f:
            f.write(text)
    return ['-I', d]


def main():
    args = sys.argv[1:]
    compile_c = '--no-cc' not in args
    args = [a for a in args if a != '--no-cc']
    spmdc, rtinc, dirs = args[0], args[1], args[2:]
    env = dict(os.environ)
    env['ASAN_OPTIONS'] = 'exitcode=99:detect_leaks=1'
    env.setdefault('UBSAN_OPTIONS', 'halt_on_error=1:exitcode=98:print_stacktrace=1')
    files = sorted(os.path.join(r, f) for d in dirs for r, _, fs in os.walk(d) for f in fs if f.endswith('.spmd'))
    failures = []
    check_only, s_only, differ = [], [], []
    accepted = rejected = lowered = 0
    # with OMPI_CC=clang (the clang build in scripts/test.sh), -fsyntax-only
    # makes mpicc's -lmpi an unused argument, which is not the program's fault
    cc_name = subprocess.run(['mpicc', '--showme:command'], capture_output=True, text=True).stdout
    quiet = ['-Wno-unused-command-line-argument'] if 'clang' in cc_name else []
    with tempfile.TemporaryDirectory() as tmp:
        cfile = os.path.join(tmp, 'prog.c')
        for path in files:
            opts, f64 = program_options(path)
            if f64:
                opts = f64_twins(tmp, f64) + opts
            name = os.path.basename(path)

            def run(mode):
                p = subprocess.run([spmdc, '--color=never', '--max-errors=0'] + mode + opts + [name],
                                   capture_output=True, text=True, errors='replace', env=env, timeout=120,
                                   cwd=os.path.dirname(path))
                return p.returncode, p.stdout + p.stderr

            for f in (cfile, cfile[:-2] + '.cu', cfile[:-2] + '.h'):
                if os.path.exists(f):
                    os.remove(f)
            chk, chk_out = run(['--check'])
            gen, gen_out = run(['-S', '-o', cfile])
            bad = [(m, rc, out) for m, rc, out in (('--check', chk, chk_out), ('-S', gen, gen_out))
                   if rc not in (0, 1, 2) or SANITIZER_RE.search(out)]
            if bad:
                for m, rc, out in bad:
                    failures.append('%s: spmdc %s exited %d\n%s' % (path, m, rc, out[-2000:]))
                continue
            if chk == 0 and gen != 0:
                check_only.append('%s: --check accepts it, -S rejects it (exit %d):\n%s' % (path, gen, gen_out[-2000:]))
                continue
            if chk != 0 and gen == 0:
                s_only.append('%s: -S accepts it, --check rejects it (exit %d):\n%s' % (path, chk, chk_out[-2000:]))
                continue
            if chk != gen or chk_out != gen_out:
                differ.append('%s: --check (exit %d) and -S (exit %d) say different things\n'
                              '--- --check\n%s--- -S\n%s' % (path, chk, gen, chk_out[-1500:], gen_out[-1500:]))
                continue
            if gen != 0:
                rejected += 1
                if os.path.exists(cfile):
                    failures.append('%s: spmdc -S rejected it (exit %d) but wrote its C' % (path, gen))
                continue
            accepted += 1
            if not os.path.exists(cfile):
                failures.append('%s: spmdc -S exited 0 and wrote no C' % path)
                continue
            if not compile_c:
                continue
            cc = subprocess.run(['mpicc', '-std=c17', '-Wall', '-Wextra', '-Werror', '-fsyntax-only'] + quiet +
                                ['-I' + rtinc, cfile], capture_output=True, text=True)
            if cc.returncode != 0:
                failures.append('%s: the generated C does not compile cleanly\n%s' % (path, cc.stderr[-2000:]))
            else:
                lowered += 1
    for title, items in (('FAIL (crash, sanitizer report or C that does not compile)', failures),
                         ('FAIL: --check accepts what -S rejects', check_only),
                         ('FAIL: -S accepts what --check rejects', s_only),
                         ('FAIL: --check and -S report different errors', differ)):
        for item in items:
            print('%s: %s' % (title, item))
    print('%d files: %d accepted by --check and -S (%s), %d rejected by both; '
          '--check accepts and -S rejects: %d; -S accepts and --check rejects: %d; different errors: %d; '
          'other failures: %d' % (len(files), accepted,
                                  '%d lowered to C that compiles' % lowered if compile_c else 'C not compiled: --no-cc',
                                  rejected, len(check_only), len(s_only),
                                  len(differ), len(failures)))
    sys.exit(0 if not (failures or check_only or s_only or differ) else 1)


if __name__ == '__main__':
    main()
