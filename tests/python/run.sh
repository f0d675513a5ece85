#!/usr/bin/env bash
# run.sh SPMDC PYTHON_PKG: the Python module over spmdc --shared.
#   train: mlp_step.spmd's loop in Python (train_mlp.py) on 1 rank without
#          mpirun, and under `mpirun -np 2 python3` on dp=1,tp=2 and dp=2,tp=1:
#          the standalone program's losses, final parameters bit for bit
#   errors: errors.py's cases on 1 and 2 ranks (every rank raises alike), and
#          an error on one rank only, which must end the job with its message
#   cuda:  --target=cuda --shared builds (the simulation when there is no nvcc)
set -euo pipefail
spmdc=$1 pkg=$2 what=${3:-all}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export PYTHONPATH=$pkg OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1 SPMDC_CFLAGS=-Werror SPMD_HOST_ERROR_WAIT=3
py=/usr/bin/python3
cp "$here/mlp_step.spmd" .
"$spmdc" --shared mlp_step.spmd -o libmlp_step.so
test -f libmlp_step.h
if [ "$what" = all ] || [ "$what" = train ]; then
  "$spmdc" mlp_step.spmd -o mlp
  mkdir mlp_data
  $py -c "import numpy as np; r = np.random.default_rng(1)
np.save('mlp_data/x.npy', r.standard_normal((8, 16, 32)).astype(np.float32))
np.save('mlp_data/t.npy', np.tanh(r.standard_normal((8, 16, 32))).astype(np.float32))"
  for mesh in dp=1,tp=1 dp=1,tp=2 dp=2,tp=1; do
    n=1
    for kv in ${mesh//,/ }; do n=$((n * ${kv#*=})); done
    echo "== train on $mesh ($n ranks)"
    if [ "$n" = 1 ]; then
      ./mlp --mesh "$mesh" > standalone.txt
      $py "$here/train_mlp.py" ./libmlp_step.so "$mesh" > python.txt # no mpirun, no mpi4py
    else
      timeout 120 mpirun -np "$n" ./mlp --mesh "$mesh" > standalone.txt
      timeout 120 mpirun -np "$n" $py "$here/train_mlp.py" ./libmlp_step.so "$mesh" > python.txt
    fi
    cat python.txt
    diff standalone.txt <(grep '^step' python.txt)
    grep -q "^final parameters identical" python.txt
  done
fi
if [ "$what" = all ] || [ "$what" = errors ]; then
  for case in args mesh ids; do
    echo "== errors: $case on 1 rank, then 2"
    $py "$here/errors.py" ./libmlp_step.so $case | tee out1.txt
    # each rank's lines in a file of its own: mpirun forwards the ranks'
    # output in pieces that need not end at a newline, so two ranks' lines
    # on one stream can run into each other
    rm -f out2.rank*.txt
    timeout 120 mpirun -np 2 bash -c '"$0" "$1" "$2" "$3" > out2.rank$OMPI_COMM_WORLD_RANK.txt' \
      $py "$here/errors.py" ./libmlp_step.so $case
    sort out2.rank0.txt out2.rank1.txt | tee out2.txt
    ! grep -q FAIL out1.txt out2.txt
    grep -c ': Error: ' out1.txt > /dev/null
    # every rank raised every error
    test "$(grep -c 'rank 0: .*: Error: ' out2.txt)" = "$(grep -c 'rank 1: .*: Error: ' out2.txt)"
  done
  echo "== errors: an error on rank 1 only ends the job with its message"
  start=$(date +%s)
  if timeout 100 mpirun -np 2 $py "$here/errors.py" ./libmlp_step.so ids_one > one.txt 2>&1; then
    cat one.txt; echo "FAIL: the job did not fail"; exit 1
  fi
  grep -q "spmd: error: \[rank 1\] mlp_step.spmd:[0-9]*: in 'embedding(.*': embedding: id 9 at position 0 is out of range for 8 rows" one.txt || { cat one.txt; exit 1; }
  ! grep -q FAIL one.txt
  test $(($(date +%s) - start)) -lt 90
  echo "ended in $(($(date +%s) - start)) s"
fi
if [ "$what" = all ] || [ "$what" = cuda ]; then
  echo "== --target=cuda --shared"
  if "$spmdc" --print-paths | grep -q '^nvcc:'; then
    "$spmdc" --target=cuda --shared mlp_step.spmd -o libmlp_cuda.so
  else
    echo "(no nvcc: the simulation build)"
  fi
  SPMDC_CUDA_SIM=1 "$spmdc" --target=cuda --shared mlp_step.spmd -o libmlp_sim.so
  $py -c "import spmdc; lib = spmdc.load('./libmlp_sim.so', mesh='tp=1'); print(lib.target, lib.init()['w1'].numpy()[0, :3])"
fi
echo "ok"
