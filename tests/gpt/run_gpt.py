#!/usr/bin/python3
"""run_gpt.py MODE SPMDC [--mpirun PATH] [-v]: tests of examples/gpt.spmd at a
small size, on the committed public-domain sample gettysburg.txt (the
Gettysburg Address and the Preamble of the US Constitution), prepared by
scripts/gpt_data.py.

MODE:
  meshes  the same 20-step training run (losses, gradient norms,
          validation losses) on 1 rank and on the meshes (2,1), (1,2),
          (2,2): SPEC section 12; and the same on 1 rank bit for bit when
          the program reads the .npy arrays instead of the token files
          (its batches as they were cut before token_batch)
  resume  a run stopped after STOP steps (its checkpoint written) and run
          again resumes from the checkpoint and continues bit-identically:
          the same printed numbers and byte-identical checkpoint files as
          an uninterrupted run, on the 2x2 mesh
  pipeline  examples/gpt_pp.spmd (the same GPT with pipeline parallelism
          on pp, SPEC 15): its 20-step run on (pp=2), (pp=2, dp=2) and
          (pp=2, tp=2) prints the 1-rank run's losses to float tolerance
  torch_uneven  the same with GPT-2's vocabulary of 50,257 on tp=3 and dp=3
          (the vocabulary, sequence, heads, MLP and batch split unevenly)
          against the one-process reference
  torch   the first steps' losses and gradient norms (before clipping)
          equal those of bench/gpt_torch.py (the
          same GPT in PyTorch, Megatron tensor and sequence parallelism
          over gloo) from the same initial parameters (the program's
          ckpt/init) and the same batches, and so does the gradient of
          step 0 field by field (the program's ckpt/grad0, -D SAVE_GRAD=1,
          against gpt_torch.py --grad: every element within GRAD_TOL of
          the field's largest magnitude), on 1 rank and on (2,2), (1,4),
          (4,1); exit 77 (skipped) when PyTorch is not installed
  gpu_bench  the PyTorch side of the GPU benchmark on the CPU:
          bench/gpu/gpt_torch_gpu.py --device cpu (eager; GPT_TEST_COMPILE=1
          adds torch.compile, slow on a CPU) from the program's ckpt/init
          prints the program's first losses (every step's, to 2e-5, and its
          RESULT line's final_loss), and bench/gpu/flagship.sh with the
          1-rank CPU build standing in for the GPU program prints its table
          (our row and eager's with the same training loss, a failing mode's
          row); exit 77 when PyTorch is not installed
  python  the flagship's loop in Python (examples/gpt_train.py over
          `spmdc --shared examples/gpt.spmd`, batches read with NumPy) on 1
          rank (no mpirun) and on (2,2) (mpirun python3): every step's
          training loss and gradient norm and the validation losses are
          the standalone program's, printed alike; the checkpoint it writes
          through the library after 5 steps is resumed by the standalone
          program, which then prints what an uninterrupted run prints and
          ends with byte-identical checkpoint files
  remat   the blocks recomputed in the backward (-D REMAT=1, remat()) give
          the printed numbers, the gradient of step 0 and the final
          checkpoint of the run without (REMAT=0) byte for byte, with
          dropout on, on 1 rank and on (2,2)

The timing columns of the program's lines (ms/step, tok/s) are left out of
every comparison.
"""
import argparse
import filecmp
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import run_e2e  # noqa: E402  (its output comparison)

SKIP = 77
# the small model: 2 blocks of width 32, 4 heads, context 16, 8 sequences per step
SMALL = {"T": 16, "D": 32, "NH": 4, "F": 128, "L": 2, "B": 8, "STEPS": 8, "WARMUP": 2,
         "PRINT_EVERY": 1, "EVAL_EVERY": 4, "EVAL_BATCHES": 2, "CKPT_EVERY": 100}
TORCH_CONSTS = ("T", "D", "NH", "L", "B", "STEPS", "WARMUP")
TIMING = re.compile(r" ms/step \S+ tok/s \S+")


