#!/bin/sh
# flagship.sh: issue 6's benchmark. The flagship training program
# (examples/mlp_tp.spmd) compiled by spmdc against the same computation
# written by hand in C + MPI + CBLAS (bench/flagship_hand.c), on one mesh,
# at sizes larger than the .spmd's defaults.
#
#   bench/flagship.sh [--build DIR] [--runs N]
#
# Builds what is missing (cmake --build DIR --target spmdc flagship_hand;
# configures DIR as Release first if it has no CMakeCache.txt), compiles the
# flagship with `spmdc -D ... -o`, then runs the generated and the hand
# program alternately (gen, hand, hand, gen, ...) RUNS times each after one
# untimed warm-up run of each, and reports the median wall time of each
# (mpirun start-up included, the same for both), the ratio generated/hand,
# and whether both printed the same losses (to RTOL relative).
#
# Environment (defaults): BUILD (REPO/build), SPMDC (BUILD/compiler/spmdc),
# NP=4 DP=2 TP=2, B=256 D=512 H=2048 STEPS=50, RUNS=5, RTOL=1e-4,
# SPMDC_FLAGS (extra spmdc flags, e.g. -O3), MPIRUN (mpirun), TIMEOUT=600 s
# per run. Exit status: 0 the losses agree, 1 they differ or a step failed
# (including: spmdc cannot compile the program yet), 2 usage.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
RUNS=${RUNS:-5}
while [ $# -gt 0 ]; do
    case $1 in
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
HAND=$BUILD/bench/flagship_hand
NP=${NP:-4} DP=${DP:-2} TP=${TP:-2}
B=${B:-256} D=${D:-512} H=${H:-2048} STEPS=${STEPS:-50}
RTOL=${RTOL:-1e-4}
MPIRUN=${MPIRUN:-mpirun}
TIMEOUT=${TIMEOUT:-600}
SPMDC_FLAGS=${SPMDC_FLAGS:-}
export OPENBLAS_NUM_THREADS=1

die() { echo "flagship.sh: error: $*" >&2; exit 1; }
case $RUNS in ''|*[!0-9]*|0) echo "flagship.sh: error: --runs needs a positive integer" >&2; exit 2 ;; esac
[ $((DP * TP)) -eq "$NP" ] || die "DP*TP = $DP*$TP must equal NP = $NP"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/flagship.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
GEN=$tmp/flagship_gen

# --- build (incremental: a no-op when up to date)
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    echo "== configuring $BUILD (Release)"
    cmake -S "$root" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > "$tmp/configure.log" 2>&1 ||
        { cat "$tmp/configure.log" >&2; die "cmake configure of $BUILD failed"; }
fi
echo "== building flagship_hand in $BUILD"
cmake --build "$BUILD" -j2 --target flagship_hand > "$tmp/build.log" 2>&1 ||
    { tail -40 "$tmp/build.log" >&2; die "building flagship_hand failed"; }
if [ $build_spmdc = 1 ]; then
    echo "== building spmdc in $BUILD"
    cmake --build "$BUILD" -j2 --target spmdc > "$tmp/build.log" 2>&1 ||
        { tail -40 "$tmp/build.log" >&2; die "building spmdc failed"; }
fi
[ -x "$SPMDC" ] || die "no spmdc at $SPMDC"

# --- compile the flagship with the generated code
defs="-D B=$B -D D=$D -D H=$H -D STEPS=$STEPS"
echo "== spmdc $defs $SPMDC_FLAGS examples/mlp_tp.spmd -o $GEN"
# shellcheck disable=SC2086
if ! "$SPMDC" $defs $SPMDC_FLAGS "$root/examples/mlp_tp.spmd" -o "$GEN" > "$tmp/spmdc.log" 2>&1 ||
        [ ! -x "$GEN" ]; then
    cat "$tmp/spmdc.log" >&2
    die "spmdc cannot compile the flagship to an executable yet ('spmdc FILE -o PROG' failed" \
        "or wrote no program); nothing to compare the hand-written version with"
fi

# --- run
mesh_gen="--mesh dp=$DP,tp=$TP"
mesh_hand="--dp $DP --tp $TP --B $B --D $D --H $H --steps $STEPS"
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

echo "== $NP ranks, mesh dp=$DP tp=$TP, B=$B D=$D H=$H STEPS=$STEPS; warm-up, then $RUNS runs each"
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
