#!/usr/bin/env python3
"""attention_torch.py: PyTorch's fused attention on the GPU, timed as
bench/attention.spmd times ours (bench/gpu/attention.sh): STEPS steps of the
forward and backward of sum(scaled_dot_product_attention(q, k, v,
is_causal=True) * w) with respect to q, k, v [B, H, T, E] (f32 leaves; with
--dtype bf16 their bf16 copies go in and the output is cast back to f32, as
MODE=2 does), each step between torch.cuda.synchronize() calls, step 0 left
out.  Prints "step N ms X" per step and a last line
  TORCH dtype=D backend=NAME median_ms=X
(backend: the SDPA kernel PyTorch picked, as far as it says)."""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--H", type=int, default=12)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--E", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False  # ours has no TF32 either
    torch.backends.cudnn.allow_tf32 = False
    g = torch.Generator(device=dev).manual_seed(1)
    shape = (a.B, a.H, a.T, a.E)
    q, k, v, w = (torch.randn(shape, device=dev, generator=g) for _ in range(4))
    for x in (q, k, v):
        x.requires_grad_(True)
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32

    def step():
        o = F.scaled_dot_product_attention(q.to(dt), k.to(dt), v.to(dt), is_causal=True)
        loss = (o.float() * w).sum()
        gq, gk, gv = torch.autograd.grad(loss, (q, k, v))
        return loss, gq

    times = []
    for s in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss, gq = step()
        print("step", s, "loss", float(loss), "gq", float((gq * gq).sum()))
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1000
        print("step", s, "ms", "%.4f" % ms)
        if s > 0:
            times.append(ms)
    backend = "unknown"
    try:  # which kernel SDPA would take for these inputs
        from torch.backends.cuda import can_use_flash_attention, can_use_efficient_attention, SDPAParams
        p = SDPAParams(q.to(dt), k.to(dt), v.to(dt), None, 0.0, True, False)
        backend = "flash" if can_use_flash_attention(p) else "efficient" if can_use_efficient_attention(p) else "math"
    except Exception:  # an older PyTorch: no SDPAParams
        pass
    print("TORCH dtype=%s backend=%s median_ms=%.3f" % (a.dtype, backend, statistics.median(times)))


if __name__ == "__main__":
    main()
