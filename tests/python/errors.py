"""errors.py LIB CASE: the Python module's errors, on every rank alike.
Each case prints 'rank R: Error: MESSAGE' for the exception it expects
(errors.sh compares), or fails.  Cases: args (wrong dtype, shape, a
non-contiguous array, a missing field, a wrong count, an unknown name,
one rank alone wrong), mesh (a mesh of more ranks than the job's), ids (a
runtime check every rank fails alike: raised on all), ids_one (a runtime
error on rank 1 only: the job ends with the message)."""
import sys

import numpy as np

import spmdc

path, case = sys.argv[1], sys.argv[2]


def expect_error(what, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except spmdc.Error as e:
        print("rank %d: %s: Error: %s" % (rank, what, e), flush=True)
        return
    print("rank %d: %s: FAIL: no error" % (rank, what), flush=True)
    sys.exit(1)


rank = 0
if case == "mesh":
    try:
        from mpi4py import MPI
        rank = MPI.COMM_WORLD.Get_rank()
        n = MPI.COMM_WORLD.Get_size()
    except ImportError:
        n = 1
    expect_error("mesh", spmdc.load, path, mesh="dp=%d,tp=2" % (n + 1))
    sys.exit(0)

lib = spmdc.load(path, mesh="tp=1")
rank = lib.rank
p = lib.init()
f32 = np.float32
x = np.zeros([16 // lib.world, 32], f32)
t = np.zeros_like(x)
buf = {k: np.zeros(v.shape, f32) for k, v in p.items()}
if case == "args":
    expect_error("dtype", lib.step, x.astype(np.float64), t, p, buf)
    expect_error("shape", lib.step, np.zeros([16 // lib.world, 31], f32), t, p, buf)
    wide = np.zeros([16 // lib.world, 64], f32)
    expect_error("contiguous", lib.step, wide[:, ::2], t, p, buf)
    expect_error("field", lib.step, x, t, {"w1": p["w1"]}, buf)
    expect_error("count", lib.step, x, t, p)
    expect_error("name", lib.step, x, t, p, buf, lr=0.1)
    expect_error("list", lib.step, x.tolist(), t, p, buf)
    # only rank 1's argument is wrong: every rank raises with its message
    if lib.world > 1:
        mine = x if rank != 1 else np.zeros([3, 32], f32)
        expect_error("one_rank", lib.step, mine, t, p, buf)
    loss, p, buf = lib.step(x, t, p, buf)  # still usable
    print("rank %d: a good call after the errors: loss %g" % (rank, loss.item()), flush=True)
elif case in ("ids", "ids_one"):
    ids = np.zeros([4 // lib.world], np.int32)
    table = np.ones([8, 4], f32)
    print("rank %d: rows %s" % (rank, lib.rows(ids, table).numpy()[0]), flush=True)
    if case == "ids" or rank == 1:
        ids[0] = 9
    if case == "ids":
        expect_error("ids", lib.rows, ids, table)
    else:  # rank 0 goes on into a step's collectives, which rank 1 never joins
        lib.rows(ids, table)
        lib.step(x, t, p, buf)
        print("rank %d: FAIL: the job went on" % rank, flush=True)
        sys.exit(1)
