#!/usr/bin/python3
"""reference.py [--check] [NAME...]: NumPy references of e2e programs.

The programs' inputs are randn (SPEC 10: a counter-based function of the
seed and the global element index: runtime/random.c's Philox4x32-10 and
Box-Muller, redone here with NumPy), so their first and last printed values
can be computed independently of spmdc and its runtime: in float64 from the
program's inputs (rounded to float32 where the program holds float32).

Without --check, prints each reference's lines (what to pin: the `// E2E:
pin="..."` lines of the test file). With --check (the ctest test
e2e/reference), every pin of each file with a reference must equal the
reference's line to the file's pin-rtol, and each reference line must be
pinned: the pins stay the reference's, whatever run_e2e.py then compares.
"""
import math
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_e2e  # noqa: E402

M32 = np.uint64(0xFFFFFFFF)


def philox(seed, counter, stream):
    """runtime/random.c's rt_philox4x32: 4 uint64 arrays of 32-bit words"""
    counter = np.asarray(counter, np.uint64)
    c = [counter & M32, counter >> np.uint64(32), np.full_like(counter, stream), np.zeros_like(counter)]
    k = [np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)]
    for _ in range(10):
        p0, p1 = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k[0], p1 & M32, (p0 >> np.uint64(32)) ^ c[3] ^ k[1], p0 & M32]
        k = [(k[0] + np.uint64(0x9E3779B9)) & M32, (k[1] + np.uint64(0xBB67AE85)) & M32]
    return c


def unit(a, b):
    return ((a >> np.uint64(5)).astype(np.float64) * 67108864.0 + (b >> np.uint64(6)).astype(np.float64)) \
        * (1.0 / 9007199254740992.0)


def randn(shape, seed, std=1.0, dtype=np.float32):
    """randn(T, seed=, std=) of the global shape, as the program holds it"""
    r = philox(seed, np.arange(int(np.prod(shape)), dtype=np.uint64), 0)
    u1, u2 = 1.0 - unit(r[0], r[1]), unit(r[2], r[3])
    x = std * np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)
    return x.reshape(shape).astype(dtype).astype(np.float64)


ERF = np.vectorize(math.erf)


def gelu(z):
    return 0.5 * z * (1.0 + ERF(z / math.sqrt(2.0)))


def gelu_d(z):
    return 0.5 * (1.0 + ERF(z / math.sqrt(2.0))) + z * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def g(v):
    return "%g" % v


def mlp_loss_grad(x, t, w1, w2):
    """the flagship's loss sum((gelu(x w1) w2 - t)^2) / (B D) and its gradients"""
    z = x @ w1
    h = gelu(z)
    err = h @ w2 - t
    n = err.size
    dy = 2.0 * err / n
    dz = (dy @ w2.T) * gelu_d(z)
    return float((err ** 2).sum() / n), x.T @ dz, h.T @ dy


def flagship(dtype=np.float32, steps=20):
    """tests/e2e/flagship_meshes.spmd (examples/mlp_tp.spmd): 20 SGD steps"""
    x = randn((16, 32), 1, 1.0, dtype)
    t = np.tanh(randn((16, 32), 2, 1.0, dtype))
    w1, w2 = randn((32, 64), 3, 0.1, dtype), randn((64, 32), 4, 0.1, dtype)
    losses = []
    for _ in range(steps):
        l, g1, g2 = mlp_loss_grad(x, t, w1, w2)
        losses.append(l)
        w1, w2 = w1 - 0.05 * g1, w2 - 0.05 * g2
    return losses


def ref_flagship_meshes():
    losses = flagship()
    return ["step 0 loss " + g(losses[0]), "step 19 loss " + g(losses[-1])]


def ref_mlp_tp_bf16_meshes():
    # the f32 column is the flagship's (the bf16 one is pinned against it by close=bf16:f32)
    losses = flagship()
    return ["step 0 bf16 %s f32 %s" % (g(losses[0]), g(losses[0])),
            "step 19 bf16 %s f32 %s" % (g(losses[-1]), g(losses[-1]))]


def ref_grad_fd():
    """tests/e2e/grad_fd.spmd: the loss and <grad, v> (f64)"""
    f64 = np.float64
    x, t = randn((8, 8), 1, 1.0, f64), np.tanh(randn((8, 8), 2, 1.0, f64))
    w1, w2 = randn((8, 16), 3, 0.5, f64), randn((16, 8), 4, 0.5, f64)
    v1, v2 = randn((8, 16), 5, 1.0, f64), randn((16, 8), 6, 1.0, f64)
    l, g1, g2 = mlp_loss_grad(x, t, w1, w2)
    ad = float((g1 * v1).sum() + (g2 * v2).sum())
    return ["loss " + g(l), "fd %s ad %s" % (g(ad), g(ad))]


def ref_pipeline_meshes():
    """tests/e2e/pipeline_meshes.spmd: L tanh layers over M microbatches,
    SGD with lr 0.5; the loss and the gradient of layer 0 at steps 0 and 9"""
    M, L, BM, D = 3, 4, 8, 6
    x = randn((M, BM, 4, D), 1)
    w = randn((L, D, D), 2, 0.4)
    n = M * BM * 4 * D
    lines = {}
    for s in range(10):
        loss, gw = 0.0, np.zeros_like(w)
        for m in range(M):
            hs = [x[m]]
            for j in range(L):
                hs.append(np.tanh(hs[-1] @ w[j]))
            err = hs[-1] - 0.5 * np.sin(x[m])
            loss += float((err ** 2).sum()) / n
            dh = 2.0 * err / n
            for j in reversed(range(L)):
                da = dh * (1.0 - hs[j + 1] ** 2)
                gw[j] += hs[j].reshape(-1, D).T @ da.reshape(-1, D)
                dh = da @ w[j].T
        lines[s] = "step %d loss %s g[0] f32 (6, 6) [%s]" % (s, g(loss), ", ".join(g(v) for v in gw[0].ravel()))
        w = w - 0.5 * gw
    return [lines[0], lines[9]]


REFERENCES = {"flagship_meshes": ref_flagship_meshes, "mlp_tp_bf16_meshes": ref_mlp_tp_bf16_meshes,
              "grad_fd": ref_grad_fd, "pipeline_meshes": ref_pipeline_meshes}


def check(name):
    """problems of NAME.spmd's pins against its reference"""
    with open(os.path.join(HERE, name + ".spmd")) as f:
        text = f.read()
    opts, _ = run_e2e.parse_header(text)
    rtol = run_e2e.parse_float(opts, "pin-rtol", run_e2e.parse_float(opts, "rtol", 1e-5))
    ref = REFERENCES[name]()
    # every pin is a reference line, and every reference line is pinned
    problems = run_e2e.check_pins("\n".join(ref), opts["pin"], rtol)
    problems += ["the reference's line is not pinned: " + p
                 for p in run_e2e.check_pins("\n".join(opts["pin"]), ref, rtol)]
    return problems


def main(argv):
    do_check = "--check" in argv
    names = [a for a in argv if a != "--check"] or sorted(REFERENCES)
    fails = 0
    for name in names:
        if not do_check:
            print("\n".join(f'// E2E: pin="{line}"' for line in REFERENCES[name]()))
            continue
        problems = check(name)
        print(f"{'FAIL' if problems else 'ok  '} {name}: {len(REFERENCES[name]())} reference lines")
        for p in problems:
            print("    " + p)
        fails += bool(problems)
    if fails:
        sys.exit(f"FAIL: {fails} of {len(names)}")


if __name__ == "__main__":
    main(sys.argv[1:])
