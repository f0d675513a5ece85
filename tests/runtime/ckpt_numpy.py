#!/usr/bin/python3
"""ckpt_numpy.py DIR SEED: the checkpoint that mpi_checkpoint saved in DIR
holds, for every field, a file NumPy reads with the global shape and dtype
and the values value(seed, global index) (the formula of mpi_checkpoint.c),
and nothing else; DIR.single.npy too."""
import os
import sys

import numpy as np

FIELDS = [  # name, dtype, global shape (as in mpi_checkpoint.c)
    ('emb', '<f4', (8, 12)),
    ('attn.wqkv', '<f4', (4, 3, 8, 2)),
    ('attn.wo', '<f8', (8, 4)),
    ('ln', '<f4', (6,)),
    ('w2', '<f4', (4, 8)),
    ('step', '<i4', ()),
    ('empty', '<f4', (0, 4)),
    ('ids', '<i4', (8, 2)),
]


def expected(seed, dtype, shape):
    g = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    if dtype == '<i4':
        return (seed * 1000 + g).astype(dtype)
    return (seed * 100.0 + g * 0.25 - 3.0).astype(dtype)


def check(path, seed, dtype, shape):
    a = np.load(path)
    assert a.dtype == np.dtype(dtype), '%s: dtype %s, expected %s' % (path, a.dtype, dtype)
    assert a.shape == shape, '%s: shape %s, expected %s' % (path, a.shape, shape)
    assert np.array_equal(a, expected(seed, dtype, shape)), '%s: values differ' % path
    with open(path, 'rb') as f:  # the header is padded to 64 bytes, as numpy does
        f.read(8)
        hlen = int.from_bytes(f.read(2), 'little')
        assert (10 + hlen) % 64 == 0, '%s: header of %d bytes' % (path, 10 + hlen)


def main():
    d, seed = sys.argv[1], int(sys.argv[2])
    names = sorted(n + '.npy' for n, _, _ in FIELDS)
    have = sorted(os.listdir(d))
    assert have == names, 'files in %s: %s, expected %s' % (d, have, names)
    for name, dtype, shape in FIELDS:
        check(os.path.join(d, name + '.npy'), seed, dtype, shape)
    check(d + '.single.npy', seed, '<f4', (4, 3, 8, 2))
    print('%s: %d files read by NumPy %s with their global shapes' % (d, len(FIELDS) + 1,
                                                                      np.__version__))


if __name__ == '__main__':
    main()
