#!/usr/bin/env bash
# run_bf16.sh SPMDC RUNTIME_INCLUDE RUNTIME_LIB BLAS_LIB FILE.spmd: the
# gradient check of a bf16 program.  Finite differences cannot see through
# bf16 rounding, so the program is compared with its f64 twin (every `bf16`
# and `f32` of FILE replaced by `f64`): the twin's gradients are checked
# against finite differences (gradcheck.c), then both programs' values and
# gradients are dumped at the same inputs (the bf16 program's f32 arguments
# are the twin's f64 ones rounded to f32) and compare.py requires the
# bf16 ones to match the f64 ones to the tolerances of FILE's `// BF16:`
# line (relative L2 error of each gradient, relative error of the value),
# on every mesh of its `// MESHES:` line.  A program may import standard
# library modules named on its `// F64_IMPORTS:` line (the twin imports
# their f64 twins).
set -euo pipefail
spmdc=$1 rtinc=$2 rtlib=$3 blas=$4 file=$5
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$here/../checked.sh"
name=$(basename "$file" .spmd)
sed 's/\b\(bf16\|f32\)\b/f64/g' "$file" > "$work/${name}_f64.spmd"
cp "$file" "$work/${name}_bf16.spmd"
# `// F64_IMPORTS: nn`: the twin imports the f64 twins of these stdlib/
# modules (every bf16 and f32 made f64); the bf16 program the modules
# themselves
declare -A imports=([bf16]="" [f64]="")
for m in $(sed -n 's|^// F64_IMPORTS: ||p' "$file"); do
  mkdir -p "$work/lib"
  sed 's/\b\(bf16\|f32\)\b/f64/g' "$here/../../../stdlib/$m.spmd" > "$work/lib/$m.spmd"
  imports[f64]="-I $work/lib"
done
for v in f64 bf16; do
  # shellcheck disable=SC2086
  "$spmdc" ${imports[$v]} -S "$work/${name}_$v.spmd" -o "$work/${name}_$v.c"
  mpicc -std=c17 -O1 -Wall -Wextra -Werror ${SPMD_RT_CFLAGS:-} -I"$rtinc" -include "$work/${name}_$v.h" \
    "$work/${name}_$v.c" "$here/../gradcheck.c" -o "$work/check_$v" "$rtlib" "$blas" ${SPMD_RT_LIBS:-} -lm
done
meshes=$(sed -n 's|^// MESHES: ||p' "$file")
tol=$(sed -n 's|^// BF16: ||p' "$file")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
for mesh in ${meshes:-dp=1,tp=1 dp=2,tp=2}; do
  n=1
  for kv in ${mesh//,/ }; do n=$((n * ${kv#*=})); done
  echo "== mesh $mesh ($n ranks): the f64 twin against finite differences"
  checked timeout 120 mpirun --oversubscribe -np "$n" "$work/check_f64" --mesh "$mesh"
  for v in f64 bf16; do
    SPMD_GRADCHECK_DUMP="$work/$v.txt" checked timeout 120 mpirun --oversubscribe -np "$n" "$work/check_$v" --mesh "$mesh"
  done
  echo "== mesh $mesh: bf16 against f64"
  /usr/bin/python3 "$here/compare.py" "$work/f64.txt" "$work/bf16.txt" $tol
done
