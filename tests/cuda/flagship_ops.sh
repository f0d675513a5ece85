#!/usr/bin/env bash
# flagship_ops.sh SPMDC LIBSPMDRT_CUDASIM: the flagship's training step on
# the CUDA target, counted by --profile in the simulation build (the same
# counting points as the GPU build: docs/runtime.md, "Device operations and
# host synchronisations"): at most CEILING device operations per step
# (median over the steps), and no host synchronisation in any step but the
# last, which prints, evaluates and saves.
#
# examples/gpt.spmd at tests/gpt's small size (T=16, D=32, 4 heads, F=128,
# L=2, B=8) on 1 rank, 6 steps. Measured (issue 26): 436 operations and 2
# host synchronisations a step before (take_along_dim copied its indices to
# the host and its offsets back; rt_binary_scalar filled a device scalar per
# call; layer_norm's backward took 8 launches; a long reduction took a
# launch per level of its tree and one to store); 372 and 0 after. Then
# the simulation learnt to count the generated (fused) kernels' launches,
# which the GPU build always counted (rt_sim_kernel_count): 405 a step
# (340.5 kernels, 43.3 GEMMs, 70.2 copies); the global norm's fields summed
# by one multi-tensor operation per placement (rt_sum_squares: 3 launches
# each, not a square, a sum and an addition per field): 354; views
# (rt_reshape and the layer weights' rt_index share their operand's memory:
# no copy where the block starts 256-byte aligned; at this size the [L, D]
# fields' rows of 128 bytes are still copied, 12 a step): 318 a step;
# then 294 with attention reading and writing the token-major layout
# (nn.attention_heads projects "btd,dhe->bthe", compiler/attention_layout.c
# folds the permutes: attention_heads 12 -> 8 operations forward, 39 -> 31
# backward) and 268 with einsum's GEMMs reading two-block transposes and
# writing a swapped result instead of permuting (backward 31 -> 19). Wider
# fusion (every binary op and comparison, where, relu/abs/rsqrt, 0-d
# results, trailing-dim operands, on this target every unary op: the global
# norm's clip 25 -> 21 at L=6) and the f32 bias epilogue of
# column_parallel_linear's GEMM (2 -> 1 per call): 318 -> 312 on their own.
# Owned parameters (AdamW and clipping in place) change no count at
# SPMD_GRAPHS=0 (the same launches, now into the parameters' and moments'
# own buffers), but with graphs a replay copied each of its 62 inputs,
# every parameter and moment field among them, into the captured buffers
# (381 operations a replayed step at 318); now the graph updates 60 of them
# in place and copies at most COPIES a replay (2 measured; 321 operations a
# replayed step). A layer's stacked gradients added by one operation
# (rt_index_add_multi: 1 per layer, not 1 per field, 16) and the
# backward's accumulators zeroed by one (rt_zero_multi, not 17 fills): 318
# -> 272 on their own (loss's backward's own operations 23 a call; at L=6,
# 694 -> 588 a step and 141 -> 35). All four together: 216 a step (at
# L=6: 694 -> 432), so CEILING was 225. Then the bias epilogues through
# einsum (attention_heads' q, k, v projections: `einsum("btd,dhe->bthe", x,
# wq) + bq` one GEMM, 8 -> 5 operations forward) and the bias gradients
# from the dW GEMMs' cuBLASLt epilogue (rt_matmul_bwd_bias: attention_heads
# backward 19 -> 13, column_parallel_linear's 4 -> 2: rt_binary_bwd's sum
# was 2 launches): 194 a step (at L=6: 432 -> 366), so CEILING is 200.
# row_parallel_linear_sp's bias gradient stays a sum: its dy is summed on
# the rank's sequence shard, its dW GEMM runs over the gathered rows. An
# adjoint's first contribution as its value (no zero fill and add of x's
# gradient per layer in loss's backward, nor the dead fill after `var x`'s)
# and attention's three gradients of x summed by one loop after the last
# GEMM (attention_heads backward 19 -> 18 on its own): 208 a step on its
# own (loss's backward's own 23 -> 16 a call; at L=6 432 -> 412). Convert
# to S(i) (and its backward to P) over a group of one rank shares its
# operand instead of copying it (the position table's convert, 1 a step)
# and the backward of the loss's division by the token count is one launch
# (rt_div_scalar_grad, not 7: converts to f64 and back around
# rt_binary_grads): 216 -> 210 a step on their own. Fused loops with one
# body (a record's fields' copies of an update) as one multi-tensor launch,
# AdamW's decay in its update's loop and the global norm's sums of squares
# of its two placements in one call (clip_by_global_norm 21 -> 5 operations
# a call, adamw 10 + adam_update 10 -> 1): 181 a step on their own (at L=6
# 432 -> 397). All four: 144 a step (at L=6: 432 -> 304), so CEILING was
# 148. Session 13's four, each on its own from 144: vocab_parallel_embedding
# in 3 operations forward and 2 backward (12 and 5 before: shard_offset and
# shard_extent host ints, i32 arithmetic, comparisons and where one fused
# loop reading host numbers, the embedding one launch with its ids' check,
# its backward one launch for a small table): 132 (at L=6 304 -> 292). A
# long reduction's chunks and its tree in one launch (runtime/cuda/dev.h's
# rt_launch_last: the last block to take its ticket adds the blocks'
# partial sums in order; rt_sum_to_shape of a bias's gradient, rt_sum_all,
# layer_norm's backward 2 -> 1): 134 (at L=6 304 -> 278). A residual's
# gradient added into layer_norm's dx as the runtime stores it
# (rt_layer_norm_bwd_add, compiler/callfuse.c), and the residual's add in
# the forward (nn.dropout_add's x + y, dropout 0.0) moved into the callee's
# copy, whose fused loop takes it with the bias's add: 136 (at L=6 304 ->
# 280). x's gradient in attention_heads' backward summed by the dX GEMMs
# themselves (cuBLASLt's beta = 1, rt_matmul_bwd_bias_acc), the loss
# mean's backward from the host number and the cross-entropy's forward in
# 3 launches: 139 (at L=6 304 -> 295). All four: 109 a step (at L=6:
# 304 -> 233), so CEILING is 113. A step
# with fewer than FLOOR operations means the counting broke. Counted with
# SPMD_GRAPHS=0: with graphs a replay counts
# its graph's operations too (cuda_sim/graph_ops_*), plus the copies of its
# inputs into the captured buffers. The host synchronisations are checked
# with graphs too (below).
set -euo pipefail
spmdc=$1
simrt=$2
CEILING=113
FLOOR=95
COPIES=2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
/usr/bin/python3 "$root/scripts/gpt_data.py" "$work/data" --text "$root/tests/gpt/gettysburg.txt" >/dev/null
. "$work/data/sizes.sh"
SPMDC_CUDA_SIM=1 SPMDC_RT_LIB="$simrt" SPMDC_CFLAGS="-Wl,-rpath,$(dirname "$simrt")" \
  "$spmdc" --target=cuda -D T=16 -D D=32 -D NH=4 -D F=128 -D L=2 -D B=8 -D NTRAIN="$NTRAIN" \
  -D NVAL="$NVAL" -D STOP_AFTER=6 -D PRINT_EVERY=1000 -D EVAL_EVERY=1000 -D CKPT_EVERY=1000 \
  -D EVAL_BATCHES=2 -D GEN_TOKENS=0 "$root/examples/gpt.spmd" -o "$work/gpt"
