#!/usr/bin/env python3
"""The training step of examples/gpt.spmd (or examples/gpt2_small.spmd) in
PyTorch on one device, timed: the PyTorch side of the GPU benchmarks
(bench/gpu/README.md).

    python3 bench/gpu/gpt_torch_gpu.py --data DIR [--model gpt|gpt2]
        [--mode eager|compile|compile-rog] [--steps N] [--warmup N] [--device cuda|cpu]
        [--init CKPT] [--attn sdpa|einsum] [--amp explicit|autocast] [-D NAME=VALUE ...]
    python3 bench/gpu/gpt_torch_gpu.py --peak [...]  # first cuBLAS's f32 and bf16 GEMM TFLOP/s

The model is bench/gpt_torch.py's (make_loss with tp=None: the whole model
on one device, plain embedding and F.cross_entropy), with the program's
constants (-D overrides them as spmdc's -D does). --model gpt (default): the
flagship, f32 throughout (TF32 off, as our CUDA target without SPMD_TF32).
--model gpt2: GPT-2 small, bf16 compute with f32 master weights (parameters,
gradients and AdamW's state f32): --amp explicit (default) casts as the
program does, op for op (make_loss's compute="bf16"); --amp autocast runs
the f32 model under torch.autocast(dtype=torch.bfloat16) instead, as a
PyTorch user would write it (the same casts for the matmuls, attention and
the loss; biases and residual adds in f32). One step does what the
program's step does:
* the batch: B windows of T + 1 tokens of DIR/train.npy (on the device) at
  the program's offsets (Philox uniform() with seed DATA_SEED + step, the
  same windows; the offsets of every step are drawn on the host before the
  timing starts, one [B] row per step, so the step only indexes them and
  gathers the windows on the device);
* the loss and its gradient, the gradients clipped to a global norm of CLIP
  (torch.nn.utils.clip_grad_norm_), the warm-up + cosine learning rate of
  step s, torch.optim.AdamW (BETA1, BETA2, EPS, WD).
Modes: eager; compile (torch.compile, default mode, of the loss, whose
backward AOTAutograd compiles, and of the clip + AdamW update, with the
learning rate a device tensor filled each step so that no step recompiles);
compile-rog (the same with mode="reduce-overhead": CUDA graphs).

--warmup steps run first and are not timed (their time beyond that of
steady steps is reported as compile_s: compilation, autotuning, graph
capture); then --steps steps, each timed between torch.cuda.synchronize()
calls. Step s of the run is the program's step s (its batch, its learning
rate), warm-up included. --init CKPT starts from the program's initial
parameters (a checkpoint of examples/gpt.spmd written with -D SAVE_INIT=1)
and prints `step S loss L` for the first 10 steps (the loss of step S, before
its update, as the program's `step S+1 train L` with PRINT_EVERY=1);
otherwise the parameters are drawn from the same distribution by NumPy.
The last line:

    RESULT mode=eager ms_per_step_median=X min=Y max=Z tokens_per_s=W compile_s=C final_loss=L ...

(tokens_per_s = B*T / median; final_loss: the mean loss of the last window
of --loss-every K steps (default 1: the last step's loss), the windows
counted from step 0 as the program's PRINT_EVERY (each step adds its loss to
a device accumulator, as the program's does); then
model_tflops_per_step, tflops (achieved, at the median), attn, model, precision
(f32, bf16-explicit or bf16-autocast), device,
steps, warmup). A mode that fails prints `RESULT mode=M failed=WHY` and
exits 1.
"""
import argparse
import os
import statistics
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import gpt_torch  # noqa: E402  (bench/gpt_torch.py: the model, its config, the batches, the schedule)


def model_flops(c):
    """Model FLOPs of one training step (forward + backward = 3 x forward):
    per token, every matmul's 2 x its weights (q, k, v, o: 4 D^2; the MLP:
    2 D F per layer; the tied output layer: D NV) and attention's scores and
    weighted sum over the whole T x T square (2 x 2 T D per layer; the causal
    half is not subtracted, as in the usual MFU convention)."""
    D, T, L, NV = c["D"], c["T"], c["L"], c["NV"]
    F4 = c["FF"] * D
    per_token = L * (2 * (4 * D * D + 2 * D * F4) + 4 * T * D) + 2 * D * NV
    return 3 * per_token * c["B"] * T


