#!/usr/bin/env bash
# gpt_ab.sh: the flagship (examples/gpt.spmd, its default sizes) built by two
# spmdc builds, A (before a change) and B (after it), side by side in one run
# on one mesh: training tokens/s of each, and whether both print the same
# numbers.
#
#   bench/gpt_ab.sh BUILD_A BUILD_B [--mesh dp=2,tp=2] [--runs N] [--steps N]
#
# BUILD_A and BUILD_B are build directories (each with compiler/spmdc, which
# links its own build's runtime); A may be a checkout of the commit before
# the change (git archive REV | tar -x -C DIR; cmake; cmake --build DIR
# --target spmdc spmdrt). Each program is compiled with PRINT_EVERY=1, then
# runs RUNS times, alternately (A, B, B, A, ...), STEPS training steps each
# after one untimed warm-up run of each. A step's time is the program's own
# `ms/step` (wall_time() around the step: batch, forward, backward,
# clipping, AdamW); the first WARM steps of each run are left out. Reported:
# tokens/s (B*T / step time) of each as the median over all timed steps of
# all its runs, with min-max, and the ratio B/A of the medians; and whether
# the two printed the same training losses and gradient norms at every step
# (exactly: a change that should not change bits, such as views, must not).
#
# Data: BUILD_B/gpt_run/data (scripts/gpt_data.py; prepared if missing).
# Environment: RUNS (5), STEPS (30), WARM (5), MESH (dp=2,tp=2), MPIRUN,
# SPMDC_FLAGS. Exit 1 when a run fails or the printed numbers differ.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 2; }
A=$(cd "$1" && pwd)
B_=$(cd "$2" && pwd)
shift 2
RUNS=${RUNS:-5}
STEPS=${STEPS:-30}
WARM=${WARM:-5}
MESH=${MESH:-dp=2,tp=2}
MPIRUN=${MPIRUN:-mpirun}
while [ $# -gt 0 ]; do
  case $1 in
    --mesh) MESH=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    *) echo "gpt_ab.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
Bsz=$(sed -n 's/^const B = \([0-9]*\);.*/\1/p' "$root/examples/gpt.spmd")
T=$(sed -n 's/^const T = \([0-9]*\);.*/\1/p' "$root/examples/gpt.spmd")
data=$B_/gpt_run/data
[ -f "$data/sizes.sh" ] || /usr/bin/python3 "$root/scripts/gpt_data.py" "$data"
. "$data/sizes.sh"
work=$(mktemp -d /tmp/gpt_ab.XXXXXX)
trap 'rm -rf "$work"' EXIT
n=1
for kv in ${MESH//,/ }; do n=$((n * ${kv#*=})); done
for side in a b; do
  build=$A
  [ $side = b ] && build=$B_
  mkdir -p "$work/$side"
  ln -sfn "$data" "$work/$side/data"
  # shellcheck disable=SC2086
  "$build/compiler/spmdc" ${SPMDC_FLAGS:-} "$root/examples/gpt.spmd" -D NTRAIN="$NTRAIN" -D NVAL="$NVAL" \
    -D STEPS="$STEPS" -D PRINT_EVERY=1 -D EVAL_EVERY=100000 -D CKPT_EVERY=100000 -D GEN_TOKENS=0 \
    -o "$work/$side/gpt"
  : > "$work/$side.steps"
done
run() { # side, file for the step lines
  (cd "$work/$1" && rm -rf ckpt && timeout 1800 "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" ./gpt \
     --mesh "$MESH") > "$work/$1.log" 2> "$work/$1.err" || { cat "$work/$1.err" >&2; echo "gpt_ab: run $1 failed" >&2; exit 1; }
  grep '^step [0-9]* train ' "$work/$1.log" >> "$2"
}
echo "gpt_ab: examples/gpt.spmd (B=$Bsz, T=$T), A = $A, B = $B_, mesh $MESH ($n ranks), $STEPS steps per run, $RUNS runs each, alternating, first $WARM steps untimed"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
run a /dev/null
run b /dev/null
for r in $(seq "$RUNS"); do
  if [ $((r % 2)) -eq 1 ]; then run a "$work/a.steps"; run b "$work/b.steps"
  else run b "$work/b.steps"; run a "$work/a.steps"; fi
done
echo "machine after: load average $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$work" "$WARM" "$Bsz" "$T" "$RUNS" <<'EOF'
import statistics, sys
d, warm, B, T, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def read(side):
    rows = []
    for line in open(f"{d}/{side}.steps"):
        w = line.split()  # step S train L lr X gnorm G ms/step M tok/s K
        rows.append((int(w[1]), w[3], w[7], float(w[9])))
    return rows
a, b = read("a"), read("b")
def tps(rows):
    v = [B * T / (ms / 1000) for s, l, g, ms in rows if s > warm]
    return statistics.median(v), min(v), max(v), len(v)
ta, tb = tps(a), tps(b)
print(f"A: {ta[0]:8.0f} tokens/s median [{ta[1]:.0f}-{ta[2]:.0f}] over {ta[3]} steps")
print(f"B: {tb[0]:8.0f} tokens/s median [{tb[1]:.0f}-{tb[2]:.0f}] over {tb[3]} steps")
print(f"B/A: {tb[0] / ta[0]:.3f}")
# the numbers each run printed (loss, gnorm per step) are the same in every run and in A and B
na = [(s, l, g) for s, l, g, ms in a]
nb = [(s, l, g) for s, l, g, ms in b]
same = na == nb and len(na) > 0
print("printed numbers (train loss, gnorm of every step):", "identical in A and B" if same else "DIFFER")
if not same:
    for x, y in zip(na, nb):
        if x != y:
            print("  first difference: A", x, "B", y)
            break
sys.exit(0 if same else 1)
EOF
