#!/usr/bin/python3
"""check_semantics.py SPMDC [FILE.spmd]: cross_entropy, take_along_dim and
dropout against PyTorch's semantics.

Compiles FILE (default: semantics.spmd next to this script), runs it on one
rank and on two (--mesh dp=2), checks that both runs write the same .npy
files byte for byte (the values are the same on every mesh), and compares
them with torch.nn.functional.cross_entropy (every reduction, ignore_index
-100, gradients by autograd), torch.take_along_dim (and its gradient) and
torch.nn.functional.dropout's semantics: the kept elements scaled by
1/(1-p), about p of them zeroed, the gradient the same mask and scale, p=0
the identity.  Needs python3-torch (a declared test dependency: without it
the test fails); SPMD_TORCH_SEMANTICS_NUMPY=1 checks against a NumPy
reference of the same formulas instead.  Exit 0 pass, 1 fail.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
except ImportError:  # the NumPy reference below
    torch = None

RTOL, ATOL = 1e-12, 1e-12


def run(cmd, cwd):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',
               OMPI_MCA_rmaps_base_oversubscribe='1', OPENBLAS_NUM_THREADS='1')
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit('FAIL %s\n%s%s' % (' '.join(cmd), p.stdout, p.stderr))


# ---------------------------------------------------------------- references

def ce_reference(logits, targets, reduction):
    """loss and d loss / d logits (for the loss weighted by w when 'none')."""
    c = logits.shape[-1]
    if torch is not None:
        x = torch.tensor(logits.reshape(-1, c), requires_grad=True)
        t = torch.tensor(targets.reshape(-1).astype(np.int64))
        loss = torch.nn.functional.cross_entropy(x, t, reduction=reduction, ignore_index=-100)
        return x, loss
    x = logits.reshape(-1, c)
    t = targets.reshape(-1)
    m = x.max(axis=1, keepdims=True)
    logp = x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    keep = t != -100
    rows = np.where(keep, -logp[np.arange(len(t)), np.where(keep, t, 0)], 0.0)
    p = np.exp(logp)
    onehot = np.zeros_like(x)
    onehot[np.arange(len(t))[keep], t[keep]] = 1
    drow = np.where(keep[:, None], p - onehot, 0.0)
    if reduction == 'none':
        return drow, rows
    if reduction == 'sum':
        return drow, rows.sum()
    return drow / keep.sum(), rows.sum() / keep.sum()


def ce_value_and_grad(logits, targets, reduction, weights=None):
    x, loss = ce_reference(logits, targets, reduction)
    if torch is not None:
        obj = (loss * torch.tensor(weights.reshape(-1))).sum() if weights is not None else loss
        obj.backward()
        return loss.detach().numpy().reshape(targets.shape if reduction == 'none' else ()), \
            x.grad.numpy().reshape(logits.shape)
    grad = x * (weights.reshape(-1, 1) if weights is not None else 1.0)
    return np.asarray(loss).reshape(targets.shape if reduction == 'none' else ()), grad.reshape(logits.shape)


def take_value_and_grad(x, idx, w):
    if torch is not None:
        xt = torch.tensor(x, requires_grad=True)
        y = torch.take_along_dim(xt, torch.tensor(idx.astype(np.int64)), dim=1)
        (y * torch.tensor(w)).sum().backward()
        return y.detach().numpy(), xt.grad.numpy()
    y = np.take_along_axis(x, idx.astype(np.int64), axis=1)
    g = np.zeros_like(x)
    np.add.at(g, (np.arange(x.shape[0])[:, None], idx), w)
    return y, g


def dropout_reference(x, mask, p, w):
    """y and d sum(y * w) / dx for the given keep-mask, as PyTorch computes them."""
    if torch is not None:
        xt = torch.tensor(x, requires_grad=True)
        # F.dropout is input * bernoulli(1 - p) / (1 - p): the same formula with our mask
        y = xt * torch.tensor(mask.astype(np.float64)) / (1 - p)
        (y * torch.tensor(w)).sum().backward()
        return y.detach().numpy(), xt.grad.numpy()
    return x * mask / (1 - p), w * mask / (1 - p)


# ---------------------------------------------------------------- checks

class Checker:
    def __init__(self, d):
        self.d = d
        self.failed = 0

    def load(self, name):
        return np.load(os.path.join(self.d, name + '.npy'))

    def close(self, what, got, want, rtol=RTOL, atol=ATOL):
        got, want = np.asarray(got), np.asarray(want)
        ok = got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        print('%s %s' % ('ok  ' if ok else 'FAIL', what))
        if not ok:
            self.failed += 1
            print('  got  %s\n  want %s' % (got, want))

    def true(self, what, cond):
        print('%s %s' % ('ok  ' if cond else 'FAIL', what))
        self.failed += not cond


def check(d):
    c = Checker(d)
    logits, targets, w = c.load('ce_logits'), c.load('ce_targets'), c.load('ce_weights')
    c.true('targets hold ignored (-100) and kept entries', (targets == -100).any() and (targets >= 0).any())
    v, g = ce_value_and_grad(logits, targets, 'sum')
    c.close('cross_entropy(reduction="sum")', c.load('ce_sum'), v)
    c.close('its gradient', c.load('ce_sum_grad'), g)
    v, g = ce_value_and_grad(logits, targets, 'mean')
    c.close('cross_entropy() (mean over the kept targets)', c.load('ce_mean'), v)
    c.close('its gradient', c.load('ce_mean_grad'), g)
    v, g = ce_value_and_grad(logits, targets, 'none', w)
    c.close('cross_entropy(reduction="none")', c.load('ce_none'), v)
    c.close('the gradient of sum(none * w)', c.load('ce_none_grad'), g)

    x, idx, wg = c.load('take_x'), c.load('take_idx'), c.load('take_w')
    y, g = take_value_and_grad(x, idx, wg)
    c.close('take_along_dim(x, idx, dim=1)', c.load('take'), y)
    c.close('its gradient', c.load('take_grad'), g)

    xd, wd, yd = c.load('drop_x'), c.load('drop_w'), c.load('drop')
    p = 0.25
    mask = yd != 0
    y, g = dropout_reference(xd, mask, p, wd)
    c.close('dropout: kept elements scaled by 1/(1-p), the others 0', yd, y)
    c.close('dropout: its gradient has the same mask and scale', c.load('drop_grad'), g)
    n, dropped = mask.size, (~mask).sum()
    sigma = np.sqrt(n * p * (1 - p))
    c.true('dropout zeroed %d of %d (expected %.0f +- %.0f)' % (dropped, n, n * p, 4 * sigma),
           abs(dropped - n * p) < 4 * sigma)
    c.close('dropout(p=0) is the identity', c.load('drop_p0'), xd, rtol=0, atol=0)
    return c.failed


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    spmdc = os.path.abspath(sys.argv[1])
    src = os.path.abspath(sys.argv[2] if len(sys.argv) == 3 else
                          os.path.join(os.path.dirname(__file__), 'semantics.spmd'))
    mpirun = shutil.which('mpirun') or 'mpirun'
    if torch is None and os.environ.get('SPMD_TORCH_SEMANTICS_NUMPY') != '1':
        # a declared test dependency (scripts/deps.sh --test): missing, the
        # test fails rather than quietly checking against its own reference
        sys.exit('FAIL: python3-torch is not installed (scripts/deps.sh --test installs it; '
                 'SPMD_TORCH_SEMANTICS_NUMPY=1 checks against the NumPy reference instead)')
    print('reference: %s' % ('PyTorch %s' % torch.__version__ if torch is not None else
                             'NumPy (SPMD_TORCH_SEMANTICS_NUMPY=1, python3-torch is not installed)'))
    work = tempfile.mkdtemp(prefix='spmd_torch_')
    try:
        prog = os.path.join(work, 'prog')
        run([spmdc, src, '-o', prog], os.path.dirname(src))
        for name, np_, mesh in (('one', 1, 'dp=1'), ('two', 2, 'dp=2')):
            os.mkdir(os.path.join(work, name))
            run([mpirun, '--allow-run-as-root', '--oversubscribe', '-np', str(np_), prog, '--mesh', mesh],
                os.path.join(work, name))
        failed = 0
        files = sorted(f for f in os.listdir(os.path.join(work, 'one')) if f.endswith('.npy'))
        for f in files:
            with open(os.path.join(work, 'one', f), 'rb') as a, open(os.path.join(work, 'two', f), 'rb') as b:
                if a.read() != b.read():
                    print('FAIL %s differs between 1 and 2 ranks' % f)
                    failed += 1
        print('%s the %d files are the same on 1 and 2 ranks' % ('ok  ' if not failed else 'FAIL', len(files)))
        failed += check(os.path.join(work, 'one'))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print('PASS' if not failed else 'FAIL (%d)' % failed)
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