def sh(cmd, cwd, verbose, timeout=600, env=None):
    env = dict(os.environ, **(env or {}), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1",
               # runs are compared byte for byte (resume): the same f32 GEMM
               # library in every run, pinned rather than timed afresh
               SPMD_GEMM=os.environ.get("SPMD_GEMM", "dnnl"),
               UBSAN_OPTIONS=os.environ.get("UBSAN_OPTIONS", "halt_on_error=1:exitcode=98:print_stacktrace=1"))
    if verbose:
        print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if verbose:
        print(r.stdout + r.stderr, flush=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    report = run_e2e.sanitizer_report(r.stderr, r.stdout)
    if report:
        sys.exit(f"FAIL: {' '.join(cmd)}: a sanitizer report: {report}\n{r.stderr}")
    return r.stdout


class Runner:
    """Compiles examples/SOURCE at the SMALL sizes (-D) and runs it on a mesh."""
    source, small = "gpt.spmd", SMALL

    def __init__(self, args, tmp):
        self.a, self.tmp = args, tmp
        self.data = os.path.join(tmp, "data")
        sh(["/usr/bin/python3", os.path.join(ROOT, "scripts", "gpt_data.py"), self.data,
            "--text", os.path.join(HERE, "gettysburg.txt")], tmp, args.v)
        self.sizes = dict(line.split("=") for line in open(os.path.join(self.data, "sizes.sh")).read().split())

    def compile(self, name, source=None, shared=False, **consts):
        c = dict(self.small, **consts)
        prog = os.path.join(self.tmp, name)
        flags = [f"-D{k}={v}" for k, v in c.items()] + [f"-D{k}={v}" for k, v in self.sizes.items()]
        sh([self.a.spmdc, *(["--shared"] if shared else []), os.path.join(ROOT, "examples", source or self.source),
            *flags, "-o", prog], self.tmp, self.a.v)
        return prog

    def run(self, prog, mesh, rundir, python=False, env=None):
        """Runs prog in rundir (created, with data/) on mesh "dp=2,tp=2";
        python: prog is [script, args...] for /usr/bin/python3, run without
        mpirun on one rank."""
        os.makedirs(rundir, exist_ok=True)
        if not os.path.exists(os.path.join(rundir, "data")):
            os.symlink(self.data, os.path.join(rundir, "data"))
        n = 1
        for kv in mesh.split(","):
            n *= int(kv.split("=")[1])
        if python:
            cmd = ["/usr/bin/python3", *prog]
            if n > 1:
                cmd = [self.a.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n), *cmd]
            return sh(cmd, rundir, self.a.v, env=env)
        return sh([self.a.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n), prog,
                   "--mesh", mesh], rundir, self.a.v)


def untimed(out):
    return "\n".join(TIMING.sub("", line) for line in out.splitlines() if line.strip())


def same_files(a, b, what):
    """1 (printing FAIL what) unless directories a and b hold the same
    files byte for byte (and some), else 0 (printing ok)."""
    names = sorted(os.listdir(a)) if os.path.isdir(a) else []
    _, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    if mismatch or errors or not names or not os.path.isdir(b) or sorted(os.listdir(b)) != names:
        print(f"FAIL: {what} differ: {mismatch + errors}" if names else f"FAIL: {what}: no files in {a}")
        return 1
    print(f"ok: {what} are byte-identical ({len(names)} files)")
    return 0


def compare_meshes(r, prog, meshes):
    """Runs prog on each mesh; (failures, the first mesh's output)."""
    outs = [untimed(r.run(prog, m, os.path.join(r.tmp, m.replace(",", "_")))) for m in meshes]
    if not re.search(r"^step 20 val ", outs[0], re.M):
        sys.exit("FAIL: no validation loss at step 20:\n" + outs[0])
    fails = 0
    for m, out in zip(meshes[1:], outs[1:]):
        problems = run_e2e.compare_outputs(meshes[0], outs[0], m, out, 1e-4, 1e-6)
        if problems:
            print(f"FAIL: {m} differs from {meshes[0]}:\n" + "\n".join(problems))
            fails += 1
        else:
            print(f"ok {m}: the same output as {meshes[0]}")
    print(outs[0])
    return fails, outs[0]


