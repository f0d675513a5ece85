#!/usr/bin/env bash
# python_overhead.sh: what driving the flagship's training step from Python
# costs. examples/gpt.spmd's own loop (main) against the same steps called
# from Python (examples/gpt_train.py over `spmdc --shared examples/gpt.spmd`:
# NumPy batches, the state kept in the runtime), side by side in one run, on
# the same meshes and data.
#
#   bench/python_overhead.sh [--build DIR] [--runs N] [--steps N] [--meshes "dp=1,tp=1 dp=2,tp=2"]
#
# For each mesh: RUNS runs of each alternately (program, Python, Python,
# program, ...), STEPS steps each, every step timed (the program's ms/step
# with PRINT_EVERY=1: wall_time() around batch, forward, backward, clipping,
# AdamW; Python's: time.perf_counter() around reading the windows with
# NumPy, the train_step call and the loss's item()); the first WARM steps of
# each run are left out. Reported: the median step time of each with min-max
# and the ratio Python/program of the medians; both runs' losses must be
# identical (exit 1 otherwise).
#
# Data: BUILD/gpt_run/data (scripts/gpt_data.py; prepared if missing).
# Environment: BUILD, RUNS (3), STEPS (20), WARM (3), MESHES, MPIRUN.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
RUNS=${RUNS:-3}
STEPS=${STEPS:-20}
WARM=${WARM:-3}
MESHES=${MESHES:-"dp=1,tp=1 dp=2,tp=2"}
MPIRUN=${MPIRUN:-mpirun}
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --meshes) MESHES=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "python_overhead.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
export PYTHONPATH=$root/python SPMD_GEMM=${SPMD_GEMM:-dnnl}
data=$BUILD/gpt_run/data
[ -f "$data/sizes.sh" ] || /usr/bin/python3 "$root/scripts/gpt_data.py" "$data"
. "$data/sizes.sh"
work=$(mktemp -d /tmp/python_overhead.XXXXXX)
trap 'rm -rf "$work"' EXIT
consts="-D NTRAIN=$NTRAIN -D NVAL=$NVAL -D STEPS=$STEPS -D PRINT_EVERY=1 -D EVAL_EVERY=100000 -D CKPT_EVERY=100000 -D GEN_TOKENS=0"
# shellcheck disable=SC2086
"$BUILD/compiler/spmdc" "$root/examples/gpt.spmd" $consts -o "$work/gpt"
# shellcheck disable=SC2086
"$BUILD/compiler/spmdc" --shared "$root/examples/gpt.spmd" $consts -o "$work/libgpt.so"
echo "python_overhead: examples/gpt.spmd's loop vs examples/gpt_train.py, $STEPS steps per run, $RUNS runs each, first $WARM steps untimed"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %-6s %28s %28s %14s\n' mesh ranks "program ms/step med [min-max]" "Python ms/step med [min-max]" Python/program
status=0
for mesh in $MESHES; do
  n=1
  for kv in ${mesh//,/ }; do n=$((n * ${kv#*=})); done
  dir=$work/${mesh//[,=]/_}
  mkdir -p "$dir"
  ln -sfn "$data" "$dir/data"
  launch=()
  [ "$n" -gt 1 ] && launch=("$MPIRUN" --allow-run-as-root --oversubscribe -np "$n")
  run_prog() {
    (cd "$dir" && rm -rf ckpt && timeout 1800 "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" "$work/gpt" --mesh "$mesh") > "$dir/prog.log"
    sed -n 's/^step \([0-9]*\) train \([^ ]*\) .* ms\/step \([^ ]*\) .*/\1 \2 \3/p' "$dir/prog.log" >> "$dir/prog.steps"
  }
  run_python() {
    (cd "$dir" && rm -rf ckpt && timeout 1800 "${launch[@]}" /usr/bin/python3 "$root/examples/gpt_train.py" "$work/libgpt.so" "$mesh" \
       --steps "$STEPS" --print-every 1 --eval-every 100000 --ckpt-every 100000) > "$dir/py.log" 2> "$dir/py.err"
    paste -d' ' <(sed -n 's/^step \([0-9]*\) train \([^ ]*\) .*/\1 \2/p' "$dir/py.log") \
                <(sed -n 's/.* \([0-9.]*\) ms\/step over 1 steps/\1/p' "$dir/py.err") >> "$dir/py.steps"
  }
  : > "$dir/prog.steps"; : > "$dir/py.steps"
  for r in $(seq "$RUNS"); do
    if [ $((r % 2)) -eq 1 ]; then run_prog; run_python; else run_python; run_prog; fi
  done
  /usr/bin/python3 - "$mesh" "$n" "$dir" "$WARM" <<'PY' || status=1
import statistics, sys
mesh, n, d, warm = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def read(name):
    return [(int(s), l, float(ms)) for s, l, ms in (x.split() for x in open(f"{d}/{name}.steps") if x.strip())]
prog, py = read("prog"), read("py")
def stat(rows):
    v = [ms for s, l, ms in rows if s > warm]
    return statistics.median(v), min(v), max(v)
a, b = stat(prog), stat(py)
same = [(s, l) for s, l, _ in prog] == [(s, l) for s, l, _ in py] and len(prog) > 0
print(f"{mesh:<12} {n:<6} {a[0]:10.2f} [{a[1]:7.2f}-{a[2]:7.2f}]  {b[0]:10.2f} [{b[1]:7.2f}-{b[2]:7.2f}]  {b[0] / a[0]:14.3f}"
      + ("" if same else "  LOSSES DIFFER"))
sys.exit(0 if same else 1)
PY
done
exit $status
