#!/bin/sh
# attention.sh: the fused attention op against the einsum formulation on the
# CPU (issue 27's goals: forward+backward at B=4, H=12, T=1024, E=64, f32
# faster than the einsum path; a peak that grows linearly in T), one rank,
# one thread, side by side in one run:
#
#   ours     attention(q, k, v, causal=true)            (runtime/kernels_attention.c)
#   einsum   einsum, scale, iota mask + where, softmax, einsum (stdlib/nn.spmd's
#            attention_heads before the op)
#
#   bench/attention.sh [--build DIR] [--runs N] [--steps N] [--no-memory]
#
# Speed: bench/attention.spmd runs STEPS steps of value_and_grad of
# sum(attention(q, k, v) * w) with respect to q, k, v (causal, f32); each
# step prints its wall time; step 0 (start-up, first allocations, the GEMM
# choice) is left out and a run's time is the median of its other steps.
# Runs alternate ours, einsum, ours, ...; the report gives the median over
# runs [min-max] of each and the ratio einsum/ours of the medians with its
# range over runs.
# Memory: one step of each at T = 256 ... 4096 (ours) and 256 ... 2048
# (einsum: its scores alone are B*H*T*T*4 bytes, 3.2 GB at 4096) under
# --profile: the runtime's high-water of live tensor bytes and the peak RSS;
# per T the ratio to the T before (2: linear, 4: quadratic).
#
# Environment (defaults): BUILD (REPO/build), RUNS=5, STEPS=5, TS_OURS
# ("256 512 1024 2048 4096"), TS_EINSUM ("256 512 1024 2048"). The machine
# may be shared: the load average is printed before and after; say so next
# to any number quoted from here.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
RUNS=${RUNS:-5}
STEPS=${STEPS:-5}
MEMORY=1
TS_OURS=${TS_OURS:-"256 512 1024 2048 4096"}
TS_EINSUM=${TS_EINSUM:-"256 512 1024 2048"}
while [ $# -gt 0 ]; do
    case $1 in
        --build) BUILD=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        --steps) STEPS=$2; shift 2 ;;
        --no-memory) MEMORY=0; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "attention.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
die() { echo "attention.sh: error: $*" >&2; exit 1; }
[ "$STEPS" -ge 2 ] || die "--steps must be at least 2 (step 0 is left out)"
spmdc=$BUILD/compiler/spmdc
[ -x "$spmdc" ] || die "no $spmdc (build first)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "load before: $(uptime)"

# prog NAME MODE T STEPS: compile bench/attention.spmd
prog() {
    "$spmdc" -D MODE=$2 -D T=$3 -D STEPS=$4 "$root/bench/attention.spmd" -o "$work/$1" || die "spmdc failed"
}

# --- speed at T=1024
prog ours 0 1024 "$STEPS"
prog einsum 1 1024 "$STEPS"
# a run's time: the median of steps 1.. of its output (ms)
step_median() {
    awk '$1 == "step" && $3 == "ms" && $2 > 0 { print $4 }' "$1" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "fail"; else if (NR % 2) print v[(NR + 1) / 2];
                                  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
: >"$work/times"
r=1
while [ "$r" -le "$RUNS" ]; do
    for kind in ours einsum; do
        "$work/$kind" >"$work/out.$kind" 2>&1 || { cat "$work/out.$kind"; die "$kind failed"; }
        echo "$r $kind $(step_median "$work/out.$kind")" >>"$work/times"
    done
    r=$((r + 1))
done
grep -h "step 1 loss" "$work/out.ours" "$work/out.einsum" | sed 's/^/  same step: /'
echo
echo "attention forward+backward, B=4 H=12 T=1024 E=64 f32 causal, 1 rank, 1 thread; ms per step"
echo "(median of steps 1..$((STEPS - 1)) per run; median over $RUNS runs [min-max])"
awk '
    { t[$2, $1] = $3; n = $1 > n ? $1 : n }
    function med(a, k,   i, j, x, m) { m = 0; for (i = 1; i <= n; i++) x[++m] = a[k, i];
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] < x[i]) { y = x[i]; x[i] = x[j]; x[j] = y }
        lo = x[1]; hi = x[m]; return m % 2 ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2 }
    END {
        mo = med(t, "ours"); lo_o = lo; hi_o = hi
        me = med(t, "einsum"); lo_e = lo; hi_e = hi
        for (i = 1; i <= n; i++) r[1, i] = t["einsum", i] / t["ours", i]
        for (i = 1; i <= n; i++) rr["x", i] = r[1, i]
        mr = med(rr, "x")
        printf "  %-8s %10.1f ms  [%.1f-%.1f]\n", "ours", mo, lo_o, hi_o
        printf "  %-8s %10.1f ms  [%.1f-%.1f]\n", "einsum", me, lo_e, hi_e
        printf "  einsum/ours %.2fx  [%.2f-%.2f over runs]\n", me / mo, lo, hi
    }' "$work/times"

# --- memory
if [ "$MEMORY" = 1 ]; then
    echo
    echo "peak memory, one step under --profile (high-water of live tensor bytes; peak RSS); x: ratio to the T before"
    printf '  %-8s %6s %14s %6s %14s %6s\n' kind T "high-water MiB" x "peak RSS MiB" x
    for kind in ours einsum; do
        if [ $kind = ours ]; then ts=$TS_OURS mode=0; else ts=$TS_EINSUM mode=1; fi
        prev_h= prev_r=
        for T in $ts; do
            prog mem $mode "$T" 1
            "$work/mem" --profile >"$work/out.mem" 2>&1 || { tail -5 "$work/out.mem"; die "$kind T=$T failed"; }
            h=$(sed -n 's/^  high-water \([0-9]*\) B.*/\1/p' "$work/out.mem" | head -1)
            rss=$(sed -n 's/^  peak RSS \([0-9]*\) KiB.*/\1/p' "$work/out.mem" | head -1)
            [ -n "$h" ] && [ -n "$rss" ] || { cat "$work/out.mem"; die "no high-water or peak RSS in --profile's output"; }
            awk -v k=$kind -v t=$T -v h=$h -v r=$rss -v ph="$prev_h" -v pr="$prev_r" 'BEGIN {
                printf "  %-8s %6d %14.1f %6s %14.1f %6s\n", k, t, h / 1048576, ph ? sprintf("%.2f", h / ph) : "",
                       r / 1024, pr ? sprintf("%.2f", r / pr) : "" }'
            prev_h=$h prev_r=$rss
        done
    done
fi
echo
echo "load after: $(uptime)"
