#!/usr/bin/python3
"""The Llama of examples/llama.spmd in plain PyTorch, written as Hugging
Face transformers' Llama modules (LlamaRMSNorm, LlamaRotaryEmbedding with
rotate_half / apply_rotary_pos_emb, repeat_kv, LlamaAttention, LlamaMLP,
LlamaDecoderLayer, LlamaForCausalLM's untied lm_head; the transformers
package itself is not used), in one process: the reference our program's
losses and gradients are checked against (tests/llama/run_llama.py torch).

    /usr/bin/python3 bench/llama_torch.py --data DIR --init CKPT [--steps N]
        [-D NAME=VALUE ...] [--grad DIR]

* Model, optimizer, schedule and data are those of examples/llama.spmd, with
  the same constant names (-D overrides them as spmdc's -D does; the
  defaults are read from the program's const lines).
* The parameters are read from CKPT (examples/llama.spmd -D SAVE_INIT=1
  writes ckpt/init, one global .npy per field path) and kept in the
  program's layout: the projections are used as transformers' nn.Linear
  weights through views (q_proj.weight = wq.reshape(D, NH*HD).T: query head
  h = k * G + g is wq[:, k, g, :]), so their gradients come out in that
  layout too.
* The batches are the program's (bench/gpt_torch.py's NumPy copy of the
  runtime's Philox generator), the optimizer torch.optim.AdamW with
  torch.nn.utils.clip_grad_norm_ and the program's warm-up + cosine
  schedule.

Prints `step S loss L gnorm G` per step (the training loss of step S before
its update, the gradient norm before clipping); with --grad DIR writes the
gradient of step 0 (before clipping) to DIR as the program's -D SAVE_GRAD=1
writes ckpt/grad0: one float32 .npy per field path.
"""
import argparse
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt_torch import batch_offsets, config, lr_at, program_defaults  # noqa: E402  (the runtime's batches, the schedule)

# The constants of examples/llama.spmd (defaults read from the program).
CONFIG = {"B": 16, "T": 128, "D": 128, "NH": 4, "NKV": 2, "F": 352, "L": 6, "NV": 256,
          "ROPE_BASE": 10000.0, "STEPS": 3000, "WARMUP": 100, "LR": 3e-3, "MIN_LR": 3e-4, "WD": 0.01,
          "BETA1": 0.9, "BETA2": 0.95, "EPS": 1e-8, "CLIP": 1.0, "DATA_SEED": 1000}
program_defaults(CONFIG, "llama.spmd")
RMS_EPS = 1e-6   # nn.rms_norm_tp's (LlamaConfig's rms_norm_eps)


