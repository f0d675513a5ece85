#!/usr/bin/env bash
# Prepares, on a machine of ours (no GPU needed), what tests/gpu/run.sh runs
# on a lent GPU machine (which has CUDA, NCCL, OpenMPI and python3, but no
# compiler toolchain of ours):
#   bash tests/gpu/bundle.sh BUILD_DIR OUT_DIR [--sim] [--programs NAME,...|none] [--no-gpt]
# OUT_DIR gets run.sh and compare.py, bin/gpu_kernels, bin/gpu_kernel_abi and
# bin/gpu_device_errors (linked with libspmdrt_cuda, or with --sim the
# simulation build, to try run.sh here), lib/ (the runtime library), ref/
# (the CPU target's results, written here: np1 every kernel, np2 and np4 the
# collectives and files; sim: the simulation build's f64 row kernels), and progs/: the
# e2e, gradcheck, flagship and GPT-2 small programs built with spmdc
# --target=cuda and the CPU build's outputs, or progs/MISSING saying why
# there are none.
# --programs: only these e2e programs (default: all); --no-gpt: not the
# flagship, GPT-2 small nor the attention benchmark (the tests here bundle
# one program to try run.sh's parts).
set -euo pipefail
build=$(cd "$1" && pwd); out=$2; shift 2
sim="" programs="" gpt=1
while [ $# -gt 0 ]; do
  case $1 in
    --sim) sim=--sim; shift ;;
    --programs) programs=$2; shift 2 ;;
    --no-gpt) gpt=0; shift ;;
    *) echo "bundle.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export SPMD_GEMM=openblas OPENBLAS_NUM_THREADS=1
rm -rf "$out"; mkdir -p "$out/bin" "$out/lib" "$out/ref" "$out/progs"
cp "$here/run.sh" "$here/compare.py" "$out/"
if [ "$sim" = --sim ]; then
  cp "$build/tests/gpu/gpu_kernels_sim" "$out/bin/gpu_kernels"
  cp "$build/tests/gpu/gpu_kernel_abi_sim" "$out/bin/gpu_kernel_abi"
  cp "$build/tests/gpu/gpu_device_errors_sim" "$out/bin/gpu_device_errors"
  cp -P "$build"/runtime/cuda/libspmdrt_cudasim.so* "$out/lib/"
  echo sim > "$out/KIND"
else
  [ -x "$build/tests/gpu/gpu_kernels_cuda" ] || { echo "bundle.sh: $build has no libspmdrt_cuda (SPMD_CUDA, nvcc)" >&2; exit 1; }
  cp "$build/tests/gpu/gpu_kernels_cuda" "$out/bin/gpu_kernels"
  cp "$build/tests/gpu/gpu_kernel_abi_cuda" "$out/bin/gpu_kernel_abi"
  cp "$build/tests/gpu/gpu_device_errors_cuda" "$out/bin/gpu_device_errors"
  cp -P "$build"/runtime/cuda/libspmdrt_cuda.so* "$out/lib/"
  echo cuda > "$out/KIND"
fi
mpirun -np 1 "$build/tests/gpu/gpu_kernels_cpu" "$out/ref/np1" >/dev/null
# the row kernels in f64 and attention in f32 and f64 by the simulation
# build (libspmdrt_cudasim, which every build has): the GPU's must have the
# same bits (run.sh's simbits; bf16 attention runs on tensor cores, whose
# sums are not the emulation's bit for bit)
mpirun -np 1 "$build/tests/gpu/gpu_kernels_sim" "$out/ref/sim" rowbits,attnbits >/dev/null
# the attention section alone (run.sh's attention part)
mpirun -np 1 "$build/tests/gpu/gpu_kernels_cpu" "$out/ref/attn" attention >/dev/null
# the collectives alone (their inputs come after fewer draws than in np1)
mpirun -np 1 "$build/tests/gpu/gpu_kernels_cpu" "$out/ref/np1c" collectives >/dev/null
for np in 2 4; do
  mpirun -np $np "$build/tests/gpu/gpu_kernels_cpu" "$out/ref/np$np" collectives,files >/dev/null
