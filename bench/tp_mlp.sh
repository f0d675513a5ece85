#!/bin/sh
# tp_mlp.sh: the f32 tp_mlp benchmark (issue 11). Per training step, start-up
# excluded, side by side on each mesh, runs alternating:
#
#   gen       examples/mlp_tp.spmd compiled by spmdc (gradient all-reduces
#             started non-blocking, bucketed; in-place SGD; SLEEF gelu)
#   gen-blk   the same binary with SPMD_OVERLAP=0 (blocking all-reduces),
#             on meshes with dp > 1: what the overlap buys
#   hand      bench/flagship_hand.c (the same step by hand, C+MPI+CBLAS,
#             blocking in-place MPI_Allreduce, scalar erff; glibc's malloc
#             defaults, not the runtime's policy: bench/hand_common.h)
#   hand-dnnl the same with its GEMMs on oneDNN (flagship_hand --dnnl):
#             gen runs its f32 GEMMs on OpenBLAS or oneDNN, whichever the
#             runtime found faster on this machine (runtime/gemm.c; named
#             in each mesh's header), so compare gen with the hand row on
#             the same library
#   torch     bench/tp_mlp_torch.py --dtype f32 (PyTorch eager, gloo,
#             Megatron-style tp, dp all-reduce after the backward)
#
#   bench/tp_mlp.sh [--build DIR] [--runs N] [--meshes "1x1 2x1 1x2 2x2"]
#
# One BLAS (and intra-op) thread per rank. Step times are each program's own
# per-step wall times on rank 0: the generated programs' `--profile` row for
# the training loop (median and min-max of the iterations), flagship_hand's
# `--time` (the same, of its loop), PyTorch's per-step timer (steps 2..).
# Each program runs RUNS times per mesh, the order alternating between runs;
# the report gives per program the median over runs of each run's median,
# the min and max step over all runs, and the ratios of the medians to hand,
# hand-dnnl and torch, with their range over runs (each run's ratio to the same run
# round's hand / torch), and the page faults per training step after the
# first (the whole process's, each rank's median over steps, the maximum over
# ranks and runs; gen's --profile line, flagship_hand --time's).
# The last loss each program prints is shown (gen,
# gen-blk and hand start from the same values; torch's differ).
#
# Environment (defaults): BUILD (REPO/build), B=256 D=1024 H=4096 STEPS=21,
# RUNS=3, MESHES ("1x1 2x1 1x2 2x2": DPxTP), MPIRUN (mpirun), PYTHON
# (/usr/bin/python3; the torch rows are skipped without torch).
# The machine may be shared: the load average is printed before and after;
# say so next to any number quoted from here.
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
        *) echo "tp_mlp.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
B=${B:-256} D=${D:-1024} H=${H:-4096} STEPS=${STEPS:-21}
MPIRUN=${MPIRUN:-mpirun}
PYTHON=${PYTHON:-/usr/bin/python3}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
die() { echo "tp_mlp.sh: error: $*" >&2; exit 1; }

cmake --build "$BUILD" -j2 --target spmdc flagship_hand >/dev/null || die "build failed"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BUILD/compiler/spmdc" -D B=$B -D D=$D -D H=$H -D STEPS=$STEPS "$root/examples/mlp_tp.spmd" -o "$work/gen" ||
    die "spmdc failed"
torch=1
"$PYTHON" -c 'import torch' 2>/dev/null || torch=0

