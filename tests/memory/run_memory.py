#!/usr/bin/python3
"""run_memory.py SPMDC: `spmdc --memory-report` against the runtime's
--profile.  For each program and mesh the report's high-water marks of the
parameters, the optimizer state, the residuals and the temporaries (each
component's own) must equal the runtime's byte for byte, and so must its
high-water of the total (the issue asks for 2%; the report models how
these programs' kernels hand their results over, docs/memory.md).  Then the residuals must fall with remat() (REMAT=1)
and with more pipeline stages (examples/gpt_pp.spmd on pp=1, 2, 4: a
stage keeps its L/pp blocks' residuals of every microbatch, besides those
of what every stage computes, the embedding and the head).

Programs: tests/golden/memory_fused.spmd on dp=2 and memory_report.spmd
(tests/remat/remat_train.spmd with remat and momentum) on (2,2), whose
reports are goldens;
examples/gpt.spmd at a small size on 1 rank, (2,1) and (2,2), with
REMAT=1 on 1 rank and (2,2); examples/gpt_pp.spmd (4 blocks, 4
microbatches) on pp=1, 2, 4."""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SMALL = {"T": 16, "D": 32, "NH": 4, "F": 128, "L": 2, "B": 8, "STEPS": 3, "WARMUP": 2, "PRINT_EVERY": 1,
         "EVAL_EVERY": 100, "EVAL_BATCHES": 2, "CKPT_EVERY": 100}
COMPS = ("params", "optimizer state", "residuals", "temporaries")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")


def sh(cmd, cwd):
    r = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def report(spmdc, src, flags, mesh, cwd):
    out = sh([spmdc, "--memory-report", src, *flags, "--mesh", mesh], cwd)
    total = float(re.search(r"^high-water of the total: (\d+) B", out, re.M).group(1))
    own = out.split("each component's own high-water")[1]
    comps = {c: float(re.search(rf"^  {c} +(\d+) B", own, re.M).group(1)) for c in COMPS}
    return total, comps, out


BUILT = {}  # (source, flags) -> the program, compiled once for all its meshes


def profile(spmdc, src, flags, mesh, cwd):
    key = (src, tuple(flags))
    if key not in BUILT:
        BUILT[key] = os.path.join(cwd, "prog")
        sh([spmdc, src, *flags, "-o", BUILT[key]], cwd)
    prog = BUILT[key]
    n = 1
    for kv in mesh.split(","):
        n *= int(kv.split("=")[1])
    out = sh(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n), prog, "--mesh", mesh, "--profile"],
             cwd)
    total = float(re.search(r"high-water (\d+) B:", out).group(1))
    own = re.search(r"each component's own high-water: (.*)", out).group(1)
    comps = {c: float(re.search(rf"{c} (\d+)", own).group(1)) for c in COMPS}
    rss = re.search(r"peak RSS (\d+) KiB", out).group(1)
    return total, comps, rss


def main():
    spmdc = os.path.abspath(sys.argv[1])
    fails = 0
    with tempfile.TemporaryDirectory(prefix="memory_test_") as tmp:
        data = os.path.join(tmp, "data")
        sh(["/usr/bin/python3", os.path.join(ROOT, "scripts", "gpt_data.py"), data, "--text",
            os.path.join(ROOT, "tests", "gpt", "gettysburg.txt")], tmp)
        sizes = dict(line.split("=") for line in open(os.path.join(data, "sizes.sh")).read().split())
        gpt = os.path.join(ROOT, "examples", "gpt.spmd")
        gpt_pp = os.path.join(ROOT, "examples", "gpt_pp.spmd")
        gflags = [f"-D{k}={v}" for k, v in dict(SMALL, **sizes).items()]
        ppflags = [f"-D{k}={v}" for k, v in dict(SMALL, **sizes, L=4, M=4).items()]
        golden = lambda name: os.path.join(ROOT, "tests", "golden", name)  # noqa: E731
        cases = [("golden/memory_fused", golden("memory_fused.spmd"), [], "dp=2"),
                 ("golden/memory_report", golden("memory_report.spmd"), [], "dp=2,tp=2"),
                 ("gpt", gpt, gflags, "dp=1,tp=1"),
                 ("gpt", gpt, gflags, "dp=2,tp=1"),
                 ("gpt", gpt, gflags, "dp=2,tp=2"),
                 ("gpt REMAT=1", gpt, gflags + ["-DREMAT=1"], "dp=1,tp=1"),
                 ("gpt REMAT=1", gpt, gflags + ["-DREMAT=1"], "dp=2,tp=2"),
                 ("gpt_pp", gpt_pp, ppflags, "pp=1,dp=1,tp=1"),
                 ("gpt_pp", gpt_pp, ppflags, "pp=2,dp=1,tp=1"),
                 ("gpt_pp", gpt_pp, ppflags, "pp=4,dp=1,tp=1")]
        resid = {}
        for i, (name, src, flags, mesh) in enumerate(cases):
            run = os.path.join(tmp, f"run{i}")
            os.makedirs(run)
            os.symlink(data, os.path.join(run, "data"))
            st, sc, text = report(spmdc, src, flags, mesh, run)
            rt, rc, rss = profile(spmdc, src, flags, mesh, run)
            bad = [c for c in COMPS if sc[c] != rc[c]]
            off = (st - rt) / rt
            # the issue asks for the total within 2%; the report models every
            # buffer these programs' kernels hand over, so it is exact here, and
            # a difference means the report and the runtime have drifted apart
            # (without the report's rule for rt_binary_bwd's shared gradients,
            # gpt REMAT=1 on (2,2) would be 1.5% above the runtime)
            ok = not bad and abs(off) <= 0.02 and st == rt
            print(f"{'ok' if ok else 'FAIL'} {name} on {mesh}: total report {st:.0f} B, runtime {rt:.0f} B "
                  f"({100 * off:+.2f}%); " + ", ".join(f"{c} {sc[c]:.0f}/{rc[c]:.0f}" for c in COMPS) +
                  f" (report/runtime); peak RSS {rss} KiB")
            if bad:
                print(f"   differ: {bad}\n{text}")
            fails += not ok
            resid[(name, mesh)] = (sc["residuals"], rc["residuals"])

        def falls(what, seq):
            nonlocal fails
            ok = all(a[0] > b[0] and a[1] > b[1] for a, b in zip(seq, seq[1:]))
            print(f"{'ok' if ok else 'FAIL'} {what}: residuals (report, runtime) " +
                  " > ".join(f"{a[0]:.0f}/{a[1]:.0f} B" for a in seq))
            fails += not ok

        for mesh in ("dp=1,tp=1", "dp=2,tp=2"):
            falls(f"gpt with remat on {mesh}", [resid[("gpt", mesh)], resid[("gpt REMAT=1", mesh)]])
        falls("gpt_pp with more stages (pp=1, 2, 4)",
              [resid[("gpt_pp", f"pp={n},dp=1,tp=1")] for n in (1, 2, 4)])
    if fails:
        sys.exit(f"FAIL: {fails} check(s)")
    print("PASS")


if __name__ == "__main__":
    main()
