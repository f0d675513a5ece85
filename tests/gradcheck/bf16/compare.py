"""compare.py REF.txt BF16.txt [grad=RTOL] [value=RTOL]: compares the values
and gradients that gradcheck.c dumped (SPMD_GRADCHECK_DUMP) for a bf16
program and its f64 twin.  Each gradient's relative L2 error
||g_bf16 - g_f64|| / ||g_f64|| must be at most grad (default 0.02: bf16
keeps 8 significant bits, 2^-8 = 0.004 per rounding, and a few roundings
compound), each value's relative error at most value (default 0.02)."""
import math
import sys


def load(path):
    values, grads = {}, {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if w[0] == 'value':
                values[w[1]] = float(w[2])
            elif w[0] == 'grad':
                grads.setdefault((w[1], w[2]), {})[int(w[3])] = float(w[4])
    return values, grads


def main():
    tol = {'grad': 0.02, 'value': 0.02}
    for kv in sys.argv[3:]:
        k, v = kv.split('=')
        tol[k] = float(v)
    rv, rg = load(sys.argv[1])
    bv, bg = load(sys.argv[2])
    fails = 0
    if set(rv) != set(bv) or set(rg) != set(bg) or not rg:
        print('FAIL: the dumps list different functions or arguments')
        return 1
    for fn in sorted(rv):
        err = abs(bv[fn] - rv[fn]) / max(abs(rv[fn]), 1e-30)
        ok = err <= tol['value']
        fails += not ok
        print('%s %s: value %.8g, f64 %.8g, relative error %.3g' % ('ok' if ok else 'FAIL', fn, bv[fn], rv[fn], err))
    for key in sorted(rg):
        r, b = rg[key], bg[key]
        num = math.sqrt(sum((b[i] - r[i]) ** 2 for i in r))
        den = math.sqrt(sum(r[i] ** 2 for i in r))
        err = num / den if den > 0 else num
        ok = err <= tol['grad'] and den > 0
        fails += not ok
        print('%s %s d/d%s: %d elements, relative L2 error %.3g (|g| = %.4g)' %
              ('ok' if ok else 'FAIL', key[0], key[1], len(r), err, den))
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