# run KIND NP DP TP: prints "MEDIAN MIN MAX FAULTS LASTLOSS" (ms per step; page
# faults per step after the first, '-' for torch) or "fail"
run() {
    kind=$1 np=$2 dp=$3 tp=$4 out=$work/out
    case $kind in
        gen|gen-blk)
            ov=1
            [ "$kind" = gen-blk ] && ov=0
            SPMD_OVERLAP=$ov $MPIRUN -np "$np" "$work/gen" --mesh "dp=$dp,tp=$tp" --profile >"$out" 2>&1 ||
                { echo "fail"; return; }
            t=$(sed -n 's/^for step ([^)]*) *[0-9]* *[0-9.]* *[0-9.]* *\([0-9.]*\) \[\([0-9.]*\)-\([0-9.]*\)\].*/\1 \2 \3/p' "$out")
            [ "$kind" = gen ] && sed -n 's/^f32 GEMM: \([A-Za-z]*\).*/\1/p' "$out" >"$work/genlib"
            ;;
        hand|hand-dnnl)
            lib=
            [ "$kind" = hand-dnnl ] && lib=--dnnl
            $MPIRUN -np "$np" "$BUILD/bench/flagship_hand" --B "$B" --D "$D" --H "$H" --steps "$STEPS" \
                --dp "$dp" --tp "$tp" --every 10 --time $lib >"$out" 2>&1 || { echo "fail"; return; }
            t=$(sed -n 's/^flagship_hand: step median \([0-9.]*\) ms \[\([0-9.]*\)-\([0-9.]*\)\].*/\1 \2 \3/p' "$out")
            ;;
        torch)
            $MPIRUN -np "$np" "$PYTHON" "$root/bench/tp_mlp_torch.py" --dtype f32 --dp "$dp" --tp "$tp" \
                --B "$B" --D "$D" --H "$H" --steps "$STEPS" >"$out" 2>&1 || { echo "fail"; return; }
            t=$(sed -n 's/^step_ms //p' "$out")
            ;;
    esac
    loss=$(sed -n 's/^step [0-9]* loss //p' "$out" | tail -1)
    # page faults per step after the first (max over ranks of each rank's median)
    pf=$(sed -n 's/^page faults per training step after the first.*(max over ranks \([0-9]*\);.*/\1/p' "$out")
    [ -n "$t" ] || { echo "fail"; return; }
    echo "$t ${pf:--} ${loss:-?}"
}

echo "# tp_mlp f32 B=$B D=$D H=$H, $STEPS steps, $RUNS runs per program and mesh, alternating"
echo "# $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for mesh in $MESHES; do
    dp=${mesh%x*} tp=${mesh#*x} np=$((${mesh%x*} * ${mesh#*x}))
    kinds="gen hand hand-dnnl"
    [ "$dp" -gt 1 ] && kinds="gen gen-blk hand hand-dnnl"
    [ $torch = 1 ] && kinds="$kinds torch"
    : >"$work/res"
    r=0
    while [ $r -lt "$RUNS" ]; do
        order=$kinds
        [ $((r % 2)) = 1 ] && order=$(echo $kinds | tr ' ' '\n' | sort -r | tr '\n' ' ')
        for k in $order; do
            echo "$r $k $(run "$k" "$np" "$dp" "$tp")" >>"$work/res"
        done
        r=$((r + 1))
    done
    echo
    echo "mesh dp=$dp tp=$tp ($np ranks); gen's f32 GEMM: $(cat "$work/genlib" 2>/dev/null || echo '?')"
    echo "  program     ms/step: median [min-max]     /hand [range]  /hand-dnnl [range]       /torch [range]  faults/step  last loss"
    awk -v kinds="$kinds" '
        $3 == "fail" { fail[$2] = 1; next }
        { k = $2; n[k]++; med[k, n[k]] = $3; run[k, $1] = $3
          if (!(k in lo) || $4 < lo[k]) lo[k] = $4; if ($5 > hi[k]) hi[k] = $5
          if (!(k in pf) || $6 == "-" || $6 + 0 > pf[k] + 0) pf[k] = $6; loss[k] = $7 }
        function median(arr, m,   i, j, t, a) {
            for (i = 1; i <= m; i++) a[i] = arr[i]
            for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
        }
        function ratio(k, base,   r, x, a, b) {  # median ratio [min-max over runs]
            if (!(base in M) || fail[base]) return "-"
            a = 1e30; b = 0
            for (r = 0; r < 1000; r++) if ((k SUBSEP r) in run && (base SUBSEP r) in run) {
                x = run[k, r] / run[base, r]; if (x < a) a = x; if (x > b) b = x }
            return sprintf("%.2f [%.2f-%.2f]", M[k] / M[base], a, b)
        }
        END {
            split(kinds, ks, " ")
            for (i = 1; ks[i] != ""; i++) if (n[ks[i]]) {
                delete tmp; for (j = 1; j <= n[ks[i]]; j++) tmp[j] = med[ks[i], j]
                M[ks[i]] = median(tmp, n[ks[i]])
            }
            for (i = 1; ks[i] != ""; i++) {
                k = ks[i]
                if (fail[k] || !n[k]) { printf "  %-9s failed\n", k; continue }
                printf "  %-9s %9.1f [%.1f-%.1f]  %18s  %18s  %18s  %11s  %s\n", k, M[k], lo[k], hi[k],
                    ratio(k, "hand"), ratio(k, "hand-dnnl"), ratio(k, "torch"), pf[k], loss[k]
            }
        }' "$work/res"
done
echo
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
