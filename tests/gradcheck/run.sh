#!/usr/bin/env bash
# run.sh SPMDC RUNTIME_INCLUDE RUNTIME_LIB BLAS_LIB FILE.spmd: generates C for
# FILE's export fns, links it with gradcheck.c, and checks the gradients on
# the meshes listed in FILE's `// MESHES: dp=2,tp=1 dp=2,tp=2` line; modules of
# stdlib/ named on its `// F64_IMPORTS:` line are imported as f64 twins.
set -euo pipefail
spmdc=$1 rtinc=$2 rtlib=$3 blas=$4 file=$5
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
name=$(basename "$file" .spmd)
. "$here/checked.sh"
# `// F64_IMPORTS: nn optim`: the standard library's f32 modules are checked
# through their f64 twins (every f32 made f64), imported instead of them
imports=()
for m in $(sed -n 's|^// F64_IMPORTS: ||p' "$file"); do
  mkdir -p "$work/lib"
  sed 's/\bf32\b/f64/g' "$here/../../stdlib/$m.spmd" > "$work/lib/$m.spmd"
  imports=(-I "$work/lib")
done
"$spmdc" "${imports[@]}" -S "$file" -o "$work/$name.c"
mpicc -std=c17 -O1 -Wall -Wextra -Werror ${SPMD_RT_CFLAGS:-} -I"$rtinc" -include "$work/$name.h" \
  "$work/$name.c" "$here/gradcheck.c" -o "$work/check" "$rtlib" "$blas" ${SPMD_RT_LIBS:-} -lm
meshes=$(sed -n 's|^// MESHES: ||p' "$file")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
for mesh in ${meshes:-dp=2,tp=1 dp=1,tp=2 dp=2,tp=2}; do
  n=1
  for kv in ${mesh//,/ }; do n=$((n * ${kv#*=})); done
  echo "== mesh $mesh ($n ranks)"
  checked timeout 120 mpirun --oversubscribe -np "$n" "$work/check" --mesh "$mesh"
done
