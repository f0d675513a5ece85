#!/usr/bin/env bash
# The main job: installs missing packages, builds spmdc and libspmdrt, then
# compiles the flagship model (examples/block_sp.spmd: pre-norm MLP blocks
# with data, Megatron tensor and sequence parallelism, Adam, generated
# backward) and trains it under mpirun on 4 ranks (dp=2, tp=2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
example=examples/block_sp.spmd
echo "== spmdc $example -o build/block_sp"
build/compiler/spmdc "$example" -o build/block_sp
echo "== mpirun -np 4 build/block_sp --mesh dp=2,tp=2"
mpirun --oversubscribe -np 4 build/block_sp --mesh dp=2,tp=2
