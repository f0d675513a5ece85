#!/usr/bin/env bash
# gpt_pp_steps.sh: step time of the pipelined GPT (examples/gpt_pp.spmd) per
# number of pipeline stages, and the time stages wait in ppermute.
#
#   bench/gpt_pp_steps.sh [--build DIR] [--steps N] [--pp "1 2 4"] [-D NAME=VALUE ...]
#
# Compiles examples/gpt_pp.spmd at its own sizes (-D overrides them, e.g.
# -D M=8) and runs STEPS steps (PRINT_EVERY=1) on meshes pp=N,dp=1,tp=1 for
# each N, with --profile.  Prints per N: the median ms/step over the steps
# after the first WARM (the program's wall_time() around batch, forward,
# backward, clipping and AdamW), the bubble (N-1)/(M+N-1), and the time a
# rank is blocked in ppermute per step (the profile's "blocked ms", which
# is the wait for the previous stage: bubble plus transfer), and the CPU
# time of the busiest rank per step: the difference of the user+system time
# (/usr/bin/time) of a STEPS-step run and a WARM-step run, divided by
# STEPS - WARM (start-up, the last evaluation and checkpoint cancel), with
# SPMD_WAIT=sleep so that waiting is not counted.  With more ranks than
# cores, or on a loaded machine, the ranks share cores and the wall times
# say little about a machine with a core per stage; the CPU times are the
# work each stage does.
#
# Data: BUILD/gpt_pp_run/data (scripts/gpt_data.py on tests/gpt/gettysburg.txt).
# Environment: BUILD, STEPS (20), WARM (5), PP, MPIRUN.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
STEPS=${STEPS:-20}
WARM=${WARM:-5}
PP=${PP:-"1 2 4"}
MPIRUN=${MPIRUN:-mpirun}
defs=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --pp) PP=$2; shift 2 ;;
    -D) defs+=(-D "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpt_pp_steps.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
run=$BUILD/gpt_pp_run
mkdir -p "$run"
[ -f "$run/data/sizes.sh" ] || /usr/bin/python3 "$root/scripts/gpt_data.py" "$run/data" --text "$root/tests/gpt/gettysburg.txt" >/dev/null
. "$run/data/sizes.sh"
for s in "$STEPS" "$WARM"; do
  "$BUILD/compiler/spmdc" -D NTRAIN="$NTRAIN" -D NVAL="$NVAL" -D STEPS="$STEPS" -D STOP_AFTER="$s" -D PRINT_EVERY=1 \
    -D EVAL_EVERY=100000 -D CKPT_EVERY=100000 "${defs[@]}" "$root/examples/gpt_pp.spmd" -o "$run/gpt_pp_$s"
done
m=$(sed -n 's|^const M = \([0-9]*\);.*|\1|p' "$root/examples/gpt_pp.spmd")
for d in "${defs[@]}"; do case $d in M=*) m=${d#M=} ;; esac; done
# the busiest rank's user+system seconds of a run of $1 steps on $2 ranks
cpu_of() {
  (cd "$dir" && rm -rf ckpt && SPMD_WAIT=sleep SPMD_GEMM=${SPMD_GEMM:-dnnl} "$MPIRUN" -np "$2" \
     /usr/bin/time -f "cpu %U %S" ./../gpt_pp_$1 --mesh "pp=$2,dp=1,tp=1" 2>&1 >/dev/null) |
    awk '$1 == "cpu" { c = $2 + $3; if (c > m) m = c } END { print m }'
}
printf '%-4s %-6s %12s %10s %22s %18s\n' pp ranks "ms/step" bubble "ppermute blocked ms/step" "CPU ms/step"
for n in $PP; do
  dir=$run/pp$n
  rm -rf "$dir" && mkdir -p "$dir" && ln -s "$run/data" "$dir/data"
  out=$(cd "$dir" && SPMD_GEMM=${SPMD_GEMM:-dnnl} "$MPIRUN" -np "$n" ./../gpt_pp_$STEPS --mesh "pp=$n,dp=1,tp=1" --profile 2>&1)
  ms=$(printf '%s\n' "$out" | sed -n 's|^step \([0-9]*\) train .* ms/step \([0-9.e+-]*\) .*|\1 \2|p' |
       awk -v w="$WARM" '$1 > w { print $2 }' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }')
  blocked=$(printf '%s\n' "$out" | awk -v s="$STEPS" '$1 == "ppermute" { printf "%.1f", $4 / s }')
  bubble=$(awk -v p="$n" -v m="$m" 'BEGIN { printf "%.3f", (p - 1) / (m + p - 1) }')
  cpu=$(awk -v a="$(cpu_of "$STEPS" "$n")" -v b="$(cpu_of "$WARM" "$n")" -v k=$((STEPS - WARM)) 'BEGIN { printf "%.0f", (a - b) / k * 1000 }')
  printf '%-4s %-6s %12s %10s %22s %18s\n' "$n" "$n" "$ms" "$bubble" "${blocked:-0}" "$cpu"
done
