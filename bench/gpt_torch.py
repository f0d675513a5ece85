#!/usr/bin/python3
"""The GPT of examples/gpt.spmd in PyTorch, with Megatron-style tensor and
sequence parallelism over gloo: the reference our program's losses are
checked against and the baseline its speed is compared with.

    /usr/bin/python3 bench/gpt_torch.py --data DIR --init CKPT [--mesh dp=2,tp=2]
        [--steps N] [--every K] [-D NAME=VALUE ...] [--time FILE] [--grad DIR]
        [--model gpt|gpt2] [--compute f32|bf16]

* Model, optimizer, schedule and data are those of examples/gpt.spmd, with
  the same constant names (-D overrides them as spmdc's -D does): byte
  embeddings (vocabulary-parallel, tied with the output layer), learned
  positions, L pre-LN blocks of causal multi-head attention (heads split on
  tp) and a GELU MLP (column- then row-parallel), a final layer norm, the
  vocabulary-parallel cross-entropy, global-norm clipping, torch.optim.AdamW
  and a warm-up + cosine learning rate.  --model gpt2: examples/gpt2_small.spmd
  instead (its sizes and rates; bf16 compute with f32 master weights, the
  program's casts: make_loss's compute="bf16"; GPT-2's tanh GELU).
* The initial parameters are read from CKPT, a checkpoint directory that
  examples/gpt.spmd writes (one global .npy per field path); each rank keeps
  its own shard.
* The batches are the program's: each step draws B window offsets with the
  runtime's counter-based generator (Philox4x32-10 keyed by the seed, the
  global element index as the counter: uniform() of runtime/random.c,
  re-implemented below in NumPy), so the same windows of DIR/train.npy.
* Ranks are laid out as our runtime lays them out (rank = i_dp * tp + i_tp).
  Megatron's regions: copy_to (identity, all-reduce backward), all-gather of
  the sequence before a column-parallel layer (reduce-scatter backward) and
  reduce-scatter after a row-parallel one (all-gather backward); gloo has no
  reduce-scatter, so it is an all_to_all of the blocks plus a local sum
  (the same bytes as a ring reduce-scatter). Gradients of parameters that
  are replicated on tp are all-reduced over tp, all gradients over dp.

Rank 0 prints `step S loss L gnorm G time T` every K steps (the training
loss of step S, before its update, the global norm of its gradient before
clipping, its wall time) and, with --time FILE, writes each step's wall
time in seconds (one per line) to FILE.  With --grad DIR it writes the
gradient of step 0 (summed over dp and tp as the optimizer gets it, before
clipping) to DIR as examples/gpt.spmd's -D SAVE_GRAD=1 writes ckpt/grad0:
one global float32 .npy per field path (wte.npy, blocks.wq.npy, ...), in the
program's layout (blocks stacked on a leading [L], heads split out:
wq [L, D, NH, HD], wo [L, NH, HD, D]; this model keeps that layout
throughout, so a tp-split gradient is only gathered along its split dim).
"""
import argparse
import math
import os
import socket
import sys
import time

import numpy as np

# The constants of examples/gpt.spmd (names and defaults must stay in step).
CONFIG = {
    "B": 16, "T": 128, "D": 128, "NH": 4, "L": 6, "NV": 256, "FF": 4,
    "STEPS": 3000, "WARMUP": 100, "LR": 3e-3, "MIN_LR": 3e-4, "WD": 0.01,
    "BETA1": 0.9, "BETA2": 0.95, "EPS": 1e-8, "CLIP": 1.0, "DATA_SEED": 1000,
}


def program_defaults(config, program):
    """Sets config's defaults to those examples/PROGRAM now has: every
    `const NAME = NUMBER;` of the program whose NAME is in config, so that
    a change of the program's size cannot leave a reference behind (also
    bench/llama_torch.py's)."""
    import re
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", program)
    try:
        text = open(path).read()
    except OSError:
        return
    for name, value in re.findall(r"^const (\w+) = ([0-9.eE+-]+);", text, re.M):
        if name in config:
            config[name] = type(config[name])(float(value)) if isinstance(config[name], int) else float(value)


