#!/usr/bin/python3
"""expect_selftest.py: expect_run.py fails what it should.

Each case runs expect_run.py on a small shell command: the expected line
followed by a non-zero exit (what PASS_REGULAR_EXPRESSION passed), an exit 0
where a failure is expected, a line that only contains the expected one, a
signal, a timeout, a sanitizer report; and the cases that must pass.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LINE = r"^step 40 loss 0\.372165$"
CASES = [  # (what, expect_run.py options, shell command, passes)
    ("the line and exit 0", ["--match", LINE], "echo step 40 loss 0.372165", True),
    ("the line, then exit 3", ["--match", LINE], "echo step 40 loss 0.372165; exit 3", False),
    ("exit 0 without the line", ["--match", LINE], "echo step 40 loss 0.372166", False),
    ("the line inside a longer one", ["--match", LINE], "echo step 40 loss 0.3721651", False),
    ("a line with another character for the dot", ["--match", LINE], "echo step 40 loss 0x372165", False),
    ("a failure expected and got", ["--exit", "nonzero", "--match", "^spmd: error: no device$"],
     "echo spmd: error: no device >&2; exit 1", True),
    ("a failure expected, exit 0", ["--exit", "nonzero", "--match", "^spmd: error: no device$"],
     "echo spmd: error: no device >&2", False),
    ("a failure expected, killed by a signal", ["--exit", "nonzero", "--match", "^spmd: error: no device$"],
     "echo spmd: error: no device >&2; kill -SEGV $$", False),
    ("a forbidden line", ["--exit", "nonzero", "--no-match", "no error"], "echo no error; exit 1", False),
    ("a timeout", ["--timeout", "1"], "echo x; sleep 30", False),
    ("a sanitizer report, exit 0", [], "echo 'a.c:3:5: runtime error: signed integer overflow' >&2", False),
    ("exit 2 where 2 is expected", ["--exit", "2"], "exit 2", True),
]


def main():
    fails = 0
    for what, opts, sh, passes in CASES:
        r = subprocess.run([sys.executable, os.path.join(HERE, "expect_run.py"), *opts, "--", "sh", "-c", sh],
                           capture_output=True, text=True, timeout=60)
        ok = (r.returncode == 0) == passes
        print(f"{'ok  ' if ok else 'FAIL'} {what}: expect_run.py exited {r.returncode} "
              f"(should {'pass' if passes else 'fail'})")
        if not ok:
            print(r.stdout + r.stderr)
        fails += not ok
    if fails:
        sys.exit(f"FAIL: {fails} of {len(CASES)}")
    print(f"all {len(CASES)} cases")


if __name__ == "__main__":
    main()
