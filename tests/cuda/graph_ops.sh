#!/usr/bin/env bash
# graph_ops.sh SPMDC LIBSPMDRT_CUDASIM NP MESH: --profile's device operations
# per training step in the simulation build count a graph region's replays
# (docs/runtime.md, "Device operations and host synchronisations"):
# tests/graphs/train_adamw.spmd (a step that is one region: captured at the
# second step, replayed from the third) on NP ranks, --mesh MESH, run with
# SPMD_GRAPHS=1 and SPMD_GRAPHS=0 must print the same, its region must
# replay, and the per-step means of kernels, GEMMs and collectives must be
# the same both ways (a replay adds the operations its capture recorded);
# copies may only be more with graphs (a replay copies its inputs into the
# captured buffers; the slot table's upload is the graph's first node).
# The region's summary (SPMD_GRAPHS_VERBOSE=1) gives the operations a replay
# counts and the nodes its graph holds: the same number (every recorded
# launch, GEMM, copy and collective counted once, generated kernels too).
set -euo pipefail
spmdc=$1
simrt=$2
np=$3
mesh=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
SPMDC_CUDA_SIM=1 SPMDC_RT_LIB="$simrt" SPMDC_CFLAGS="-Wl,-rpath,$(dirname "$simrt")" \
  "$spmdc" --target=cuda "$root/tests/graphs/train_adamw.spmd" -o "$work/prog"
for g in 1 0; do
  (cd "$work" && SPMD_GRAPHS=$g SPMD_GRAPHS_VERBOSE=1 timeout 200 mpirun -np "$np" ./prog --mesh "$mesh" \
     --profile >"out$g" 2>"err$g") || { cat "$work/err$g"; echo "FAIL: the program did not run (SPMD_GRAPHS=$g)"; exit 1; }
done
cmp -s "$work/out1" "$work/out0" || { diff "$work/out1" "$work/out0"; echo "FAIL: the output differs"; exit 1; }
summary=$(grep '^spmd: graph region .*: captured, [1-9][0-9]* replays' "$work/err1") ||
  { cat "$work/err1"; echo "FAIL: the region did not replay"; exit 1; }
echo "$summary"
counted=$(sed -n 's/.*a replay counts \([0-9]*\) device operations.*/\1/p' <<<"$summary")
nodes=$(sed -n 's/.*its graph holds \([0-9]*\) nodes.*/\1/p' <<<"$summary")
[ -n "$counted" ] && [ "$counted" = "$nodes" ] ||
  { echo "FAIL: a replay counts ${counted:-?} device operations, its graph holds ${nodes:-?} nodes"; exit 1; }
# "mean on rank 0: 46.0 kernels, 5.0 GEMMs, 0.5 copies, 0.0 collectives"
means() { sed -n 's/.*mean on rank 0: \([0-9.]*\) kernels, \([0-9.]*\) GEMMs, \([0-9.]*\) copies, \([0-9.]*\) collectives).*/\1 \2 \3 \4/p' "$1"; }
read -r k1 m1 c1 l1 <<<"$(means "$work/err1")"
read -r k0 m0 c0 l0 <<<"$(means "$work/err0")"
grep '^device operations per training step' "$work/err1" "$work/err0"
[ -n "${k1:-}" ] && [ -n "${k0:-}" ] || { echo "FAIL: no device-operation line in the profile"; exit 1; }
[ "$k1" = "$k0" ] && [ "$m1" = "$m0" ] && [ "$l1" = "$l0" ] ||
  { echo "FAIL: per step with graphs $k1 kernels, $m1 GEMMs, $l1 collectives; eager $k0, $m0, $l0"; exit 1; }
awk -v a="$c1" -v b="$c0" 'BEGIN { exit !(a >= b) }' ||
  { echo "FAIL: fewer copies per step with graphs ($c1) than eager ($c0)"; exit 1; }
echo "ok: $k1 kernels, $m1 GEMMs, $l1 collectives per step both ways; copies $c1 (graphs), $c0 (eager); a replay: $counted operations, $nodes nodes"
