#!/usr/bin/env bash
# trace_regions.sh SPMDC: a generated program's --trace output is valid
# JSON and shows each function's forward and backward as regions, with the
# collectives inside them (the gradients' all-reduces as start and wait).
set -euo pipefail
spmdc=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$(cd "$(dirname "$0")/.." && pwd)
"$spmdc" "$root/examples/block_sp.spmd" -D STEPS=1 -o "$work/prog"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
timeout 120 mpirun --oversubscribe -np 4 "$work/prog" --mesh dp=2,tp=2 --trace "$work/t.json" >/dev/null
/usr/bin/python3 - "$work/t.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
events = d["traceEvents"] if isinstance(d, dict) else d
names = {e.get("name") for e in events}
want = {"main", "loss (forward)", "loss (backward)", "block (forward)", "block (backward)",
        "all_gather", "reduce_scatter", "all_reduce",
        "all_reduce (start)", "all_reduce (wait)"}  # gradients' all_reduces overlap
missing = want - names
pids = {e.get("pid") for e in events if e.get("ph") == "X"}
if missing or len(pids) != 4:
    sys.exit("trace lacks %s or has %d ranks" % (sorted(missing), len(pids)))
print("trace ok: %d events from %d ranks" % (len(events), len(pids)))
PY
