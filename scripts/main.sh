#!/usr/bin/env bash
# The main job: installs missing packages, builds spmdc and libspmdrt, then
# trains the flagship, examples/gpt.spmd (a byte-level GPT: nn.spmd's
# Megatron layers with data, tensor and sequence parallelism, optim.spmd's
# AdamW), on the fortunes of Debian's `fortunes` package, under mpirun on 4
# ranks (dp=2, tp=2), within 10 minutes of the job's start; on the GPU
# (spmdc --target=cuda, one rank per GPU) where the machine has one.
#
#   build/gpt_run/data/     the tokens (scripts/gpt_data.py): the token files train.bin and
#                           val.bin the program reads (nanoGPT's uint16), .npy copies, meta.json
#   build/gpt_run/train.log what the program printed (losses, step time, tokens/s)
#   build/gpt_run/ckpt/last the last checkpoint: run the job again and it resumes from it
#   build/gpt_run/loss.png  the loss curves (scripts/gpt_plot.py)
#   build/gpt_run/sample/ids.npy  text the trained model wrote (printed at the end)
#
# Environment: GPT_BUDGET (seconds from the job's start to the end of
# training, default 570: the program stops after the step that passes it,
# with a checkpoint; GPT_GEN_SECONDS, default 40, are kept for the sample of
# text at the end), GPT_FRESH=1 (start over: remove the checkpoint and
# the log), GPT_FLAGS (more spmdc flags, e.g. "-D STEPS=300"), GPT_TARGET
# (auto, cpu or cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target spmdc spmdrt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# the target: the GPU when the machine has one and this build has the CUDA
# runtime (one rank per GPU, up to 4: dp=1, 2 or dp=2,tp=2), else 4 ranks
# on the CPUs; GPT_TARGET=cpu|cuda forces it (cuda fails without a GPU)
target=cpu np=4 mesh=dp=2,tp=2 why="no GPU found (nvidia-smi)"
ngpu=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
if [ "${GPT_TARGET:-auto}" = cuda ] || { [ "${GPT_TARGET:-auto}" = auto ] && [ "$ngpu" -gt 0 ]; }; then
  if cmake --build build -j "$(nproc)" --target spmdrt_cuda >/dev/null 2>&1; then
    target=cuda
    case $ngpu in 0|1) np=1 mesh=dp=1,tp=1 ;; 2|3) np=2 mesh=dp=2,tp=1 ;; *) np=4 mesh=dp=2,tp=2 ;; esac
    why="$ngpu GPU(s): one rank per GPU"
  else
    why="$ngpu GPU(s), but this build has no CUDA runtime (SPMD_CUDA, nvcc with NCCL)"
    [ "${GPT_TARGET:-auto}" = cuda ] && { echo "main.sh: GPT_TARGET=cuda: $why" >&2; exit 1; }
  fi
fi
[ "${GPT_TARGET:-auto}" = cpu ] && why="GPT_TARGET=cpu"
echo "== target $target, mesh $mesh on $np rank(s): $why"
run=build/gpt_run
if [ "${GPT_FRESH:-0}" = 1 ]; then
  rm -rf "$run/ckpt" "$run/train.log"
fi
mkdir -p "$run"
if [ ! -f "$run/data/sizes.sh" ] || [ ! -f "$run/data/train.bin" ]; then
  echo "== /usr/bin/python3 scripts/gpt_data.py $run/data"
  /usr/bin/python3 scripts/gpt_data.py "$run/data"
fi
. "$run/data/sizes.sh"
# training gets the budget less what the sample at the end takes (GPT_GEN_SECONDS)
limit=$(( ${GPT_BUDGET:-570} - ${GPT_GEN_SECONDS:-40} - ($(date +%s) - t0) ))
[ "$limit" -lt 60 ] && limit=60
flags="--target=$target -D NTRAIN=$NTRAIN -D NVAL=$NVAL -D TIME_LIMIT=$limit ${GPT_FLAGS:-}"
echo "== spmdc $flags examples/gpt.spmd -o $run/gpt"
# shellcheck disable=SC2086
build/compiler/spmdc $flags examples/gpt.spmd -o "$run/gpt"
if [ -d "$run/ckpt/last" ]; then
  echo "== resuming from $run/ckpt/last (GPT_FRESH=1 starts over)"
fi
echo "== mpirun -np $np $run/gpt --mesh $mesh   (training stops by ${limit}s of its run)"
(cd "$run" && mpirun --oversubscribe -np $np ./gpt --mesh $mesh) | tee -a "$run/train.log"
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
# the text the trained model wrote (examples/gpt.spmd's generate(): bytes,
# so no tokenizer): the prompt, then what the model wrote after it
if [ -f "$run/sample/ids.npy" ]; then
/usr/bin/python3 - "$run" <<'EOF'
import re, sys
import numpy as np
run = sys.argv[1]
log = open(f"{run}/train.log").read()
m = re.findall(r"^sample (\d+) bytes after a prompt of (\d+) in (\d+) windows: generation ms/step \S+ tok/s (\S+)", log, re.M)
n, prompt, _, tps = m[-1]
ids = np.load(f"{run}/sample/ids.npy")
print(f"== a sample of the model's text (temperature and top-k as in examples/gpt.spmd; "
      f"generation {float(tps):.0f} tok/s): the prompt, then >>> and what the model wrote")
for row in ids[:3]:
    b = bytes(int(t) for t in row)
    print("----")
    print(b[:int(prompt)].decode("utf-8", "replace") + ">>>" + b[int(prompt):int(prompt) + int(n)].decode("utf-8", "replace"))
print("----")
EOF
fi