program_defaults(CONFIG, "gpt.spmd")

# examples/gpt2_small.spmd (GPT-2 small, bf16 compute with f32 master
# weights): the same constant names, its own sizes and rates; make_loss
# with compute="bf16" is its model.
CONFIG_GPT2 = dict(CONFIG, B=16, T=1024, D=768, NH=12, L=12, NV=50257, STEPS=5000, WARMUP=200,
                   LR=6e-4, MIN_LR=6e-5, WD=0.1, GELU="tanh")
program_defaults(CONFIG_GPT2, "gpt2_small.spmd")


# ---- the runtime's counter-based random numbers (runtime/random.c)

M32 = np.uint64(0xFFFFFFFF)


def philox4x32(seed, counter, stream):
    """Philox4x32-10 of runtime/random.c, vectorised over counters."""
    counter = np.asarray(counter, dtype=np.uint64)
    c0, c1 = counter & M32, counter >> np.uint64(32)
    c2 = np.full_like(c0, stream)
    c3 = np.zeros_like(c0)
    k0, k1 = np.uint64(seed) & M32, np.uint64(seed) >> np.uint64(32)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & M32
        hi1, lo1 = p1 >> np.uint64(32), p1 & M32
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = (k0 + np.uint64(0x9E3779B9)) & M32
        k1 = (k1 + np.uint64(0xBB67AE85)) & M32
    return c0, c1, c2, c3


def uniform(seed, n, lo, hi):
    """uniform(f64[n], seed=seed, lo=lo, hi=hi) of the runtime."""
    r0, r1, _, _ = philox4x32(seed, np.arange(n, dtype=np.uint64), 1)
    unit = ((r0 >> np.uint64(5)).astype(np.float64) * 67108864.0
            + (r1 >> np.uint64(6)).astype(np.float64)) * (1.0 / 9007199254740992.0)
    return lo + (hi - lo) * unit


def batch_offsets(seed, B, T, n):
    """The window starts of one batch: astype(uniform(...), i32) in gpt.spmd."""
    return uniform(seed, B, 0.0, float(n - T - 1)).astype(np.int32)


def config(defines, who="gpt_torch", base=None):
    """base (default CONFIG) with spmdc-style -D NAME=VALUE overrides."""
    c = dict(CONFIG if base is None else base)
    for d in defines:
        k, _, v = d.partition("=")
        if k not in c:
            sys.exit(f"{who}: -D {k}: no such constant (have {', '.join(c)})")
        c[k] = type(c[k])(float(v)) if isinstance(c[k], float) else int(v)
    return c


def lr_at(step, c):
    """Linear warm-up to LR, then cosine decay to MIN_LR (optim.spmd's)."""
    if step < c["WARMUP"]:
        return c["LR"] * (step + 1) / c["WARMUP"]
    span = max(1, c["STEPS"] - c["WARMUP"])
    progress = min(1.0, (step - c["WARMUP"]) / span)
    return c["MIN_LR"] + 0.5 * (c["LR"] - c["MIN_LR"]) * (1.0 + math.cos(math.pi * progress))


# ---- the parameters and the model (used on one device too: bench/gpu/gpt_torch_gpu.py)

def param_names(c):
    """{field path: (global shape, the dim split on tp or None)}, the
    program's layout: blocks stacked on a leading [L], heads split out."""
    D, NH, L, NV, T = c["D"], c["NH"], c["L"], c["NV"], c["T"]
    HD, F4 = D // NH, c["FF"] * D
    shapes = {"wte": ((NV, D), 0), "wpe": ((T, D), None), "lnf_g": ((D,), None), "lnf_b": ((D,), None)}
    for n in ("ln1_g", "ln1_b", "ln2_g", "ln2_b", "bo", "b2"):
        shapes["blocks." + n] = ((L, D), None)
    for n in ("wq", "wk", "wv"):
        shapes["blocks." + n] = ((L, D, NH, HD), 2)
    for n in ("bq", "bk", "bv"):
        shapes["blocks." + n] = ((L, NH, HD), 1)
    shapes["blocks.wo"] = ((L, NH, HD, D), 1)
    shapes["blocks.w1"] = ((L, D, F4), 2)
    shapes["blocks.b1"] = ((L, F4), 1)
    shapes["blocks.w2"] = ((L, F4, D), 1)
    return shapes