def mode_meshes(r):
    prog = r.compile("gpt", STEPS=20, EVAL_EVERY=5)      # a 20-step trajectory
    meshes = ["dp=1,tp=1", "dp=2,tp=1", "dp=1,tp=2", "dp=2,tp=2"]
    fails, first = compare_meshes(r, prog, meshes)
    # then the sample the flagship writes (temperature and top-k from the
    # trained model): the same bytes on every mesh for its seed
    if r.source != "gpt.spmd":   # llama.spmd (llama/meshes) writes none
        return fails
    import numpy as np
    ids = [np.load(os.path.join(r.tmp, m.replace(",", "_"), "sample", "ids.npy")) for m in meshes]
    for m, x in zip(meshes[1:], ids[1:]):
        if not np.array_equal(x, ids[0]):
            print(f"FAIL: the sample on {m} differs from {meshes[0]}'s in {int((x != ids[0]).sum())} bytes")
            fails += 1
    if all(np.array_equal(x, ids[0]) for x in ids):
        print(f"ok: the generated sample ({ids[0].shape[0]} windows) is the same on every mesh")
    return fails + tokens_vs_npy(r, dict(STEPS=20, EVAL_EVERY=5), first)


# The flagship as it read its text before it read token files: the whole
# .npy array loaded, the windows cut with take_along_dim at the starts that
# window_starts draws (its batch() then); tokens_vs_npy compiles it.
NPY_WINDOWS = """
fn npy_windows(data: i32[N]{dp: R, tp: R}, seed) -> i32[B@dp, T1]{tp: R} {
  let idx = reshape(window_starts(N, seed), [B, 1]) + iota(i32[B@dp, T1]{tp: R}, dim=1);
  return take_along_dim(reshape(data, [1, N]), idx, dim=1);
}
"""
TOKEN_BATCH = re.compile(r'token_batch\("data/(train|val)\.bin", i32\[B@dp, T1\]\{tp: R\}, seed=([^,]+), vocab=NV\)')


def tokens_vs_npy(r, consts, ours):
    """1 (printing FAIL) unless the flagship compiled with its token_batch
    reads replaced by the .npy arrays' windows prints OURS (the flagship's
    1-rank output) exactly: the token files give the same batches, so the
    same losses, bit for bit; else 0."""
    src = open(os.path.join(ROOT, "examples", "gpt.spmd")).read()
    size = {"train": "NTRAIN", "val": "NVAL"}
    npy, n = TOKEN_BATCH.subn(lambda m: f'npy_windows(load("data/{m.group(1)}.npy", i32[{size[m.group(1)]}]'
                                        f'{{dp: R, tp: R}}), {m.group(2)})', src)
    if n != 3:
        print(f"FAIL: {n} token_batch reads in examples/gpt.spmd, not the 3 this test replaces")
        return 1
    path = os.path.join(r.tmp, "gpt_npy.spmd")
    with open(path, "w") as f:
        f.write(npy.replace("\nfn main() {", NPY_WINDOWS + "\nfn main() {", 1))
    c = dict(r.small, **consts)
    prog = os.path.join(r.tmp, "gpt_npy")
    sh([r.a.spmdc, "-I", os.path.join(ROOT, "stdlib"), path, *[f"-D{k}={v}" for k, v in c.items()],
        *[f"-D{k}={v}" for k, v in r.sizes.items()], "-o", prog], r.tmp, r.a.v)
    out = untimed(r.run(prog, "dp=1,tp=1", os.path.join(r.tmp, "npy")))
    if out != ours:
        print("FAIL: the flagship on the .npy arrays prints\n" + out + "\non the token files\n" + ours)
        return 1
    print(f"ok: the flagship on the token files (train.bin, val.bin) prints what it prints on the .npy arrays, "
          f"every loss bit for bit ({len(out.splitlines())} lines)")
    return 0


