#!/usr/bin/env bash
# multi_tensor.sh SPMDC LIBSPMDRT_CUDASIM: the multi-tensor launch (issue
# 26; schedule.c sched_horizontal_group, emit_cuda.c cuda_multi_launch).
# tests/cuda/multi_tensor.spmd updates a record of seven fields with AdamW
# after clipping: on the CUDA target each field's copy of the update's and
# of the clip's computation (one body; two fields of one shape share a
# fused loop) is a row of one launch's table.  Its
# simulation build, with the default table and with tables of 2 rows
# (SPMD_MULTI_FIELDS=2), prints
# and saves exactly what the CPU target's separate loops do, and --profile counts
# one launch per chunk: with the small table the launches of 7 and 6
# rows take 4 and 3 chunks, 5 operations a step more.
set -euo pipefail
spmdc=$1
simrt=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
src=$root/tests/cuda/multi_tensor.spmd
"$spmdc" "$src" -o "$work/cpu"
(cd "$work" && ./cpu --mesh dp=1 >cpu.out && mv state cpu_state)
# the host C: one launch for AdamW (7 fields, the decay in the update's
# loop) and one for the clip's scale (6: the 0-d field's fuses with the
# factor's arithmetic), and the global norm's two sums of squares as one
# call
SPMDC_CUDA_SIM=1 "$spmdc" --target=cuda -S "$src" -o "$work/k.c"
launches=$(grep -o '^ *spmd_multi_tensor_fused_[0-9]*(ctx, [0-9]*, mn_, mp_' "$work/k.c" | sed 's/.*(ctx, \([0-9]*\),.*/\1/' | tr '\n' ' ')
[ "$launches" = "6 7 " ] ||
  { grep -n 'copies of one fused body' "$work/k.c" || true; echo "FAIL: multi-tensor launches of '$launches' rows, not '6 7 '"; exit 1; }
grep -q '^ *rt_sum_squares_multi(ctx, 2, (const int\[\]){6, 1}, xs_, ys_);$' "$work/k.c" ||
  { grep -n 'sum_squares' "$work/k.c" || true; echo "FAIL: the global norm's two sums of squares are not one call"; exit 1; }
for rows in default 2; do
  flags=""
  [ "$rows" = default ] || flags="-DSPMD_MULTI_FIELDS=$rows"
  SPMDC_CUDA_SIM=1 SPMDC_RT_LIB="$simrt" SPMDC_CFLAGS="-Wl,-rpath,$(dirname "$simrt")" SPMDC_CXXFLAGS="$flags" \
    "$spmdc" --target=cuda "$src" -o "$work/sim_$rows"
  (cd "$work" && SPMD_GRAPHS=0 ./sim_$rows --mesh dp=1 --profile >sim_$rows.out 2>sim_$rows.err) ||
    { cat "$work/sim_$rows.err"; echo "FAIL: the simulation build ($rows rows) did not run"; exit 1; }
  cmp -s "$work/cpu.out" "$work/sim_$rows.out" ||
    { diff "$work/cpu.out" "$work/sim_$rows.out" | head -20; echo "FAIL: the simulation ($rows rows) prints other numbers than the CPU target"; exit 1; }
  diff -r "$work/cpu_state" "$work/state" >/dev/null ||
    { diff -r "$work/cpu_state" "$work/state" || true; echo "FAIL: the simulation ($rows rows) saves other bytes than the CPU target"; exit 1; }
  rm -rf "$work/state"
done
ops() { sed -n 's/^device operations per training step.*: median \([0-9.]*\) per rank.*/\1/p' "$1"; }
a=$(ops "$work/sim_default.err"); b=$(ops "$work/sim_2.err")
[ -n "$a" ] && [ -n "$b" ] || { cat "$work/sim_default.err"; echo "FAIL: no device-operation line in the profile"; exit 1; }
[ "$((b - a))" = 5 ] ||
  { echo "FAIL: $a operations a step with the default table, $b with 2 rows: not 5 more (4 and 3 chunks, not 1 and 1)"; exit 1; }
echo "ok: multi-tensor launches of 6 and 7 rows; the simulation prints and saves the CPU target's bits in one chunk a launch and in 3 or 4 ($a and $b operations a step)"
