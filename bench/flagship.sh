#!/bin/sh
# flagship.sh: the flagship benchmarks (issue 6 and after). A training program
# of examples/ compiled by spmdc against the same computation written by hand
# in C + MPI + CBLAS, on one mesh, at sizes larger than the .spmd's defaults.
#
#   bench/flagship.sh [--model mlp|block] [--build DIR] [--runs N]
#
# Models (--model, or MODEL in the environment; default mlp):
#   mlp    examples/mlp_tp.spmd  against bench/flagship_hand.c
#          constants B=256 D=512 H=2048 STEPS=50
#   block  examples/block_sp.spmd against bench/block_hand.c
#          constants B=8 SEQ=128 D=256 H=1024 L=2 STEPS=20
# Each constant can be overridden from the environment (e.g. SEQ=256); it is
# passed to spmdc as `-D NAME=VALUE` and to the hand program as `--NAME VALUE`
# (`--steps` for STEPS).
#
# Builds what is missing (cmake --build DIR --target spmdc HAND; configures
# DIR as Release first if it has no CMakeCache.txt), compiles the model with
# `spmdc -D ... -o`, then runs the generated and the hand program
# alternately (gen, hand, hand, gen, ...) RUNS times each after one untimed
# warm-up run of each, and reports the median wall time of each (mpirun
# start-up included, the same for both), the ratio generated/hand, and
# whether both printed the same losses (to RTOL relative; the largest
# relative difference is printed).
#
# Environment (defaults): MODEL (mlp), BUILD (REPO/build), SPMDC
# (BUILD/compiler/spmdc), NP=4 DP=2 TP=2, the model's constants, RUNS=5,
# RTOL=1e-4, SPMDC_FLAGS (extra spmdc flags, e.g. -O3), MPIRUN (mpirun),
# TIMEOUT=600 s per run. Exit status: 0 the losses agree, 1 they differ or a
# step failed (including: spmdc cannot compile the program yet), 2 usage.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
RUNS=${RUNS:-5}
MODEL=${MODEL:-mlp}
while [ $# -gt 0 ]; do
    case $1 in
        --model) MODEL=$2; shift 2 ;;
        --model=*) MODEL=${1#--model=}; shift ;;
        --build) BUILD=$2; shift 2 ;;
        --build=*) BUILD=${1#--build=}; shift ;;
        --runs) RUNS=$2; shift 2 ;;
        --runs=*) RUNS=${1#--runs=}; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "flagship.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
build_spmdc=0
[ -z "${SPMDC:-}" ] && build_spmdc=1
SPMDC=${SPMDC:-$BUILD/compiler/spmdc}
# the model: its source, hand-written target, and constants NAME=DEFAULT
case $MODEL in
    mlp) src=examples/mlp_tp.spmd hand=flagship_hand consts="B=256 D=512 H=2048 STEPS=50" ;;
    block) src=examples/block_sp.spmd hand=block_hand consts="B=8 SEQ=128 D=256 H=1024 L=2 STEPS=20" ;;
    *) echo "flagship.sh: error: unknown model '$MODEL' (mlp or block)" >&2; exit 2 ;;
esac
HAND=$BUILD/bench/$hand
NP=${NP:-4} DP=${DP:-2} TP=${TP:-2}
# defs: spmdc's -D flags; hand_args: the hand program's; sizes: for the report
defs= hand_args= sizes=
for kv in $consts; do
    name=${kv%%=*}
    eval "val=\${$name:-${kv#*=}}"
    case $val in ''|*[!0-9.eE+-]*) echo "flagship.sh: error: $name='$val' is not a number" >&2; exit 2 ;; esac
    flag=$name
    [ "$name" = STEPS ] && flag=steps
    defs="$defs -D $name=$val" hand_args="$hand_args --$flag $val" sizes="$sizes $name=$val"
done
sizes=${sizes# }
RTOL=${RTOL:-1e-4}
MPIRUN=${MPIRUN:-mpirun}
TIMEOUT=${TIMEOUT:-600}
SPMDC_FLAGS=${SPMDC_FLAGS:-}
export OPENBLAS_NUM_THREADS=1

die() { echo "flagship.sh: error: $*" >&2; exit 1; }
case $RUNS in ''|*[!0-9]*|0) echo "flagship.sh: error: --runs needs a positive integer" >&2; exit 2 ;; esac
[ $((DP * TP)) -eq "$NP" ] || die "DP*TP = $DP*$TP must equal NP = $NP"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/flagship_$MODEL.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
GEN=$tmp/${MODEL}_gen