def load_params(init, c, ntp=1, itp=0):
    """{field path: (this tp rank's shard as float32, split dim or None)}
    from a checkpoint directory of examples/gpt.spmd (one global .npy per
    field path)."""
    out = {}
    for k, (shape, dim) in param_names(c).items():
        a = np.load(os.path.join(init, k + ".npy"))
        if a.shape != shape:
            sys.exit(f"gpt_torch: {init}/{k}.npy has shape {a.shape}, the model's is {shape} (-D sizes?)")
        if dim is not None:
            n = shape[dim] // ntp
            a = a[(slice(None),) * dim + (slice(itp * n, (itp + 1) * n),)]
        out[k] = (np.ascontiguousarray(a, dtype=np.float32), dim)
    return out


def random_params(c, seed=0):
    """GPT-2's initialisation as init_params() of examples/gpt.spmd has it
    (N(0, 0.02) weights, residual projections by 1/sqrt(2L), positions
    N(0, 0.01), zero biases, unit gains), drawn by NumPy: the same
    distribution, not the program's numbers (--init gives those)."""
    rng = np.random.default_rng(seed)
    proj = 0.02 / math.sqrt(2.0 * c["L"])
    std = {"wte": 0.02, "wpe": 0.01, "blocks.wq": 0.02, "blocks.wk": 0.02, "blocks.wv": 0.02,
           "blocks.w1": 0.02, "blocks.wo": proj, "blocks.w2": proj}
    out = {}
    for k, (shape, dim) in param_names(c).items():
        if k in std:
            a = rng.standard_normal(shape) * std[k]
        else:
            a = np.ones(shape) if k.endswith("_g") else np.zeros(shape)
        out[k] = (a.astype(np.float32), dim)
    return out


