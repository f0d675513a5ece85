#!/usr/bin/python3
"""run_sampling.py SPMDC WORKDIR MPIRUN [ARGS...]: argmax, argmin, topk and
categorical (docs/weights.md, "Sampling") on fixed logits, on 1, 2 and 4
ranks: every result the same on every mesh (the draws are keyed by the
logits' global indices); argmax, argmin and topk equal NumPy's; greedy and
top_k=1 draws are the argmax; top_k=3 draws only the 3 largest; the same
seed draws the same and another seed differently; and the frequencies of
4096 draws from one row's softmax (at temperatures 1 and 2) are within 5
standard deviations of its probabilities."""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st  # noqa: E402
NR, NV, K = 4096, 8, 3
SAME = 4096  # rows alike (all): a frequency test of every draw
MESHES = [(1, 'dp=1,tp=1'), (2, 'dp=2,tp=1'), (4, 'dp=2,tp=2')]
FIELDS = ('amax_i', 'amin_i', 'top', 'greedy', 't1', 't1_again', 't1_seed2', 'topk1', 'topk3', 'hot')
failures = []


def bad(msg):
    print('FAIL:', msg)
    failures.append(msg)


def freq_ok(draws, logits, temp, what):
    p = np.exp(logits / temp - np.max(logits / temp))
    p /= p.sum()
    f = np.bincount(draws, minlength=NV) / len(draws)
    sd = np.sqrt(p * (1 - p) / len(draws))
    if np.any(np.abs(f - p) > 5 * sd + 1e-9):
        bad(f'{what}: frequencies {np.round(f, 4)} vs probabilities {np.round(p, 4)}')


def main():
    spmdc, work, mpirun, mpiargs = st.harness_args(sys.argv)
    prog = os.path.join(work, 'sampling')
    subprocess.run([spmdc, os.path.join(HERE, 'sampling.spmd'), '-o', prog], check=True)
    row = np.array([1.0, 0.5, 2.0, -1.0, 0.0, 1.5, 0.25, 2.0], np.float32)   # a tie: classes 2 and 7
    logits = np.tile(row, (NR, 1))
    res = None
    for np_, mesh in MESHES:
        d = os.path.join(work, mesh.replace(',', '_').replace('=', ''))
        os.makedirs(d)
        np.save(os.path.join(d, 'logits.npy'), logits)
        r = subprocess.run([mpirun] + mpiargs + ['-np', str(np_), prog, '--mesh', mesh], cwd=d,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            bad(f'{mesh}: exit {r.returncode}: {r.stderr[-1500:]}')
            continue
        got = {f: np.load(os.path.join(d, 'out/draws', f + '.npy')) for f in FIELDS}
        if res is None:
            res = got
        elif any(not np.array_equal(got[f], res[f]) for f in FIELDS):
            bad(f'{mesh}: results differ from the first mesh\'s: ' +
                ', '.join(f for f in FIELDS if not np.array_equal(got[f], res[f])))
        else:
            print(f'ok: {mesh}: every result equals the first mesh\'s')
    if res is None:
        sys.exit('FAIL: no run')
    checks = [('argmax', np.array_equal(res['amax_i'], np.argmax(logits, 1))),
              ('argmin', np.array_equal(res['amin_i'], np.argmin(logits, 1))),
              ('topk', np.array_equal(res['top'], -np.sort(-logits, 1)[:, :K])),
              ('greedy is argmax', np.array_equal(res['greedy'], np.argmax(logits, 1))),
              ('top_k=1 is argmax', np.array_equal(res['topk1'], np.argmax(logits, 1))),
              ('top_k=3 draws the 3 largest', set(np.unique(res['topk3'])) <= {2, 7, 5}),
              ('the same seed draws the same', np.array_equal(res['t1'], res['t1_again'])),
              ('another seed draws differently', not np.array_equal(res['t1'], res['t1_seed2']))]
    for name, ok in checks:
        print(('ok: ' if ok else 'FAIL: ') + name)
        if not ok:
            failures.append(name)
    freq_ok(res['t1'], row.astype(np.float64), 1.0, 'temperature 1')
    freq_ok(res['t1_seed2'], row.astype(np.float64), 1.0, 'temperature 1, seed 6')
    freq_ok(res['hot'], row.astype(np.float64), 2.0, 'temperature 2')
    top = row.astype(np.float64).copy()
    top[[0, 1, 3, 4, 6]] = -np.inf
    freq_ok(res['topk3'], top, 0.7, 'top_k=3, temperature 0.7')
    if failures:
        sys.exit(f'FAIL: {len(failures)} problems')
    print('ok: every case (frequencies within 5 sd of softmax)')


main()
