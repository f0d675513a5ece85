#!/usr/bin/python3
"""gpt2_hf.py SPMDC WORKDIR MPIRUN [ARGS...]: Hugging Face GPT-2 weights into
examples/gpt2_small.spmd itself through examples/gpt2.map (docs/weights.md).

GPT-2 is written here in plain PyTorch with transformers' parameter names
and layouts (Conv1D weights [in, out], the fused c_attn, lm_head tied to
wte, the tanh GELU; Debian has no transformers), at a small size but with
GPT-2's whole vocabulary of 50,257 (prime: split unevenly over every tp >
1), with random weights saved as gpt2.safetensors with json + NumPy
(tests/weights/st.py).  The example, compiled with -D sizes and
INIT_HF=1 SAVE_HF=1 SAVE_INIT=1 SAVE_LOGITS=1 STOP_AFTER=1, runs one step on
token files (train.bin with llm.c's header, val.bin raw uint16) on 1 rank,
dp=2,tp=2 and dp=1,tp=3.  Per mesh:

* the inputs of step 0 (ckpt/ids0.npy) are the token file's windows that
  the flagship's batch() draws (bench/gpt_torch.py's NumPy generator);
* the logits of step 0 (ckpt/logits0.npy) equal PyTorch's on the same
  weights and inputs: the example computes in bf16 with f32 master
  weights, so PyTorch's model runs with the example's casts (each weight
  cast to bf16 where used, layer norms in f32, f32 residual stream, gelu
  in f32 rounded once) and the logits, all bf16 values, must agree to
  LOGIT_TOL of the largest and L2_TOL in relative L2, which the f32
  model's logits do not meet (reported);
* the printed loss of step 0 is PyTorch's cross-entropy of those logits;
* ckpt/init.safetensors, saved back through the map, holds every tensor of
  the input bit for bit, and PyTorch loads it (strict)."""
import math
import os
import re
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
sys.path.insert(0, os.path.join(ROOT, 'bench'))
import gpt_torch  # noqa: E402  (the runtime's window offsets in NumPy)

NV, T, D, NH, L, B = 50257, 32, 128, 2, 2, 4     # head width 64: examples/gpt2.map's
HD, F = D // NH, 4 * D
DATA_SEED = 1000                                  # the example's
NTOK = 4000
MESHES = ((1, 'dp=1,tp=1'), (4, 'dp=2,tp=2'), (3, 'dp=1,tp=3'))
# The example's logits against PyTorch's with the example's bf16 casts (on
# a tp mesh its row-parallel partial sums added in bf16 too).  Both round
# the same values to bf16 at the same points, but their f32 arithmetic
# differs (sum orders, layer norm, tanh), so a value near a bf16 rounding
# boundary can round the other way and carry on.  Measured: max |diff| at
# most 5.6e-3 of the largest logit (1 bf16 ulp of it), relative L2 1.4e-3
# (1 rank) to 1.7e-3 (dp=2,tp=2); the f32 model is 9.1e-3 to 9.5e-3 away
# (relative L2) and fails L2_TOL, as does the example against PyTorch's
# own bf16 tanh GELU (which rounds inside: 7e-3).
LOGIT_TOL = 1e-2
L2_TOL = 4e-3
LOSS_TOL = 1e-3


class Conv1D(torch.nn.Module):   # transformers.pytorch_utils.Conv1D: y = x W + b, W [in, out]
    def __init__(self, nin, nout):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(nin, nout))
        self.bias = torch.nn.Parameter(torch.empty(nout))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.attn = torch.nn.Module()
        self.attn.c_attn, self.attn.c_proj = Conv1D(D, 3 * D), Conv1D(D, D)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = Conv1D(D, F), Conv1D(F, D)


