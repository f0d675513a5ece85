#!/usr/bin/env bash
# profile_views.sh SPMDC: reshape, index and a slice of a contiguous block
# copy nothing on the CPU target (issue 26: views of their operand's
# storage). A training loop of STEPS=3 steps reshapes, indexes and slices
# (dim 0, contiguous; dim 2, strided) a [4, 6, 6] tensor; --profile must
# count 3 views a step (9) and one copy operation a step (the strided
# slice), where every one of the four was a copy before.
set -euo pipefail
spmdc=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/views.spmd" <<'SPMD'
mesh (dp: 1);

const L = 4;
const D = 6;
const STEPS = 3;

fn main() {
  let w = randn(f32[L, D, D]{dp: R}, seed=1, std=1.0);
  var acc = randn(f32[D]{dp: R}, seed=2, std=1.0);
  for step in 0..STEPS {
    let flat = reshape(w, [L * D * D]);
    let layer = w[step];
    let first = slice(w, dim=0, start=0, end=2);
    let strided = slice(w, dim=2, start=0, end=3);
    acc = acc + sum(layer, dim=0) + sum(flat) + sum(first) + sum(strided);
  }
  print(acc);
}
SPMD
"$spmdc" "$work/views.spmd" -o "$work/views"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
(cd "$work" && timeout 120 ./views --profile >out 2>err) || { cat "$work/err"; echo "FAIL: the program did not run"; exit 1; }
cat "$work/out" "$work/err"
grep -q "^views: 9 reshape, index and slice results per rank shared their operand's memory (no copy)$" "$work/err" ||
  { echo "FAIL: expected 9 views (reshape, index and the contiguous slice, 3 steps)"; exit 1; }
grep -Eq "^device operations per training step .*mean on rank 0: [0-9.]+ kernels, 0.0 GEMMs, 1.0 copies," "$work/err" ||
  { echo "FAIL: expected one copy a step (the strided slice)"; exit 1; }
echo "ok: reshape, index and the contiguous slice are views; the strided slice is the step's one copy"
