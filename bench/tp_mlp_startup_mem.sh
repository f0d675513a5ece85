#!/bin/sh
# tp_mlp_startup_mem.sh: start-up and peak memory of the f32 tp_mlp (issue
# 11's goals: start-up no slower than the hand-written C's, peak memory per
# rank at most 1.1x), side by side on each mesh, runs alternating:
#
#   gen    examples/mlp_tp.spmd compiled by spmdc, run with --profile
#   hand   bench/flagship_hand.c, run with --time
#
#   bench/tp_mlp_startup_mem.sh [--build DIR] [--runs N] [--meshes "1x1 2x1 1x2 2x2"]
#
# Both programs report start-up through the same runtime code
# (rt_startup_print: the `start-up:` line of --profile and of
# flagship_hand --time), as the maximum over ranks of:
#
#   start-up   from the process's start (the kernel's start time of the
#              rank's process, /proc/self/stat, whole 10 ms clock ticks) to
#              the start of the first training step (rt_step_begin): loading
#              the libraries, MPI_Init, the mesh, then everything the program
#              does before its loop (drawing x, t, w1, w2; buffers);
#   init       the part of it after rt_init's closing barrier (exact: one
#              clock), i.e. initialising tp_mlp's 8.5 M parameters and data.
#
# Peak memory is each rank's maximum resident set size from GNU time
# (`mpirun ... /usr/bin/time -v -o FILE.RANK PROG`), the maximum over ranks, in MiB.
# The report gives per program the median over runs [min-max] of each, and
# the ratios gen/hand of the medians with their range over runs (each run's
# ratio to the same run round's hand).
#
# Environment (defaults): BUILD (REPO/build), B=256 D=1024 H=4096 STEPS=5,
# RUNS=5, MESHES ("1x1 2x1 1x2 2x2": DPxTP), MPIRUN (mpirun), TIME
# (/usr/bin/time, the Debian package `time`). The machine may be shared: the
# load average is printed before and after; say so next to any number
# quoted from here.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
RUNS=${RUNS:-5}
MESHES=${MESHES:-"1x1 2x1 1x2 2x2"}
while [ $# -gt 0 ]; do
    case $1 in
        --build) BUILD=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        --meshes) MESHES=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "tp_mlp_startup_mem.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
B=${B:-256} D=${D:-1024} H=${H:-4096} STEPS=${STEPS:-5}
MPIRUN=${MPIRUN:-mpirun}
TIME=${TIME:-/usr/bin/time}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
die() { echo "tp_mlp_startup_mem.sh: error: $*" >&2; exit 1; }

"$TIME" -v true 2>/dev/null || die "$TIME -v does not work (apt-get install time)"
cmake --build "$BUILD" -j2 --target spmdc flagship_hand >/dev/null || die "build failed"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BUILD/compiler/spmdc" -D B=$B -D D=$D -D H=$H -D STEPS=$STEPS "$root/examples/mlp_tp.spmd" -o "$work/gen" ||
    die "spmdc failed"

# each rank under GNU time, its report in its own file (not in the shared stderr)
printf '#!/bin/sh\nexec "%s" -v -o "%s/rss.${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" "$@"\n' "$TIME" "$work" \
    >"$work/timed"
chmod +x "$work/timed"

# run KIND NP DP TP: prints "STARTUP_MS INIT_MS PEAK_MIB LASTLOSS" or "fail"
run() {
    kind=$1 np=$2 dp=$3 tp=$4 out=$work/out
    rm -f "$work"/rss.*
    case $kind in
        gen)
            $MPIRUN -np "$np" "$work/timed" "$work/gen" --mesh "dp=$dp,tp=$tp" --profile >"$out" 2>&1 ||
                { echo "fail"; return; }
            ;;
        hand)
            $MPIRUN -np "$np" "$work/timed" "$BUILD/bench/flagship_hand" --B "$B" --D "$D" --H "$H" \
                --steps "$STEPS" --dp "$dp" --tp "$tp" --every 10 --time >"$out" 2>&1 ||
                { echo "fail"; return; }
            ;;
    esac
    t=$(sed -n 's/^start-up: .*, \([0-9.]*\) ms to the first training step, \([0-9.]*\) ms of them after rt_init.*/\1 \2/p' "$out")
    rss=$(cat "$work"/rss.* 2>/dev/null | sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): \([0-9]*\)/\1/p' |
        awk 'BEGIN { m = 0; n = 0 } { n++; if ($1 > m) m = $1 } END { if (n) printf "%.1f %d", m / 1024, n }')
    loss=$(sed -n 's/^step [0-9]* loss //p' "$out" | tail -1)
    [ -n "$t" ] && [ "${rss#* }" = "$np" ] || { echo "fail"; return; }
    echo "$t ${rss% *} ${loss:-?}"
}

echo "# tp_mlp f32 B=$B D=$D H=$H, $STEPS steps, $RUNS runs per program and mesh, alternating"
echo "# $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# start-up: process start -> first step; init: rt_init's end -> first step (ms, max over ranks);"
echo "# peak: maximum resident set size (MiB, max over ranks); each: median [min-max] over runs, gen/hand [range]"
for mesh in $MESHES; do
    dp=${mesh%x*} tp=${mesh#*x} np=$((${mesh%x*} * ${mesh#*x}))
    kinds="gen hand"
    : >"$work/res"
    r=0
    while [ $r -lt "$RUNS" ]; do
        order=$kinds
        [ $((r % 2)) = 1 ] && order="hand gen"
        for k in $order; do
            echo "$r $k $(run "$k" "$np" "$dp" "$tp")" >>"$work/res"
        done
        r=$((r + 1))
    done
    echo
    echo "mesh dp=$dp tp=$tp ($np ranks)"
    awk '
        $3 == "fail" { fail[$2] = 1; next }
        { k = $2; n[k]++; for (c = 0; c < 3; c++) { v[k, c, n[k]] = $(3 + c); run[k, c, $1] = $(3 + c) }
          loss[k] = $6 }
        function median(k, c, m,   i, j, t, a) {
            for (i = 1; i <= m; i++) a[i] = v[k, c, i]
            for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            lo = a[1]; hi = a[m]
            return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
        }
        function ratio(c,   r, x, a, b) {  # gen/hand of the medians [min-max over runs]
            if (fail["gen"] || fail["hand"] || !n["gen"] || !n["hand"]) return "-"
            a = 1e30; b = 0
            for (r = 0; r < 1000; r++) if (("gen" SUBSEP c SUBSEP r) in run && ("hand" SUBSEP c SUBSEP r) in run) {
                x = run["gen", c, r] / run["hand", c, r]; if (x < a) a = x; if (x > b) b = x }
            return sprintf("%.2f [%.2f-%.2f]", M["gen", c] / M["hand", c], a, b)
        }
        END {
            split("start-up-ms init-ms peak-MiB", names, " ")
            printf "  %-6s %26s %26s %26s   %s\n", "", names[1], names[2], names[3], "last loss"
            split("gen hand", ks, " ")
            for (i = 1; i <= 2; i++) {
                k = ks[i]
                if (fail[k] || !n[k]) { printf "  %-6s failed\n", k; continue }
                line = sprintf("  %-6s", k)
                for (c = 0; c < 3; c++) {
                    M[k, c] = median(k, c, n[k])
                    line = line sprintf(" %26s", sprintf("%.1f [%.1f-%.1f]", M[k, c], lo, hi))
                }
                print line "   " loss[k]
            }
            printf "  %-6s %26s %26s %26s\n", "g/h", ratio(0), ratio(1), ratio(2)
        }' "$work/res"
done
echo
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
