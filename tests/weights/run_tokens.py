#!/usr/bin/python3
"""run_tokens.py SPMDC WORKDIR MPIRUN [ARGS...]: token files as batches
(docs/weights.md). tokens.spmd reads tok.bin in each format (nanoGPT's raw
uint16, llm.c's .bin with its uint16 and uint32 headers) with token_batch
on 1, 2 and 4 ranks: the batches must equal the flagship's batch() of the
same tokens as an array with the same seed, and be the same on every mesh.
Bad files (odd length, a token past the vocabulary, a wrong header, a
header whose count disagrees with the file) stop every rank with a message
naming the file."""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st  # noqa: E402
N, NV = 1000, 300
# dp=3 and tp=3 split the 8 windows (3, 3, 2) and their positions unevenly (SPEC 4)
MESHES = [(1, 'dp=1,tp=1'), (2, 'dp=2,tp=1'), (4, 'dp=2,tp=2'), (3, 'dp=3,tp=1'), (3, 'dp=1,tp=3')]
failures = []


def bad(msg):
    print('FAIL:', msg)
    failures.append(msg)


def llmc(tokens, magic, version, dt):
    h = np.zeros(256, np.int32)
    h[:3] = magic, version, len(tokens)
    return h.tobytes() + tokens.astype(dt).tobytes()


def main():
    spmdc, work, mpirun, mpiargs = st.harness_args(sys.argv)
    prog = os.path.join(work, 'tokens')
    subprocess.run([spmdc, os.path.join(HERE, 'tokens.spmd'), '-o', prog], check=True)
    tok = np.random.default_rng(3).integers(0, NV, N).astype(np.int32)

    def run(name, np_, mesh, blob):
        d = os.path.join(work, name)
        os.makedirs(d)
        open(os.path.join(d, 'tok.bin'), 'wb').write(blob)
        np.save(os.path.join(d, 'tok.npy'), tok)
        r = subprocess.run([mpirun] + mpiargs + ['-np', str(np_), prog, '--mesh', mesh], cwd=d,
                           capture_output=True, text=True, timeout=120)
        return d, r

    formats = {'raw': tok.astype('<u2').tobytes(), 'llmc16': llmc(tok, 20240520, 1, '<u2'),
               'llmc32': llmc(tok, 20240801, 7, '<u4')}
    first = None
    for fname, blob in formats.items():
        for np_, mesh in MESHES:
            d, r = run(f'{fname}_{np_}_{mesh.replace(",", "_").replace("=", "")}', np_, mesh, blob)
            if r.returncode != 0:
                bad(f'{fname} on {mesh}: exit {r.returncode}: {r.stderr[-1500:]}')
                continue
            a, b, ref = (np.load(os.path.join(d, 'out/batches', f + '.npy')) for f in ('a', 'b', 'ref'))
            if not (np.array_equal(a, ref) and np.array_equal(b, ref)):
                bad(f'{fname} on {mesh}: token_batch differs from batch() of the array')
            if first is None:
                first = ref
            elif not np.array_equal(a, first):
                bad(f'{fname} on {mesh}: the batch differs from the first mesh\'s')
            print(f'ok: {fname} on {mesh}: token_batch == batch() of the array, == every other mesh')
    # each window is W consecutive tokens of the file
    starts = [np.where(np.all(np.lib.stride_tricks.sliding_window_view(tok, first.shape[1]) == row, axis=1))[0]
              for row in first]
    if any(len(s) == 0 for s in starts):
        bad('a row of the batch is not a window of the file')
    over = tok.copy()
    over[N // 2:] = NV + 7   # every window reaches one
    cases = [('odd length', formats['raw'] + b'\0', "token file 'tok.bin': odd length (2001 bytes)"),
             ('past vocab', over.astype('<u2').tobytes(), f"is not below the vocabulary's {NV}"),
             ('version', llmc(tok, 20240520, 3, '<u2'), 'llm.c header with magic 20240520 and version 3'),
             ('count', llmc(tok, 20240520, 1, '<u2')[:-10], 'the header says 1000 tokens of 2 bytes, but 1990')]
    for i, (name, blob, msg) in enumerate(cases):
        np_, mesh = MESHES[1 + i % 2]
        d, r = run('bad_' + name.replace(' ', '_'), np_, mesh, blob)
        lines = [x for x in r.stderr.splitlines() if x.startswith('spmd: error: [rank') and msg in x]
        if r.returncode == 0 or len({x.split(']')[0] for x in lines}) != np_:
            bad(f'{name}: expected "{msg}" from all {np_} ranks, got rc {r.returncode}:\n{r.stderr[-1500:]}')
        else:
            print(f'ok: {name}: every rank stops: {lines[0][len("spmd: error: "):]}')
    if failures:
        sys.exit(f'FAIL: {len(failures)} problems')
    print('ok: every case')


main()
