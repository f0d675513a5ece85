#!/usr/bin/env bash
# gpt_bench.sh: training throughput of examples/gpt.spmd against the same GPT
# in PyTorch (bench/gpt_torch.py: Megatron TP + SP over gloo, torch.optim.AdamW),
# side by side in one run, on the same meshes, data and initial parameters.
#
#   bench/gpt_bench.sh [--build DIR] [--runs N] [--steps N] [--meshes "dp=1,tp=1 dp=2,tp=2"]
#
# For each mesh: one untimed warm-up run of ours (which also writes the
# initial parameters, ckpt/init, that PyTorch starts from), then RUNS runs
# of each program alternately (ours, torch, torch, ours, ...), STEPS
# training steps each. Every step's wall time is recorded (ours: the
# program's `ms/step` with PRINT_EVERY=1, measured with wall_time() around
# the step: batch, forward, backward, clipping, AdamW; torch: the same span
# with time.perf_counter()); the first WARM steps of each run are left out.
# Reported per mesh: tokens/s (B*T / step time, B and T read from the
# program's const lines) as the median over all timed steps of all runs,
# with min-max, and the ratio ours/torch of the medians; our page faults per
# training step after the first (from the warm-up run, which runs with
# --profile: the maximum over ranks of each rank's median over steps);
# both programs' first losses, which must agree (the correctness side of
# the comparison is the test gpt/torch).
#
# Data: BUILD/gpt_run/data (scripts/gpt_data.py; prepared if missing).
# Environment: BUILD, RUNS (3), STEPS (30), WARM (5), MESHES, MPIRUN,
# SPMDC_FLAGS. Needs python3-torch. Exit 1 when a run fails or the first
# losses differ by more than 1e-4 relative.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
RUNS=${RUNS:-3}
STEPS=${STEPS:-30}
WARM=${WARM:-5}
MESHES=${MESHES:-"dp=1,tp=1 dp=2,tp=1 dp=1,tp=2 dp=2,tp=2"}
MPIRUN=${MPIRUN:-mpirun}
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --meshes) MESHES=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpt_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "gpt_bench.sh: needs PyTorch (apt-get install python3-torch)" >&2; exit 1; }
# the batch and context of the program (tokens per step = B * T), from its const lines
B=$(sed -n 's/^const B = \([0-9]*\);.*/\1/p' "$root/examples/gpt.spmd")
T=$(sed -n 's/^const T = \([0-9]*\);.*/\1/p' "$root/examples/gpt.spmd")
data=$BUILD/gpt_run/data
[ -f "$data/sizes.sh" ] || /usr/bin/python3 "$root/scripts/gpt_data.py" "$data"
. "$data/sizes.sh"
work=$(mktemp -d /tmp/gpt_bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
consts="-D STEPS=$STEPS -D PRINT_EVERY=1 -D EVAL_EVERY=100000 -D CKPT_EVERY=100000 -D TIME_LIMIT=0"
# shellcheck disable=SC2086
"$BUILD/compiler/spmdc" ${SPMDC_FLAGS:-} "$root/examples/gpt.spmd" -D NTRAIN=$NTRAIN -D NVAL=$NVAL $consts \
  -D SAVE_INIT=1 -o "$work/gpt"
echo "gpt_bench: examples/gpt.spmd vs bench/gpt_torch.py, $STEPS steps per run, $RUNS runs each, first $WARM steps untimed"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %-6s %26s %26s %8s %11s   %s\n' mesh ranks "ours tok/s median [min-max]" "torch tok/s median [min-max]" ours/torch faults/step "first losses (ours | torch)"
status=0
for mesh in $MESHES; do
  n=1
  for kv in ${mesh//,/ }; do n=$((n * ${kv#*=})); done
  dir=$work/${mesh//[,=]/_}
  mkdir -p "$dir"
  ln -sfn "$data" "$dir/data"
  run_ours() { # file for the step times [--profile]
    (cd "$dir" && rm -rf ckpt/last && timeout 1800 "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" "$work/gpt" --mesh "$mesh" ${2:-}) > "$dir/ours.log" 2> "$dir/ours.err"
    sed -n 's/^step \([0-9]*\) train \([^ ]*\) .* ms\/step \([^ ]*\) .*/\1 \2 \3/p' "$dir/ours.log" >> "$1"
  }
  run_torch() {
    (cd "$dir" && timeout 1800 /usr/bin/python3 "$root/bench/gpt_torch.py" --data data --init ckpt/init --mesh "$mesh" -D STEPS="$STEPS" \
       --steps "$STEPS" --time "$dir/torch_times" 2>/dev/null) > "$dir/torch.log"
    paste <(sed -n 's/^step \([0-9]*\) loss \([^ ]*\) .*/\1 \2/p' "$dir/torch.log") <(awk '{print $1 * 1000}' "$dir/torch_times") \
      | awk '{print $1 + 1, $2, $3}' >> "$1"
  }
  run_ours /dev/null --profile              # warm-up; writes ckpt/init; page faults per step
  faults=$(sed -n 's/^page faults per training step after the first.*(max over ranks \([0-9]*\);.*/\1/p' "$dir/ours.err")
  run_torch /dev/null
  : > "$dir/ours.steps"; : > "$dir/torch.steps"
  for r in $(seq "$RUNS"); do
    if [ $((r % 2)) -eq 1 ]; then run_ours "$dir/ours.steps"; run_torch "$dir/torch.steps"
    else run_torch "$dir/torch.steps"; run_ours "$dir/ours.steps"; fi
  done
  /usr/bin/python3 - "$mesh" "$n" "$dir" "$WARM" "$B" "$T" "${faults:-?}" <<'EOF' || status=1
import statistics, sys
mesh, n, d, warm = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
B, T, faults = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
def read(name):
    rows = [l.split() for l in open(f"{d}/{name}.steps") if l.strip()]
    return [(int(s), float(l), float(ms)) for s, l, ms in rows]
ours, torch = read("ours"), read("torch")
def tps(rows):
    v = [B * T / (ms / 1000) for s, l, ms in rows if s > warm]
    return statistics.median(v), min(v), max(v)
o, t = tps(ours), tps(torch)
lo = [l for s, l, ms in ours if s <= 3][:3]
lt = [l for s, l, ms in torch if s <= 3][:3]
ok = all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(lo, lt)) and len(lo) == len(lt) == 3
print(f"{mesh:<12} {n:<6} {o[0]:9.0f} [{o[1]:6.0f}-{o[2]:6.0f}]  {t[0]:9.0f} [{t[1]:6.0f}-{t[2]:6.0f}]  {o[0] / t[0]:8.2f} {faults:>11}   "
      + " ".join(f"{x:.5f}" for x in lo) + " | " + " ".join(f"{x:.5f}" for x in lt) + ("" if ok else "  LOSSES DIFFER"))
sys.exit(0 if ok else 1)
EOF
done
exit $status
