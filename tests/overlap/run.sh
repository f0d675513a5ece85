#!/usr/bin/env bash
# run.sh SPMDC: gradient all_reduces started non-blocking (and bucketed) give
# the same bits as the blocking schedule. mlp_bias.spmd is trained on the
# meshes (2,1), (2,2) and (4,1) with: the default schedule (overlap, 1 MiB
# buckets: every gradient in one bucket), SPMD_BUCKET_KB=1 (the weights
# start their own MPI_Iallreduce, the biases share a bucket),
# SPMD_BUCKET_KB=0 (no buckets), SPMD_BUCKET_KB=0 SPMD_PIECE_KB=3 (each
# weight's all-reduce starts its first 3 KiB, the wait reduces the rest
# blocking) and SPMD_OVERLAP=0 (the blocking
# MPI_Allreduce of each gradient); the saved parameters must be identical
# byte for byte, and the profile must show the collectives in flight.
set -euo pipefail
spmdc=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$spmdc" "$here/mlp_bias.spmd" -o "$work/prog"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# the runs are compared byte for byte, so they must use the same f32 GEMM
# library: pinned, rather than timed afresh by each run (runtime/gemm.c)
export SPMD_GEMM=${SPMD_GEMM:-dnnl}
files="w1.npy b1.npy w2.npy b2.npy"
for mesh in dp=2,tp=1 dp=2,tp=2 dp=4,tp=1; do
  n=1
  for kv in ${mesh//,/ }; do n=$((n * ${kv#*=})); done
  for sched in overlap bucket1 nobucket pieces blocking; do
    dir="$work/$mesh.$sched"
    mkdir -p "$dir"
    case $sched in
    overlap) env=() ;;
    bucket1) env=(SPMD_BUCKET_KB=1) ;;
    nobucket) env=(SPMD_BUCKET_KB=0) ;;
    pieces) env=(SPMD_BUCKET_KB=0 SPMD_PIECE_KB=3) ;;
    blocking) env=(SPMD_OVERLAP=0) ;;
    esac
    (cd "$dir" && env "${env[@]}" timeout 120 mpirun --oversubscribe -np "$n" "$work/prog" --mesh "$mesh" \
        --profile > out.txt 2> err.txt) || { cat "$dir/err.txt"; echo "FAIL: $mesh $sched"; exit 1; }
    grep -q "^step 3 loss" "$dir/out.txt" || { cat "$dir/out.txt"; echo "FAIL: $mesh $sched printed no loss"; exit 1; }
    if [ "$sched" != blocking ]; then
      # the 4 gradients' all_reduces spent time in flight (started, then waited for)
      awk '$1 == "all_reduce" && $6 > 0 { ok = 1 } END { exit !ok }' "$dir/err.txt" \
        || { cat "$dir/err.txt"; echo "FAIL: $mesh $sched: no all_reduce in flight"; exit 1; }
    fi
    for f in $files; do
      cmp "$work/$mesh.overlap/$f" "$dir/$f" || { echo "FAIL: $mesh: $f differs between overlap and $sched"; exit 1; }
    done
    cmp "$work/$mesh.overlap/out.txt" "$dir/out.txt" || { echo "FAIL: $mesh: losses differ ($sched)"; exit 1; }
  done
  echo "ok: $mesh: overlap, 1 KiB buckets, no buckets, 3 KiB pieces and blocking give identical parameters"
done