# --- build (incremental: a no-op when up to date)
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    echo "== configuring $BUILD (Release)"
    cmake -S "$root" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > "$tmp/configure.log" 2>&1 ||
        { cat "$tmp/configure.log" >&2; die "cmake configure of $BUILD failed"; }
fi
echo "== building $hand in $BUILD"
cmake --build "$BUILD" -j2 --target "$hand" > "$tmp/build.log" 2>&1 ||
    { tail -40 "$tmp/build.log" >&2; die "building $hand failed"; }
if [ $build_spmdc = 1 ]; then
    echo "== building spmdc in $BUILD"
    cmake --build "$BUILD" -j2 --target spmdc > "$tmp/build.log" 2>&1 ||
        { tail -40 "$tmp/build.log" >&2; die "building spmdc failed"; }
fi
[ -x "$SPMDC" ] || die "no spmdc at $SPMDC"

# --- compile the model with the generated code
echo "== spmdc$defs${SPMDC_FLAGS:+ $SPMDC_FLAGS} $src -o $GEN"
# shellcheck disable=SC2086
if ! "$SPMDC" $defs $SPMDC_FLAGS "$root/$src" -o "$GEN" > "$tmp/spmdc.log" 2>&1 ||
        [ ! -x "$GEN" ]; then
    cat "$tmp/spmdc.log" >&2
    die "spmdc cannot compile $src to an executable yet ('spmdc FILE -o PROG' failed" \
        "or wrote no program); nothing to compare the hand-written version with"
fi

# --- run
mesh_gen="--mesh dp=$DP,tp=$TP"
mesh_hand="--dp $DP --tp $TP$hand_args"
now() { date +%s.%N; }
# run KIND OUT: runs one program, prints its wall time in seconds
run() {
    if [ "$1" = gen ]; then set -- "$1" "$2" "$GEN" $mesh_gen; else set -- "$1" "$2" "$HAND" $mesh_hand; fi
    kind=$1 out=$2; shift 2
    t0=$(now)
    timeout "$TIMEOUT" "$MPIRUN" --allow-run-as-root --oversubscribe -np "$NP" "$@" \
        > "$out" 2> "$out.err"
    rc=$?
    t1=$(now)
    if [ $rc -ne 0 ]; then
        cat "$out.err" "$out" >&2
        [ $rc -eq 124 ] && die "the $kind program timed out after $TIMEOUT s"
        die "the $kind program failed (exit $rc): $*"
    fi
    echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "== $MODEL: $NP ranks, mesh dp=$DP tp=$TP, $sizes; warm-up, then $RUNS runs each"
run gen "$tmp/gen.out" > /dev/null
run hand "$tmp/hand.out" > /dev/null
: > "$tmp/gen.times"; : > "$tmp/hand.times"
i=0
while [ $i -lt "$RUNS" ]; do
    if [ $((i % 2)) -eq 0 ]; then order="gen hand"; else order="hand gen"; fi
    for k in $order; do
        t=$(run $k "$tmp/$k.$i.out") || exit 1
        echo "$t" >> "$tmp/$k.times"
        printf '  run %d %-4s %8.3f s\n' $((i + 1)) "$k" "$t"
        # every run must print what the warm-up printed (the programs are deterministic)
        sh "$root/bench/same_losses.sh" "$tmp/$k.out" "$tmp/$k.$i.out" "$RTOL" \
            "$k warm-up" "$k run $((i + 1))" > "$tmp/same.log" ||
            { cat "$tmp/same.log" >&2; die "the $k program's losses changed between runs"; }
    done
    i=$((i + 1))
done

mg=$(median < "$tmp/gen.times") mh=$(median < "$tmp/hand.times")
echo
echo "losses (generated | hand):"
paste "$tmp/gen.out" "$tmp/hand.out" | sed 's/^/  /; s/\t/   |   /'
echo
printf '%-28s %10s\n' "program" "median s"
printf '%-28s %10.3f\n' "generated (spmdc)" "$mg"
printf '%-28s %10.3f\n' "hand-written (C+MPI+CBLAS)" "$mh"
echo "$mg $mh" | awk '{ printf "%-28s %10.3f\n", "ratio generated/hand", $1 / $2 }'
echo
if sh "$root/bench/same_losses.sh" "$tmp/gen.out" "$tmp/hand.out" "$RTOL" generated hand-written; then
    exit 0
fi
die "the generated and the hand-written programs printed different losses"