def make_loss(P, c, tp=None, attn="einsum", device=None, compute="f32"):
    """The model's loss: loss(ids [b, T], targets [b, T]) -> the sum of the
    next-token cross-entropies over this rank's rows, / (B * T).  P: {field
    path: tensor} (this rank's shards).  tp=None: one device, the whole model
    (plain embedding and F.cross_entropy); otherwise Megatron's tensor and
    sequence parallelism through tp.ntp, tp.itp and its regions tp.gather
    (all-gather of the sequence, reduce-scatter backward), tp.scatter (the
    converse) and tp.ce (vocabulary-parallel cross-entropy per row).
    attn: "einsum" (scores, the causal mask, softmax: the program's
    formulation) or "sdpa" (F.scaled_dot_product_attention, is_causal).
    compute: "f32" (examples/gpt.spmd) or "bf16" (examples/gpt2_small.spmd:
    the f32 parameters cast to bf16 where they are used, the program's casts
    op for op: layer norms in f32 on the f32 residual stream, their results
    cast to bf16; the projections, attention and the MLP in bf16, each
    sublayer's bf16 result, bias included, added to the residual in f32;
    bf16 logits cast to f32 for the loss)."""
    import torch
    import torch.nn.functional as F

    B, T, D, NH, L, NV = c["B"], c["T"], c["D"], c["NH"], c["L"], c["NV"]
    HD = D // NH
    gelu = c.get("GELU", "none")     # gpt2_small.spmd's is GPT-2's tanh form, gpt.spmd's erf's
    ntp, itp = (1, 0) if tp is None else (tp.ntp, tp.itp)
    Tl, NVl = T // ntp, NV // ntp
    causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()
    if tp is None:
        gather = scatter = (lambda x: x)
    else:
        gather, scatter = tp.gather, tp.scatter
    if compute == "bf16":
        low = lambda t: t.to(torch.bfloat16)     # noqa: E731  (astype(t, bf16))
        add = lambda x, y, bias: x + (scatter(y) + low(bias)).float()   # noqa: E731
    else:
        low = lambda t: t                        # noqa: E731
        add = lambda x, y, bias: x + scatter(y) + bias                  # noqa: E731

    def attention(q, k, v):                                                  # [b, h, T, e]
        if attn == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        # the program's fused attention op computes in f32 from bf16 q, k, v
        # and rounds its output once (runtime/kernels_attention.c)
        dt = q.dtype
        q, k, v = (t.float() if dt == torch.bfloat16 else t for t in (q, k, v))
        s = torch.einsum("bhte,bhse->bhts", q, k) * (1.0 / math.sqrt(HD))
        s = torch.where(causal, s, torch.full_like(s, -1e9))
        return torch.einsum("bhts,bhse->bhte", torch.softmax(s, dim=-1), v).to(dt)

    def forward(ids, tgt):
        b = P
        if tp is None:
            x = F.embedding(ids, b["wte"]) + b["wpe"]                        # [B, T, D]
        else:
            # vocabulary-parallel embedding: masked local lookup, then the
            # pending sum over tp is reduce-scattered onto the sequence shards
            lo = itp * NVl
            mine = (ids >= lo) & (ids < lo + NVl)
            local = torch.where(mine, ids - lo, torch.zeros_like(ids)).long()
            e = F.embedding(local, b["wte"]) * mine.unsqueeze(-1).to(torch.float32)
            x = scatter(e) + b["wpe"][itp * Tl:(itp + 1) * Tl]               # [Bl, T/tp, D]
        for l in range(L):
            n = low(F.layer_norm(x, (D,), b["blocks.ln1_g"][l], b["blocks.ln1_b"][l]))
            nf = gather(n)                                                   # [Bl, T, D]
            q = torch.einsum("btd,dhe->bhte", nf, low(b["blocks.wq"][l])) + low(b["blocks.bq"][l]).unsqueeze(1)
            k = torch.einsum("btd,dhe->bhte", nf, low(b["blocks.wk"][l])) + low(b["blocks.bk"][l]).unsqueeze(1)
            v = torch.einsum("btd,dhe->bhte", nf, low(b["blocks.wv"][l])) + low(b["blocks.bv"][l]).unsqueeze(1)
            o = attention(q, k, v)
            y = torch.einsum("bhte,hed->btd", o, low(b["blocks.wo"][l]))     # partial on tp
            x = add(x, y, b["blocks.bo"][l])
            n = low(F.layer_norm(x, (D,), b["blocks.ln2_g"][l], b["blocks.ln2_b"][l]))
            nf = gather(n)
            pre = nf @ low(b["blocks.w1"][l]) + low(b["blocks.b1"][l])
            # the program's gelu computes in f32 and rounds once (PyTorch's
            # CPU kernel of the bf16 tanh GELU rounds in between: 44% of
            # its results 1 bf16 ulp away)
            h = F.gelu(pre.float(), approximate=gelu).to(pre.dtype) if compute == "bf16" else \
                F.gelu(pre, approximate=gelu)
            y = h @ low(b["blocks.w2"][l])                                   # partial on tp
            x = add(x, y, b["blocks.b2"][l])
        xf = gather(low(F.layer_norm(x, (D,), b["lnf_g"], b["lnf_b"])))
        logits = torch.einsum("btd,vd->btv", xf, low(b["wte"])).float()      # [Bl, T, NV/tp]
        if tp is None:
            total = F.cross_entropy(logits.reshape(-1, NV), tgt.reshape(-1), reduction="sum")
        else:
            total = tp.ce(logits, tgt).sum()                                 # rows [Bl, T]
        return total / (B * T)                                               # this dp rank's part

    return forward


# ---- one process per rank

