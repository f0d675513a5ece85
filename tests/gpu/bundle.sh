#!/usr/bin/env bash
# Prepares, on a machine of ours (no GPU needed), what tests/gpu/run.sh runs
# on a lent GPU machine (which has CUDA, NCCL, OpenMPI and python3, but no
# compiler toolchain of ours):
#   bash tests/gpu/bundle.sh BUILD_DIR OUT_DIR [--sim]
# OUT_DIR gets run.sh and compare.py, bin/gpu_kernels and bin/gpu_kernel_abi (linked with
# libspmdrt_cuda, or with --sim the simulation build, to try run.sh here),
# lib/ (the runtime library), ref/ (the CPU target's results, written here:
# np1 every kernel, np2 and np4 the collectives and files), and progs/: the
# e2e, gradcheck and flagship programs built with spmdc --target=cuda and the
# CPU build's outputs, or progs/MISSING saying why there are none.
set -euo pipefail
build=$(cd "$1" && pwd); out=$2; sim=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export SPMD_GEMM=openblas OPENBLAS_NUM_THREADS=1
rm -rf "$out"; mkdir -p "$out/bin" "$out/lib" "$out/ref" "$out/progs"
cp "$here/run.sh" "$here/compare.py" "$out/"
if [ "$sim" = --sim ]; then
  cp "$build/tests/gpu/gpu_kernels_sim" "$out/bin/gpu_kernels"
  cp "$build/tests/gpu/gpu_kernel_abi_sim" "$out/bin/gpu_kernel_abi"
  cp -P "$build"/runtime/cuda/libspmdrt_cudasim.so* "$out/lib/"
  echo sim > "$out/KIND"
else
  [ -x "$build/tests/gpu/gpu_kernels_cuda" ] || { echo "bundle.sh: $build has no libspmdrt_cuda (SPMD_CUDA, nvcc)" >&2; exit 1; }
  cp "$build/tests/gpu/gpu_kernels_cuda" "$out/bin/gpu_kernels"
  cp "$build/tests/gpu/gpu_kernel_abi_cuda" "$out/bin/gpu_kernel_abi"
  cp -P "$build"/runtime/cuda/libspmdrt_cuda.so* "$out/lib/"
  echo cuda > "$out/KIND"
fi
mpirun -np 1 "$build/tests/gpu/gpu_kernels_cpu" "$out/ref/np1" >/dev/null
for np in 2 4; do
  mpirun -np $np "$build/tests/gpu/gpu_kernels_cpu" "$out/ref/np$np" collectives,files >/dev/null
done
# the programs need the compiler half (spmdc --target=cuda)
printf 'mesh (x);\nfn main() { print(1); }\n' > "$out/progs/probe.spmd"
if "$build/compiler/spmdc" --target=cuda --check "$out/progs/probe.spmd" >/dev/null 2>&1; then
  echo "bundle.sh: spmdc knows --target=cuda, but building programs for it is not written yet" > "$out/progs/MISSING"
else
  echo "spmdc has no --target=cuda yet: no e2e, gradcheck or flagship programs for the GPU" > "$out/progs/MISSING"
fi
rm -f "$out/progs/probe.spmd"
echo "bundle.sh: $out ($(cat "$out/KIND")): $(du -sh "$out" | cut -f1)"
