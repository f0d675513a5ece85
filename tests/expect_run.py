#!/usr/bin/python3
"""expect_run.py [--exit 0|nonzero|N] [--match RE]... [--no-match RE]... [--timeout S] -- CMD...

Runs CMD and passes (exit 0) only when both its exit status and its output
are what is expected: ctest's PASS_REGULAR_EXPRESSION alone ignores the
exit status (a test passes as soon as the line appears, whatever the
program does next), so tests that look for a line use this instead.

  --exit 0        CMD must exit 0 (the default)
  --exit nonzero  CMD must fail with an exit status (1..255), not a signal
                  or a timeout
  --exit N        CMD must exit N
  --match RE      RE (Python, MULTILINE: anchor lines with ^ and $) must
                  match CMD's standard output and error; repeatable
  --no-match RE   RE must not match them; repeatable
  --timeout S     seconds before CMD's process group is killed (600)

CMD's output is printed, then what was wrong; a sanitizer report in the
output ("runtime error:", "ERROR: AddressSanitizer") fails the test too.
"""
import os
import re
import signal
import subprocess
import sys

SANITIZER = re.compile(r"runtime error:|ERROR: (Address|Leak|Thread|Memory|UndefinedBehavior)Sanitizer")


def parse(argv):
    opts = {"exit": "0", "match": [], "no-match": [], "timeout": 600.0}
    i = 0
    while i < len(argv) and argv[i] != "--":
        key = argv[i][2:]
        if key not in opts or i + 1 >= len(argv):
            sys.exit(f"expect_run.py: bad option {argv[i]!r} (see --help in the source)")
        v = argv[i + 1]
        if key in ("match", "no-match"):
            opts[key].append(re.compile(v, re.M))
        elif key == "timeout":
            opts[key] = float(v)
        else:
            if v not in ("0", "nonzero") and not v.isdigit():
                sys.exit(f"expect_run.py: --exit takes 0, nonzero or a number, not {v!r}")
            opts[key] = v
        i += 2
    cmd = argv[i + 1:]
    if not cmd:
        sys.exit("expect_run.py: no command after --")
    return opts, cmd


def main(argv):
    opts, cmd = parse(argv)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=opts["timeout"])
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc = None
    text = out.decode("utf-8", "replace")
    sys.stdout.write(text)
    problems = []
    want = opts["exit"]
    if rc is None:
        problems.append(f"timed out after {opts['timeout']:g} s")
    elif want == "nonzero" and not 0 < rc < 256:
        problems.append(f"exited {rc}, expected a failure with an exit status" if rc == 0 else
                        f"killed by signal {-rc}, expected a failure with an exit status")
    elif want != "nonzero" and rc != int(want):
        problems.append(f"exited {rc}, expected {want}")
    for r in opts["match"]:
        if not r.search(text):
            problems.append(f"nothing matches {r.pattern!r}")
    for r in opts["no-match"]:
        m = r.search(text)
        if m:
            problems.append(f"{r.pattern!r} matches: {m.group(0)!r}")
    m = SANITIZER.search(text)
    if m:
        problems.append(f"a sanitizer report: {m.group(0)!r}")
    for p in problems:
        print(f"expect_run.py: FAIL: {p}")
    if problems:
        print("expect_run.py: $ " + " ".join(cmd))
        return 1
    print("expect_run.py: ok (exit %s%s)" % (rc, "".join(f", {r.pattern!r} matches" for r in opts["match"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
