#!/usr/bin/env bash
# The CUDA target's checks on a GPU machine, from a bundle made on ours by
# tests/gpu/bundle.sh (SPEC 14; issue 17):
#   bash run.sh [--bundle DIR] [--only PART,...] [--dry-run] [--timeout S]
# PARTS (in order): kernels (every kernel against the CPU's results), rerun
# (a second run, bit-identical), resume (a checkpoint the CPU wrote), host2,
# host4 (collectives on 2 and 4 ranks sharing the GPU through host memory and
# MPI), nccl (1 rank, SPMD_COLL=nccl), abi (a generated-style kernel launcher
# through spmdrt_kernels.h: rt_kernel_stream, rt_kernel_launched,
# rt_device_data), programs (gradient checks, e2e on 1, 2 and 4 ranks, the
# flagship's 20 steps: need spmdc --target=cuda).
# Each part prints its failures and "PART: ok" or "PART: FAILED"; the last
# line is "N passed, M failed" (checks, not parts). Exit status 1 on failure.
set -uo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
only="" dry=0 limit=120
while [ $# -gt 0 ]; do
  case $1 in
    --bundle) bundle=$(cd "$2" && pwd); shift 2 ;;
    --only) only=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --timeout) limit=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
parts="kernels rerun resume host2 host4 nccl abi programs"
for p in ${only//,/ }; do
  case " $parts " in *" $p "*) ;; *) echo "run.sh: unknown part '$p' (parts: $parts)" >&2; exit 2 ;; esac
done
wanted() { [ -z "$only" ] || case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d "${TMPDIR:-/tmp}/spmd_gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
kern="$bundle/bin/gpu_kernels" cmp="python3 $bundle/compare.py"
passed=0 failed=0

# runs a part's command; its output's "N passed, M failed" line (or 1 failed
# when it has none) adds to the totals
part() {
  local name=$1; shift
  wanted "$name" || return 0
  if [ $dry = 1 ]; then echo "would run $name: $*"; return 0; fi
  local log="$work/$name.log"
  timeout "$limit" bash -c "$*" >"$log" 2>&1
  local rc=$? line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
  grep -E '^FAIL|error' "$log" | head -20
  if [ -n "$line" ]; then
    passed=$((passed + ${line%% passed*})); local f=${line#*, }; failed=$((failed + ${f%% failed*}))
  else
    failed=$((failed + 1))
    [ $rc = 124 ] && echo "$name: timed out after ${limit}s" || tail -5 "$log"
  fi
  if [ $rc = 0 ] && [ -n "$line" ]; then echo "$name: ok ($line)"; else echo "$name: FAILED"; fi
}

part kernels "mpirun -np 1 $kern $work/np1 && $cmp $bundle/ref/np1 $work/np1"
part rerun "mpirun -np 1 $kern $work/again && $cmp --identical $work/np1 $work/again"
part resume "KERNELS_RESUME_FROM=$bundle/ref/np1/ckpt mpirun -np 1 $kern $work/resume resume && $cmp --subset $bundle/ref/np1 $work/resume"
part host2 "SPMD_COLL=host mpirun -np 2 $kern $work/np2 collectives,files && $cmp $bundle/ref/np2 $work/np2"
part host4 "SPMD_COLL=host mpirun -np 4 $kern $work/np4 collectives,files && $cmp $bundle/ref/np4 $work/np4"
part nccl "SPMD_COLL=nccl mpirun -np 1 $kern $work/nccl collectives && $cmp --subset $bundle/ref/np1 $work/nccl"
part abi "$bundle/bin/gpu_kernel_abi && echo '1 passed, 0 failed'"
part programs "cat $bundle/progs/MISSING 2>/dev/null | sed 's/^/FAIL programs: /'; ls $bundle/progs/*.run >/dev/null 2>&1 && for r in $bundle/progs/*.run; do bash \$r; done"
[ $dry = 1 ] && exit 0
echo "$passed passed, $failed failed"
[ $failed = 0 ]
