#!/usr/bin/python3
"""llama_hf.py SPMDC WORKDIR MPIRUN [ARGS...]: Hugging Face Llama weights into
examples/llama.spmd's model through examples/llama.map (docs/weights.md).

LlamaForCausalLM is written here in plain PyTorch from transformers'
modeling_llama (nn.Linear projections [out, in], RMSNorm, rotate_half
rotary embeddings, repeat_kv for grouped-query heads, SwiGLU, the untied
lm_head; Debian has no transformers), with random weights under
transformers' parameter names, saved as a .safetensors file (st.py).
llama_hf.spmd, the example's model at a small size, loads it by the map on
1 rank and on dp=2,tp=2: its logits must equal PyTorch's on the same
tokens (float tolerance), and the file it saves by the map must hold the
same tensors."""
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
NV, T, D, NH, NKV, F, L, B = 64, 16, 128, 4, 2, 96, 2, 4
HD, G, BASE, EPS = D // NH, NH // NKV, 10000.0, 1e-6


def rms_norm(x, w):   # LlamaRMSNorm
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def rotate_half(x):
    x1, x2 = x[..., :HD // 2], x[..., HD // 2:]
    return torch.cat((-x2, x1), dim=-1)


def forward(sd, ids):
    """LlamaForCausalLM's logits from a state dict of transformers' names."""
    inv_freq = 1.0 / (BASE ** (torch.arange(0, HD, 2).float() / HD))
    freqs = torch.outer(torch.arange(T).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((T, T), float('-inf')).triu(1)
    x = sd['model.embed_tokens.weight'][ids]
    for l in range(L):
        w = lambda n: sd[f'model.layers.{l}.{n}.weight']  # noqa: E731
        h = rms_norm(x, w('input_layernorm'))
        q = (h @ w('self_attn.q_proj').T).view(B, T, NH, HD).transpose(1, 2)
        k = (h @ w('self_attn.k_proj').T).view(B, T, NKV, HD).transpose(1, 2)
        v = (h @ w('self_attn.v_proj').T).view(B, T, NKV, HD).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)   # repeat_kv
        a = torch.softmax(q @ k.transpose(2, 3) / HD ** 0.5 + mask, dim=-1) @ v
        x = x + a.transpose(1, 2).reshape(B, T, D) @ w('self_attn.o_proj').T
        h = rms_norm(x, w('post_attention_layernorm'))
        m = torch.nn.functional.silu(h @ w('mlp.gate_proj').T) * (h @ w('mlp.up_proj').T)
        x = x + m @ w('mlp.down_proj').T
    return rms_norm(x, sd['model.norm.weight']) @ sd['lm_head.weight'].T


def main():
    spmdc, work, mpirun, mpiargs = st.harness_args(sys.argv)
    g = torch.Generator().manual_seed(0)
    shapes = {'model.embed_tokens.weight': (NV, D), 'model.norm.weight': (D,), 'lm_head.weight': (NV, D)}
    for l in range(L):
        p = f'model.layers.{l}.'
        shapes.update({p + 'input_layernorm.weight': (D,), p + 'post_attention_layernorm.weight': (D,),
                       p + 'self_attn.q_proj.weight': (NH * HD, D), p + 'self_attn.k_proj.weight': (NKV * HD, D),
                       p + 'self_attn.v_proj.weight': (NKV * HD, D), p + 'self_attn.o_proj.weight': (D, NH * HD),
                       p + 'mlp.gate_proj.weight': (F, D), p + 'mlp.up_proj.weight': (F, D),
                       p + 'mlp.down_proj.weight': (D, F)})
    # random, every weight mattering: norms near 1, projections scaled to keep the activations O(1)
    sd = {k: (1.0 + 0.1 * torch.randn(s, generator=g)) if len(s) == 1 else torch.randn(s, generator=g) / s[-1] ** 0.5
          for k, s in shapes.items()}
    src = os.path.join(work, 'model.safetensors')
    st.write(src, {k: ('F32', v.numpy().astype(np.float32)) for k, v in sd.items()})
    ids = np.random.default_rng(1).integers(0, NV, (B, T)).astype(np.int32)
    with torch.no_grad():
        want = forward(sd, torch.from_numpy(ids).long()).numpy()
    fails = 0
    for mesh, d in st.run_hf(spmdc, os.path.join(HERE, 'llama_hf.spmd'), work, mpirun, mpiargs, src,
                             os.path.join(ROOT, 'examples', 'llama.map'), ids):
        if d is None:
            fails += 1
            continue
        got = np.load(os.path.join(d, 'out', 'logits.npy'))
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        ok = got.shape == want.shape and err < 1e-5
        print(f'{"ok" if ok else "FAIL"}: {mesh}: logits against PyTorch\'s Llama: max error {err:.2e} of the largest')
        fails += not ok
        back, _ = st.read(os.path.join(d, 'out', 'model.safetensors'))
        same = sorted(back) == sorted(sd) and all(np.array_equal(back[k], sd[k].numpy()) for k in sd)
        print(f'{"ok" if same else "FAIL"}: {mesh}: the saved file holds every tensor as given, by its name')
        fails += not same
    if fails:
        sys.exit(f'FAIL: {fails} problems')
    print('ok: every case')


if __name__ == '__main__':
    main()
