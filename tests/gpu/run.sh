#!/usr/bin/env bash
# The CUDA target's checks on a GPU machine, from a bundle made on ours by
# tests/gpu/bundle.sh (SPEC 14; issue 17):
#   bash run.sh [--bundle DIR] [--only PART,...] [--dry-run] [--timeout S]
# PARTS (in order): kernels (every kernel against the CPU's results), rerun
# (a second run, bit-identical), simbits (the row kernels in f64 and the
# attention kernels in f32 and f64 against the simulation build's, bit for
# bit: a warp's sums in the emulated order, attention's fma chains and its
# own exp and log; bf16 attention's tensor-core sums are not bit for bit),
# errors (ids and targets out of range, found on the device, stop both
# ranks with the CPU's message and the line, at the next synchronisation),
# resume (a checkpoint the CPU wrote), host2,
# host4 (collectives on 2 and 4 ranks sharing the GPU through host memory and
# MPI), nccl (1 rank, SPMD_COLL=nccl), abi (a generated-style kernel launcher
# through spmdrt_kernels.h: rt_kernel_stream, rt_kernel_launched,
# rt_device_data), programs (every e2e program built by spmdc --target=cuda
# on the first and last of its meshes, against the CPU target's output), gpt
# (the flagship's first 20 steps on 1 rank and dp=2,tp=2 against the CPU's
# losses and gradient norms), speed (the flagship's step time, --profile),
# gpt2 (GPT-2 small in bf16: a reduced size's first 20 steps on 1 rank and
# dp=2,tp=2 against the CPU's, then bench/gpu/gpt2.sh at full size against
# PyTorch eager and torch.compile; about 8 minutes: run it alone, --only gpt2),
# attention (the fused op's results against the CPU's, bf16 on tensor
# cores; the bf16 MMA in the library's SASS where cuobjdump is at hand;
# bench/gpu/attention.sh: the fused op's forward and backward at
# B=4, H=12, T=1024, E=64 in f32 and bf16 against PyTorch's
# scaled_dot_product_attention, timed; about 2 minutes), graphs (the
# flagship's step captured and replayed as a CUDA graph, SPMD_GRAPHS=1,
# against eager, SPMD_GRAPHS=0: its first 20 steps print the same numbers,
# the step region replays on every step after its capture, and the step time
# of each, 150 steps on 1 GPU: about 1 minute).
# Each part prints its failures and "PART: ok" or "PART: FAILED"; the last
# line is "N passed, M failed" (checks, not parts). Exit status 1 on failure.
set -uo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
only="" dry=0 limit=120 worker=""
while [ $# -gt 0 ]; do
  case $1 in
    --bundle) bundle=$(cd "$2" && pwd); shift 2 ;;
    --only) only=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --timeout) limit=$2; shift 2 ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    --programs-worker|--gpt-worker|--speed-worker|--errors-worker|--gpt2-worker|--attention-worker|--graphs-worker) worker=${1#--}; shift ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
parts="kernels rerun simbits errors resume host2 host4 nccl abi programs gpt speed gpt2 attention graphs"
for p in ${only//,/ }; do
  case " $parts " in *" $p "*) ;; *) echo "run.sh: unknown part '$p' (parts: $parts)" >&2; exit 2 ;; esac
