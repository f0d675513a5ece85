"""gpt_train.py LIB MESH [--steps N] [--print-every K] [--eval-every K] [--ckpt-every K]:
the flagship's training loop (examples/gpt.spmd's main) in Python, over the
library `spmdc --shared examples/gpt.spmd -o LIB` builds (docs/python.md).

The batches are read with NumPy: data/train.npy memory-mapped, each rank
cutting its B/dp windows at the offsets the program draws
(train_windows(step), the counter-based generator main() uses, so the
batches are main()'s on every mesh). The state (parameters, AdamW's moments,
the step) stays in the runtime from step to step (spmdc.Tensor handles);
only the loss and the gradient norm cross to Python. Checkpoints go through
the library (save_state: ckpt/last, the directory main() resumes from, and
that this loop resumes from too). Rank 0 prints main()'s lines ("step S
train L gnorm G", "step S val V") and logs the time per step with the
standard library's logging.

Run from the directory holding data/ (scripts/gpt_data.py writes it):
    spmdc --shared -D NTRAIN=$NTRAIN -D NVAL=$NVAL examples/gpt.spmd -o libgpt.so
    PYTHONPATH=python python3 examples/gpt_train.py ./libgpt.so dp=1,tp=1
    PYTHONPATH=python mpirun -np 4 python3 examples/gpt_train.py ./libgpt.so dp=2,tp=2
"""
import argparse
import logging
import os
import time

import numpy as np

import spmdc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lib")
    ap.add_argument("mesh")
    ap.add_argument("--steps", type=int, required=True, help="train until this step (main()'s STEPS or STOP_AFTER)")
    ap.add_argument("--print-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--ckpt-every", type=int, default=100)
    a = ap.parse_args()
    logging.basicConfig(format="%(asctime)s %(name)s: %(message)s", level=logging.INFO)
    log = logging.getLogger("gpt_train")

    lib = spmdc.load(a.lib, mesh=a.mesh)
    T = lib.train_step.blocks()[0][1][1]   # ids, this rank's block: [B/dp, T]
    data = np.load("data/train.npy", mmap_mode="r")   # the whole text; each rank reads its windows
    span = np.arange(T + 1, dtype=np.int64)

    if os.path.isdir("ckpt/last"):
        state = lib.load_state()
        log.info("resumed from ckpt/last at step %d", int(state["step"].item()))
    else:
        state = lib.init_state()
    start = int(state["step"].item())
    acc, n_timed, t_last = 0.0, 0, time.perf_counter()
    for step in range(start, a.steps):
        starts = lib.train_windows(state["step"]).numpy().astype(np.int64)   # [B/dp]
        win = data[starts[:, None] + span].astype(np.int32)              # [B/dp, T + 1]
        ids, targets = np.ascontiguousarray(win[:, :T]), np.ascontiguousarray(win[:, 1:])
        loss, gnorm, state = lib.train_step(ids, targets, state)
        acc += loss.item()   # f32 sums in main(): here each step's value, summed in f64
        n_timed += 1
        last = step + 1 == a.steps
        if (step + 1) % a.print_every == 0 or last:
            dt = time.perf_counter() - t_last
            if lib.rank == 0:
                print("step %d train %.6g gnorm %.6g" % (step + 1, acc / n_timed, gnorm.item()), flush=True)
                log.info("%.3f ms/step over %d steps", 1e3 * dt / n_timed, n_timed)
            acc, n_timed = 0.0, 0
        if (step + 1) % a.eval_every == 0 or last:
            v = lib.val_loss(state["params"])
            if lib.rank == 0:
                print("step %d val %.6g" % (step + 1, v.item()), flush=True)
        if (step + 1) % a.ckpt_every == 0 or last:
            lib.save_state(state)
            if lib.rank == 0:
                print("step %d checkpoint ckpt/last" % (step + 1), flush=True)
        if n_timed == 0:
            t_last = time.perf_counter()
    lib.close()


if __name__ == "__main__":
    main()
