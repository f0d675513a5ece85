#!/usr/bin/env python3
"""gpt_compare.py REF OUT [--rtol R]: the flagship's run on the GPU (OUT, what
examples/gpt.spmd printed) against the CPU target's (REF) on the same mesh:
every `step N train LOSS lr LR gnorm G` and `step N val V` line of REF must be
in OUT with the same step numbers, and LOSS, LR, G and V within rtol (the two
targets multiply in a different order, so the trajectories drift apart by
rounding: a wrong kernel moves them by far more). Prints one line per compared
quantity with its largest relative difference, then "N passed, M failed"."""
import re
import sys


def read(path):
    train, val = {}, {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"step (\d+) train (\S+) lr (\S+) gnorm (\S+)", line)
            if m:
                train[int(m.group(1))] = tuple(float(x) for x in m.group(2, 3, 4))
            m = re.match(r"step (\d+) val (\S+)", line)
            if m:
                val[int(m.group(1))] = float(m.group(2))
    return train, val


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def main(argv):
    rtol = 1e-3
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--rtol":
            rtol = float(argv[i + 1])
            i += 2
            continue
        args.append(argv[i])
        i += 1
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    (rt, rv), (ot, ov) = read(args[0]), read(args[1])
    passed = failed = 0

    def check(what, ok, detail):
        nonlocal passed, failed
        print("%s %s: %s" % ("ok" if ok else "FAIL", what, detail))
        passed, failed = passed + ok, failed + (not ok)

    check("steps", bool(rt) and sorted(rt) == sorted(ot) and sorted(rv) == sorted(ov),
          "reference steps %s (val %s), run steps %s (val %s)"
          % (sorted(rt)[-1:] or "none", sorted(rv), sorted(ot)[-1:] or "none", sorted(ov)))
    for k, name in enumerate(("train loss", "lr", "gnorm")):
        common = [s for s in sorted(rt) if s in ot]
        if not common:
            continue
        worst = max(common, key=lambda s: rel(rt[s][k], ot[s][k]))
        d = rel(rt[worst][k], ot[worst][k])
        check(name, d <= rtol, "largest relative difference %.3g at step %d (%r vs %r), rtol %g"
              % (d, worst, rt[worst][k], ot[worst][k], rtol))
    common = [s for s in sorted(rv) if s in ov]
    if common:
        worst = max(common, key=lambda s: rel(rv[s], ov[s]))
        d = rel(rv[worst], ov[worst])
        check("val loss", d <= rtol, "largest relative difference %.3g at step %d (%r vs %r), rtol %g"
              % (d, worst, rv[worst], ov[worst], rtol))
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
