#!/bin/sh
# check_trace.sh PYTHON TRACE CMD...: runs CMD (which writes TRACE with
# --trace and prints a profile with --profile) and checks that TRACE is valid
# Chrome trace JSON with events from every rank and that a profile was printed.
py=$1; trace=$2
shift 2
rm -f "$trace"
err=$(mktemp)
"$@" 2>"$err" || { cat "$err"; rm -f "$err"; exit 1; }
cat "$err"
grep -q "spmd profile:" "$err" && grep -q "all_reduce" "$err" || { echo "FAIL: no profile"; exit 1; }
grep -Eq "^f32 GEMM: (OpenBLAS|oneDNN) \(" "$err" || { echo "FAIL: the profile does not name the f32 GEMM library"; exit 1; }
rm -f "$err"
"$py" - "$trace" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
pids = {e["pid"] for e in ev}
names = {e["name"] for e in ev if e["ph"] == "X"}
for e in ev:
    assert e["ph"] in ("X", "M"), e
    if e["ph"] == "X":
        assert e["dur"] >= 0 and e["ts"] >= 0, e
need = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
assert need <= names, names
assert len(pids) >= 2, pids
labels = {e["args"]["labels"] for e in ev if e["name"] == "process_labels"}
assert labels in ({"f32 GEMM: OpenBLAS"}, {"f32 GEMM: oneDNN"}), labels
print("trace ok:", len(ev), "events from ranks", sorted(pids))
PY