def build(c, init):
    import torch
    import torch.nn.functional as F
    from torch import nn

    B, T, D, NH, NKV, L, NV = c["B"], c["T"], c["D"], c["NH"], c["NKV"], c["L"], c["NV"]
    HD, G = D // NH, NH // NKV

    class LlamaRMSNorm(nn.Module):
        def __init__(self, weight):
            super().__init__()
            self.weight = weight

        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + RMS_EPS)
            return self.weight * hidden_states.to(input_dtype)

    class LlamaRotaryEmbedding(nn.Module):
        def __init__(self, dim, base):
            super().__init__()
            self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))

        def forward(self, position_ids):
            freqs = position_ids.float()[:, None] * self.inv_freq[None, :]   # outer product
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos(), emb.sin()

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin):
        return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)

    def repeat_kv(hidden_states, n_rep):
        batch, num_key_value_heads, slen, head_dim = hidden_states.shape
        if n_rep == 1:
            return hidden_states
        hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
        return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)

    P = {}

    def param(name):
        P[name] = torch.nn.Parameter(torch.from_numpy(np.load(os.path.join(init, name + ".npy")).astype(np.float32)))
        return P[name]

    for n in ("embed", "norm", "head") + tuple("blocks." + f for f in
                                               ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "wg", "wu", "wd")):
        param(n)

    class LlamaAttention(nn.Module):
        """q_proj, k_proj, v_proj, o_proj: nn.Linear weights [out, in] as views of our layout."""
        def __init__(self, l):
            super().__init__()
            self.l = l

        def forward(self, hidden_states, cos, sin, mask):
            l, bsz, q_len = self.l, hidden_states.shape[0], hidden_states.shape[1]
            q_w = P["blocks.wq"][l].reshape(D, NH * HD).t()
            k_w = P["blocks.wk"][l].reshape(D, NKV * HD).t()
            v_w = P["blocks.wv"][l].reshape(D, NKV * HD).t()
            o_w = P["blocks.wo"][l].reshape(NH * HD, D).t()
            query_states = F.linear(hidden_states, q_w).view(bsz, q_len, NH, HD).transpose(1, 2)
            key_states = F.linear(hidden_states, k_w).view(bsz, q_len, NKV, HD).transpose(1, 2)
            value_states = F.linear(hidden_states, v_w).view(bsz, q_len, NKV, HD).transpose(1, 2)
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
            key_states = repeat_kv(key_states, G)
            value_states = repeat_kv(value_states, G)
            attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(HD)
            attn_weights = attn_weights + mask
            attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
            attn_output = torch.matmul(attn_weights, value_states)
            attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, NH * HD)
            return F.linear(attn_output, o_w)

    class LlamaMLP(nn.Module):
        def __init__(self, l):
            super().__init__()
            self.l = l

        def forward(self, x):
            l = self.l
            gate = F.linear(x, P["blocks.wg"][l].t())
            up = F.linear(x, P["blocks.wu"][l].t())
            return F.linear(F.silu(gate) * up, P["blocks.wd"][l].t())

    class LlamaDecoderLayer(nn.Module):
        def __init__(self, l):
            super().__init__()
            self.self_attn, self.mlp = LlamaAttention(l), LlamaMLP(l)
            self.input_layernorm = LlamaRMSNorm(P["blocks.attn_norm"][l])
            self.post_attention_layernorm = LlamaRMSNorm(P["blocks.mlp_norm"][l])

        def forward(self, hidden_states, cos, sin, mask):
            residual = hidden_states
            hidden_states = self.self_attn(self.input_layernorm(hidden_states), cos, sin, mask)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
            return residual + hidden_states

    rotary = LlamaRotaryEmbedding(HD, c["ROPE_BASE"])
    # the causal mask of transformers (_prepare_4d_causal_attention_mask): min float above the diagonal
    mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)

    def forward(ids, targets):
        hidden_states = F.embedding(ids, P["embed"])
        cos, sin = rotary(torch.arange(T))
        for l in range(L):
            # (the layers read P each call: the modules hold no copies)
            hidden_states = LlamaDecoderLayer(l)(hidden_states, cos, sin, mask)
        hidden_states = LlamaRMSNorm(P["norm"])(hidden_states)
        logits = F.linear(hidden_states, P["head"])                      # untied lm_head
        return F.cross_entropy(logits.reshape(-1, NV), targets.reshape(-1).long())

    return P, forward


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="directory of train.npy (scripts/gpt_data.py)")
    ap.add_argument("--init", required=True, help="ckpt/init written by examples/llama.spmd -D SAVE_INIT=1")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--grad", metavar="DIR", help="write step 0's gradients (before clipping) to DIR, one .npy per field")
    ap.add_argument("-D", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args()
    c = config(args.D, "llama_torch", CONFIG)
    steps = c["STEPS"] if args.steps is None else args.steps

    import torch
    torch.set_num_threads(1)
    P, forward = build(c, args.init)
    names = sorted(P)
    params = [P[k] for k in names]
    opt = torch.optim.AdamW(params, lr=c["LR"], betas=(c["BETA1"], c["BETA2"]), eps=c["EPS"], weight_decay=c["WD"])
    train = np.load(os.path.join(args.data, "train.npy"))
    B, T = c["B"], c["T"]
    for step in range(steps):
        offs = batch_offsets(c["DATA_SEED"] + step, B, T, len(train))
        win = np.stack([train[o:o + T + 1] for o in offs])
        ids, tgt = torch.from_numpy(win[:, :T].copy()).long(), torch.from_numpy(win[:, 1:].copy())
        opt.zero_grad(set_to_none=True)
        loss = forward(ids, tgt)
        loss.backward()
        if step == 0 and args.grad:
            os.makedirs(args.grad, exist_ok=True)
            for k, p in zip(names, params):
                np.save(os.path.join(args.grad, k + ".npy"), p.grad.detach().numpy())
        gnorm = float(torch.nn.utils.clip_grad_norm_(params, c["CLIP"]))
        for g in opt.param_groups:
            g["lr"] = lr_at(step, c)
        opt.step()
        print(f"step {step} loss {float(loss):.7g} gnorm {gnorm:.7g}", flush=True)


if __name__ == "__main__":
    main()
