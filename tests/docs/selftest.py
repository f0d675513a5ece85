#!/usr/bin/python3
"""selftest.py SPMDC: check_docs.py must reject each document of bad/.

Each bad/NAME.md starts with `<!-- expect-fail: TEXT -->`: check_docs.py
must exit non-zero and print TEXT (a plain substring).  This is what keeps
an untested, unlabelled or wrongly documented block from passing.
"""
import glob
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    spmdc = sys.argv[1]
    fails = 0
    cases = sorted(glob.glob(os.path.join(HERE, "bad", "*.md")))
    for md in cases:
        with open(md) as f:
            m = re.match(r"<!-- expect-fail: (.*) -->", f.readline())
        if not m:
            print(f"FAIL {md}: no expect-fail line")
            fails += 1
            continue
        r = subprocess.run([sys.executable, os.path.join(HERE, "check_docs.py"), spmdc, md],
                           capture_output=True, text=True, timeout=120)
        out = r.stdout + r.stderr
        if r.returncode == 0 or m.group(1) not in out:
            print(f"FAIL {os.path.basename(md)}: exit {r.returncode}, expected a failure saying "
                  f"{m.group(1)!r}:\n{out}")
            fails += 1
        else:
            print(f"ok   {os.path.basename(md)}")
    if fails or not cases:
        sys.exit(f"FAIL: {fails} of {len(cases)}")
    print(f"all {len(cases)} bad documents rejected")


if __name__ == "__main__":
    main()