def mode_pipeline(r):
    # 4 blocks; 4 microbatches of 2 windows: on (pp=2, dp=2) each dp rank has one window of each
    prog = r.compile("gpt_pp", "gpt_pp.spmd", STEPS=20, EVAL_EVERY=5, L=4, M=4)
    fails, piped = compare_meshes(r, prog, ["pp=1,dp=1,tp=1", "pp=2,dp=1,tp=1", "pp=2,dp=2,tp=1",
                                            "pp=2,dp=1,tp=2", "pp=4,dp=1,tp=1"])
    # the same model as the flagship: examples/gpt.spmd (no dropout) on 1 rank
    # prints the same numbers (the microbatches only change the order of sums)
    flagship = r.compile("gpt", STEPS=20, EVAL_EVERY=5, L=4)
    out = untimed(r.run(flagship, "dp=1,tp=1", os.path.join(r.tmp, "flagship")))
    # the flagship ends with a sample of generated text, which gpt_pp.spmd does not write
    out = "\n".join(line for line in out.splitlines() if not line.startswith("sample "))
    problems = run_e2e.compare_outputs("gpt.spmd", out, "gpt_pp.spmd", piped, 1e-4, 1e-6)
    if problems:
        print("FAIL: gpt_pp.spmd differs from gpt.spmd on 1 rank:\n" + "\n".join(problems))
        fails += 1
    else:
        print("ok: gpt_pp.spmd on 1 rank prints what gpt.spmd prints")
    return fails


def mode_resume(r):
    mesh = "dp=2,tp=2"
    full = r.compile("gpt", CKPT_EVERY=4)
    whole = untimed(r.run(full, mesh, os.path.join(r.tmp, "whole")))
    stopped = r.compile("gpt_stop", CKPT_EVERY=4, STOP_AFTER=5)
    run = os.path.join(r.tmp, "stopped")
    first = untimed(r.run(stopped, mesh, run))            # steps 0..4, checkpoint at 4 and 5
    second = untimed(r.run(full, mesh, run))              # resumes at step 5
    fails = 0
    if "resumed from ckpt/last at step 5" not in second:
        print("FAIL: the second run did not resume at step 5:\n" + second)
        fails += 1
    # the numbers of every step (a checkpoint line is printed where each run saves)
    steps = lambda out: [l for l in out.splitlines() if l.startswith("step ") and "checkpoint" not in l]  # noqa: E731
    # (the stopped run also evaluates at its last step, 5)
    joined = [l for l in steps(first) if not l.startswith("step 5 val")] + steps(second)
    if joined != steps(whole):
        print("FAIL: stopped + resumed differs from the uninterrupted run")
        print("uninterrupted:\n" + "\n".join(steps(whole)))
        print("stopped + resumed:\n" + "\n".join(joined))
        fails += 1
    else:
        print("ok: stopped after 5 steps + resumed prints exactly what the uninterrupted run prints")
    fails += same_files(os.path.join(r.tmp, "whole", "ckpt", "last"), os.path.join(run, "ckpt", "last"),
                        "the final checkpoints")
    print("\n".join(joined))
    return fails


# The gradients of step 0 must agree, field by field, to GRAD_TOL relative
# to the field's largest magnitude: max|ours - torch| <= GRAD_TOL * max|torch|.
# Both are float32 sums in different orders (BLAS and the runtime's kernels
# against PyTorch's).  Measured on the four meshes with either GEMM library
# (SPMD_GEMM=openblas: at worst 5.3e-7, w1 on (1,4); dnnl: 6.2e-7, wq on 1
# rank; a few float32 ulps of the field's largest element), so
# GRAD_TOL = 1e-5 leaves a margin of ~16 while a field
# off by 0.01% fails (tried: our lnf_g scaled by 1.0001, or torch's bq by
# 1.001, fail on every mesh; the losses and gradient norms still agree).
# blocks.bk's exact gradient is 0 (a key bias adds q.bk to every score of a
# query, which the softmax cancels); both sides hold rounding noise there
# (~1e-11), so a field's scale is at least GRAD_FLOOR times the largest
# gradient element of all fields (0.53, bo's): 5e-5, below every other
# field's largest magnitude (the smallest is bq's, 9.4e-5).
GRAD_TOL = 1e-5
GRAD_FLOOR = 1e-4


