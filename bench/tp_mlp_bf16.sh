#!/bin/sh
# tp_mlp_bf16.sh: the bf16 tp_mlp benchmark (issue 11). Per training step,
# start-up excluded, side by side on each mesh, runs alternating:
#
#   gen-bf16    examples/mlp_tp_bf16.spmd (f32 parameters, bf16 compute:
#               oneDNN bf16 GEMM, bf16 tp all-reduce)
#   gen-f32     examples/mlp_tp.spmd (f32 GEMMs on OpenBLAS or oneDNN,
#               whichever the runtime found faster here: runtime/gemm.c)
#   hand-f32    bench/flagship_hand.c (the same f32 step by hand, C+MPI+CBLAS)
#   torch-bf16  bench/tp_mlp_torch.py --dtype bf16 (PyTorch, bf16 tensors)
#   torch-f32   bench/tp_mlp_torch.py --dtype f32
#
#   bench/tp_mlp_bf16.sh [--build DIR] [--runs N] [--meshes "1x1 2x1 1x2 2x2"]
#
# Step times: the generated programs' `--profile` line for the training
# loop (rank 0's median ms per iteration and its min-max), the hand
# program's `--time` (mean ms/step of its loop), PyTorch's own per-step
# timer (median, min-max of steps 2..). Each program runs RUNS times per
# mesh, interleaved; the report gives the median over runs of each run's
# median, the min and max over all runs, and the ratios to hand-f32 and
# torch-bf16. The last loss each program prints (after STEPS-1 updates) is
# shown; gen-bf16 and gen-f32 start from the same values (torch's differ).
#
# Environment (defaults): BUILD (REPO/build), B=256 D=1024 H=4096 STEPS=21,
# RUNS=3, MESHES ("1x1 2x1 1x2 2x2": DPxTP), MPIRUN (mpirun), PYTHON
# (/usr/bin/python3; torch rows are skipped without torch).
# The machine may be shared: say so next to any number quoted from here.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
RUNS=${RUNS:-3}
MESHES=${MESHES:-"1x1 2x1 1x2 2x2"}
while [ $# -gt 0 ]; do
    case $1 in
        --build) BUILD=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        --meshes) MESHES=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "tp_mlp_bf16.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
B=${B:-256} D=${D:-1024} H=${H:-4096} STEPS=${STEPS:-21}
MPIRUN=${MPIRUN:-mpirun}
PYTHON=${PYTHON:-/usr/bin/python3}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
die() { echo "tp_mlp_bf16.sh: error: $*" >&2; exit 1; }

[ -x "$BUILD/compiler/spmdc" ] && [ -x "$BUILD/bench/flagship_hand" ] ||
    cmake --build "$BUILD" -j2 --target spmdc flagship_hand >/dev/null || die "build failed"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
defs="-D B=$B -D D=$D -D H=$H -D STEPS=$STEPS"
"$BUILD/compiler/spmdc" $defs "$root/examples/mlp_tp_bf16.spmd" -o "$work/gen_bf16" || die "spmdc failed"
"$BUILD/compiler/spmdc" $defs "$root/examples/mlp_tp.spmd" -o "$work/gen_f32" || die "spmdc failed"
torch=1
"$PYTHON" -c 'import torch' 2>/dev/null || torch=0

# run KIND NP DP TP: prints "MEDIAN MIN MAX LASTLOSS" (ms per step)
run() {
    kind=$1 np=$2 dp=$3 tp=$4 out=$work/out
    case $kind in
        gen-*)
            exe=$work/gen_${kind#gen-}
            $MPIRUN -np "$np" "$exe" --mesh "dp=$dp,tp=$tp" --profile >"$out" 2>&1 || { echo "fail"; return; }
            t=$(sed -n 's/^for step ([^)]*) *[0-9]* *[0-9.]* *[0-9.]* *\([0-9.]*\) \[\([0-9.]*\)-\([0-9.]*\)\].*/\1 \2 \3/p' "$out")
            ;;
        hand-f32)
            $MPIRUN -np "$np" "$BUILD/bench/flagship_hand" --B "$B" --D "$D" --H "$H" --steps "$STEPS" \
                --dp "$dp" --tp "$tp" --every 10 --time >"$out" 2>&1 || { echo "fail"; return; }
            m=$(sed -n 's/.*(\([0-9.]*\) ms\/step).*/\1/p' "$out")
            t="$m $m $m"
            ;;
        torch-*)
            $MPIRUN -np "$np" "$PYTHON" "$root/bench/tp_mlp_torch.py" --dtype "${kind#torch-}" --dp "$dp" \
                --tp "$tp" --B "$B" --D "$D" --H "$H" --steps "$STEPS" >"$out" 2>&1 || { echo "fail"; return; }
            t=$(sed -n 's/^step_ms //p' "$out")
            ;;
    esac
    loss=$(sed -n 's/^step [0-9]* loss //p' "$out" | tail -1)
    echo "$t ${loss:-?}"
}

kinds="gen-bf16 gen-f32 hand-f32"
[ $torch = 1 ] && kinds="$kinds torch-bf16 torch-f32"
echo "# tp_mlp B=$B D=$D H=$H, $STEPS steps, $RUNS runs per program and mesh, interleaved"
echo "# $(getconf _NPROCESSORS_ONLN) cores; $(grep -o 'avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for mesh in $MESHES; do
    dp=${mesh%x*} tp=${mesh#*x} np=$((${mesh%x*} * ${mesh#*x}))
    : >"$work/res"
    r=0
    while [ $r -lt "$RUNS" ]; do
        order=$kinds
        [ $((r % 2)) = 1 ] && order=$(echo $kinds | tr ' ' '\n' | sort -r | tr '\n' ' ')
        for k in $order; do
            echo "$k $(run "$k" "$np" "$dp" "$tp")" >>"$work/res"
        done
        r=$((r + 1))
    done
    echo
    echo "mesh dp=$dp tp=$tp ($np ranks)      ms/step: median [min-max]   /hand-f32  /torch-bf16  last loss"
    awk -v kinds="$kinds" '
        $2 == "fail" { fail[$1] = 1; next }
        { n[$1]++; med[$1, n[$1]] = $2; if (!($1 in lo) || $3 < lo[$1]) lo[$1] = $3;
          if ($4 > hi[$1]) hi[$1] = $4; loss[$1] = $5 }
        function median(k,   i, j, t, m, a) {
            m = n[k]; for (i = 1; i <= m; i++) a[i] = med[k, i]
            for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
        }
        END {
            split(kinds, ks, " ")
            for (i = 1; ks[i] != ""; i++) if (n[ks[i]]) M[ks[i]] = median(ks[i])
            for (i = 1; ks[i] != ""; i++) {
                k = ks[i]
                if (fail[k] || !n[k]) { printf "  %-12s failed\n", k; continue }
                printf "  %-12s %10.1f [%.1f-%.1f]   %8s  %10s  %s\n", k, M[k], lo[k], hi[k],
                    ("hand-f32" in M) ? sprintf("%.2fx", M[k] / M["hand-f32"]) : "-",
                    ("torch-bf16" in M) ? sprintf("%.2fx", M[k] / M["torch-bf16"]) : "-", loss[k]
            }
        }' "$work/res"
done