done
wanted() { [ -z "$only" ] || case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d "${TMPDIR:-/tmp}/spmd_gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
# numpy is in the torch environment on the lent machines
PY=python3
for p in /opt/torch/.venv/bin/python3 /usr/bin/python3; do
  if [ -x $p ] && $p -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
kern="$bundle/bin/gpu_kernels" cmp="$PY $bundle/compare.py"

# errors: each case of tests/gpu/device_errors.c on 2 ranks sharing the GPU:
# the op returns ("after the op"), the next synchronisation stops both ranks
# with the CPU target's message, the op and the rt_at line
if [ "$worker" = errors-worker ]; then
  p=0 f=0
  for spec in "ce|bad.spmd:7: cross_entropy: target 7 at row 2 is out of range for 5 classes" \
              "ce_bwd|bad.spmd:8: cross_entropy: target 7 at row 2 is out of range for 5 classes" \
              "ce_vp|bad.spmd:9: cross_entropy: target 13 at row 2 is out of range for 10 classes" \
              "ce_vp_bwd|bad.spmd:10: cross_entropy: target 13 at row 2 is out of range for 10 classes" \
              "embedding|bad.spmd:3: embedding: id 9 at position 2 is out of range for 3 rows" \
              "embedding_bwd|bad.spmd:4: embedding: id 9 at position 2 is out of range for 3 rows" \
              "take|bad.spmd:5: take_along_dim: index 6 is out of range for dim 1 of size 5" \
              "first|bad.spmd:3: embedding: id 9 at position 2 is out of range for 3 rows"; do
    c=${spec%%|*} msg=${spec#*|}
    out=$(timeout 60 mpirun -np 2 "$bundle/bin/gpu_device_errors" "$c" 2>&1)
    if grep -q '^after the op' <<<"$out" && grep -qF "] $msg" <<<"$out" && ! grep -q '^no error' <<<"$out"; then
      p=$((p + 1))
    else
      f=$((f + 1)); echo "FAIL errors $c: expected \"$msg\" after \"after the op\""; tail -8 <<<"$out"
    fi
  done
  echo "$p passed, $f failed"
  exit 0
fi
# programs: every e2e program built by spmdc --target=cuda, on the first and
# last of its meshes, against the CPU target's outputs (4 at a time)
if [ "$worker" = programs-worker ]; then
  fails=0
  if [ -f "$bundle/progs/MISSING" ]; then sed 's/^/FAIL programs: /' "$bundle/progs/MISSING"; fails=$(wc -l < "$bundle/progs/MISSING"); fi
  ls "$bundle"/progs/*.ref -d | sed 's/\.ref$//' | xargs -P 4 -I{} sh -c \
    '$0 $1/progs/run_e2e.py --ends --prebuilt {} --reference {}.ref none $1/progs/e2e/$(basename {}).spmd > {}.gpu.log 2>&1; tail -1 {}.gpu.log' "$PY" "$bundle" \
    > "$work/programs.sum"
  cat "$work/programs.sum"
  [ -n "${OUT:-}" ] && mkdir -p "$OUT/logs" && cat "$bundle"/progs/*.gpu.log > "$OUT/logs/programs_all.log"
  for f in "$bundle"/progs/*.gpu.log; do grep -q '^PASS' "$f" || { echo "== ${f##*/}"; head -60 "$f"; }; done
  p=$(grep -c '^PASS' "$work/programs.sum"); f=$(grep -vc '^PASS' "$work/programs.sum")
  echo "$p passed, $((f + fails)) failed"
  exit 0
fi
# gpt: the flagship's first steps on 1 rank (NCCL) and dp=2,tp=2 (host
# staging: 4 ranks share the GPU) against the CPU target's
if [ "$worker" = gpt-worker ]; then
  for mesh in dp=1,tp=1 dp=2,tp=2; do
    np=$(( ${mesh:3:1} * ${mesh:8:1} )); d="$work/gpt_$mesh"; mkdir -p "$d"; ln -s "$bundle/data" "$d/data"
    (cd "$d" && timeout 120 mpirun -np $np "$bundle/progs/gpt_check" --mesh $mesh > "$d/out" 2>&1)
    echo "== gpt $mesh (exit $?)"; grep -E '^step (1|20) |rror' "$d/out" | head -8
    $PY "$bundle/gpt_compare.py" "$bundle/progs/gpt_$mesh.cpu.out" "$d/out" | tee "$d/cmp" | grep -v '^[0-9]* passed'
    [ -n "${OUT:-}" ] && mkdir -p "$OUT/logs" && cp "$d/out" "$OUT/logs/gpt_${mesh//[=,]/_}.txt"
  done
  cat "$work"/gpt_*/cmp | awk '/passed, .* failed$/ {p += $1; f += $3} END {print p " passed, " f " failed"}'
  exit 0
fi
# speed: the flagship on 1 GPU against PyTorch eager and torch.compile
# (bench/gpu/flagship.sh), then --profile with every launch waited for
# (SPMD_CUDA_SYNC=1: each op's device time, for the note)
if [ "$worker" = speed-worker ]; then
  d="$work/speed"; mkdir -p "$d"; ln -s "$bundle/data" "$d/data"
  timeout 200 bash "$bundle/bench/gpu/flagship.sh" "$bundle" > "$d/bench" 2>&1
  rc=$?; cat "$d/bench"
  (cd "$d" && SPMD_CUDA_SYNC=1 timeout 100 mpirun -np 1 "$bundle/progs/gpt_speed" --mesh dp=1,tp=1 --profile > "$d/sync" 2>&1)
  [ -n "${OUT:-}" ] && mkdir -p "$OUT/logs" && for f in bench sync; do cp "$d/$f" "$OUT/logs/speed_$f.txt"; done
  sed -n '/^where /,/^other /p' "$d/sync"
  [ $rc = 0 ] && grep -q '^FLAGSHIP ' "$d/bench" && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
  exit 0
fi
# gpt2: GPT-2 small (bf16) at a reduced size on 1 rank and dp=2,tp=2
# against the CPU target's losses and gradient norms (to 1e-2: bf16 GEMMs of
# cuBLAS and oneDNN round differently), then its full size against PyTorch
# eager and torch.compile (bench/gpu/gpt2.sh)
if [ "$worker" = gpt2-worker ]; then
  for mesh in dp=1,tp=1 dp=2,tp=2; do
    np=$(( ${mesh:3:1} * ${mesh:8:1} )); d="$work/gpt2_$mesh"; mkdir -p "$d"; ln -s "$bundle/data" "$d/data"
    (cd "$d" && timeout 120 mpirun -np $np "$bundle/progs/gpt2_check" --mesh $mesh > "$d/out" 2>&1)
    echo "== gpt2 $mesh (exit $?)"; grep -E '^step (1|20) |rror' "$d/out" | head -8
    $PY "$bundle/gpt_compare.py" --rtol 1e-2 "$bundle/progs/gpt2_$mesh.cpu.out" "$d/out" | tee "$d/cmp" | grep -v '^[0-9]* passed'
    [ -n "${OUT:-}" ] && mkdir -p "$OUT/logs" && cp "$d/out" "$OUT/logs/gpt2_${mesh//[=,]/_}.txt"
  done
  d="$work/gpt2_speed"; mkdir -p "$d"
  timeout 400 bash "$bundle/bench/gpu/gpt2.sh" "$bundle" > "$d/bench" 2>&1
  rc=$?; cat "$d/bench"
  [ -n "${OUT:-}" ] && mkdir -p "$OUT/logs" && cp "$d/bench" "$OUT/logs/gpt2_bench.txt"
  if [ $rc = 0 ] && grep -q '^GPT2 .*ours_ms=' "$d/bench"; then echo "1 passed, 0 failed" > "$d/cmp"
  else echo "0 passed, 1 failed" > "$d/cmp"; fi
  cat "$work"/gpt2_*/cmp | awk '/passed, .* failed$/ {p += $1; f += $3} END {print p " passed, " f " failed"}'
  exit 0
fi
# attention: the fused op's results on this GPU (kernels.c's attention
# section) against the CPU's (the bundle's ref/attn): bf16 on tensor cores
# within 1e-2, f32 and f64 within 1e-5, one check each; where cuobjdump is
# at hand, libspmdrt_cuda's SASS must hold the bf16 MMA (HMMA.16816.F32.BF16:
# the tensor-core path is compiled in); then bench/gpu/attention.sh (ours
# against PyTorch's SDPA): a check that passes when ours ran in f32 and bf16
# (the timings are for the note)
if [ "$worker" = attention-worker ]; then
  p=0 f=0
  timeout 120 mpirun -np 1 "$kern" "$work/attn" attention > "$work/attn.log" 2>&1 &&
    $cmp "$bundle/ref/attn" "$work/attn" > "$work/attn.cmp" 2>&1
  cat "$work/attn.cmp" 2>/dev/null | grep -v '^[0-9]* passed' | head -20
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/attn.cmp" 2>/dev/null | tail -1)
  if [ -n "$line" ]; then
    p=$((p + ${line%% passed*})); ff=${line#*, }; f=$((f + ${ff%% failed*}))
    echo "attention results against the CPU: $line"
  else
    echo "FAIL attention: the kernels' attention section did not run"; tail -5 "$work/attn.log"; f=$((f + 1))
  fi
  objdump=""
  for c in cuobjdump /usr/local/cuda/bin/cuobjdump; do command -v $c > /dev/null && { objdump=$c; break; }; done
  if [ -n "$objdump" ]; then
    n=$($objdump -sass "$bundle"/lib/libspmdrt_cuda.so 2>/dev/null | grep -c 'HMMA\.16816\.F32\.BF16')
    echo "attention: $n HMMA.16816.F32.BF16 instructions in libspmdrt_cuda"
    if [ "$n" -gt 0 ]; then p=$((p + 1)); else echo "FAIL attention: no bf16 tensor-core MMA in libspmdrt_cuda"; f=$((f + 1)); fi
  fi
  timeout 300 bash "$bundle/bench/gpu/attention.sh" "$bundle" > "$work/attention" 2>&1
  rc=$?; cat "$work/attention"
  line=$(grep '^ATTENTION ' "$work/attention")
  if [ $rc = 0 ] && grep -q 'ours_f32_ms=[0-9]' <<<"$line" && grep -q 'ours_bf16_ms=[0-9]' <<<"$line"; then
    p=$((p + 1))
  else
    echo "FAIL attention: no timing of ours in f32 and bf16"; f=$((f + 1))
  fi
  echo "$p passed, $f failed"
  exit 0
fi
# graphs: the flagship with its step region captured and replayed
# (SPMD_GRAPHS=1, the CUDA target's default) and eager (SPMD_GRAPHS=0) on 1
# GPU: progs/gpt_check's 20 steps print the same numbers (all but the
# timings), rank 0's summary says the step region replayed on every step
# after the warm-up and the capture, and progs/gpt_speed's step time in each
# mode (the last "ms/step" printed: 50 steps after 100) for the note
if [ "$worker" = graphs-worker ]; then
  p=0 f=0
  for g in 0 1; do
    for prog in gpt_check gpt_speed; do
      d="$work/graphs_${prog}_$g"; mkdir -p "$d"; ln -s "$bundle/data" "$d/data"
      (cd "$d" && SPMD_GRAPHS=$g SPMD_GRAPHS_VERBOSE=1 timeout 150 mpirun -np 1 "$bundle/progs/$prog" \
         --mesh dp=1,tp=1 > "$d/out" 2>&1; echo $? > "$d/rc")
      [ -n "${OUT:-}" ] && mkdir -p "$OUT/logs" && cp "$d/out" "$OUT/logs/graphs_${prog}_$g.txt"
    done
  done
  numbers() { grep -E '^step [0-9]+ ' "$1" | sed -E 's/ ms\/step [^ ]+ tok\/s [^ ]+//'; }
  e="$work/graphs_gpt_check_0" r="$work/graphs_gpt_check_1"
  if [ "$(cat "$e/rc")" = 0 ] && [ "$(cat "$r/rc")" = 0 ] && [ "$(numbers "$e/out" | wc -l)" -gt 0 ] \
     && diff <(numbers "$e/out") <(numbers "$r/out") > "$work/graphs.diff"; then
    p=$((p + 1))
  else
    f=$((f + 1)); echo "FAIL graphs: gpt_check with graphs (exit $(cat "$r/rc")) does not print eager's numbers (exit $(cat "$e/rc"))"
    head -20 "$work/graphs.diff" 2>/dev/null; tail -5 "$r/out"
  fi
  # the step region (the one with the most replays): captured, then replayed
  # on every step but the warm-up and the capture
  summary=$(grep -E 'graph region .*: captured, [0-9]+ replays' "$r/out" | sort -t, -k2 -n | tail -1)
  echo "${summary:-no graph region summary}"
  replays=$(sed -nE 's/.*captured, ([0-9]+) replays, ([0-9]+) eager.*/\1 \2/p' <<<"$summary")
  steps=$(numbers "$r/out" | grep -c ' train ')
  if [ -n "$replays" ] && [ "${replays#* }" = 0 ] && [ "${replays% *}" -ge $((steps - 2)) ] && [ "$steps" -gt 2 ]; then
    p=$((p + 1))
  else
    f=$((f + 1)); echo "FAIL graphs: the step region did not replay on every step after its capture ($steps steps)"
  fi
  ms() { grep -E '^step [0-9]+ train' "$1" | tail -1 | sed -nE 's/.* ms\/step ([^ ]+) .*/\1/p'; }
  echo "GRAPHS eager_ms=$(ms "$work/graphs_gpt_speed_0/out") graphs_ms=$(ms "$work/graphs_gpt_speed_1/out") (gpt_speed, the last 50 steps, 1 GPU)"
  echo "$p passed, $f failed"
  exit 0
fi
passed=0 failed=0

# runs a part's command; its output's "N passed, M failed" line (or 1 failed
# when it has none) adds to the totals
part() {
  local name=$1; shift
  wanted "$name" || return 0
  if [ $dry = 1 ]; then echo "would run $name: $*"; return 0; fi
  local log="$work/$name.log"
  local lim=$limit; case $name in programs) lim=$((limit * 3)) ;; speed) lim=$((limit + 330)) ;; gpt2) lim=$((limit + 450)) ;; attention|graphs) lim=$((limit + 200)) ;; esac
  timeout "$lim" bash -c "$*" >"$log" 2>&1
  local rc=$? line
  [ -n "${OUT:-}" ] && mkdir -p "$OUT/logs" && cp "$log" "$OUT/logs/$name.log"
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
  grep -E '^FAIL|error|^GRAPHS ' "$log" | head -20
  if [ -n "$line" ]; then
    passed=$((passed + ${line%% passed*})); local f=${line#*, }; failed=$((failed + ${f%% failed*}))
    # a part that exited non-zero after "N passed, 0 failed" failed all the same
    [ $rc != 0 ] && [ "${f%% failed*}" = 0 ] && failed=$((failed + 1))
  else
    failed=$((failed + 1))
    [ $rc = 124 ] && echo "$name: timed out after ${lim}s" || tail -5 "$log"
  fi
  # ok: the part ran and none of its checks failed
  if [ $rc = 0 ] && [ "${line#*, }" = "0 failed" ]; then echo "$name: ok ($line)"; else echo "$name: FAILED${line:+ ($line)}"; fi
}