def compare_grads(ours_dir, torch_dir, tol=GRAD_TOL):
    """[(field, relative difference, max|torch|)], worst first, and the problems."""
    import numpy as np
    names = lambda d: sorted(f[:-4] for f in os.listdir(d) if f.endswith(".npy")) if os.path.isdir(d) else []  # noqa: E731
    fields, problems = names(ours_dir), []
    if fields != names(torch_dir) or not fields:
        return [], [f"different fields: ours {fields}, torch {names(torch_dir)}"]
    a = {f: np.load(os.path.join(ours_dir, f + ".npy")) for f in fields}
    b = {f: np.load(os.path.join(torch_dir, f + ".npy")) for f in fields}
    for f in fields:
        if a[f].shape != b[f].shape or a[f].dtype != np.float32 or b[f].dtype != np.float32:
            problems.append(f"{f}: ours {a[f].dtype}{a[f].shape}, torch {b[f].dtype}{b[f].shape}")
    if problems:
        return [], problems
    floor = GRAD_FLOOR * max(float(np.abs(b[f]).max()) for f in fields)
    diffs = sorted(((f, float(np.abs(a[f].astype(np.float64) - b[f]).max()) / max(float(np.abs(b[f]).max()), floor),
                     float(np.abs(b[f]).max())) for f in fields), key=lambda x: -x[1])
    problems = [f"{f}: max|ours - torch| is {d:.3g} of the field's largest magnitude (limit {tol:g})"
                for f, d, _ in diffs if not d <= tol]
    return diffs, problems


def losses(out, pattern):
    return [float(x) for x in re.findall(pattern, out, re.M)]


def have_torch():
    try:
        subprocess.run(["/usr/bin/python3", "-c", "import torch"], check=True, capture_output=True)
        return True
    except (subprocess.CalledProcessError, FileNotFoundError):
        return False


def compare_with_torch(r, reference, torch_consts, meshes, per_mesh, grad_tol=GRAD_TOL, extra=None):
    """The first steps' losses and gradient norms and the gradient of step 0
    field by field, ours (r's program, -D SAVE_INIT=1 SAVE_GRAD=1) against
    bench/REFERENCE's from the program's ckpt/init on the same batches, on
    each mesh; the reference runs on each mesh too (--mesh) when per_mesh,
    else once (one process: the model is the same on every mesh).  The
    number of failures, or SKIP without PyTorch."""
    if not have_torch():
        print("skipped: PyTorch (python3-torch) is not installed")
        return SKIP
    steps = 5
    extra = extra or {}
    prog = r.compile(r.source.split(".")[0], SAVE_INIT=1, SAVE_GRAD=1, STEPS=steps, EVAL_EVERY=100, **extra)
    consts = [f"-D{k}={v}" for k, v in dict(r.small, STEPS=steps, **extra).items() if k in torch_consts or k in extra]
    fails, theirs, torch_grad = 0, None, None
    for mesh in meshes:
        run = os.path.join(r.tmp, "torch_" + mesh.replace(",", "_"))
        out_ours = r.run(prog, mesh, run)
        ours = losses(out_ours, r"^step \d+ train (\S+)") + losses(out_ours, r"^step \d+ train .* gnorm (\S+)")
        if theirs is None or per_mesh:
            torch_grad = os.path.join(run, "torch_grad0")
            out = sh(["/usr/bin/python3", os.path.join(ROOT, "bench", reference), "--data", r.data,
                      "--init", os.path.join(run, "ckpt", "init"), *(["--mesh", mesh] if per_mesh else []),
                      "--grad", torch_grad, *consts], run, r.a.v)
            theirs = losses(out, r"^step \d+ loss (\S+)") + losses(out, r"^step \d+ loss .* gnorm (\S+)")
        worst = max((abs(a - b) / abs(b) for a, b in zip(ours, theirs)), default=1.0)
        ok = len(ours) == len(theirs) == 2 * steps and worst < 2e-5
        print(f"{'ok' if ok else 'FAIL'} {mesh}: losses, then gradient norms\n   ours  {ours}\n   torch {theirs}\n"
              f"   largest relative difference {worst:.2g}")
        fails += not ok
        diffs, problems = compare_grads(os.path.join(run, "ckpt", "grad0"), torch_grad, grad_tol)
        if diffs:
            print(f"{'FAIL' if problems else 'ok'} {mesh}: the gradients of step 0, {len(diffs)} fields; worst "
                  f"{diffs[0][0]}: max|ours - torch| = {diffs[0][1]:.2g} of its largest magnitude")
            print("\n".join(f"   {f:18} {d:.2g}  (max|torch| {m:.3g})" for f, d, m in diffs))
        for p in problems:
            print(f"FAIL {mesh}: gradient {p}")
        fails += bool(problems)
    return fails


