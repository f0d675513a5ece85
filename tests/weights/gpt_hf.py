#!/usr/bin/python3
"""gpt_hf.py SPMDC WORKDIR MPIRUN [ARGS...]: Hugging Face GPT-2 weights into
examples/gpt.spmd's model through examples/gpt.map (docs/weights.md).

GPT-2 is written here in plain PyTorch with transformers' parameter names
and layouts (Conv1D weights [in, out], the fused c_attn, lm_head tied to
wte; Debian has no transformers), with random weights, and saved as a
.safetensors file with json + NumPy (tests/weights/st.py). gpt_hf.spmd, the
flagship's model at a small size, loads it by the map on 1 rank and on
dp=2,tp=2: its logits must equal PyTorch's on the same tokens (float
tolerance), its greedy generation PyTorch's argmax loop (recomputing the
window, and with the key/value caches one position at a time), and the file it
saves by the map must hold the same tensors, which PyTorch loads back.
The flagship's GELU is erf's (GPT-2's is tanh's): the PyTorch model uses
erf's, so this tests the names, layouts and splits, not the activation."""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

try:
    import torch
except ImportError:
    print('skip: no PyTorch (python3-torch)')
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NV, T, D, NH, L, B = 64, 16, 64, 2, 2, 4
HD, F = D // NH, 4 * D


class Conv1D(torch.nn.Module):   # transformers.pytorch_utils.Conv1D: y = x W + b, W [in, out]
    def __init__(self, nin, nout):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(nin, nout))
        self.bias = torch.nn.Parameter(torch.empty(nout))

    def forward(self, x):
        return x @ self.weight + self.bias


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.attn = torch.nn.Module()
        self.attn.c_attn, self.attn.c_proj = Conv1D(D, 3 * D), Conv1D(D, D)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = Conv1D(D, F), Conv1D(F, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(D, dim=2)
        heads = lambda z: z.view(b, t, NH, HD).transpose(1, 2)  # noqa: E731
        q, k, v = heads(q), heads(k), heads(v)
        s = q @ k.transpose(-1, -2) / math.sqrt(HD)
        s = s.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool)), float('-inf'))
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, t, D)
        x = x + self.attn.c_proj(o)
        return x + self.mlp.c_proj(torch.nn.functional.gelu(self.mlp.c_fc(self.ln_2(x))))


class GPT2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = torch.nn.Module()
        self.transformer.wte, self.transformer.wpe = torch.nn.Embedding(NV, D), torch.nn.Embedding(T, D)
        self.transformer.h = torch.nn.ModuleList(Block() for _ in range(L))
        self.transformer.ln_f = torch.nn.LayerNorm(D)

    def forward(self, ids):
        x = self.transformer.wte(ids) + self.transformer.wpe(torch.arange(ids.shape[1]))
        for blk in self.transformer.h:
            x = blk(x)
        return self.transformer.ln_f(x) @ self.transformer.wte.weight.T   # lm_head, tied


def main():
    spmdc, work, mpirun, mpiargs = st.harness_args(sys.argv)
    torch.manual_seed(0)
    model = GPT2()
    st.randomize_gpt2(model, 0.3)   # random, with every parameter mattering
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    src = os.path.join(work, 'model.safetensors')
    st.write(src, {k: ('F32', v) for k, v in sd.items()})
    ids = np.random.default_rng(1).integers(0, NV, (B, T)).astype(np.int32)
    with torch.no_grad():
        want = model(torch.from_numpy(ids).long()).numpy()
        gen = torch.from_numpy(ids).long().clone()
        for i in range(4, T):   # greedy: position i from the logits at i - 1
            gen[:, i] = model(gen)[:, i - 1].argmax(-1)
    fails = 0
    for mesh, d in st.run_hf(spmdc, os.path.join(HERE, 'gpt_hf.spmd'), work, mpirun, mpiargs, src,
                             os.path.join(ROOT, 'examples', 'gpt.map'), ids):
        if d is None:
            fails += 1
            continue
        got = np.load(os.path.join(d, 'out', 'logits.npy'))
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        ok = got.shape == want.shape and err < 1e-5
        print(f'{"ok" if ok else "FAIL"}: {mesh}: logits against PyTorch\'s GPT-2: max error {err:.2e} of the largest')
        fails += not ok
        g = np.load(os.path.join(d, 'out', 'greedy.npy'))
        ok = np.array_equal(g, gen.numpy())
        print(f'{"ok" if ok else "FAIL"}: {mesh}: greedy generation equals PyTorch\'s '
              f'({int((g != gen.numpy()).sum())} tokens differ)')
        fails += not ok
        g = np.load(os.path.join(d, 'out', 'greedy_cached.npy'))
        ok = np.array_equal(g, gen.numpy())
        print(f'{"ok" if ok else "FAIL"}: {mesh}: greedy generation with the key/value caches equals PyTorch\'s '
              f'({int((g != gen.numpy()).sum())} tokens differ)')
        fails += not ok
        back, _ = st.read(os.path.join(d, 'out', 'model.safetensors'))
        same = sorted(back) == sorted(sd) and all(np.array_equal(back[k], sd[k]) for k in sd)
        m2 = GPT2()
        m2.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in back.items()}, strict=True)
        with torch.no_grad():
            same = same and np.array_equal(m2(torch.from_numpy(ids).long()).numpy(), want)
        print(f'{"ok" if same else "FAIL"}: {mesh}: the saved file holds every tensor as given; PyTorch loads it')
        fails += not same
    if fails:
        sys.exit(f'FAIL: {fails} problems')
    print('ok: every case')


main()
