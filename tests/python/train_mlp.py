"""train_mlp.py LIB MESH: mlp_step.spmd's training loop in Python over
spmdc --shared's library: batches read with NumPy from mlp_data/ (the
global arrays; each rank passes its block), the parameters and momentum
kept in the runtime from step to step.  Prints the losses as the
standalone program does and checks the final parameters against the
standalone program's mlp_out/ bit for bit.  Run with or without mpirun."""
import logging
import sys
import time

import numpy as np

import spmdc

logging.basicConfig(format="%(message)s", level=logging.INFO)
lib = spmdc.load(sys.argv[1], mesh=sys.argv[2])
log = logging.getLogger("train")
xs, ts = np.load("mlp_data/x.npy"), np.load("mlp_data/t.npy")
p = lib.init()
buf = {k: np.zeros(v.shape, np.float32) for k, v in p.items()}  # this rank's blocks
t0 = time.perf_counter()
for s in range(xs.shape[0]):
    x, t = lib.shard("step", "x", xs[s]), lib.shard("step", "t", ts[s])
    loss, p, buf = lib.step(x, t, p, buf)
    if lib.rank == 0:
        print("step %d loss %g" % (s, loss.item()), flush=True)
if lib.rank == 0:
    log.info("python: %d ranks, mesh %s, %.3f ms per step", lib.world, lib.mesh,
             1e3 * (time.perf_counter() - t0) / xs.shape[0])
for k in ("w1", "w2"):
    want = lib.shard("step", "p." + k, np.load("mlp_out/%s.npy" % k))
    got = p[k].numpy()
    if got.tobytes() != want.tobytes():
        print("FAIL rank %d: %s differs from the standalone program's (max %g)"
              % (lib.rank, k, np.abs(got - want).max()), flush=True)
        sys.exit(1)
if lib.rank == 0:
    print("final parameters identical to the standalone program's", flush=True)
