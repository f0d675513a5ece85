#!/usr/bin/env bash
# run.sh SPMDC: remat() gives the same bits as no recomputation.
# remat_train.spmd is compiled with REMAT=0 (nothing recomputed), 1 (each
# layer), 2 (the call holding the loop over layers) and 3 (both: nested)
# and trained on 1 rank and on the meshes (1,2) and (2,2); the printed
# losses and the saved parameters must be identical byte for byte to
# REMAT=0's, and REMAT=1..3's C must recompute (call a *_remat function in
# the forward, the *_fwd one in the backward).
set -euo pipefail
spmdc=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export SPMD_GEMM=${SPMD_GEMM:-dnnl}   # every run the same f32 GEMM library: compared bit for bit
for r in 0 1 2 3; do
  "$spmdc" "$here/remat_train.spmd" -D REMAT=$r -o "$work/prog$r"
  "$spmdc" -S "$here/remat_train.spmd" -D REMAT=$r -o "$work/prog$r.c"
done
for r in 1 2 3; do
  grep -q "f_layer_0_remat\|f_stack_0_remat" "$work/prog$r.c" || { echo "FAIL: REMAT=$r: no *_remat function"; exit 1; }
done
for mesh in dp=1,tp=1 dp=1,tp=2 dp=2,tp=2; do
  n=1
  for kv in ${mesh//,/ }; do n=$((n * ${kv#*=})); done
  for r in 0 1 2 3; do
    dir="$work/$mesh.$r"
    mkdir -p "$dir"
    (cd "$dir" && timeout 120 mpirun --oversubscribe -np "$n" "$work/prog$r" --mesh "$mesh" > out.txt 2> err.txt) \
      || { cat "$dir/err.txt"; echo "FAIL: $mesh REMAT=$r"; exit 1; }
    grep -q "^step 2 loss" "$dir/out.txt" || { cat "$dir/out.txt"; echo "FAIL: $mesh REMAT=$r printed no loss"; exit 1; }
    cmp "$work/$mesh.0/out.txt" "$dir/out.txt" || { echo "FAIL: $mesh: losses differ with REMAT=$r"; exit 1; }
    for f in w1 w2 g; do
      cmp "$work/$mesh.0/params/$f.npy" "$dir/params/$f.npy" \
        || { echo "FAIL: $mesh: parameter $f differs with REMAT=$r"; exit 1; }
    done
  done
  echo "ok: $mesh: REMAT=1, 2, 3 give REMAT=0's losses and parameters bit for bit"
done
