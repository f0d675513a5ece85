#!/usr/bin/env python3
"""run_ctest.py [CTEST ARGS...]: ctest in the current build directory, where
only a failure of mpirun itself to start is run again.

scripts/test.sh runs the suite through this. Every test runs once (ctest's
results as JUnit XML, with each test's output). A failed test is run once
more only when its output holds one of Open MPI's messages for a start-up
that failed before the test's program ran (START_FAILURES: the texts of
Open MPI's help files, /usr/share/openmpi/help-*.txt); every other failure
fails the suite at once. At the end every test that passed only when run
again is listed with the message that let it be retried (a test that keeps
appearing there is flaky: find out why), then the failures. Exit status 0
when every test passed, first time or on its retry.
"""
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

# Open MPI 4.1 (Debian's openmpi-bin): start-up failures of mpirun, its
# daemons or MPI_Init, by their help texts (help-orte-runtime.txt,
# help-opal-runtime.txt, help-mpi-runtime.txt, help-plm-base.txt,
# help-errmgr-base.txt)
START_FAILURES = [
    r"It looks like (orte_init|opal_init|MPI_INIT|MPI_Init) failed for some reason",
    r"ORTE was unable to reliably start one or more daemons",
    r"An ORTE daemon has unexpectedly failed after launch and before\s+communicating back to mpirun",
    r"MPI_INIT has failed because at least one MPI process is unreachable",
]
START_RE = re.compile("|".join(f"(?:{p})" for p in START_FAILURES))

# ctest options that select tests: dropped from the retry, which names its tests
SELECT_WITH_VALUE = {"-R", "--tests-regex", "-E", "--exclude-regex", "-L", "--label-regex",
                     "-LE", "--label-exclude", "-I", "--tests-information", "--repeat",
                     "--output-junit"}


def run(args, junit):
    rc = subprocess.call(["ctest", *args, "--output-junit", junit])
    results = {}
    if not os.path.exists(junit):
        return rc, results
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name")
        failed = case.find("failure") is not None or case.get("status") not in (None, "run")
        skipped = (case.find("skipped").get("message", "") if case.find("skipped") is not None else "")
        if case.get("status") == "disabled" or (case.get("status") == "notrun" and case.find("failure") is None
                                                 and skipped.startswith(("SKIP_RETURN_CODE", "SKIP_REGULAR"))):
            continue  # skipped by the test itself (SKIP_RETURN_CODE) or disabled: not a failure
        # (any other "notrun": an executable not found, a fixture that failed: a failure)
        out = case.findtext("system-out") or ""
        results[name] = (failed, out)
    return rc, results


def cmake_regex_escape(s):
    return "".join("\\" + c if c in ".^$*+?()[]{}|\\" else c for c in s)


def main():
    args = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        rc, first = run(args, os.path.join(tmp, "first.xml"))
        if not first and rc != 0:
            print("run_ctest: ctest failed without results", file=sys.stderr)
            return rc
        failed = {n: out for n, (f, out) in first.items() if f}
        retry = {}
        for name, out in failed.items():
            m = START_RE.search(out)
            if m:
                retry[name] = m.group(0).split("\n")[0]
        passed_on_retry, still = [], [n for n in failed if n not in retry]
        if retry:
            keep, skip = [], False
            for a in args:
                if skip:
                    skip = False
                elif a in SELECT_WITH_VALUE:
                    skip = True
                elif not any(a.startswith(o + "=") for o in SELECT_WITH_VALUE):
                    keep.append(a)
            names = "|".join(cmake_regex_escape(n) for n in sorted(retry))
            print(f"\nrun_ctest: {len(retry)} test(s) failed as mpirun started; running them again: "
                  + ", ".join(sorted(retry)), flush=True)
            _, second = run([*keep, "-R", f"^({names})$"], os.path.join(tmp, "retry.xml"))
            for name in sorted(retry):
                if name in second and not second[name][0]:
                    passed_on_retry.append(name)
                else:
                    still.append(name)
    print()
    if passed_on_retry:
        print(f"run_ctest: {len(passed_on_retry)} test(s) passed only when run again after mpirun "
              "failed to start (flaky? find out why):")
        for n in passed_on_retry:
            print(f"  {n}: {retry[n]}")
    else:
        print("run_ctest: no test needed a retry")
    if still:
        print(f"run_ctest: {len(still)} test(s) failed:")
        for n in sorted(still):
            print(f"  {n}")
        return 1
    return 0 if rc == 0 or failed else rc


if __name__ == "__main__":
    sys.exit(main())