def mode_torch(r):
    # the reference is distributed as the program is (Megatron's tp over gloo): it runs on each mesh
    return compare_with_torch(r, "gpt_torch.py", TORCH_CONSTS, ("dp=1,tp=1", "dp=2,tp=2", "dp=1,tp=4", "dp=4,tp=1"),
                              per_mesh=True)


def mode_torch_uneven(r):
    # GPT-2's vocabulary of 50,257 (no padding) on meshes that split it, the
    # sequence, the heads, the MLP and the batch unevenly (torch.chunk's
    # blocks, SPEC 4): ours against the one-process PyTorch reference
    # (Megatron's even split cannot hold it; the model is the same anyway)
    return compare_with_torch(r, "gpt_torch.py", TORCH_CONSTS, ("dp=1,tp=3", "dp=3,tp=1"), per_mesh=False,
                              extra={"NV": 50257})


def cpu_bench_table(r, script, prog, torch_args):
    """bench/gpu/SCRIPT with the CPU build PROG standing in for the GPU program
    and PyTorch on the CPU (modes eager and "nosuch", which must fail): its
    table, the rows by program (ours, torch eager, nosuch) and a function
    giving a row's final loss."""
    env = dict(FLAGSHIP_PROG=prog, FLAGSHIP_DATA=r.data, FLAGSHIP_PYTHON="/usr/bin/python3", FLAGSHIP_DEVICE="cpu",
               FLAGSHIP_WARMUP="1", FLAGSHIP_MODES="eager nosuch", FLAGSHIP_TORCH_ARGS=" ".join(torch_args),
               MPIRUN=r.a.mpirun)
    os.makedirs(os.path.join(r.tmp, "bundle"), exist_ok=True)
    old = dict(os.environ)
    os.environ.update(env)
    try:
        table = sh(["bash", os.path.join(ROOT, "bench", "gpu", script), os.path.join(r.tmp, "bundle")],
                   r.tmp, r.a.v, timeout=300)
    finally:
        os.environ.clear()
        os.environ.update(old)
    rows = {m.group(1).strip(): m.group(2) for m in re.finditer(r"^(spmdc --target=cuda|torch eager|nosuch) {2,}(.*)$",
                                                                  table, re.M)}
    return table, rows, lambda name: re.findall(r"(\d+\.\d+)$", rows.get(name, ""))


