#!/usr/bin/env bash
# The flagship's GPU benchmark, run ON the GPU machine from a bundle of
# tests/gpu/bundle.sh (bench/gpu/README.md):
#   bash bench/gpu/flagship.sh BUNDLE_DIR
# runs our prebuilt flagship (BUNDLE_DIR/progs/gpt_speed: examples/gpt.spmd
# by spmdc --target=cuda, on 1 rank, --profile) and then PyTorch's same
# training step (bench/gpu/gpt_torch_gpu.py) eager, with torch.compile and
# with torch.compile(mode="reduce-overhead"), each under `timeout` within one
# time budget, and prints a table: ms/step median [min-max], tokens/s, the
# speed-up over each PyTorch mode, MFU, and the GPU's name. A run that fails
# or times out gets a row saying so; the table is always printed.
# Environment (defaults for the GPU machine; the overrides let it run on a
# CPU with a CPU-built program standing in, as tests/gpt/run_gpt.py does):
#   FLAGSHIP_PROG     our program             BUNDLE_DIR/progs/gpt_speed (gpt2: gpt2_speed)
#   FLAGSHIP_DATA     the data directory (train.bin, train.npy)   BUNDLE_DIR/data
#   FLAGSHIP_PYTHON   PyTorch's python        /opt/torch/.venv/bin/python3
#   FLAGSHIP_DEVICE   cuda | cpu              cuda
#   FLAGSHIP_STEPS    timed PyTorch steps     as many as ours ran, less the warm-up (at most 1000)
#   FLAGSHIP_WARMUP   untimed steps first     20
#   FLAGSHIP_MODES    PyTorch modes, in order "eager compile-rog compile"
#   FLAGSHIP_BUDGET   seconds for everything  150
#   FLAGSHIP_TORCH_ARGS  more arguments for gpt_torch_gpu.py (-D sizes of a stand-in)
#   FLAGSHIP_MODEL    gpt | gpt2 (GPT-2 small, bf16: bench/gpu/gpt2.sh sets it)  gpt
#   FLAGSHIP_CAPS     seconds each run may take: ours, eager, each compiled mode  "45 40 90"
#   MPIRUN            mpirun
set -uo pipefail
if [ $# != 1 ] || [ ! -d "$1" ]; then sed -n "2,26p" "$0" >&2; exit 2; fi
bundle=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
model=${FLAGSHIP_MODEL:-gpt}
case $model in
  gpt) default_prog=gpt_speed ;;
  gpt2) default_prog=gpt2_speed ;;
  *) echo "flagship.sh: FLAGSHIP_MODEL must be gpt or gpt2, not '$model'" >&2; exit 2 ;;
esac
read -r cap_ours cap_eager cap_compiled <<< "${FLAGSHIP_CAPS:-45 40 90}"
prog=${FLAGSHIP_PROG:-$bundle/progs/$default_prog}
data=${FLAGSHIP_DATA:-$bundle/data}
py=${FLAGSHIP_PYTHON:-/opt/torch/.venv/bin/python3}
device=${FLAGSHIP_DEVICE:-cuda}
warmup=${FLAGSHIP_WARMUP:-20}
modes=${FLAGSHIP_MODES:-eager compile-rog compile}
budget=${FLAGSHIP_BUDGET:-150}
mpirun=${MPIRUN:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[ -d "$bundle/lib" ] && export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
data=$(cd "$data" && pwd) || { echo "flagship.sh: no data directory $data" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/flagship.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

# the seconds a run may take: its cap, within what is left of the budget
allow() { local left=$(( start + budget - $(date +%s) )); [ "$left" -lt "$1" ] && echo "$left" || echo "$1"; }

gpu=$(timeout 10 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "${gpu:-no GPU name (nvidia-smi failed)}" > "$work/gpu"

# ours: in a fresh directory (the program writes ckpt/last where it runs and
# would resume from it), data/ linked in
mkdir -p "$work/ours"; ln -s "$data" "$work/ours/data"
t=$(allow "$cap_ours")
if [ ! -x "$prog" ]; then
  echo "no program $prog" > "$work/ours.err"; echo 127 > "$work/ours.rc"
elif [ "$t" -lt 5 ]; then
  echo "skipped: the time budget is spent" > "$work/ours.err"; echo 124 > "$work/ours.rc"
else
  (cd "$work/ours" && timeout -k 5 "$t" "$mpirun" -np 1 "$prog" --mesh dp=1,tp=1 --profile \
     > "$work/ours.out" 2> "$work/ours.err"; echo $? > "$work/ours.rc")
fi
echo "ours: exit $(cat "$work/ours.rc") after $(( $(date +%s) - start )) s" >&2
# PyTorch runs as many steps as ours (the same batches and learning rates,
# so the final losses are comparable), from our initial parameters where the
# program saved them (-D SAVE_INIT=1: ckpt/init)
n=$(grep -oE '^step [0-9]+ train' "$work/ours.out" 2>/dev/null | tail -1 | cut -d' ' -f2)
steps=${FLAGSHIP_STEPS:-}
if [ -z "$steps" ]; then
  steps=100
  [ -n "$n" ] && [ "$n" -gt "$warmup" ] && steps=$(( n - warmup > 1000 ? 1000 : n - warmup ))
fi
init=""; [ -d "$work/ours/ckpt/init" ] && init="--init $work/ours/ckpt/init"
# its final loss averaged over the program's last window (PRINT_EVERY steps)
every=$(grep -oE '^step [0-9]+ train' "$work/ours.out" 2>/dev/null | head -1 | cut -d' ' -f2)

# PyTorch: each mode in its own process; eager also measures the GEMM peaks
for mode in $modes; do
  extra=""; cap=$cap_compiled
  [ "$mode" = eager ] && { extra="--peak"; cap=$cap_eager; }
  t=$(allow $cap)
  if [ "$t" -lt 10 ]; then
    echo "RESULT mode=$mode failed=skipped:the_time_budget_is_spent" > "$work/torch_$mode.out"
    continue
  fi
  # shellcheck disable=SC2086
  timeout -k 5 "$t" "$py" "$here/gpt_torch_gpu.py" --model "$model" --mode "$mode" --data "$data" --device "$device" \
    --steps "$steps" --warmup "$warmup" $extra $init --loss-every "${every:-1}" ${FLAGSHIP_TORCH_ARGS:-} \
    > "$work/torch_$mode.out" 2> "$work/torch_$mode.err"
  rc=$?
  [ $rc = 124 ] || [ $rc = 137 ] && echo "RESULT mode=$mode failed=timed_out_after_${t}s" >> "$work/torch_$mode.out"
  echo "torch $mode: exit $rc after $(( $(date +%s) - start )) s" >&2
  grep -q '^RESULT' "$work/torch_$mode.out" || { echo "RESULT mode=$mode failed=exit_$rc"; } >> "$work/torch_$mode.out"
done

# the table by the system's python3 (PyTorch's where there is none)
"$(command -v python3 || echo "$py")" "$here/flagship_table.py" "$work" "$modes" "$(( $(date +%s) - start ))" "$model"
