#!/usr/bin/python3
"""run_llama.py MODE SPMDC [--mpirun PATH] [-v]: tests of examples/llama.spmd
at a small size on tests/gpt/gettysburg.txt, as tests/gpt/run_gpt.py tests
the GPT (whose runner, output comparison and gradient comparison it uses).

MODE:
  meshes  the same 20-step training run (losses, gradient norms,
          validation losses) on 1 rank and on (2,1), (1,2), (2,2)
  resume  stopped after 5 steps and run again = the uninterrupted run: the
          same printed numbers and byte-identical checkpoint files (2x2)
  torch   the first steps' losses and gradient norms, and the gradient of
          step 0 field by field (ckpt/grad0, -D SAVE_GRAD=1), equal those
          of bench/llama_torch.py (the same model as transformers' Llama
          modules in plain PyTorch, one process) from the program's initial
          parameters (ckpt/init) on the same batches, on 1 rank and on
          (2,2), (2,1), (1,2); exit 77 (skipped) when PyTorch is not
          installed
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpt"))
import run_gpt  # noqa: E402

SKIP = 77
# the small model: 2 blocks of width 32, 4 query heads in 2 KV groups, context 16
SMALL = {"T": 16, "D": 32, "NH": 4, "NKV": 2, "F": 96, "L": 2, "B": 8, "STEPS": 8, "WARMUP": 2,
         "PRINT_EVERY": 1, "EVAL_EVERY": 4, "EVAL_BATCHES": 2, "CKPT_EVERY": 100}
TORCH_CONSTS = ("T", "D", "NH", "NKV", "F", "L", "B", "STEPS", "WARMUP")
MESHES = ("dp=1,tp=1", "dp=2,tp=2", "dp=2,tp=1", "dp=1,tp=2")
# the gradients of step 0, field by field, to GRAD_TOL of the field's
# largest magnitude (run_gpt.compare_grads); measured worst: see docs/llama.md
GRAD_TOL = 1e-5


class Runner(run_gpt.Runner):
    def compile(self, name, **consts):
        c = dict(SMALL, **consts)
        prog = os.path.join(self.tmp, name)
        flags = [f"-D{k}={v}" for k, v in c.items()] + [f"-D{k}={v}" for k, v in self.sizes.items()]
        run_gpt.sh([self.a.spmdc, os.path.join(ROOT, "examples", "llama.spmd"), *flags, "-o", prog], self.tmp,
                   self.a.v)
        return prog


def mode_torch(r):
    try:
        subprocess.run(["/usr/bin/python3", "-c", "import torch"], check=True, capture_output=True)
    except (subprocess.CalledProcessError, FileNotFoundError):
        print("SKIPPED: PyTorch (python3-torch) is not installed")
        return SKIP
    steps = 5
    prog = r.compile("llama", SAVE_INIT=1, SAVE_GRAD=1, STEPS=steps, EVAL_EVERY=100)
    consts = [f"-D{k}={v}" for k, v in dict(SMALL, STEPS=steps).items() if k in TORCH_CONSTS]
    fails, theirs, torch_grad = 0, None, os.path.join(r.tmp, "torch_grad0")
    for mesh in MESHES:
        run = os.path.join(r.tmp, "torch_" + mesh.replace(",", "_"))
        out_ours = r.run(prog, mesh, run)
        ours = (run_gpt.losses(out_ours, r"^step \d+ train (\S+)")
                + run_gpt.losses(out_ours, r"^step \d+ train .* gnorm (\S+)"))
        if theirs is None:   # one reference: the model is the same on every mesh (same ckpt/init)
            out = run_gpt.sh(["/usr/bin/python3", os.path.join(ROOT, "bench", "llama_torch.py"), "--data", r.data,
                              "--init", os.path.join(run, "ckpt", "init"), "--grad", torch_grad, *consts],
                             r.tmp, r.a.v)
            theirs = (run_gpt.losses(out, r"^step \d+ loss (\S+)")
                      + run_gpt.losses(out, r"^step \d+ loss .* gnorm (\S+)"))
        worst = max((abs(a - b) / abs(b) for a, b in zip(ours, theirs)), default=1.0)
        ok = len(ours) == len(theirs) == 2 * steps and worst < 2e-5
        print(f"{'ok' if ok else 'FAIL'} {mesh}: losses, then gradient norms\n   ours  {ours}\n   torch {theirs}\n"
              f"   largest relative difference {worst:.2g}")
        fails += not ok
        run_gpt.GRAD_TOL = GRAD_TOL
        diffs, problems = run_gpt.compare_grads(os.path.join(run, "ckpt", "grad0"), torch_grad)
        if diffs:
            print(f"{'FAIL' if problems else 'ok'} {mesh}: the gradients of step 0, {len(diffs)} fields; worst "
                  f"{diffs[0][0]}: max|ours - torch| = {diffs[0][1]:.2g} of its largest magnitude")
            print("\n".join(f"   {f:18} {d:.2g}  (max|torch| {m:.3g})" for f, d, m in diffs))
        for p in problems:
            print(f"FAIL {mesh}: gradient {p}")
        fails += bool(problems)
    return fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["meshes", "resume", "torch"])
    ap.add_argument("spmdc")
    ap.add_argument("--mpirun", default=os.environ.get("MPIRUN", "mpirun"))
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    args.spmdc = os.path.abspath(args.spmdc)
    with tempfile.TemporaryDirectory(prefix="llama_test_") as tmp:
        r = Runner(args, tmp)
        fails = {"meshes": run_gpt.mode_meshes, "resume": run_gpt.mode_resume, "torch": mode_torch}[args.mode](r)
    if fails == SKIP:
        sys.exit(SKIP)
    if fails:
        sys.exit(f"FAIL: {fails} comparison(s) failed")
    print("PASS")


if __name__ == "__main__":
    main()
