#!/usr/bin/python3
"""run_gpt2.py MODE SPMDC [--mpirun PATH] [-v]: tests of
examples/gpt2_small.spmd (GPT-2 small, bf16 compute with f32 master weights)
at a reduced size (L=2, D=64, 4 heads, T=32, vocabulary 512, B=8) on
tests/gpt/gettysburg.txt, with tests/gpt/run_gpt.py's runner.

MODE:
  meshes    the same 8-step run (losses, learning rates, gradient norms,
            validation losses) on 1 rank and on (2,1), (1,2), (2,2), to
            MESH_RTOL: a tp=2 mesh sums the row-parallel products' bf16
            partial sums in bf16, so its bits differ from one rank's
  torch     from the program's initial parameters (ckpt/init), on 1 rank
            and (2,2): the first steps' losses and gradient norms against
            bench/gpt_torch.py --model gpt2 (the program's bf16 casts, op for
            op, Megatron's tp over gloo on the same mesh) to TORCH_RTOL, and
            the gradient of step 0 (ckpt/grad0, all fields) to GRAD_RTOL
            and each field alone to FIELD_RTOL (relative L2) while the same model computed in f32 (--compute f32) is at least
            BF16_SEPARATION times further from it (ours computes in bf16);
            the benchmark's own PyTorch step (bench/gpu/gpt_torch_gpu.py
            --model gpt2 --device cpu) gives ours' losses to TORCH_RTOL, and
            under torch.autocast (--amp autocast) to AUTOCAST_RTOL; and
            bench/gpu/gpt2.sh with the CPU build standing in for the GPU
            program prints its table (our row and eager's with the same
            training loss, a failing mode's row); exit 77 without PyTorch
  cuda_sim  the CUDA target's simulation build (SPMDC_CUDA_SIM=1 spmdc
            --target=cuda: the kernels as host loops on the CPU runtime)
            prints exactly what the CPU target prints and writes the same
            final parameters (ckpt/last) byte for byte, on 1 rank and (2,2)

The timing columns of the program's lines (ms/step, tok/s) are left out of
every comparison.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpt"))
import run_gpt  # noqa: E402
from run_gpt import losses, run_e2e, sh, untimed  # noqa: E402

# the reduced GPT-2: 2 blocks of width 64, 4 heads, context 32, vocabulary 512
SMALL = {"T": 32, "D": 64, "NH": 4, "L": 2, "NV": 512, "B": 8, "STEPS": 8, "WARMUP": 2, "LR": 0.003,
         "PRINT_EVERY": 1, "EVAL_EVERY": 4, "EVAL_BATCHES": 2}
TORCH_CONSTS = ("T", "D", "NH", "L", "NV", "B", "STEPS", "WARMUP", "LR")
MESHES = ("dp=1,tp=1", "dp=2,tp=1", "dp=1,tp=2", "dp=2,tp=2")
# Tolerances, from what was measured here (docs/gpt2.md): across meshes the
# largest relative difference of any printed number over the 8 steps is
# 6e-4 (on (1,2)); against PyTorch's bf16 step on the same mesh the losses
# and gradient norms of 6 steps differ by at most 1.4e-4 relatively, and
# the gradient of step 0 (all fields, relative L2) by 6.9e-4 on 1 rank and
# 5.5e-4 on (2,2), while the f32 model's is 3.0e-3 and 2.8e-3 from ours (4.3
# and 5.1 times further).  Adding the attention's output to the residual in
# bf16 instead of f32 (tried) moves ours to 2.1e-3 and 1.9e-3 from PyTorch's
# bf16 gradient: both limits fail it.
MESH_RTOL = 5e-3
TORCH_RTOL = 5e-4
GRAD_RTOL = 1.5e-3
# Field by field (one L2 over all fields can hide a small field): measured
# at worst 2.8e-3 (blocks.bv on 1 rank; 1.9e-3 on (2,2); every other field
# <= 1.1e-3), so a field off by 2% fails.  A field's norm is floored at
# FIELD_FLOOR of the largest field's (blocks.bk's exact gradient is ~0).
FIELD_RTOL = 1e-2
FIELD_FLOOR = 1e-2
AUTOCAST_RTOL = 2e-3        # measured 3e-5: a check that autocast runs the same model
BF16_SEPARATION = 2.5
TORCH_STEPS = 6


class Runner(run_gpt.Runner):
    source, small = "gpt2_small.spmd", SMALL

    def __init__(self, args, tmp):
        super().__init__(args, tmp)
        self.sizes = {}    # the example reads token files (data/train.bin): no NTRAIN, NVAL


def mode_meshes(r):
    prog = r.compile("gpt2")
    outs = [untimed(r.run(prog, m, os.path.join(r.tmp, m.replace(",", "_")))) for m in MESHES]
    if not re.search(r"^step 8 val ", outs[0], re.M):
        sys.exit("FAIL: no validation loss at step 8:\n" + outs[0])
    fails = 0
    for m, out in zip(MESHES[1:], outs[1:]):
        problems = run_e2e.compare_outputs(MESHES[0], outs[0], m, out, MESH_RTOL, 0.0)
        worst = max((abs(float(a) - float(b)) / max(abs(float(a)), abs(float(b)), 1e-30)
                     for x, y in zip(outs[0].splitlines(), out.splitlines())
                     for a, b in zip(run_e2e.tokenize(x)[1], run_e2e.tokenize(y)[1])), default=0.0)
        if problems:
            print(f"FAIL: {m} differs from {MESHES[0]} beyond rtol {MESH_RTOL}:\n" + "\n".join(problems))
            fails += 1
        else:
            print(f"ok {m}: the output of {MESHES[0]} (largest relative difference {worst:.2g})")
    print(outs[0])
    return fails


def grad_distance(ours_dir, torch_dir):
    """(||ours - torch|| / ||torch|| over every field of two gradient
    checkpoints at once, {field: the same over that field alone}); inf
    where the fields or shapes differ.  A field's distance is relative to
    max(||torch field||, FIELD_FLOOR * the largest field's norm), so a field
    whose exact gradient is (nearly) zero is held to the others' scale."""
    import numpy as np
    fields = sorted(f for f in os.listdir(torch_dir) if f.endswith(".npy")) if os.path.isdir(torch_dir) else []
    if not fields or not os.path.isdir(ours_dir) or sorted(f for f in os.listdir(ours_dir)
                                                             if f.endswith(".npy")) != fields:
        return float("inf"), {}
    diff, norm = {}, {}
    for f in fields:
        a = np.load(os.path.join(ours_dir, f)).astype(np.float64)
        b = np.load(os.path.join(torch_dir, f)).astype(np.float64)
        if a.shape != b.shape:
            return float("inf"), {}
        diff[f[:-4]] = float(((a - b) ** 2).sum())
        norm[f[:-4]] = float((b ** 2).sum())
    floor = FIELD_FLOOR * max(norm.values()) ** 0.5
    per_field = {f: diff[f] ** 0.5 / max(norm[f] ** 0.5, floor, 1e-30) for f in diff}
    return (sum(diff.values()) / max(sum(norm.values()), 1e-60)) ** 0.5, per_field


def rel(a, b):
    return max((abs(x - y) / abs(y) for x, y in zip(a, b)), default=1.0)


def mode_torch(r):
    if not run_gpt.have_torch():
        print("skipped: PyTorch (python3-torch) is not installed")
        return run_gpt.SKIP
    steps = TORCH_STEPS
    prog = r.compile("gpt2", SAVE_INIT=1, SAVE_GRAD=1, STOP_AFTER=steps, EVAL_EVERY=1000)
    consts = [f"-D{k}={v}" for k, v in SMALL.items() if k in TORCH_CONSTS]
    fails = 0

    def check(ok, what):
        nonlocal fails
        print(f"{'ok' if ok else 'FAIL'} {what}")
        fails += not ok

    # PyTorch from ours' initial parameters (1 rank's; the same on every
    # mesh): the program's model in bf16 on the same mesh (Megatron's tp over
    # gloo: a tp=2 mesh sums bf16 partial products as ours does) and, to tell
    # bf16 from f32, the same model computed in f32 (one process)
    first = os.path.join(r.tmp, "torch_dp=1_tp=1")
    init = os.path.join(first, "ckpt", "init")
    ours_out = {"dp=1,tp=1": r.run(prog, "dp=1,tp=1", first)}

    def reference(compute, mesh):
        grad = os.path.join(r.tmp, f"grad_{compute}_" + mesh.replace(",", "_"))
        out = sh(["/usr/bin/python3", os.path.join(ROOT, "bench", "gpt_torch.py"), "--model", "gpt2", "--compute",
                  compute, "--mesh", mesh, "--data", r.data, "--init", init, "--steps", str(steps), "--grad", grad,
                  *consts], r.tmp, r.a.v)
        return losses(out, r"^step \d+ loss (\S+)"), losses(out, r"^step \d+ loss .* gnorm (\S+)"), grad

    f32 = reference("f32", "dp=1,tp=1")
    for mesh in ("dp=1,tp=1", "dp=2,tp=2"):
        run = os.path.join(r.tmp, "torch_" + mesh.replace(",", "_"))
        out = ours_out.get(mesh) or r.run(prog, mesh, run)
        ours = (losses(out, r"^step \d+ train (\S+)"), losses(out, r"^step \d+ train .* gnorm (\S+)"))
        t16 = reference("bf16", mesh)
        d_loss, d_norm = rel(ours[0], t16[0]), rel(ours[1], t16[1])
        check(len(ours[0]) == len(t16[0]) == steps and max(d_loss, d_norm) <= TORCH_RTOL,
              f"{mesh}: the first {steps} losses and gradient norms against PyTorch's bf16 step (gpt_torch.py "
              f"--model gpt2): largest relative difference {d_loss:.2g}, {d_norm:.2g} (limit {TORCH_RTOL:g})\n"
              f"   ours  {ours[0]} {ours[1]}\n   torch {t16[0]} {t16[1]}")
        g16, fields = grad_distance(os.path.join(run, "ckpt", "grad0"), t16[2])
        g32, _ = grad_distance(os.path.join(run, "ckpt", "grad0"), f32[2])
        check(g16 <= GRAD_RTOL and g32 >= BF16_SEPARATION * g16,
              f"{mesh}: the gradient of step 0 (every field) is {g16:.2g} from PyTorch's bf16 one (limit "
              f"{GRAD_RTOL:g}) and {g32:.2g} from the f32 model's (at least {BF16_SEPARATION:g} times further: "
              f"ours is bf16)")
        worst = sorted(fields.items(), key=lambda x: -x[1])
        check(bool(worst) and worst[0][1] <= FIELD_RTOL,
              f"{mesh}: the gradient of step 0 field by field against PyTorch's bf16 one (relative L2, limit "
              f"{FIELD_RTOL:g}), worst first:\n" + "\n".join(f"   {f:18} {d:.2g}" for f, d in worst))

    # the benchmark's PyTorch step (bench/gpu/gpt_torch_gpu.py --model gpt2) on
    # the CPU: with the program's casts to TORCH_RTOL; under torch.autocast
    # (other rounding points: biases and residual adds in f32) to AUTOCAST_RTOL
    ours = losses(ours_out["dp=1,tp=1"], r"^step \d+ train (\S+)")
    for amp, tol in (("explicit", TORCH_RTOL), ("autocast", AUTOCAST_RTOL)):
        out = sh(["/usr/bin/python3", os.path.join(ROOT, "bench", "gpu", "gpt_torch_gpu.py"), "--model", "gpt2",
                  "--amp", amp, "--device", "cpu", "--mode", "eager", "--data", r.data, "--init", init,
                  "--steps", str(steps - 1), "--warmup", "1", "--threads", "1", "--attn", "einsum", *consts],
                 first, r.a.v)
        bench = losses(out, r"^step \d+ loss (\S+)")
        result = re.search(r"^RESULT mode=eager .* final_loss=(\S+) .*precision=(\S+)", out, re.M)
        final = [float(result.group(1))] if result and result.group(2) == "bf16-" + amp else []
        d = rel(ours + ours[-1:], bench + final)
        check(len(bench) == steps and len(final) == 1 and d <= tol,
              f"gpt_torch_gpu.py --model gpt2 --amp {amp} --device cpu: the first {steps} losses and the RESULT's "
              f"final_loss, largest relative difference {d:.2g} from ours (limit {tol:g})\n   torch {bench} {final}")

    # gpt2.sh with the CPU build standing in; the mode "nosuch" must get a FAILED row
    consts = [f"-D{k}={v}" for k, v in SMALL.items() if k in TORCH_CONSTS]
    table, rows, row_loss = run_gpt.cpu_bench_table(r, "gpt2.sh", prog,
                                                    consts + ["--threads", "1", "--attn", "einsum"])
    checks = [
        ("the title is GPT-2 small's, bf16", re.search(r"^GPT-2 small .*bf16 compute, f32 master weights", table, re.M)),
        ("MFU over the bf16 peaks", re.search(r"measured bf16 GEMM or datasheet bf16", table)),
        ("our row has a step time and a loss", re.match(r"\d+\.\d+ \[\d+\.\d+-\d+\.\d+\]", rows.get("spmdc --target=cuda", "")) and row_loss("spmdc --target=cuda")),
        ("torch eager's row has a step time and a loss", re.match(r"\d+\.\d+ \[", rows.get("torch eager", "")) and row_loss("torch eager")),
        ("the two rows' training losses agree to 3 digits",
         row_loss("spmdc --target=cuda") and row_loss("torch eager")
         and abs(float(row_loss("spmdc --target=cuda")[0]) - float(row_loss("torch eager")[0])) < 2e-3),
        ("the failing mode has a FAILED row", rows.get("nosuch", "").startswith("FAILED")),
        ("the summary line", re.search(r"^GPT2 gpu=\S+ ours_ms=[\d.]+ eager_ms=[\d.]+$", table, re.M)),
    ]
    for what, ok in checks:
        print(f"{'ok' if ok else 'FAIL'} gpt2.sh: {what}")
        fails += not ok
    print(table)
    return fails


def mode_cuda_sim(r):
    cpu = r.compile("gpt2", SAVE_LAST=1)
    old = os.environ.get("SPMDC_CUDA_SIM")
    os.environ["SPMDC_CUDA_SIM"] = "1"
    try:
        sim = os.path.join(r.tmp, "gpt2_sim")
        flags = [f"-D{k}={v}" for k, v in dict(SMALL, SAVE_LAST=1).items()] + [f"-D{k}={v}" for k, v in r.sizes.items()]
        sh([r.a.spmdc, "--target=cuda", os.path.join(ROOT, "examples", "gpt2_small.spmd"), *flags, "-o", sim],
           r.tmp, r.a.v)
    finally:
        if old is None:
            del os.environ["SPMDC_CUDA_SIM"]
        else:
            os.environ["SPMDC_CUDA_SIM"] = old
    fails = 0
    for mesh in ("dp=1,tp=1", "dp=2,tp=2"):
        runs = {k: os.path.join(r.tmp, f"{k}_" + mesh.replace(",", "_")) for k in ("cpu", "sim")}
        outs = {k: untimed(r.run(p, mesh, runs[k])) for k, p in (("cpu", cpu), ("sim", sim))}
        if outs["cpu"] != outs["sim"] or not re.search(r"^step 8 val ", outs["cpu"], re.M):
            print(f"FAIL {mesh}: the simulation prints\n{outs['sim']}\nthe CPU target prints\n{outs['cpu']}")
            fails += 1
        else:
            print(f"ok {mesh}: the simulation prints what the CPU target prints ({len(outs['cpu'].splitlines())} lines)")
        fails += run_gpt.same_files(*(os.path.join(runs[k], "ckpt", "last") for k in ("cpu", "sim")),
                                    f"{mesh}: the final parameters")
    return fails


def main():
    run_gpt.run_main(__doc__, {"meshes": mode_meshes, "torch": mode_torch, "cuda_sim": mode_cuda_sim},
                     Runner, "gpt2_test_")


if __name__ == "__main__":
    main()
