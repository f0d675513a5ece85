#!/usr/bin/env bash
# profile_regions.sh SPMDC: --profile of a generated program prints where the
# time goes: per kernel kind (matmul, elementwise, collectives, allocation,
# other), per collective, and per function and training-loop iteration, with
# each region's self time split by kind; and per training step the CPU
# target's operations (runtime calls, collectives among them) and host
# synchronisations (the wait for the gradients' non-blocking all-reduce).
set -euo pipefail
spmdc=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$(cd "$(dirname "$0")/.." && pwd)
"$spmdc" "$root/examples/mlp_tp.spmd" -D STEPS=3 -o "$work/prog"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
timeout 120 mpirun --oversubscribe -np 2 "$work/prog" --mesh dp=2,tp=1 --profile >"$work/out" 2>"$work/err"
cat "$work/err"
/usr/bin/python3 - "$work/err" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def row(name):
    m = re.search(r"^%s +(.*)$" % re.escape(name), text, re.M)
    if not m:
        sys.exit("profile lacks a row for %r" % name)
    return m.group(1).split()
m = re.search(r"^spmd profile: 2 ranks, ([0-9.]+) ms", text, re.M)
if not m:
    sys.exit("no profile header")
total_ms = float(m.group(1))
parts = 0.0
for kind in ["matmul", "elementwise", "collectives", "alloc", "random"]:
    parts += float(row(kind)[1])
for kind in ["reduce", "copy"]:
    if re.search(r"^%s " % kind, text, re.M):
        parts += float(row(kind)[1])
parts += float(row("other")[0])
if abs(parts - total_ms) > 0.02 * total_ms + 1:
    sys.exit("kinds add up to %.3f ms, the run took %.3f ms" % (parts, total_ms))
# dw1 and dw2 share one bucket per step (non-blocking), and the loss at step 0
r = row("all_reduce")
if r[0] != "4" or float(r[4]) <= 0:
    sys.exit("expected 4 all_reduce calls per rank, some time in flight: %r" % r)
for region, calls in [("main", "1"), ("value_and_grad(loss)", "3"), ("loss (forward)", "3"),
                      ("mlp (backward)", "3")]:
    r = row(region)
    if r[0] != calls:
        sys.exit("region %r: %s calls, expected %s" % (region, r[0], calls))
# the SGD updates (2 per step), the gelu gradient and the loss's: in place
if not re.search(r"^in place: 12 of 12 elementwise results", text, re.M):
    sys.exit("expected the 12 in-place results of 3 steps")
if not re.search(r"^for step \(.*mlp_tp\.spmd:35\) +3 ", text, re.M):
    sys.exit("no region for the iterations of the training loop")
m = re.search(r"^device operations per training step \(for step \(.*mlp_tp\.spmd:35\)\): median (\d+) per rank "
              r".*rank 0's 3 steps: .*; mean on rank 0: .* ([0-9.]+) collectives\)$", text, re.M)
if not m or int(m.group(1)) == 0 or float(m.group(2)) == 0:
    sys.exit("no device operations (with collectives) per training step")
m = re.search(r"^host synchronisations per training step \(for step \(.*mlp_tp\.spmd:35\)\): median (\d+) per rank "
              r".*steps with any on rank 0: 1 2 3\)$", text, re.M)
if not m or int(m.group(1)) < 1:
    sys.exit("expected a host synchronisation (the gradients' wait) in every step")
print("profile ok")
PY
