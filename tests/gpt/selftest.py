#!/usr/bin/python3
"""selftest.py: run_gpt.py's verdicts, fed canned results instead of runs.

Each mode is a function of a runner (compile, run) and of run_gpt.sh (the
reference scripts); here both are replaced by fakes that return the outputs
a case describes, so a mode can be shown a right result (it must count no
failure) and wrong ones (it must count at least one, and run_main's
verdict must then exit non-zero):

* gpu_bench: the right losses and table pass; wrong losses, no RESULT line,
  an empty table each fail (the mode once ended without returning its
  count, which run_main read as a pass);
* resume: an uninterrupted and a stopped + resumed run with the same
  numbers and checkpoint files pass; an empty checkpoint directory, a
  differing file or a differing step fail;
* verdict: None (a mode that returns nothing), a negative count and True
  fail; 0 passes; 77 is a skip.
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_gpt  # noqa: E402

FAILS = []


def expect(what, cond):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        FAILS.append(what)


class Args:
    v = False
    mpirun = "mpirun"
    spmdc = "spmdc"


class FakeRunner:
    """compile returns the program's name; run calls self.on_run."""
    source, small = "gpt.spmd", run_gpt.SMALL

    def __init__(self, tmp, on_run):
        self.a, self.tmp, self.data, self.on_run = Args(), tmp, os.path.join(tmp, "data"), on_run

    def compile(self, name, source=None, **consts):
        return name

    def run(self, prog, mesh, rundir):
        os.makedirs(rundir, exist_ok=True)
        return self.on_run(prog, mesh, rundir)


def quietly(f, *args):
    """f(*args) with its output hidden (shown when a check fails)"""
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            return f(*args)
        except SystemExit as e:
            return ("exit", e.code)
        finally:
            quietly.last = buf.getvalue()


OURS = [5.5451, 5.4012, 5.2733, 5.1004]


def gpu_bench(theirs, result, table):
    """mode_gpu_bench's count with torch printing THEIRS (and RESULT's
    final_loss RESULT, None: no line) and flagship.sh printing TABLE"""
    def sh(cmd, cwd, verbose, timeout=600):
        if cmd[0] == "bash":
            return table
        out = "".join(f"step {i} loss {x} ms 1.0\n" for i, x in enumerate(theirs))
        if result is not None:
            out += (f"RESULT mode=eager ms_per_step_median=1.0 min=1.0 max=1.0 tokens_per_s=10 compile_s=0 "
                    f"final_loss={result}\n")
        return out
    run = lambda prog, mesh, rundir: "".join(f"step {i} train {x} lr 1e-3\n" for i, x in enumerate(OURS))  # noqa: E731
    saved = run_gpt.sh, run_gpt.have_torch
    run_gpt.sh, run_gpt.have_torch = sh, lambda: True
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return quietly(run_gpt.mode_gpu_bench, FakeRunner(tmp, run))
    finally:
        run_gpt.sh, run_gpt.have_torch = saved


GOOD_TABLE = """program               ms/step [min-max]  loss
spmdc --target=cuda   12.50 [12.00-13.00]  5.100400
torch eager           14.00 [13.50-14.50]  5.100400
nosuch                FAILED (exit 2)
FLAGSHIP gpu=cpu ours_ms=12.50 eager_ms=14.00
"""


def check_gpu_bench():
    n = gpu_bench(OURS, OURS[-1], GOOD_TABLE)
    expect("gpu_bench: the right losses and table count no failure", n == 0)
    for what, args in (("wrong losses", ([x * 1.01 for x in OURS], OURS[-1] * 1.01, GOOD_TABLE)),
                       ("no RESULT line", (OURS, None, GOOD_TABLE)),
                       ("an empty table", (OURS, OURS[-1], "")),
                       ("the rows' losses differ", (OURS, OURS[-1], GOOD_TABLE.replace("14.00 [13.50-14.50]  5.100400",
                                                                                      "14.00 [13.50-14.50]  5.200400")))):
        n = gpu_bench(*args)
        expect(f"gpu_bench: {what} is counted as a failure (got {n!r})", type(n) is int and n > 0)
        if not (type(n) is int and n > 0):
            print(quietly.last)


def resume(break_it):
    """mode_resume's count where the runs print the same numbers and write
    the same checkpoint, changed by break_it(whole_dir, resumed_dir, outs)"""
    lines = [f"step {i} train {3 - i * 0.1:.4f} gnorm 1.0" for i in range(8)]
    lines[5:5] = ["step 4 val 2.5"]
    outs = {"whole": "\n".join(lines),
            "first": "\n".join(lines[:6] + ["step 5 val 2.45"]),
            "second": "\n".join(["resumed from ckpt/last at step 5"] + lines[6:])}
    dirs = {}

    def run(prog, mesh, rundir):
        which = "whole" if rundir.endswith("whole") else "first" if prog == "gpt_stop" else "second"
        dirs[which] = rundir
        ck = os.path.join(rundir, "ckpt", "last")
        os.makedirs(ck, exist_ok=True)
        for f in ("w.npy", "step.npy"):
            with open(os.path.join(ck, f), "wb") as fh:
                fh.write(f.encode() * 10)
        if which == "second":
            break_it(os.path.join(dirs["whole"], "ckpt", "last"), ck, outs)
        return outs[which]

    with tempfile.TemporaryDirectory() as tmp:
        return quietly(run_gpt.mode_resume, FakeRunner(tmp, run))


def check_resume():
    expect("resume: the same numbers and files count no failure", resume(lambda a, b, o: None) == 0)

    def empty(a, b, o):
        for d in (a, b):
            for f in os.listdir(d):
                os.remove(os.path.join(d, f))

    def differ(a, b, o):
        with open(os.path.join(b, "w.npy"), "ab") as fh:
            fh.write(b"x")

    def step(a, b, o):
        o["second"] = o["second"].replace("step 7 train", "step 7 train 9 ")
    for what, f in (("empty checkpoint directories", empty), ("a differing checkpoint file", differ),
                    ("a differing step", step)):
        n = resume(f)
        expect(f"resume: {what} is counted as a failure (got {n!r})", type(n) is int and n > 0)
        if not (type(n) is int and n > 0):
            print(quietly.last)


def check_verdict():
    for fails, ok in ((None, False), (-1, False), (True, False), ("0", False), (3, False), (0, True), (77, None)):
        r = quietly(run_gpt.verdict, fails)
        code = r[1] if isinstance(r, tuple) else 0
        got = code in (0, None) if ok else code == run_gpt.SKIP if ok is None else code not in (0, None, run_gpt.SKIP)
        expect(f"verdict({fails!r}) {'passes' if ok else 'skips' if ok is None else 'fails'} (exit {code!r})", got)


def main():
    check_gpu_bench()
    check_resume()
    check_verdict()
    if FAILS:
        sys.exit(f"FAIL: {len(FAILS)} check(s)")
    print("PASS")


if __name__ == "__main__":
    main()
