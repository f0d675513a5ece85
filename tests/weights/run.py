#!/usr/bin/python3
"""run.py SPMDC WORKDIR MPIRUN [MPIRUN ARGS...]: records in and out of
.safetensors files (docs/weights.md).

roundtrip.spmd loads in.safetensors (written here with NumPy: GPT-2-like
names, stacked layers, a fused c_attn, a Linear to transpose, F16, BF16 and
I64 tensors) through model.map on 1, 2, 3 and 4 ranks (dp=1,tp=1; dp=2; tp=2;
dp=2,tp=2; and tp=3, dp=3, which split dims unevenly, SPEC 4), and the fields must equal what NumPy makes of the tensors by
the map's rules; its files (by the map, c_attn joined back; by field
names) must hold the source's values, read here with a NumPy reader, and be
the same bytes on every mesh; loading them back gives the same fields.
Then each bad file (truncated, header too long, not JSON, offsets outside
the file or overlapping, wrong dtype, wrong shape, a missing tensor, bad
maps) must stop every rank with a message naming the file and the tensor,
and saves that cannot make every tensor must stop before writing anything.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NV, T, D, NH, HD, F, L = 16, 8, 8, 4, 2, 12, 4
# tp=3 and dp=3 split unevenly (SPEC 4, torch.chunk's split): 16 vocabulary
# rows 6, 6, 4, 4 heads 2, 2, 0 (a rank with none), D = 8 columns 3, 3, 2,
# 4 layers and 8 positions on dp = 3 as 2, 2, 0 and 3, 3, 2: each rank reads
# and writes its own block
MESHES = [(1, 'dp=1,tp=1'), (2, 'dp=2,tp=1'), (2, 'dp=1,tp=2'), (4, 'dp=2,tp=2'), (3, 'dp=1,tp=3'),
          (3, 'dp=3,tp=1')]
failures = []


def bad(msg):
    print('FAIL:', msg)
    failures.append(msg)


def source():
    rng = np.random.default_rng(7)
    t = {'transformer.wte.weight': ('F32', rng.standard_normal((NV, D), np.float32)),
         'transformer.wpe.weight': ('F32', rng.standard_normal((T, D), np.float32))}
    for l in range(L):
        h = f'transformer.h.{l}.'
        t[h + 'ln_1.weight'] = ('F16', rng.standard_normal(D).astype(np.float16))
        t[h + 'attn.c_attn.weight'] = ('F32', rng.standard_normal((D, 3 * D), np.float32))
        t[h + 'attn.c_attn.bias'] = ('F32', rng.standard_normal(3 * D, np.float32))
        t[h + 'attn.c_proj.weight'] = ('F32', rng.standard_normal((D, D), np.float32))
        t[h + 'mlp.fc.weight'] = ('F32', rng.standard_normal((F, D), np.float32))
    t['lm_head.weight'] = ('BF16', st.f32_to_bf16(rng.standard_normal((NV, D), np.float32)))
    t['ids'] = ('I64', rng.integers(0, 1000, T).astype(np.int64))
    t['unused.tensor'] = ('F32', np.arange(5, dtype=np.float32))   # no field names it: ignored
    return t


def expected(t):
    """the fields, by the map's rules written in NumPy"""
    g = lambda n: t[n][1]  # noqa: E731
    stack = lambda f: np.stack([f(f'transformer.h.{l}.') for l in range(L)])  # noqa: E731
    e = {'wte': g('transformer.wte.weight'), 'wpe': g('transformer.wpe.weight'),
         'blocks.ln_g': stack(lambda h: g(h + 'ln_1.weight').astype(np.float32)),
         'blocks.wo': stack(lambda h: g(h + 'attn.c_proj.weight').reshape(NH, HD, D)),
         'blocks.w1': stack(lambda h: g(h + 'mlp.fc.weight').T),
         'head': st.bf16_to_f32(g('lm_head.weight')).T, 'ids': g('ids').astype(np.int32)}
    for i, n in enumerate('qkv'):
        e['blocks.w' + n] = stack(lambda h: g(h + 'attn.c_attn.weight').reshape(D, 3, NH, HD)[:, i])
        e['blocks.b' + n] = stack(lambda h: g(h + 'attn.c_attn.bias').reshape(3, NH, HD)[i])
    return e


def run(spmdc, prog, np_, mesh, work, mpirun, files):
    st.fresh_dir(work)
    for name, path in files.items():
        shutil.copy(path, os.path.join(work, name))
    cmd = [mpirun] + MPIARGS + ['-np', str(np_), prog, '--mesh', mesh]
    return subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=120)


def compare_fields(dirpath, want, what):
    for k, v in want.items():
        p = os.path.join(dirpath, k + '.npy')
        if not os.path.exists(p):
            bad(f'{what}: no {p}')
            continue
        got = np.load(p)
        if got.shape != v.shape or not np.array_equal(got, v.astype(got.dtype)):
            bad(f'{what}: field {k} differs (shape {got.shape} vs {v.shape})')


