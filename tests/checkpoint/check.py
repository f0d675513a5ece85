#!/usr/bin/python3
"""check.py: what resume.sh asks of checkpoint directories, with NumPy.

  check.py shapes DIR        every file of resume.spmd's State checkpoint is
                             there, and NumPy reads it with its global shape
  check.py close A B RTOL    the checkpoints A and B hold the same fields,
                             equal within RTOL (relative to each field's max)
"""
import os
import sys

import numpy as np

L, D, H = 3, 16, 32
MODEL = {'blocks.g': (L, D), 'blocks.w1': (L, D, H), 'blocks.w2': (L, H, D), 'head': (D, D)}
STATE = {'%s.%s' % (part, f): s for part in ('model', 'adam_m', 'adam_v') for f, s in MODEL.items()}
STATE['step'] = ()


def shapes(d):
    names = sorted(os.listdir(d))
    want = sorted(n + '.npy' for n in STATE)
    assert names == want, '%s holds %s, expected %s' % (d, names, want)
    for name, shape in STATE.items():
        a = np.load(os.path.join(d, name + '.npy'))
        assert a.shape == shape, '%s: shape %s, expected %s' % (name, a.shape, shape)
        assert a.dtype == (np.int32 if name == 'step' else np.float32), '%s: dtype %s' % (name, a.dtype)
    print('%s: %d fields, NumPy %s reads them with their global shapes' % (d, len(STATE), np.__version__))


def close(a, b, rtol):
    assert sorted(os.listdir(a)) == sorted(os.listdir(b)), 'different fields in %s and %s' % (a, b)
    worst = 0.0
    for name in sorted(os.listdir(a)):
        x, y = np.load(os.path.join(a, name)), np.load(os.path.join(b, name))
        assert x.shape == y.shape and x.dtype == y.dtype, name
        scale = max(float(np.abs(x).max(initial=0)), 1e-30)
        err = float(np.abs(x.astype(np.float64) - y).max(initial=0)) / scale
        worst = max(worst, err)
        assert err <= rtol, '%s: differs by %.3g (relative to its max), more than %g' % (name, err, rtol)
    print('%s and %s agree within %.3g (allowed %g)' % (a, b, worst, rtol))


if __name__ == '__main__':
    if sys.argv[1] == 'shapes':
        shapes(sys.argv[2])
    else:
        close(sys.argv[2], sys.argv[3], float(sys.argv[4]))