class GPT2(torch.nn.Module):
    """transformers' GPT2LMHeadModel's parameters; forward(ids, low): low
    is what each matmul's operands are cast to (identity: the f32 model;
    bf16: the example's casts, as bench/gpt_torch.py's compute="bf16")."""

    def __init__(self):
        super().__init__()
        self.transformer = torch.nn.Module()
        self.transformer.wte, self.transformer.wpe = torch.nn.Embedding(NV, D), torch.nn.Embedding(T, D)
        self.transformer.h = torch.nn.ModuleList(Block() for _ in range(L))
        self.transformer.ln_f = torch.nn.LayerNorm(D)

    def forward(self, ids, low, ntp=1):
        F_ = torch.nn.functional
        lin = lambda x, m: x @ low(m.weight) + low(m.bias)   # noqa: E731  (Conv1D)
        ln = lambda x, m: low(F_.layer_norm(x, (D,), m.weight, m.bias))   # noqa: E731  (f32 in, cast out)

        def row(x, m, unit):
            """a row-parallel Conv1D on ntp ranks: each rank's product of its
            blocks of `unit` rows (torch.chunk's), the partial sums added in
            rank order (bf16: rounded at each addition), then the bias"""
            if ntp == 1:
                return lin(x, m)
            bounds = np.cumsum([0] + [len(c) for c in torch.arange(m.weight.shape[0] // unit).chunk(ntp)]) * unit
            acc = None
            for a, e in zip(bounds, bounds[1:]):
                part = x[..., a:e] @ low(m.weight[a:e])
                acc = part if acc is None else (acc.float() + part.float()).to(part.dtype)
            return acc + low(m.bias)

        b, t = ids.shape
        x = self.transformer.wte(ids) + self.transformer.wpe(torch.arange(t))
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        for blk in self.transformer.h:
            q, k, v = lin(ln(x, blk.ln_1), blk.attn.c_attn).split(D, dim=2)
            heads = lambda z: z.view(b, t, NH, HD).transpose(1, 2).float()   # noqa: E731
            q, k, v = heads(q), heads(k), heads(v)       # attention computes in f32, rounds its output
            s = (q @ k.transpose(-1, -2) / math.sqrt(HD)).masked_fill(~mask, float('-inf'))
            o = low((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, t, D))
            x = x + row(o, blk.attn.c_proj, HD).float()  # heads split over tp
            pre = lin(ln(x, blk.ln_2), blk.mlp.c_fc)     # gelu computes in f32 and rounds (PyTorch's
            h = F_.gelu(pre.float(), approximate='tanh').to(pre.dtype)   # bf16 tanh GELU rounds within)
            x = x + row(h, blk.mlp.c_proj, 1).float()    # the MLP's width split over tp
        return (ln(x, self.transformer.ln_f) @ low(self.transformer.wte.weight).T).float()   # lm_head, tied


def main():
    spmdc, work, mpirun, mpiargs = st.harness_args(sys.argv)
    torch.manual_seed(0)
    model = GPT2()
    st.randomize_gpt2(model, 0.1)   # random, with every parameter mattering
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    src = os.path.join(work, 'gpt2.safetensors')
    st.write(src, {k: ('F32', v) for k, v in sd.items()})
    # the token files: train.bin with llm.c's header (magic 20240520, version
    # 1, uint16), val.bin nanoGPT's raw uint16; ids up to the last of the vocabulary
    rng = np.random.default_rng(1)
    train = rng.integers(0, NV, NTOK).astype('<u2')
    train[:8] = NV - 1
    data = os.path.join(work, 'data')
    os.makedirs(data)
    header = np.zeros(256, '<i4')
    header[:3] = (20240520, 1, NTOK)
    with open(os.path.join(data, 'train.bin'), 'wb') as f:
        f.write(header.tobytes() + train.tobytes())
    rng.integers(0, NV, NTOK).astype('<u2').tofile(os.path.join(data, 'val.bin'))
    offs = gpt_torch.batch_offsets(DATA_SEED, B, T, NTOK)
    ids = np.stack([train[o:o + T] for o in offs]).astype(np.int32)
    tgt = np.stack([train[o + 1:o + T + 1] for o in offs]).astype(np.int64)
    t_ids = torch.from_numpy(ids).long()
    with torch.no_grad():
        want32 = model(t_ids, lambda z: z).numpy()
    defines = dict(NV=NV, T=T, D=D, NH=NH, L=L, B=B, INIT_HF=1, SAVE_HF=1, SAVE_INIT=1, SAVE_LOGITS=1,
                   STOP_AFTER=1, EVAL_BATCHES=1)
    fails = 0
    for mesh, d in st.run_hf(spmdc, os.path.join(ROOT, 'examples', 'gpt2_small.spmd'), work, mpirun, mpiargs,
                                  src, os.path.join(ROOT, 'examples', 'gpt2.map'), ids, defines=defines,
                                  meshes=MESHES, data=data):
        if d is None:
            fails += 1
            continue
        out = open(os.path.join(d, 'out.txt')).read()
        got_ids = np.load(os.path.join(d, 'ckpt', 'ids0.npy'))
        ok = np.array_equal(got_ids, ids)
        print(f'{"ok" if ok else "FAIL"}: {mesh}: the inputs of step 0 are the token file\'s windows of the '
              f'flagship\'s batch() (llm.c header; ids up to {int(ids.max())})')
        fails += not ok
        ntp = int(mesh.split('tp=')[1])
        with torch.no_grad():
            want = model(t_ids, lambda z: z.to(torch.bfloat16), ntp).numpy()
            want_loss = float(torch.nn.functional.cross_entropy(torch.from_numpy(want).reshape(-1, NV),
                                                                torch.from_numpy(tgt).reshape(-1)))
        got = np.load(os.path.join(d, 'ckpt', 'logits0.npy'))
        scale = np.max(np.abs(want))
        err = np.max(np.abs(got - want)) / scale if got.shape == want.shape else float('inf')
        l2 = lambda a: float(np.linalg.norm((got - a).ravel()) / np.linalg.norm(a.ravel()))   # noqa: E731
        rel, rel32 = (l2(want), l2(want32)) if got.shape == want.shape else (float('inf'),) * 2
        bf16 = got.shape == want.shape and not np.any(got.view(np.uint32) & 0xffff)
        ok = err <= LOGIT_TOL and rel <= L2_TOL and bf16
        print(f'{"ok" if ok else "FAIL"}: {mesh}: logits {list(got.shape)}, bf16 values{"" if bf16 else " NOT"}, '
              f'against PyTorch\'s GPT-2 with the example\'s bf16 casts: max |diff| {err * scale:.3g}, {err:.2e} of '
              f'the largest (limit {LOGIT_TOL:g}), relative L2 {rel:.2e} (limit {L2_TOL:g}); against the f32 '
              f'model: relative L2 {rel32:.2e}')
        fails += not ok
        m = re.search(r'^step 1 train (\S+)', out, re.M)
        loss = float(m.group(1)) if m else float('nan')
        ok = abs(loss - want_loss) <= LOSS_TOL * want_loss
        print(f'{"ok" if ok else "FAIL"}: {mesh}: the loss of step 0 {loss:.6g}, PyTorch\'s cross-entropy of its '
              f'logits {want_loss:.6g}')
        fails += not ok
        back, _ = st.read(os.path.join(d, 'ckpt', 'init.safetensors'))
        same = sorted(back) == sorted(sd) and all(np.array_equal(back[k], sd[k]) for k in sd)
        m2 = GPT2()
        m2.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in back.items()}, strict=True)
        print(f'{"ok" if same else "FAIL"}: {mesh}: ckpt/init.safetensors, saved through gpt2.map, holds every '
              f'tensor as given ({len(sd)}); PyTorch loads it')
        fails += not same
    if fails:
        sys.exit(f'FAIL: {fails} problems')
    print('ok: every case')


main()