part kernels "mpirun -np 1 $kern $work/np1 && $cmp $bundle/ref/np1 $work/np1"
part rerun "mpirun -np 1 $kern $work/again && $cmp --identical $work/np1 $work/again"
part simbits "mpirun -np 1 $kern $work/simbits rowbits,attnbits && $cmp --identical $bundle/ref/sim $work/simbits"
part errors "bash $bundle/run.sh --bundle $bundle --errors-worker"
part resume "KERNELS_RESUME_FROM=$bundle/ref/np1/ckpt mpirun -np 1 $kern $work/resume resume && $cmp --subset $bundle/ref/np1 $work/resume"
part host2 "SPMD_COLL=host mpirun -np 2 $kern $work/np2 collectives,files && $cmp $bundle/ref/np2 $work/np2"
part host4 "SPMD_COLL=host mpirun -np 4 $kern $work/np4 collectives,files && $cmp $bundle/ref/np4 $work/np4"
part nccl "SPMD_COLL=nccl mpirun -np 1 $kern $work/nccl collectives && $cmp $bundle/ref/np1c $work/nccl"
part abi "$bundle/bin/gpu_kernel_abi && echo '1 passed, 0 failed'"
part programs "bash $bundle/run.sh --bundle $bundle --programs-worker"
part gpt "bash $bundle/run.sh --bundle $bundle --gpt-worker"
part speed "bash $bundle/run.sh --bundle $bundle --speed-worker"
part gpt2 "bash $bundle/run.sh --bundle $bundle --gpt2-worker"
part attention "bash $bundle/run.sh --bundle $bundle --attention-worker"
part graphs "bash $bundle/run.sh --bundle $bundle --graphs-worker"
[ $dry = 1 ] && exit 0
# what comes back from a lent machine: one archive of the logs
[ -n "${OUT:-}" ] && [ -d "$OUT/logs" ] && tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$OUT/logs"
echo "$passed passed, $failed failed"
[ $failed = 0 ]