def mode_gpu_bench(r):
    if not have_torch():
        print("skipped: PyTorch (python3-torch) is not installed")
        return SKIP
    steps = 4
    prog = r.compile("gpt", SAVE_INIT=1, STOP_AFTER=steps, EVAL_EVERY=1000)
    run = os.path.join(r.tmp, "gpu_bench")
    out = r.run(prog, "dp=1,tp=1", run)
    ours = losses(out, r"^step \d+ train (\S+)")
    consts = [f"-D{k}={v}" for k, v in SMALL.items() if k in TORCH_CONSTS]
    script = os.path.join(ROOT, "bench", "gpu", "gpt_torch_gpu.py")
    fails = 0
    modes = ["eager"] + (["compile"] if os.environ.get("GPT_TEST_COMPILE") == "1" else [])
    for mode in modes:
        out = sh(["/usr/bin/python3", script, "--device", "cpu", "--mode", mode, "--data", r.data,
                  "--init", os.path.join(run, "ckpt", "init"), "--steps", str(steps - 1), "--warmup", "1",
                  "--threads", "1", *consts], run, r.a.v)
        theirs = losses(out, r"^step \d+ loss (\S+)")
        result = re.search(r"^RESULT mode=(\S+) ms_per_step_median=\S+ min=\S+ max=\S+ tokens_per_s=\S+ "
                           r"compile_s=\S+ final_loss=(\S+)", out, re.M)
        final = [float(result.group(2))] if result and result.group(1) == mode else []
        worst = max((abs(a - b) / abs(b) for a, b in zip(ours + ours[-1:], theirs + final)), default=1.0)
        ok = len(ours) == len(theirs) == steps and len(final) == 1 and worst < 2e-5
        print(f"{'ok' if ok else 'FAIL'} gpt_torch_gpu.py --mode {mode}: the first {steps} losses, then the "
              f"RESULT's final_loss\n   ours  {ours}\n   torch {theirs} {final}\n   largest relative difference {worst:.2g}")
        fails += not ok
    if len(modes) == 1:
        print("not run: --mode compile on the CPU (GPT_TEST_COMPILE=1 runs it; torch.compile takes minutes on 2 cores)")
    # flagship.sh with the CPU build standing in for the GPU program; the
    # mode "nosuch" fails (gpt_torch_gpu.py rejects it) and must get a row
    table, rows, row_loss = cpu_bench_table(r, "flagship.sh", prog, consts + ["--threads", "1"])
    checks = [
        ("our row has a step time and a loss", re.match(r"\d+\.\d+ \[\d+\.\d+-\d+\.\d+\]", rows.get("spmdc --target=cuda", "")) and row_loss("spmdc --target=cuda")),
        ("torch eager's row has a step time and a loss", re.match(r"\d+\.\d+ \[", rows.get("torch eager", "")) and row_loss("torch eager")),
        ("the two rows' training losses agree", row_loss("spmdc --target=cuda") and row_loss("spmdc --target=cuda") == row_loss("torch eager")),
        ("the failing mode has a FAILED row", rows.get("nosuch", "").startswith("FAILED")),
        ("the summary line", re.search(r"^FLAGSHIP gpu=\S+ ours_ms=[\d.]+ eager_ms=[\d.]+$", table, re.M)),
    ]
    for what, ok in checks:
        print(f"{'ok' if ok else 'FAIL'} flagship.sh: {what}")
        fails += not ok
    print(table)
    return fails