(cd "$work" && SPMD_GRAPHS=0 timeout 500 ./gpt --mesh dp=1,tp=1 --profile >out 2>err) ||
  { cat "$work/err"; echo "FAIL: the flagship did not run"; exit 1; }
cat "$work/out"
ops=$(grep '^device operations per training step' "$work/err") ||
  { cat "$work/err"; echo "FAIL: no device-operation line in the profile"; exit 1; }
syncs=$(grep '^host synchronisations per training step' "$work/err") ||
  { cat "$work/err"; echo "FAIL: no host-synchronisation line in the profile"; exit 1; }
echo "$ops"
echo "$syncs"
n=$(sed -n 's/.*: median \([0-9]*\) per rank.*/\1/p' <<<"$ops")
[ -n "$n" ] && [ "$n" -ge "$FLOOR" ] ||
  { echo "FAIL: ${n:-?} device operations per step: fewer than $FLOOR, the counting is broken"; exit 1; }
[ "$n" -le "$CEILING" ] ||
  { echo "FAIL: $n device operations per step, more than the ceiling of $CEILING"; exit 1; }
# The region table's own device operations per call (ops/call: those
# counted while the function was the innermost open region): printed so
# that a failure shows where the operations are; every operation of the 6
# steps is some region's own, so the table's sum is at least 6 x n.
table=$(sed -n '/^functions and loop iterations/,/^[a-z][a-z ]*:/p' "$work/err" | awk '
  /^region / || /^functions/ || NF < 8 { next }
  { i = 1; name = ""; while ($i !~ /^[0-9.]+$/) { name = name (name ? " " : "") $i; i++ }
    printf "%-42s %6d calls %8.1f ops/call\n", name, $i, $(i + 5) }')
echo "$table"
total=$(awk '{ t += $(NF - 3) * $(NF - 1) } END { printf "%d", t }' <<<"$table")
[ "$total" -ge $((6 * n)) ] ||
  { echo "FAIL: the regions' own operations add up to $total, fewer than the 6 steps' $((6 * n))"; exit 1; }
with=$(sed -n 's/.*steps with any on rank 0: \([^)]*\))$/\1/p' <<<"$syncs")
[ "$with" = "6" ] ||
  { echo "FAIL: host synchronisations in steps '${with:-?}' of 6: only the last (6) may synchronise"; exit 1; }
# With graphs (SPMD_GRAPHS=1): the step region is captured in step 2 and
# replays in steps 3-6; a replay's slot table (the step's host numbers) is
# set as its first kernel's parameters, so no replayed step waits for the
# device either (before: each replay waited for the last one's upload from
# the pinned table, a host synchronisation in steps 3-6).
(cd "$work" && rm -rf ckpt && SPMD_GRAPHS=1 SPMD_GRAPHS_VERBOSE=1 timeout 500 ./gpt --mesh dp=1,tp=1 --profile \
   >out_graphs 2>err_graphs) || { cat "$work/err_graphs"; echo "FAIL: the flagship did not run with graphs"; exit 1; }
untimed() { sed 's| ms/step .*||' "$1"; } # the step's time and tokens/s differ from run to run
[ "$(untimed "$work/out")" = "$(untimed "$work/out_graphs")" ] ||
  { diff <(untimed "$work/out") <(untimed "$work/out_graphs"); echo "FAIL: graphs on and off print different numbers"; exit 1; }
grep -q 'captured, 4 replays, 0 eager iterations' "$work/err_graphs" ||
  { grep '^spmd: graph region' "$work/err_graphs"; echo "FAIL: the step region did not replay in steps 3-6"; exit 1; }
copied=$(sed -n 's/.*captured, \([0-9]*\) replays.*; \([0-9]*\) of its [0-9]* inputs copied.*/\2 \1/p' "$work/err_graphs")
read -r ncopied nreplays <<<"$copied"
[ -n "${ncopied:-}" ] && [ "$ncopied" -le $((COPIES * nreplays)) ] ||
  { grep '^spmd: graph region' "$work/err_graphs"
    echo "FAIL: ${ncopied:-?} inputs copied over ${nreplays:-?} replays: more than $COPIES a replay"; exit 1; }
gsyncs=$(grep '^host synchronisations per training step' "$work/err_graphs") ||
  { cat "$work/err_graphs"; echo "FAIL: no host-synchronisation line in the profile with graphs"; exit 1; }
echo "$gsyncs"
gwith=$(sed -n 's/.*steps with any on rank 0: \([^)]*\))$/\1/p' <<<"$gsyncs")
[ "$gwith" = "6" ] ||
  { echo "FAIL: with graphs, host synchronisations in steps '${gwith:-?}' of 6: only the last (6) may synchronise"; exit 1; }
echo "ok: $n device operations per step (ceiling $CEILING), host synchronisations only in the last step, with graphs too; $ncopied inputs copied over $nreplays replays"
