#!/usr/bin/env bash
# export_tuple.sh SPMDC RUNTIME_INCLUDE RUNTIME_LIB BLAS_LIB: mlp_step.spmd's
# header against its golden (the entry points and their description are
# the library's ABI: a change must be deliberate), then tuple_host.c over
# it on 1 and 2 ranks (dp=1,tp=2 and dp=2,tp=1).
set -euo pipefail
spmdc=$1 rtinc=$2 rtlib=$3 blas=$4
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cp "$here/mlp_step.spmd" .
"$spmdc" -S mlp_step.spmd -o mlp_step.c
# the first line names spmdc's version
if ! diff -u "$here/mlp_step.h.golden" <(sed 1d mlp_step.h); then
  echo "FAIL: the header differs from tests/python/mlp_step.h.golden (update it if the change is meant)"
  exit 1
fi
# the program's own main (the standalone trainer) renamed out of the host's way
mpicc -std=c17 -O1 -Wall -Wextra -Werror ${SPMD_RT_CFLAGS:-} -I"$rtinc" -Dmain=mlp_step_main -c mlp_step.c
mpicc -std=c17 -O1 -Wall -Wextra -Werror ${SPMD_RT_CFLAGS:-} -I"$rtinc" -include mlp_step.h \
  mlp_step.o "$here/tuple_host.c" -o host "$rtlib" "$blas" ${SPMD_RT_LIBS:-} -lm
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
./host --mesh dp=1,tp=1
for mesh in dp=1,tp=2 dp=2,tp=1; do
  timeout 120 mpirun --oversubscribe -np 2 ./host --mesh "$mesh"
done
