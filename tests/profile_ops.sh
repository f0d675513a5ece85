#!/usr/bin/env bash
# profile_ops.sh SPMDC: SPMD_PROFILE_OPS=1 with --profile prints each
# counted device operation on stderr, "op KIND REGION: CALL" (docs/runtime.md,
# "Device operations and host synchronisations"), so that a region's
# ops/call can be read one by one (issue 26). A loop of STEPS=3 steps of a
# matmul, a sum and a fused add on the CPU target: every step's operations
# are printed in the step's region with the kernel's name (the CUDA target:
# the runtime function called), as many as --profile counts; without the
# variable nothing is printed.
set -euo pipefail
spmdc=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/ops.spmd" <<'SPMD'
mesh (dp: 1);

const D = 4;
const STEPS = 3;

fn main() {
  let w = randn(f32[D, D]{dp: R}, seed=1, std=1.0);
  var acc = zeros(f32{dp: R});
  for step in 0..STEPS {
    let y = matmul(w, w);
    acc = acc + sum(y);
  }
  print(acc);
}
SPMD
"$spmdc" "$work/ops.spmd" -o "$work/ops"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
(cd "$work" && SPMD_PROFILE_OPS=1 timeout 120 ./ops --profile >out 2>err) ||
  { cat "$work/err"; echo "FAIL: the program did not run"; exit 1; }
grep '^op ' "$work/err" | uniq -c
step='for step (.*ops.spmd:[0-9]*)'
gemms=$(grep -c "^op gemm $step: matmul$" "$work/err" || true)
[ "$gemms" = 3 ] || { cat "$work/err"; echo "FAIL: expected 3 'op gemm for step (...): matmul' lines, one a step; got $gemms"; exit 1; }
grep -q "^op kernel $step: sum$" "$work/err" ||
  { cat "$work/err"; echo "FAIL: no 'op kernel for step (...): sum' line"; exit 1; }
n=$(grep -c "^op [a-z]* $step: " "$work/err")
per=$(sed -n 's/^device operations per training step .*: median \([0-9]*\) per rank.*/\1/p' "$work/err")
[ -n "$per" ] && [ "$n" = $((3 * per)) ] ||
  { cat "$work/err"; echo "FAIL: $n operations printed in the step's region, --profile counts ${per:-?} a step (3 steps)"; exit 1; }
(cd "$work" && timeout 120 ./ops --profile >out2 2>err2) || { cat "$work/err2"; echo "FAIL: the program did not run"; exit 1; }
! grep -q '^op ' "$work/err2" || { echo "FAIL: operations printed without SPMD_PROFILE_OPS"; exit 1; }
echo "ok: $n operations printed in the step's region ($per a step), none without SPMD_PROFILE_OPS"
