#!/usr/bin/python3
"""selftest.py SPMDC [--sanitize]: run_e2e.py fails what it should.

Each selftest/NAME.spmd is an e2e test whose `// SELFTEST:` lines say what
run_e2e.py must make of it: `pass`, or `fail "TEXT"` (a non-zero exit with
TEXT in its output); `env K=V ...` sets variables for it (%S: selftest/);
`sanitize` runs it only in the sanitizer build (--sanitize).  The cases:
a wrong pin, a wrong integer, NaN on every mesh, a pinned NaN, no pin, a
sanitizer report from a program that exits 0, undefined behaviour in the
generated program (sanitizer build), and a right one.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    spmdc, sanitize = argv[0], "--sanitize" in argv
    fails = run = 0
    for path in sorted(glob.glob(os.path.join(HERE, "selftest", "*.spmd"))):
        name = os.path.basename(path)
        lines = [m.group(1).strip() for m in re.finditer(r"^// SELFTEST: (.*)$", open(path).read(), re.M)]
        if "sanitize" in lines and not sanitize:
            print(f"not run {name}: the sanitizer build only")
            continue
        env = dict(os.environ)
        want = None
        for l in lines:
            if l.startswith("env "):
                for kv in shlex.split(l[4:]):
                    k, v = kv.split("=", 1)
                    env[k] = v.replace("%S", os.path.join(HERE, "selftest"))
            elif l.startswith("fail "):
                want = shlex.split(l[5:])[0]
        run += 1
        r = subprocess.run([sys.executable, os.path.join(HERE, "run_e2e.py"), spmdc, path], env=env,
                           capture_output=True, text=True, timeout=300)
        out = r.stdout + r.stderr
        ok = r.returncode == 0 if want is None else r.returncode not in (0, 77) and want in out
        print(f"{'ok  ' if ok else 'FAIL'} {name}: run_e2e.py exited {r.returncode}, "
              + ("should pass" if want is None else f"should fail saying {want!r}"))
        if not ok:
            print(out)
        fails += not ok
    if fails or not run:
        sys.exit(f"FAIL: {fails} of {run}")
    print(f"all {run} cases")


if __name__ == "__main__":
    main(sys.argv[1:])
