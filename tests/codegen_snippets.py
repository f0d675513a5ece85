#!/usr/bin/env python3
"""codegen_snippets.py SPMDC FILE.spmd: the C that `spmdc -S` generates for
FILE contains, in order, a line matching each `// C: REGEX` comment of FILE
(Python re.search on each generated line, leading whitespace stripped;
`// C-NOT: REGEX` lines must match no generated line at all).  The first
line may be `// ARGS: ...` (extra spmdc flags).  Used for what the code
generator must do -- updates in place, collectives started early -- without
pinning the whole generated file."""
import os, re, subprocess, sys

def main():
    spmdc, path = os.path.abspath(sys.argv[1]), sys.argv[2]
    src = open(path).read().splitlines()
    args = []
    if src and src[0].startswith("// ARGS:"):
        args = src[0][len("// ARGS:"):].split()
    want = [l.split("// C:", 1)[1].strip() for l in src if l.strip().startswith("// C:")]
    never = [l.split("// C-NOT:", 1)[1].strip() for l in src if l.strip().startswith("// C-NOT:")]
    if not want and not never:
        sys.exit("%s: no // C: lines" % path)
    r = subprocess.run([spmdc, "-S", os.path.basename(path), "-o", "-"] + args,
                       cwd=os.path.dirname(os.path.abspath(path)), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("spmdc failed (%d):\n%s" % (r.returncode, r.stderr))
    lines = [l.strip() for l in r.stdout.splitlines()]
    at = 0
    for rx in want:
        k = at
        while k < len(lines) and not re.search(rx, lines[k]):
            k += 1
        if k == len(lines):
            print(r.stdout)
            sys.exit("%s: no generated line after line %d matches %r" % (path, at + 1, rx))
        at = k + 1
    for rx in never:
        for k, l in enumerate(lines):
            if re.search(rx, l):
                print(r.stdout)
                sys.exit("%s: generated line %d matches %r: %s" % (path, k + 1, rx, l))
    print("ok: %d snippets in order, %d absent" % (len(want), len(never)))

main()
