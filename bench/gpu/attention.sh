#!/usr/bin/env bash
# Fused attention on one GPU against PyTorch's scaled_dot_product_attention
# (issue 27: forward+backward bf16 within 1.25x of SDPA in the same call),
# run ON the GPU machine from a bundle of tests/gpu/bundle.sh:
#   bash bench/gpu/attention.sh BUNDLE_DIR
# B=4, H=12, T=1024, E=64, causal; STEPS steps of value_and_grad of
# sum(attention(q, k, v) * w) with respect to q, k, v (bench/attention.spmd):
#   ours_f32     progs/attention_f32: MODE=0 by spmdc --target=cuda
#   ours_bf16    progs/attention_bf16: MODE=2 (bf16 q, k, v, f32 accumulation)
#   einsum_f32   progs/attention_einsum: MODE=1 (the einsum formulation)
#   torch_f32, torch_bf16  bench/gpu/attention_torch.py (F.scaled_dot_product_attention,
#                is_causal=True), with PyTorch's python if there is one
# Each: the median of steps 1.. (step 0 is the warm-up) of its "step N ms X"
# lines (ours: wall time of a step, which ends by reading the loss and so
# waits for the device; PyTorch: between torch.cuda.synchronize() calls).
# Last line:
#   ATTENTION gpu=NAME ours_f32_ms=A torch_f32_ms=B ours_bf16_ms=C torch_bf16_ms=D einsum_f32_ms=E
# (a number is "none" where its run failed or PyTorch is missing).
# Environment: ATTN_PYTHON (/opt/torch/.venv/bin/python3), ATTN_STEPS (20),
# ATTN_CAP (60: seconds for each run).
set -uo pipefail
if [ $# != 1 ] || [ ! -d "$1" ]; then sed -n "2,22p" "$0" >&2; exit 2; fi
bundle=$(cd "$1" && pwd)
py=${ATTN_PYTHON:-/opt/torch/.venv/bin/python3}
steps=${ATTN_STEPS:-20} cap=${ATTN_CAP:-60}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/spmd_attn.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
gpu=$(timeout 10 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
gpu=${gpu:-unknown}
# median of steps 1.. of a log's "step N ms X" lines, or none
med() {
  awk '$1 == "step" && $3 == "ms" && $2 > 0 { print $4 }' "$1" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "none"; else if (NR % 2) printf "%.3f\n", v[(NR + 1) / 2];
                              else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
declare -A ms
for run in ours_f32:attention_f32 ours_bf16:attention_bf16 einsum_f32:attention_einsum; do
  name=${run%%:*} prog=$bundle/progs/${run#*:}
  if [ -x "$prog" ]; then
    (cd "$work" && timeout "$cap" mpirun -np 1 "$prog" > "$work/$name.log" 2>&1)
    echo "== $name (exit $?)"; grep -E '^step (1|'$((steps - 1))') ' "$work/$name.log"; grep -i error "$work/$name.log" | head -5
  else
    echo "== $name: no $prog" > "$work/$name.log"; cat "$work/$name.log"
  fi
  ms[$name]=$(med "$work/$name.log")
done
for dt in f32 bf16; do
  if [ -x "$py" ] && "$py" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    timeout "$cap" "$py" "$here/attention_torch.py" --dtype $dt --steps "$steps" > "$work/torch_$dt.log" 2>&1
    echo "== torch_$dt (exit $?)"; grep -E '^(step (1|'$((steps - 1))') |TORCH)' "$work/torch_$dt.log"; tail -3 "$work/torch_$dt.log" | grep -i error
  else
    echo "== torch_$dt: no PyTorch with CUDA at $py" > "$work/torch_$dt.log"; cat "$work/torch_$dt.log"
  fi
  ms[torch_$dt]=$(med "$work/torch_$dt.log")
done
[ -n "${OUT:-}" ] && mkdir -p "$OUT/logs" && for f in "$work"/*.log; do cp "$f" "$OUT/logs/attention_$(basename "$f")"; done
echo
echo "attention forward+backward on $gpu: B=4 H=12 T=1024 E=64 causal, ms per step (median of steps 1..$((steps - 1)))"
for dt in f32 bf16; do
  awk -v dt=$dt -v o="${ms[ours_$dt]}" -v t="${ms[torch_$dt]}" 'BEGIN {
    printf "  %-5s ours %10s   torch SDPA %10s   ours/torch %s\n", dt, o, t,
           (o != "none" && t != "none" && t > 0) ? sprintf("%.2fx", o / t) : "-" }'
done
echo "  f32   einsum formulation (ours) ${ms[einsum_f32]}"
echo "ATTENTION gpu=${gpu// /_} ours_f32_ms=${ms[ours_f32]} torch_f32_ms=${ms[torch_f32]} ours_bf16_ms=${ms[ours_bf16]} torch_bf16_ms=${ms[torch_bf16]} einsum_f32_ms=${ms[einsum_f32]}"