def worker(rank, world, args, c, port):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ndp, ntp = args.dp, args.tp
    idp, itp = rank // ntp, rank % ntp
    tp_groups = [dist.new_group([d * ntp + t for t in range(ntp)]) for d in range(ndp)]
    dp_groups = [dist.new_group([d * ntp + t for d in range(ndp)]) for t in range(ntp)]
    tpg, dpg = tp_groups[idp], dp_groups[itp]

    B, T, NV = c["B"], c["T"], c["NV"]
    Bl, NVl = B // ndp, NV // ntp

    # -- Megatron's communication regions as autograd functions
    # gloo moves no bf16: bf16 tensors travel as their bits, viewed as float16
    # (all-gather and all-to-all only copy)
    wire = lambda t: t.view(torch.float16) if t.dtype == torch.bfloat16 else t   # noqa: E731

    def all_gather_seq(x):              # [b, T/tp, ...] -> [b, T, ...]
        if ntp == 1:
            return x
        parts = [torch.empty_like(x) for _ in range(ntp)]
        dist.all_gather([wire(p) for p in parts], wire(x.contiguous()), group=tpg)
        return torch.cat(parts, dim=1)

    def reduce_scatter_seq(x):          # [b, T, ...] partial -> [b, T/tp, ...] summed
        if ntp == 1:
            return x
        blocks = torch.stack(x.chunk(ntp, dim=1)).contiguous()    # [tp, b, T/tp, ...]
        out = torch.empty_like(blocks)
        dist.all_to_all_single(wire(out), wire(blocks), group=tpg)   # out[j] = rank j's block for us
        return out.sum(0)                                         # (bf16: in f32, rounded once)

    class GatherSeq(torch.autograd.Function):        # all-gather; backward reduce-scatter
        @staticmethod
        def forward(ctx, x):
            return all_gather_seq(x)

        @staticmethod
        def backward(ctx, g):
            return reduce_scatter_seq(g)

    class ScatterSeq(torch.autograd.Function):       # reduce-scatter; backward all-gather
        @staticmethod
        def forward(ctx, x):
            return reduce_scatter_seq(x)

        @staticmethod
        def backward(ctx, g):
            return all_gather_seq(g)

    class VocabParallelCE(torch.autograd.Function):
        """Megatron's: local max and sum-exp all-reduced over tp, the target
        logit picked on the rank that owns it. Returns the loss per row."""
        @staticmethod
        def forward(ctx, logits, target):
            m = logits.max(dim=-1)[0]
            if ntp > 1:
                dist.all_reduce(m, op=dist.ReduceOp.MAX, group=tpg)
            z = logits - m.unsqueeze(-1)
            lo = itp * NVl
            mine = (target >= lo) & (target < lo + NVl)
            local = torch.where(mine, target - lo, torch.zeros_like(target))
            picked = torch.gather(z, -1, local.unsqueeze(-1).long()).squeeze(-1)
            picked = torch.where(mine, picked, torch.zeros_like(picked))
            e = z.exp()
            se = e.sum(dim=-1)
            if ntp > 1:
                dist.all_reduce(picked, group=tpg)
                dist.all_reduce(se, group=tpg)
            ctx.save_for_backward(e / se.unsqueeze(-1), mine, local)
            return se.log() - picked

        @staticmethod
        def backward(ctx, g):
            p, mine, local = ctx.saved_tensors
            grad = p.clone()
            onehot = torch.zeros_like(grad).scatter_(-1, local.unsqueeze(-1).long(), 1.0)
            grad -= onehot * mine.unsqueeze(-1).to(grad.dtype)
            return grad * g.unsqueeze(-1), None

    # -- parameters: the global arrays of the checkpoint, this rank's shards
    shards = load_params(args.init, c, ntp, itp)
    P = {k: torch.nn.Parameter(torch.from_numpy(v)) for k, (v, _) in shards.items()}
    split_dim = {k: d for k, (_, d) in shards.items() if d is not None}
    sharded = set(split_dim)
    names = sorted(P)
    params = [P[k] for k in names]
    regions = argparse.Namespace(ntp=ntp, itp=itp, gather=GatherSeq.apply, scatter=ScatterSeq.apply,
                                 ce=VocabParallelCE.apply)
    forward = make_loss(P, c, regions, compute=args.compute or ("bf16" if args.model == "gpt2" else "f32"))

    def save_grads(out):
        """The synchronised gradients as global .npy files (rank 0 writes;
        the tp-split ones are first gathered along their split dim)."""
        if rank == 0:
            os.makedirs(out, exist_ok=True)
        for k, p in zip(names, params):
            g = p.grad
            if k in split_dim and ntp > 1:
                parts = [torch.empty_like(g) for _ in range(ntp)]
                dist.all_gather(parts, g.contiguous(), group=tpg)
                g = torch.cat(parts, dim=split_dim[k])
            if rank == 0:
                np.save(os.path.join(out, k + ".npy"), g.detach().numpy())

    opt = torch.optim.AdamW(params, lr=c["LR"], betas=(c["BETA1"], c["BETA2"]),
                            eps=c["EPS"], weight_decay=c["WD"])
    train = np.load(os.path.join(args.data, "train.npy"))
    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        offs = batch_offsets(c["DATA_SEED"] + step, B, T, len(train))[idp * Bl:(idp + 1) * Bl]
        win = np.stack([train[o:o + T + 1] for o in offs])
        ids, tgt = torch.from_numpy(win[:, :T].copy()), torch.from_numpy(win[:, 1:].copy())
        for p in params:
            p.grad = None
        loss = forward(ids, tgt)
        loss.backward()
        # gradient synchronisation: tp-replicated parameters over tp, all over dp
        for k, p in zip(names, params):
            if ntp > 1 and k not in sharded:
                dist.all_reduce(p.grad, group=tpg)
            if ndp > 1:
                dist.all_reduce(p.grad, group=dpg)
        if step == 0 and args.grad:
            save_grads(args.grad)
        # global-norm clipping (Megatron's: replicated parameters counted once)
        sq = torch.zeros(())
        for k, p in zip(names, params):
            if k in sharded or itp == 0:
                sq += p.grad.double().pow(2).sum().float()
        if ntp > 1:
            dist.all_reduce(sq, group=tpg)
        gnorm = math.sqrt(float(sq))
        coef = min(1.0, c["CLIP"] / (gnorm + 1e-6))
        for p in params:
            p.grad.mul_(coef)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, c)
        opt.step()
        total = loss.detach().clone()
        if ndp > 1:
            dist.all_reduce(total, group=dpg)
        times.append(time.perf_counter() - t0)
        if rank == 0 and (step % args.every == 0 or step == args.steps - 1):
            print(f"step {step} loss {float(total):.7g} gnorm {gnorm:.7g} time {times[-1]:.4f}", flush=True)
    if rank == 0 and args.time:
        with open(args.time, "w") as f:
            f.write("".join(f"{t:.6f}\n" for t in times))
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="directory of train.npy (scripts/gpt_data.py)")
    ap.add_argument("--init", required=True, help="checkpoint directory written by examples/gpt.spmd")
    ap.add_argument("--mesh", default="dp=1,tp=1")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--time", help="write each step's seconds to this file")
    ap.add_argument("--grad", metavar="DIR", help="write step 0's gradients (before clipping) to DIR, one .npy per field")
    ap.add_argument("--model", choices=["gpt", "gpt2"], default="gpt",
                    help="examples/gpt.spmd (f32) or examples/gpt2_small.spmd (bf16 compute, f32 master weights)")
    ap.add_argument("--compute", choices=["f32", "bf16"], default=None,
                    help="the model's precision instead of its own (--model gpt2 --compute f32: the "
                         "reference tests/gpt2 tells bf16 from)")
    ap.add_argument("-D", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args()
    c = config(args.D, base=CONFIG_GPT2 if args.model == "gpt2" else None)
    mesh = dict(kv.split("=") for kv in args.mesh.split(","))
    args.dp, args.tp = int(mesh.get("dp", 1)), int(mesh.get("tp", 1))
    if args.steps is None:
        args.steps = c["STEPS"]
    world = args.dp * args.tp
    port = free_port()
    if world == 1:
        worker(0, 1, args, c, port)
    else:
        import torch.multiprocessing as mp
        mp.spawn(worker, args=(world, args, c, port), nprocs=world)


if __name__ == "__main__":
    main()