def measure_peak(device):
    """cuBLAS GEMM throughput (TFLOP/s) at 8192^3, f32 without TF32 and
    bf16 (f32 accumulation): the measured ceilings MFU is also given over."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 8192 if device.type == "cuda" else 1024
    out = {}
    for name, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        a = torch.randn(n, n, device=device).to(dt)
        b = torch.randn(n, n, device=device).to(dt)
        for _ in range(3):
            a @ b
        times = []
        for _ in range(10):
            sync(device)
            t0 = time.perf_counter()
            a @ b
            sync(device)
            times.append(time.perf_counter() - t0)
        out[name] = 2 * n ** 3 / min(times) / 1e12
    print(f"PEAK f32_gemm_tflops={out['f32']:.2f} bf16_gemm_tflops={out['bf16']:.2f} n={n}", flush=True)


def sync(device):
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(args, c):
    import torch
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("highest")
    compiled = args.mode != "eager"
    if compiled and not hasattr(torch, "compile"):
        raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
    if args.attn == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        raise RuntimeError(f"torch {torch.__version__} has no scaled_dot_product_attention (--attn einsum)")

    B, T = c["B"], c["T"]
    train_np = np.load(os.path.join(args.data, "train.npy"))
    total = args.warmup + args.steps
    offsets = np.stack([gpt_torch.batch_offsets(c["DATA_SEED"] + s, B, T, len(train_np))
                        for s in range(total)]).astype(np.int64)                       # [steps, B]
    train = torch.from_numpy(train_np.astype(np.int64)).to(device)
    offs = torch.from_numpy(offsets).to(device)
    window = torch.arange(T + 1, device=device)

    init = gpt_torch.load_params(args.init, c) if args.init else gpt_torch.random_params(c, args.seed)
    P = {k: torch.nn.Parameter(torch.from_numpy(v).to(device)) for k, (v, _) in init.items()}
    params = [P[k] for k in sorted(P)]
    bf16 = args.model == "gpt2"
    compute = "bf16" if bf16 and args.amp == "explicit" else "f32"
    forward = gpt_torch.make_loss(P, c, None, attn=args.attn, device=device, compute=compute)
    autocast = bf16 and args.amp == "autocast"

    def loss_at(off):                       # off: [B] window starts
        win = train[off.unsqueeze(1) + window]                                 # [B, T+1]
        if autocast:
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                return forward(win[:, :T], win[:, 1:]).float()
        return forward(win[:, :T], win[:, 1:])

    hyper = dict(betas=(c["BETA1"], c["BETA2"]), eps=c["EPS"], weight_decay=c["WD"])
    lr_tensor = compiled and device.type == "cuda"
    if lr_tensor:
        # a Python float that changes every step would recompile every step
        opt = torch.optim.AdamW(params, lr=torch.tensor(c["LR"], device=device), foreach=True,
                                capturable=True, **hyper)
    else:
        opt = torch.optim.AdamW(params, lr=c["LR"], **hyper)

    def update():
        torch.nn.utils.clip_grad_norm_(params, c["CLIP"])
        opt.step()

    mark_step = lambda: None  # noqa: E731
    graphs = lambda: 0  # noqa: E731
    if compiled:
        mode = "reduce-overhead" if args.mode == "compile-rog" else "default"
        # the compiled loss takes the step's offsets from one fixed buffer
        # (a view at another offset each step could be guarded on), and the
        # parameters and the data stay where they are (static inputs of the
        # CUDA graphs, not copied in at every replay)
        cur = torch.empty_like(offs[0])
        if hasattr(torch._dynamo, "mark_static_address"):
            for t in params + [train, window, cur]:
                torch._dynamo.mark_static_address(t)
        loss_at = torch.compile(loss_at, mode=mode)
        update = torch.compile(update, mode=mode)
        if args.mode == "compile-rog":
            mark_step = torch.compiler.cudagraph_mark_step_begin

        def graphs():
            try:
                from torch._dynamo.utils import counters
                return counters["stats"]["unique_graphs"]
            except (ImportError, KeyError, AttributeError):
                return 0

    acc = torch.zeros((), device=device)     # the loss summed over a window of steps

    def step(s, keep):
        mark_step()
        if compiled:
            cur.copy_(offs[s])
            loss = loss_at(cur)
        else:
            loss = loss_at(offs[s])
        kept = loss.detach().clone() if keep else None     # (a CUDA graph's output is reused)
        acc.add_(loss.detach())
        loss.backward()
        lr = gpt_torch.lr_at(s, c)
        for g in opt.param_groups:
            if lr_tensor:
                g["lr"].fill_(lr)
            else:
                g["lr"] = lr
        update()
        for p in params:
            p.grad = None
        return kept

    losses, times, means = {}, [], []
    keep = set(range(10)) if args.init else set()
    n_acc = 0
    for s in range(total):
        if s == args.warmup:
            graphs_warm = graphs()
        sync(device)
        t0 = time.perf_counter()
        loss = step(s, s in keep)
        sync(device)
        times.append(time.perf_counter() - t0)
        if s in keep:
            losses[s] = loss
        n_acc += 1
        if (s + 1) % args.loss_every == 0 or s == total - 1:   # as the program's prints
            means.append(acc / n_acc)
            acc.zero_()
            n_acc = 0
    if args.warmup == 0:
        graphs_warm = 0
    timed = times[args.warmup:]
    med = statistics.median(timed)
    compile_s = max(0.0, sum(times[:args.warmup]) - args.warmup * med) if compiled else 0.0
    late = graphs() - graphs_warm
    if compiled and late and args.warmup:
        print(f"WARNING: {late} graph(s) compiled during the timed steps", file=sys.stderr)
    for s in sorted(losses):
        if s < 10 and args.init:
            print(f"step {s} loss {float(losses[s]):.7g}")
    flops = model_flops(c)
    precision = f"bf16-{args.amp}" if bf16 else "f32"
    print(f"RESULT mode={args.mode} ms_per_step_median={med * 1e3:.4f} min={min(timed) * 1e3:.4f} "
          f"max={max(timed) * 1e3:.4f} tokens_per_s={B * T / med:.1f} compile_s={compile_s:.2f} "
          f"final_loss={float(means[-1]):.6g} model_tflops_per_step={flops / 1e12:.6g} "
          f"tflops={flops / med / 1e12:.4g} attn={args.attn} model={args.model} precision={precision} "
          f"device={args.device} steps={args.steps} "
          f"warmup={args.warmup} first_step_s={times[0]:.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["eager", "compile", "compile-rog"], default="eager")
    ap.add_argument("--model", choices=["gpt", "gpt2"], default="gpt",
                    help="examples/gpt.spmd (f32) or examples/gpt2_small.spmd (bf16 compute, f32 master weights)")
    ap.add_argument("--amp", choices=["explicit", "autocast"], default="explicit",
                    help="--model gpt2's bf16: the program's casts, or torch.autocast over the f32 model")
    ap.add_argument("--data", help="directory of train.npy (scripts/gpt_data.py)")
    ap.add_argument("--steps", type=int, default=200, help="timed steps")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--init", metavar="CKPT", help="the program's initial parameters (-D SAVE_INIT=1: ckpt/init)")
    ap.add_argument("--attn", choices=["sdpa", "einsum"], default=None,
                    help="attention: F.scaled_dot_product_attention (default where torch has it) "
                         "or the program's einsum + mask + softmax")
    ap.add_argument("--loss-every", type=int, default=1, metavar="K",
                    help="final_loss: the mean loss of the last window of K steps (the program's "
                         "`train` column with PRINT_EVERY=K)")
    ap.add_argument("--seed", type=int, default=0, help="NumPy seed of the parameters without --init")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--peak", action="store_true", help="measure the GEMM ceilings first (alone without --data)")
    ap.add_argument("-D", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"RESULT mode={args.mode} failed=no-torch ({e})", flush=True)
        sys.exit(1)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.peak:
        measure_peak(torch.device(args.device))
        if not args.data:
            return
    if not args.data:
        ap.error("--data is required (or --peak alone)")
    if args.steps < 1 or args.warmup < 0 or args.loss_every < 1:
        ap.error("--steps and --loss-every must be at least 1, --warmup at least 0")
    if args.attn is None:
        args.attn = "sdpa" if hasattr(torch.nn.functional, "scaled_dot_product_attention") else "einsum"
    c = gpt_torch.config(args.D, "gpt_torch_gpu", gpt_torch.CONFIG_GPT2 if args.model == "gpt2" else None)
    try:
        run(args, c)
    except Exception as e:  # noqa: BLE001 (the benchmark reports any failure as its result)
        traceback.print_exc()
        why = f"{type(e).__name__}: {e}".splitlines()[0][:200].replace(" ", "_")
        print(f"RESULT mode={args.mode} failed={why}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
