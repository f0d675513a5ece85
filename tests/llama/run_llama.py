#!/usr/bin/python3
"""run_llama.py MODE SPMDC [--mpirun PATH] [-v]: tests of examples/llama.spmd
at a small size on tests/gpt/gettysburg.txt, as tests/gpt/run_gpt.py tests
the GPT (whose runner, modes meshes and resume, comparison with PyTorch and
command line it uses).

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
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpt"))
import run_gpt  # noqa: E402

# the small model: 2 blocks of width 32, 4 query heads in 2 KV groups, context 16
SMALL = {"T": 16, "D": 32, "NH": 4, "NKV": 2, "F": 96, "L": 2, "B": 8, "STEPS": 8, "WARMUP": 2,
         "PRINT_EVERY": 1, "EVAL_EVERY": 4, "EVAL_BATCHES": 2, "CKPT_EVERY": 100}
TORCH_CONSTS = ("T", "D", "NH", "NKV", "F", "L", "B", "STEPS", "WARMUP")
MESHES = ("dp=1,tp=1", "dp=2,tp=2", "dp=2,tp=1", "dp=1,tp=2")
# the gradients of step 0, field by field, to GRAD_TOL of the field's
# largest magnitude (run_gpt.compare_grads); measured worst: see docs/llama.md
GRAD_TOL = 1e-5


class Runner(run_gpt.Runner):
    source, small = "llama.spmd", SMALL


def mode_torch(r):
    # the reference is one process (the same model on every mesh): it runs once
    return run_gpt.compare_with_torch(r, "llama_torch.py", TORCH_CONSTS, MESHES, per_mesh=False, grad_tol=GRAD_TOL)


def main():
    run_gpt.run_main(__doc__, {"meshes": run_gpt.mode_meshes, "resume": run_gpt.mode_resume, "torch": mode_torch},
                     Runner, "llama_test_")


if __name__ == "__main__":
    main()