done
# the programs: every e2e test (and examples/moe.spmd, which carries its own
# E2E lines) checked here on its first and last mesh by the CPU target, whose
# rank-0 outputs become the references, and compiled with spmdc --target=cuda;
# run.sh runs each on the same meshes and compares (run_e2e.py --reference)
repo=$(cd "$here/../.." && pwd)
mkdir -p "$out/progs/e2e"
find "$repo"/tests/e2e -maxdepth 1 -type f -exec cp {} "$out/progs/e2e/" \; # (not selftest/)
cp "$repo/examples/moe.spmd" "$out/progs/e2e/"
missing=""
for case in "$repo"/tests/e2e/*.spmd "$repo/examples/moe.spmd"; do
  name=$(basename "$case" .spmd)
  if [ -n "$programs" ]; then case ",$programs," in *",$name,"*) ;; *) continue ;; esac; fi
  if ! /usr/bin/python3 "$repo/tests/e2e/run_e2e.py" --ends --save-outputs "$out/progs/$name.ref" \
        "$build/compiler/spmdc" "$case" > "$out/progs/$name.cpu.log" 2>&1; then
    missing="$missing$name: the CPU target fails it here ($out/progs/$name.cpu.log)\n"; continue
  fi
  if [ "$sim" = --sim ]; then
    SPMDC_CUDA_SIM=1 python3 "$repo/tests/e2e/run_e2e.py" --compile-only "$out/progs/$name" \
      --spmdc-flag --target=cuda "$build/compiler/spmdc" "$case" >> "$out/progs/$name.cpu.log" 2>&1
  else
    python3 "$repo/tests/e2e/run_e2e.py" --compile-only "$out/progs/$name" \
      --spmdc-flag --target=cuda "$build/compiler/spmdc" "$case" >> "$out/progs/$name.cpu.log" 2>&1
  fi || { missing="$missing$name: spmdc --target=cuda fails ($out/progs/$name.cpu.log)\n"; continue; }
done
cp "$repo/tests/e2e/run_e2e.py" "$out/progs/"
[ -n "$missing" ] && printf "$missing" > "$out/progs/MISSING"

if [ $gpt = 1 ]; then
# the flagship (examples/gpt.spmd) on the fortunes: STEPS steps on 1 rank and
# dp=2,tp=2, every step's loss and gradient norm against the CPU target's
# (tests/gpu/gpt_compare.py); and a longer run for its step time (--profile)
data="$repo/build/gpt_run/data"
if [ ! -f "$data/sizes.sh" ] || [ ! -f "$data/train.bin" ]; then
  data="$out/gpt_data_tmp"; /usr/bin/python3 "$repo/scripts/gpt_data.py" "$data" >/dev/null
fi
mkdir -p "$out/data"; cp "$data"/train.bin "$data"/val.bin "$data"/train.npy "$data"/val.npy "$data"/meta.json "$data"/sizes.sh "$out/data/"
rm -rf "$out/gpt_data_tmp"
. "$out/data/sizes.sh"
gflags="-D NTRAIN=$NTRAIN -D NVAL=$NVAL -D PRINT_EVERY=1 -D EVAL_EVERY=10 -D CKPT_EVERY=100000 -D STOP_AFTER=${GPU_GPT_STEPS:-20}"
cuda_env=""; [ "$sim" = --sim ] && cuda_env="SPMDC_CUDA_SIM=1"
# model_check NAME SOURCE FLAGS: SOURCE compiled with FLAGS for the CPU, run
# on 1 rank and dp=2,tp=2 (progs/NAME_MESH.cpu.out, the references), and for
# the GPU (progs/NAME_check)
model_check() {
  local name=$1 src=$2 flags=$3 mesh np
  # shellcheck disable=SC2086
  "$build/compiler/spmdc" $flags "$src" -o "$out/progs/${name}_cpu"
  for mesh in dp=1,tp=1 dp=2,tp=2; do
    np=$(( ${mesh:3:1} * ${mesh:8:1} ))
    rm -rf "$out/ref_${name}_$mesh"; mkdir -p "$out/ref_${name}_$mesh"; ln -s ../data "$out/ref_${name}_$mesh/data"
    (cd "$out/ref_${name}_$mesh" && mpirun -np $np "$out/progs/${name}_cpu" --mesh $mesh > "$out/progs/${name}_$mesh.cpu.out" 2>&1)
    rm -rf "$out/ref_${name}_$mesh"
  done
  rm -f "$out/progs/${name}_cpu"
  # shellcheck disable=SC2086
  env $cuda_env "$build/compiler/spmdc" --target=cuda $flags "$src" -o "$out/progs/${name}_check" \
    || printf '%s: spmdc --target=cuda fails\n' "$name" >> "$out/progs/MISSING"
}
model_check gpt "$repo/examples/gpt.spmd" "$gflags"
# the speed run (bench/gpu/flagship.sh: ours against PyTorch eager and
# torch.compile, which start from our initial parameters, ckpt/init)
# shellcheck disable=SC2086
env $cuda_env "$build/compiler/spmdc" --target=cuda -D NTRAIN=$NTRAIN -D NVAL=$NVAL -D PRINT_EVERY=50 \
  -D EVAL_EVERY=100000 -D CKPT_EVERY=100000 -D STOP_AFTER=${GPU_GPT_SPEED_STEPS:-150} -D SAVE_INIT=1 \
  "$repo/examples/gpt.spmd" -o "$out/progs/gpt_speed" || printf 'gpt_speed: spmdc --target=cuda fails\n' >> "$out/progs/MISSING"
# GPT-2 small (examples/gpt2_small.spmd, bf16 compute, f32 master weights):
# a reduced size (tests/gpt2's) for GPU_GPT2_STEPS steps on 1 rank and
# dp=2,tp=2 against the CPU target's losses and gradient norms, and the full
# size for its step time against PyTorch (bench/gpu/gpt2.sh).  LR=0.001: at
# tests/gpt2's 0.003 the fortunes make a loss spike by step 18 that turns
# rounding differences into 12% (1 rank against dp=2,tp=2 on the CPU); at
# 0.001 those two differ by at most 9e-4 over the 20 steps.
g2flags="-D T=32 -D D=64 -D NH=4 -D L=2 -D NV=512 -D B=8 -D WARMUP=2 -D LR=0.001"
g2flags="$g2flags -D PRINT_EVERY=1 -D EVAL_EVERY=10 -D EVAL_BATCHES=2 -D STOP_AFTER=${GPU_GPT2_STEPS:-20}"
model_check gpt2 "$repo/examples/gpt2_small.spmd" "$g2flags"
# shellcheck disable=SC2086
env $cuda_env "$build/compiler/spmdc" --target=cuda -D PRINT_EVERY=10 \
  -D EVAL_EVERY=100000 -D EVAL_BATCHES=1 -D STOP_AFTER=${GPU_GPT2_SPEED_STEPS:-40} -D SAVE_INIT=1 \
  "$repo/examples/gpt2_small.spmd" -o "$out/progs/gpt2_speed" || printf 'gpt2_speed: spmdc --target=cuda fails\n' >> "$out/progs/MISSING"
cp "$here/gpt_compare.py" "$out/"
mkdir -p "$out/bench/gpu" "$out/examples"
cp "$repo/bench/gpt_torch.py" "$out/bench/"
cp "$repo"/bench/gpu/flagship.sh "$repo"/bench/gpu/gpt2.sh "$repo"/bench/gpu/flagship_table.py \
   "$repo"/bench/gpu/gpt_torch_gpu.py "$out/bench/gpu/"
cp "$repo/examples/gpt.spmd" "$repo/examples/gpt2_small.spmd" "$out/examples/"
# the attention benchmark (bench/gpu/attention.sh: the fused op in f32 and
# bf16 and the einsum formulation, against PyTorch's SDPA)
for spec in attention_f32:0 attention_bf16:2 attention_einsum:1; do
  env $cuda_env "$build/compiler/spmdc" --target=cuda -D MODE=${spec#*:} -D STEPS=${GPU_ATTN_STEPS:-20} \
    "$repo/bench/attention.spmd" -o "$out/progs/${spec%%:*}" || printf '%s: spmdc --target=cuda fails\n' "${spec%%:*}" >> "$out/progs/MISSING"
done
cp "$repo"/bench/gpu/attention.sh "$repo"/bench/gpu/attention_torch.py "$out/bench/gpu/"
fi
echo "bundle.sh: $out ($(cat "$out/KIND")): $(du -sh "$out" | cut -f1)"