def main():
    global MPIARGS
    spmdc, work, mpirun, MPIARGS = st.harness_args(sys.argv)
    prog = os.path.join(work, 'roundtrip')
    subprocess.run([spmdc, os.path.join(HERE, 'roundtrip.spmd'), '-o', prog], check=True)
    t = source()
    src = os.path.join(work, 'in.safetensors')
    st.write(src, t)
    want = expected(t)
    files = {'in.safetensors': src, 'model.map': os.path.join(HERE, 'model.map')}
    saved = {}
    for np_, mesh in MESHES:
        d = os.path.join(work, mesh.replace(',', '_').replace('=', ''))
        r = run(spmdc, prog, np_, mesh, d, mpirun, files)
        if r.returncode != 0:
            bad(f'{mesh}: exit {r.returncode}: {r.stderr[-2000:]}')
            continue
        compare_fields(os.path.join(d, 'out/loaded'), want, f'{mesh} load by the map')
        compare_fields(os.path.join(d, 'out/again'), want, f'{mesh} load of its own file')
        compare_fields(os.path.join(d, 'out/plain'), want, f'{mesh} load by field names')
        got, head = st.read(os.path.join(d, 'out/model.safetensors'))
        for name, (dt, a) in t.items():
            if name == 'unused.tensor':
                continue
            ref = st.bf16_to_f32(a) if dt == 'BF16' else a
            if name not in got or got[name].shape != a.shape or not np.array_equal(got[name], ref.astype(got[name].dtype)):
                bad(f'{mesh}: tensor {name} of out/model.safetensors differs from the source')
        wantdt = {'lm_head.weight': 'BF16', 'ids': 'I32'}
        for name, e in head.items():
            if name != '__metadata__' and e['dtype'] != wantdt.get(name, 'F32'):
                bad(f'{mesh}: {name} saved as {e["dtype"]}')
        if 'unused.tensor' in got:
            bad(f'{mesh}: a tensor no field names was saved')
        plain, _ = st.read(os.path.join(d, 'out/plain.safetensors'))
        if sorted(plain) != sorted(want):
            bad(f'{mesh}: plain.safetensors names {sorted(plain)}')
        for k, v in want.items():
            if k in plain and not np.array_equal(plain[k], v.astype(plain[k].dtype)):
                bad(f'{mesh}: plain.safetensors {k} differs')
        if any('.tmp.' in f for f in os.listdir(os.path.join(d, 'out'))):
            bad(f'{mesh}: temporary files left')
        for f in ('model.safetensors', 'plain.safetensors'):
            b = open(os.path.join(d, 'out', f), 'rb').read()
            if f in saved and saved[f] != b:
                bad(f'{mesh}: out/{f} is not byte-identical to the first mesh\'s')
            saved.setdefault(f, b)
        print(f'ok: {mesh}: loaded by the map, saved (c_attn joined), loaded back; NumPy agrees')

    # ---- bad files: every rank stops, naming the file and the tensor
    good = open(src, 'rb').read()
    (hn,) = struct.unpack('<Q', good[:8])
    head = json.loads(good[8:8 + hn])

    def rewrite(hook):
        h = json.loads(json.dumps(head))
        hook(h)
        b = json.dumps(h).encode()
        b += b' ' * (-len(b) % 8)
        return struct.pack('<Q', len(b)) + b + good[8 + hn:]

    def drop(name):
        def f(h):
            del h[name]
        return f

    def setk(name, key, val):
        def f(h):
            h[name][key] = val
        return f

    c0 = 'transformer.h.0.attn.c_attn.weight'
    cases = [
        ('truncated', good[:5], "load 'in.safetensors': file is truncated: 5 bytes"),
        ('data cut', good[:len(good) - 100], "are outside the file's"),
        ('header too long', struct.pack('<Q', 10**12) + good[8:], "load 'in.safetensors': header too long"),
        ('header past the end', struct.pack('<Q', len(good)) + good[8:], 'header too long'),
        ('not JSON', struct.pack('<Q', 8) + b'{"a": 1 ' + good[16:], 'the header is not JSON'),
        ('outside', rewrite(setk('ids', 'data_offsets', [10**6, 10**6 + 64])),
         "tensor 'ids': data_offsets [1000000, 1000064] are outside the file"),
        ('overlap', rewrite(setk('transformer.wpe.weight', 'data_offsets', head['transformer.wte.weight']['data_offsets'][:1] +
                                 [head['transformer.wte.weight']['data_offsets'][0] + 4 * T * D])), 'overlap tensor'),
        ('size', rewrite(setk('ids', 'shape', [T + 1])), "tensor 'ids': data_offsets"),
        ('dtype', rewrite(setk('ids', 'dtype', 'F64')), "field 'ids': tensor 'ids' is F64, which an i32 field cannot hold"),
        ('unknown dtype', rewrite(setk('ids', 'dtype', 'Q7')), "tensor 'ids': unknown dtype 'Q7'"),
        ('shape', rewrite(setk(c0, 'shape', [3 * D, D])), f"field 'blocks.wq': tensor '{c0}' of shape [24, 8] (map 'model.map' line 5): split(1, ...) does not fit"),
        ('field shape', rewrite(setk('transformer.h.1.mlp.fc.weight', 'shape', [F // 2, 2 * D])),
         "field 'blocks.w1': tensor 'transformer.h.1.mlp.fc.weight' has shape [6, 16], which the map makes [16, 6], expected [8, 12]"),
        ('missing', rewrite(drop('transformer.h.3.mlp.fc.weight')),
         "field 'blocks.w1': no tensor 'transformer.h.3.mlp.fc.weight'"),
    ]
    prog2 = [(2, 'dp=2,tp=1'), (4, 'dp=2,tp=2')]
    for i, (name, data, msg) in enumerate(cases):
        np_, mesh = prog2[i % 2]
        d = os.path.join(work, 'bad_' + name.replace(' ', '_'))
        path = os.path.join(work, 'bad.safetensors')
        open(path, 'wb').write(data)
        r = run(spmdc, prog, np_, mesh, d, mpirun, {'in.safetensors': path, 'model.map': files['model.map']})
        check_stop(r, np_, msg, f'bad file: {name}', d)
    maps = [('unknown step', 'blocks.w1  transformer.h.{L}.mlp.fc.weight  slice(1, 0, 3)\n', "unknown step 'slice(1, 0, 3)'"),
            ('no line', '', "the map 'model.map' has no line for field 'ids'"),
            ('order', 'head lm_head.weight transpose split(0, 4, 4)\n', 'steps go in this order'),
            ('split misfit', 'head lm_head.weight split(0, 5, -1)\n', "split(0, ...) does not fit dim 0 of size 16")]
    base = open(files['model.map']).read()
    for name, line, msg in maps:
        text = base.replace('ids              ids\n', '') if name == 'no line' else \
            '\n'.join(x for x in base.splitlines() if not x.startswith(line.split()[0] + ' ')) + '\n' + line
        mp = os.path.join(work, 'bad.map')
        open(mp, 'w').write(text)
        d = os.path.join(work, 'badmap_' + name.replace(' ', '_'))
        r = run(spmdc, prog, 2, 'dp=1,tp=2', d, mpirun, {'in.safetensors': src, 'model.map': mp})
        check_stop(r, 2, msg, f'bad map: {name}', d)

    # ---- saves that cannot make every tensor: nothing written, nothing replaced
    for case, msg in ((1, "tensor 'transformer.h.0.attn.c_attn.weight' is only partly written"),
                      (2, "the map 'model.map' has no line for field 'extra'")):
        prog3 = os.path.join(work, f'save_bad{case}.exe')
        subprocess.run([spmdc, '-D', f'CASE={case}', os.path.join(HERE, 'save_bad.spmd'), '-o', prog3], check=True)
        d = os.path.join(work, f'save_bad{case}')
        os.makedirs(os.path.join(d, 'out'))
        keep = os.path.join(d, 'out', 'model.safetensors')
        open(keep, 'wb').write(b'the previous file')
        r = run_in(prog3, 4, 'dp=2,tp=2', d, mpirun, files)
        check_stop(r, 4, msg, f'save case {case}', d, fresh=False)
        if open(keep, 'rb').read() != b'the previous file' or len(os.listdir(os.path.join(d, 'out'))) != 1:
            bad(f'save case {case}: the old file was touched or something was written: {os.listdir(os.path.join(d, "out"))}')
    if failures:
        sys.exit(f'FAIL: {len(failures)} problems')
    print('ok: every case')


def run_in(prog, np_, mesh, work, mpirun, files):
    for name, path in files.items():
        shutil.copy(path, os.path.join(work, name))
    cmd = [mpirun] + MPIARGS + ['-np', str(np_), prog, '--mesh', mesh]
    return subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=120)


def check_stop(r, np_, msg, what, d, fresh=True):
    if r.returncode == 0:
        bad(f'{what}: the run succeeded')
        return
    lines = [x for x in r.stderr.splitlines() if x.startswith('spmd: error: [rank')]
    ranks = {x.split(']')[0] for x in lines if msg in x}
    if len(ranks) != np_:
        bad(f'{what}: expected "{msg}" from all {np_} ranks, got:\n{r.stderr[-1500:]}')
        return
    if fresh and os.path.exists(os.path.join(d, 'out')):
        bad(f'{what}: something was written')
        return
    print(f'ok: {what}: every rank stops: {lines[0][len("spmd: error: "):]}')


main()
