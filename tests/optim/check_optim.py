#!/usr/bin/python3
"""check_optim.py SPMDC [MPIRUN]: stdlib/optim.spmd against NumPy.

Compiles optim_steps.spmd (next to this file), runs it on one rank and on a
2x2 mesh, and redoes in NumPy (float64) what it did, from the inputs it
saved: three steps of SGD with momentum and of AdamW (PyTorch's formulas:
torch.optim.SGD(momentum=0.9), torch.optim.AdamW, also with two parameter
groups, one without weight decay), the warm-up + cosine
schedule, and clipping by the global norm (torch.nn.utils.clip_grad_norm_).
Every saved result must match to 1e-5 relative (float32 rounding), and the
files of the two meshes must be the same.
"""
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL, ATOL = 1e-5, 1e-6


def lr_at(step, warmup, total, lr, min_lr):
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1.0, total - warmup))
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def expect(name, got, want, fails):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape or not np.allclose(got, want, rtol=RTOL, atol=ATOL):
        err = np.max(np.abs(got - want)) if got.shape == want.shape else "shape"
        print(f"FAIL {name}: largest difference {err}")
        fails.append(name)
    else:
        print(f"ok {name}")


def check(d, out, fails):
    ld = lambda n: np.load(os.path.join(d, n + ".npy")).astype(np.float64)  # noqa: E731
    p0 = {"w": ld("p0_w"), "b": ld("p0_b")}
    gs = [{"w": ld(f"g{i}_w"), "b": ld(f"g{i}_b")} for i in range(3)]
    # SGD with momentum 0.9, lr 0.1 (torch.optim.SGD: buf = mu * buf + g)
    for f in "wb":
        p, buf = p0[f].copy(), np.zeros_like(p0[f])
        for g in gs:
            buf = 0.9 * buf + g[f]
            p = p - 0.1 * buf
        expect(f"sgd_momentum {f}", ld(f"sgd_{f}"), p, fails)
    # AdamW (torch.optim.AdamW), betas (0.9, 0.95), eps 1e-8, weight decay 0.1
    for f in "wb":
        p, m, v = p0[f].copy(), np.zeros_like(p0[f]), np.zeros_like(p0[f])
        for step, g in enumerate(gs):
            lr = lr_at(step, 2, 3, 0.01, 0.001)
            p = p * (1 - lr * 0.1)
            m = 0.9 * m + 0.1 * g[f]
            v = 0.95 * v + 0.05 * g[f] * g[f]
            bc1, bc2 = 1 - 0.9 ** (step + 1), 1 - 0.95 ** (step + 1)
            p = p - (lr / bc1) * m / (np.sqrt(v) / math.sqrt(bc2) + 1e-8)
        expect(f"adamw {f}", ld(f"adamw_{f}"), p, fails)
        if f == "w":
            expect("adamw m", ld("adamw_m_w"), m, fails)
        else:
            expect("adamw v", ld("adamw_v_b"), v, fails)
    # AdamW with two groups (torch.optim.AdamW([{w, weight_decay 0.1}, {b, weight_decay 0}])):
    # scale_fields(p, 1 - lr * 0.1, skip="b") then adam_update
    for f in "wb":
        p, m, v = p0[f].copy(), np.zeros_like(p0[f]), np.zeros_like(p0[f])
        for step, g in enumerate(gs):
            lr = lr_at(step, 2, 3, 0.01, 0.001)
            p = p * (1 - lr * (0.1 if f == "w" else 0.0))
            m = 0.9 * m + 0.1 * g[f]
            v = 0.95 * v + 0.05 * g[f] * g[f]
            bc1, bc2 = 1 - 0.9 ** (step + 1), 1 - 0.95 ** (step + 1)
            p = p - (lr / bc1) * m / (np.sqrt(v) / math.sqrt(bc2) + 1e-8)
        expect(f"adamw groups {f}", ld(f"groups_{f}"), p, fails)
    # the same two groups through torch.optim.AdamW itself, where PyTorch is installed
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        tp = {f: torch.nn.Parameter(torch.from_numpy(p0[f].astype(np.float32))) for f in "wb"}
        opt = torch.optim.AdamW([{"params": [tp["w"]], "weight_decay": 0.1}, {"params": [tp["b"]], "weight_decay": 0.0}],
                                lr=0.01, betas=(0.9, 0.95), eps=1e-8)
        for step, g in enumerate(gs):
            for group in opt.param_groups:
                group["lr"] = lr_at(step, 2, 3, 0.01, 0.001)
            for f in "wb":
                tp[f].grad = torch.from_numpy(g[f].astype(np.float32))
            opt.step()
        for f in "wb":
            expect(f"torch.optim.AdamW groups {f}", ld(f"groups_{f}"), tp[f].detach().numpy(), fails)
    # clipping to norm 1
    # (global_norm: every field of the record, each counted once globally)
    big = {f: ld("big_" + f) for f in "wbzr"}
    norm = math.sqrt(sum((big[f] ** 2).sum() for f in "wbzr"))
    coef = min(1.0, 1.0 / (norm + 1e-6))
    for f in "wbzr":
        expect(f"clip {f}", ld("clip_" + f), big[f] * coef, fails)
    expect("clip (small: unchanged) w", ld("clip2_w"), big["w"] * 0.01, fails)
    printed = dict(re.findall(r"\b(norm2?|clipped|sq|wnorm) ([-0-9.e+]+)", out))
    expect("printed norm", float(printed["norm"]), norm, fails)
    expect("printed norm2", float(printed["norm2"]), norm * 0.01, fails)
    expect("norm after clipping", float(printed["clipped"]), norm * coef, fails)
    expect("squared norm", float(printed["sq"]), norm * norm, fails)
    expect("norm of one tensor", float(printed["wnorm"]), math.sqrt((big["w"] ** 2).sum()), fails)
    # the schedule
    sched = [float(x) for x in re.search(r"^schedule (.*)$", out, re.M).group(1).split()]
    want = [lr_at(s, 10, 110, 1.0, 0.1) for s in (0, 9, 60, 110, 200)]
    expect("warmup_cosine", sched, want, fails)
    lrs = [float(x) for x in re.findall(r"^step \d+ lr (\S+)$", out, re.M)]
    expect("warmup_cosine (short)", lrs, [lr_at(s, 2, 3, 0.01, 0.001) for s in range(3)], fails)


def main():
    spmdc = sys.argv[1]
    mpirun = sys.argv[2] if len(sys.argv) > 2 else "mpirun"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        subprocess.run([spmdc, os.path.join(HERE, "optim_steps.spmd"), "-o", prog], check=True)
        dirs = []
        for np_, mesh in ((1, "dp=1,tp=1"), (4, "dp=2,tp=2")):
            d = os.path.join(tmp, mesh.replace(",", "_"))
            os.makedirs(d)
            r = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(np_), prog,
                                "--mesh", mesh], cwd=d, env=env, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                sys.exit(f"FAIL: the program failed on {mesh}:\n{r.stdout}{r.stderr}")
            print(f"== mesh {mesh}")
            check(d, r.stdout, fails)
            dirs.append(d)
        for n in sorted(os.listdir(dirs[0])):
            if n.endswith(".npy"):
                a, b = np.load(os.path.join(dirs[0], n)), np.load(os.path.join(dirs[1], n))
                if not np.allclose(a, b, rtol=RTOL, atol=ATOL):
                    print(f"FAIL {n} differs between the meshes")
                    fails.append(n)
    if fails:
        sys.exit(f"FAIL: {len(fails)} checks failed")
    print("all checks passed")


if __name__ == "__main__":
    main()
