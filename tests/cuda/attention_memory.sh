#!/usr/bin/env bash
# attention_memory.sh SPMDC LIBSPMDRT_CUDASIM: the CUDA target's fused
# attention keeps O(T x E) per head (runtime/cuda/attention.cu: tiles in
# shared memory, a value per row; no T x S buffer), seen in --profile's
# high-water of live device bytes in the simulation build (which allocates
# as the GPU build does): one forward+backward step of bench/attention.spmd
# (B=1, H=2, E=16, causal) at T = 256 and 512. The fused op's (MODE=0)
# high-water must grow at most 2.2x when T doubles (linear, plus constants);
# the einsum formulation's (MODE=1, its T x T scores) must grow at least 3x
# in the same run, or the measure would not see a T x T buffer.
set -euo pipefail
spmdc=$(readlink -f "$1")
simrt=$(readlink -f "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
hw() { # MODE T: the high-water in bytes
  SPMDC_CUDA_SIM=1 SPMDC_RT_LIB="$simrt" SPMDC_CFLAGS="-Wl,-rpath,$(dirname "$simrt")" \
    "$spmdc" --target=cuda -D MODE=$1 -D T=$2 -D B=1 -D H=2 -D E=16 -D STEPS=1 \
    "$root/bench/attention.spmd" -o "$work/attn"
  (cd "$work" && timeout 200 ./attn --profile >out 2>&1) || { cat "$work/out"; echo "FAIL: MODE=$1 T=$2 did not run"; exit 1; }
  sed -n 's/^  high-water \([0-9]*\) B.*/\1/p' "$work/out" | head -1
}
fail=0
for mode in 0 1; do
  a=$(hw $mode 256); b=$(hw $mode 512)
  [[ "$a" =~ ^[0-9]+$ && "$b" =~ ^[0-9]+$ ]] || { printf '%s\n%s\n' "$a" "$b"; echo "FAIL: no high-water in --profile's output"; exit 1; }
  r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')
  name=$([ $mode = 0 ] && echo fused || echo einsum)
  echo "$name: high-water $a B at T=256, $b B at T=512: x$r"
  if [ $mode = 0 ]; then
    awk -v r="$r" 'BEGIN { exit !(r <= 2.2) }' || { echo "FAIL: the fused op's memory grows faster than T"; fail=1; }
  else
    awk -v r="$r" 'BEGIN { exit !(r >= 3) }' || { echo "FAIL: the einsum formulation's T x T scores do not show"; fail=1; }
  fi
done
[ $fail = 0 ] && echo PASS
exit $fail
