#!/usr/bin/env bash
# The main job: installs missing packages, builds spmdc and libspmdrt, then
# trains the flagship, examples/gpt.spmd (a byte-level GPT: nn.spmd's
# Megatron layers with data, tensor and sequence parallelism, optim.spmd's
# AdamW), on the fortunes of Debian's `fortunes` package, under mpirun on 4
# ranks (dp=2, tp=2), within 10 minutes of the job's start.
#
#   build/gpt_run/data/     the tokens (scripts/gpt_data.py): train.npy, val.npy, meta.json
#   build/gpt_run/train.log what the program printed (losses, step time, tokens/s)
#   build/gpt_run/ckpt/last the last checkpoint: run the job again and it resumes from it
#   build/gpt_run/loss.png  the loss curves (scripts/gpt_plot.py)
#
# Environment: GPT_BUDGET (seconds from the job's start to the end of
# training, default 570: the program stops after the step that passes it,
# with a checkpoint), GPT_FRESH=1 (start over: remove the checkpoint and
# the log), GPT_FLAGS (more spmdc flags, e.g. "-D STEPS=300").
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target spmdc spmdrt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
run=build/gpt_run
if [ "${GPT_FRESH:-0}" = 1 ]; then
  rm -rf "$run/ckpt" "$run/train.log"
fi
mkdir -p "$run"
if [ ! -f "$run/data/sizes.sh" ]; then
  echo "== /usr/bin/python3 scripts/gpt_data.py $run/data"
  /usr/bin/python3 scripts/gpt_data.py "$run/data"
fi
. "$run/data/sizes.sh"
limit=$(( ${GPT_BUDGET:-570} - ($(date +%s) - t0) ))
[ "$limit" -lt 60 ] && limit=60
flags="-D NTRAIN=$NTRAIN -D NVAL=$NVAL -D TIME_LIMIT=$limit ${GPT_FLAGS:-}"
echo "== spmdc $flags examples/gpt.spmd -o $run/gpt"
# shellcheck disable=SC2086
build/compiler/spmdc $flags examples/gpt.spmd -o "$run/gpt"
if [ -d "$run/ckpt/last" ]; then
  echo "== resuming from $run/ckpt/last (GPT_FRESH=1 starts over)"
fi
echo "== mpirun -np 4 $run/gpt --mesh dp=2,tp=2   (training stops by ${limit}s of its run)"
(cd "$run" && mpirun --oversubscribe -np 4 ./gpt --mesh dp=2,tp=2) | tee -a "$run/train.log"
/usr/bin/python3 scripts/gpt_plot.py "$run/train.log" --meta "$run/data/meta.json" -o "$run/loss.png"
/usr/bin/python3 - "$run" "$(( $(date +%s) - t0 ))" <<'EOF'
import json, re, sys
run, secs = sys.argv[1], int(sys.argv[2])
meta = json.load(open(f"{run}/data/meta.json"))
log = open(f"{run}/train.log").read()
train = re.findall(r"^step (\d+) train (\S+) .*tok/s (\S+)", log, re.M)
val = re.findall(r"^step (\d+) val (\S+)", log, re.M)
print(f"== summary: {train[-1][0]} steps; final train loss {float(train[-1][1]):.4f}, "
      f"validation loss {float(val[-1][1]):.4f} nats/byte (step {val[-1][0]})")
print(f"   unigram entropy of the text {meta['unigram_entropy']:.4f} nats/byte "
      f"(a unigram model's validation loss {meta['unigram_val_xent']:.4f})")
print(f"   last tokens/s {float(train[-1][2]):.0f}; the job took {secs} s; plot: {run}/loss.png")
EOF
