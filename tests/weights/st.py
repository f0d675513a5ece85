"""st.py: a small NumPy reader and writer of .safetensors files, written from
the format's description (Debian has no `safetensors` module): an 8-byte
little-endian header length, a JSON header (name -> dtype, shape,
data_offsets), then little-endian row-major data."""
import json
import os
import shutil
import struct

import numpy as np

DTYPES = {'F64': '<f8', 'F32': '<f4', 'F16': '<f2', 'BF16': '<u2', 'I64': '<i8', 'I32': '<i4', 'I16': '<i2',
          'I8': 'i1', 'U64': '<u8', 'U32': '<u4', 'U16': '<u2', 'U8': 'u1', 'BOOL': '?'}


def bf16_to_f32(u):
    return (u.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """round to nearest even (finite values)"""
    b = np.asarray(x, np.float32).view(np.uint32)
    return ((b + 0x7fff + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def read(path, raw=False):
    """{name: array} (BF16 as float32 unless raw) and the header"""
    data = open(path, 'rb').read()
    (n,) = struct.unpack('<Q', data[:8])
    head = json.loads(data[8:8 + n])
    out = {}
    for name, e in head.items():
        if name == '__metadata__':
            continue
        b, end = e['data_offsets']
        a = np.frombuffer(data[8 + n + b:8 + n + end], dtype=DTYPES[e['dtype']]).reshape(e['shape'])
        out[name] = bf16_to_f32(a) if e['dtype'] == 'BF16' and not raw else a
    return out, head


def write(path, tensors, header_hook=None):
    """tensors: {name: (dtype name, array)}; BF16 arrays are uint16 bits"""
    head, blobs, off = {}, [], 0
    for name, (dt, a) in tensors.items():
        blob = np.ascontiguousarray(a, dtype=DTYPES[dt]).tobytes()
        head[name] = {'dtype': dt, 'shape': list(a.shape), 'data_offsets': [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    if header_hook:
        header_hook(head)
    h = json.dumps(head).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def run_hf(spmdc, source, work, mpirun, mpiargs, model, map_path, ids, defines=None,
           meshes=((1, 'dp=1,tp=1'), (4, 'dp=2,tp=2')), data=None):
    """The Hugging Face tests' runs (gpt_hf.py, llama_hf.py, gpt2_hf.py):
    SOURCE compiled into WORK (spmdc -D NAME=VALUE for DEFINES), then run on
    each of MESHES ((ranks, mesh), default 1 rank and dp=2,tp=2) in a
    directory of its own holding MODEL (under its own name), the map,
    ids.npy and DATA (a directory, linked as data/); the standard output
    goes to out.txt there.  Yields (mesh, directory) per mesh, the
    directory None when the run failed (printed)."""
    import os
    import shutil
    import subprocess
    prog = os.path.join(work, os.path.basename(source).split('.')[0])
    flags = [f'-D{k}={v}' for k, v in (defines or {}).items()]
    subprocess.run([spmdc, source, *flags, '-o', prog], check=True)
    for np_, mesh in meshes:
        d = os.path.join(work, mesh.replace(',', '_').replace('=', ''))
        os.makedirs(d)
        shutil.copy(model, d)
        shutil.copy(map_path, d)
        np.save(os.path.join(d, 'ids.npy'), ids)
        if data:
            os.symlink(os.path.abspath(data), os.path.join(d, 'data'))
        r = subprocess.run([mpirun] + mpiargs + ['-np', str(np_), prog, '--mesh', mesh], cwd=d,
                           capture_output=True, text=True, timeout=300)
        with open(os.path.join(d, 'out.txt'), 'w') as f:
            f.write(r.stdout)
        if r.returncode != 0:
            print(f'FAIL: {mesh}: exit {r.returncode}: {r.stderr[-2000:]}')
            d = None
        yield mesh, d


def fresh_dir(path):
    """path as an empty directory (removed first if it exists)."""
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)


def harness_args(argv):
    """The weights tests' command line, SPMDC WORK MPIRUN [MPIRUN ARGS...]:
    (spmdc, work, mpirun, mpirun's arguments), WORK made fresh."""
    spmdc, work, mpirun = argv[1:4]
    fresh_dir(work)
    return spmdc, work, mpirun, argv[4:]


def randomize_gpt2(model, scale):
    """A transformers-named GPT-2's parameters drawn at random (torch's
    current seed) so that every one matters: matrices N(0, scale^2), vectors
    N(0, 0.01), the layer norms' weights around 1."""
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            norm = name.endswith('ln_1.weight') or name.endswith('ln_2.weight') or name.endswith('ln_f.weight')
            p.copy_(torch.randn(p.shape) * (scale if p.dim() > 1 else 0.1) + (1.0 if norm else 0.0))
