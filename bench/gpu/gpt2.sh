#!/usr/bin/env bash
# GPT-2 small's GPU benchmark (issue 18), run ON the GPU machine from a
# bundle of tests/gpu/bundle.sh (bench/gpu/README.md, docs/gpt2.md):
#   bash bench/gpu/gpt2.sh BUNDLE_DIR
# runs our prebuilt GPT-2 small (BUNDLE_DIR/progs/gpt2_speed:
# examples/gpt2_small.spmd by spmdc --target=cuda, L=12, D=768, 12 heads,
# T=1024, vocab 50257 (GPT-2's), B=16; bf16 compute with f32 master weights; on 1
# rank, --profile), then PyTorch's same training step (bench/gpu/
# gpt_torch_gpu.py --model gpt2: the batch, the loss, clipping, the schedule,
# AdamW, from our initial parameters) eager and with torch.compile, each
# under `timeout` within one time budget, and prints the table of
# flagship.sh: ms/step median [min-max], tokens/s, the speed-up over each
# PyTorch mode, MFU over the measured cuBLAS bf16 GEMM peak and over the
# datasheet's dense bf16 peak (H100 SXM: 989 TFLOP/s), and a last line
#   GPT2 gpu=NAME ours_ms=X eager_ms=Y compile_ms=Z
# This is flagship.sh with FLAGSHIP_MODEL=gpt2 and GPT-2 small's defaults;
# every variable of flagship.sh overrides them (FLAGSHIP_TORCH_ARGS="--amp
# autocast": PyTorch under torch.autocast instead of the program's casts).
#   FLAGSHIP_MODES    "eager compile"   (add compile-rog for CUDA graphs)
#   FLAGSHIP_WARMUP   10                untimed PyTorch steps first
#   FLAGSHIP_BUDGET   360               seconds for everything
#   FLAGSHIP_CAPS     "90 75 200"       ours, eager, each compiled mode
set -uo pipefail
if [ $# != 1 ] || [ ! -d "$1" ]; then sed -n "2,23p" "$0" >&2; exit 2; fi
export FLAGSHIP_MODEL=gpt2
export FLAGSHIP_MODES=${FLAGSHIP_MODES:-eager compile}
export FLAGSHIP_WARMUP=${FLAGSHIP_WARMUP:-10}
export FLAGSHIP_BUDGET=${FLAGSHIP_BUDGET:-360}
export FLAGSHIP_CAPS=${FLAGSHIP_CAPS:-90 75 200}
exec bash "$(cd "$(dirname "$0")" && pwd)/flagship.sh" "$1"