def mode_python(r):
    consts = dict(GEN_TOKENS=0, EVAL_EVERY=4, CKPT_EVERY=4)
    full = r.compile("gpt", **consts)
    lib = r.compile("libgpt.so", shared=True, **consts)
    env = dict(PYTHONPATH=os.path.join(ROOT, "python"))
    script = os.path.join(ROOT, "examples", "gpt_train.py")
    no_lr = re.compile(r" lr \S+")
    # the numbers of every step (each run prints a checkpoint line where it saves)
    steps = lambda out: [no_lr.sub("", l) for l in out.splitlines()  # noqa: E731
                         if l.startswith("step ") and "checkpoint" not in l]
    fails = 0
    for mesh in ("dp=1,tp=1", "dp=2,tp=2"):
        tag = mesh.replace(",", "_")
        whole = steps(untimed(r.run(full, mesh, os.path.join(r.tmp, "whole_" + tag))))
        run = os.path.join(r.tmp, "python_" + tag)
        out = r.run([script, lib, mesh, "--steps", "5", "--print-every", "1", "--eval-every", "4",
                     "--ckpt-every", "4"], mesh, run, python=True, env=env)
        py = steps(out)
        if "step 5 checkpoint ckpt/last" not in out:
            print(f"FAIL {mesh}: the Python loop wrote no checkpoint at step 5:\n" + out)
            fails += 1
        resumed = untimed(r.run(full, mesh, run))
        if "resumed from ckpt/last at step 5" not in resumed:
            print(f"FAIL {mesh}: the standalone program did not resume from Python's checkpoint:\n" + resumed)
            fails += 1
        joined = [l for l in py if not l.startswith("step 5 val")] + steps(resumed)
        if len(py) < 5 or joined != whole:
            print(f"FAIL {mesh}: Python's 5 steps + the standalone program resumed differ from the standalone run")
            print("standalone:\n" + "\n".join(whole))
            print("Python + resumed:\n" + "\n".join(joined))
            fails += 1
        else:
            print(f"ok {mesh}: Python's steps 1-5 and the standalone program resumed from Python's checkpoint "
                  "print what the standalone run prints")
        fails += same_files(os.path.join(r.tmp, "whole_" + tag, "ckpt", "last"), os.path.join(run, "ckpt", "last"),
                            f"{mesh}: the final checkpoints")
        print("\n".join(py))
    return fails


def mode_remat(r):
    fails = 0
    progs = {k: r.compile(f"gpt_remat{k}", REMAT=k, SAVE_GRAD=1, STEPS=4, EVAL_EVERY=4, CKPT_EVERY=4, DROPOUT=0.1)
             for k in (0, 1)}
    for mesh in ("dp=1,tp=1", "dp=2,tp=2"):
        runs = {k: os.path.join(r.tmp, f"remat{k}_" + mesh.replace(",", "_")) for k in progs}
        outs = {k: untimed(r.run(progs[k], mesh, runs[k])) for k in progs}
        if outs[0] != outs[1] or not re.search(r"^step 4 val ", outs[0], re.M):
            print(f"FAIL {mesh}: REMAT=1 prints\n{outs[1]}\nREMAT=0 prints\n{outs[0]}")
            fails += 1
        for ck in ("grad0", "last"):
            fails += same_files(os.path.join(runs[0], "ckpt", ck), os.path.join(runs[1], "ckpt", ck),
                                f"{mesh}: ckpt/{ck} with and without remat")
    return fails


def run_main(doc, modes, runner=Runner, prefix="gpt_test_"):
    """The command line of run_gpt.py and run_llama.py: MODE SPMDC; runs
    modes[MODE](runner(args, tmp)) and exits 0, SKIP or with the failures."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("mode", choices=list(modes))
    ap.add_argument("spmdc")
    ap.add_argument("--mpirun", default=os.environ.get("MPIRUN", "mpirun"))
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    args.spmdc = os.path.abspath(args.spmdc)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        fails = modes[args.mode](runner(args, tmp))
    verdict(fails)


def verdict(fails):
    """Exits with a mode's result: SKIP, a count of failures (0: PASS);
    anything else (None: a mode that forgot to return its count) fails."""
    if type(fails) is not int or fails < 0:
        sys.exit(f"FAIL: the mode returned {fails!r}, not a count of failures")
    if fails == SKIP:
        sys.exit(SKIP)
    if fails:
        sys.exit(f"FAIL: {fails} comparison(s) failed")
    print("PASS")


def main():
    run_main(__doc__, {"meshes": mode_meshes, "pipeline": mode_pipeline, "resume": mode_resume, "torch": mode_torch,
                       "gpu_bench": mode_gpu_bench, "remat": mode_remat, "python": mode_python,
                       "torch_uneven": mode_torch_uneven})

if __name__ == "__main__":
    main()
