#!/bin/sh
# block_hand_losses.sh BLOCK_HAND SPMDC BLOCK_SP.spmd MPIRUN: correctness (not
# timing) test of the hand-written block_sp: compiles the .spmd at its default
# sizes with `spmdc -o`, runs it and block_hand on 1 rank and on the 2x2 mesh,
# and checks every printed loss agrees to 1e-5 relative (same_losses.sh), the
# generated program against the hand one on each mesh. ctest
# bench/block_hand_losses.
set -u
hand=$1 spmdc=$2 src=$3 mpirun=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/block_hand_losses.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
if ! "$spmdc" "$src" -o "$tmp/block_gen" > "$tmp/spmdc.log" 2>&1 || [ ! -x "$tmp/block_gen" ]; then
    echo "FAIL: spmdc could not compile $src:"
    cat "$tmp/spmdc.log"
    exit 1
fi
run() { # OUT NP PROGRAM ARGS...
    out=$1 np=$2
    shift 2
    if ! timeout 60 "$mpirun" --allow-run-as-root --oversubscribe -np "$np" "$@" \
            > "$tmp/$out.txt" 2> "$tmp/$out.err"; then
        echo "FAIL: $* on $np rank(s) exited with an error:"
        cat "$tmp/$out.err" "$tmp/$out.txt"
        exit 1
    fi
}
status=0
for m in 1x1:1:1:1 2x2:4:2:2; do
    IFS=: read -r name np dp tp <<EOT
$m
EOT
    run "gen$name" "$np" "$tmp/block_gen" --mesh "dp=$dp,tp=$tp"
    run "hand$name" "$np" "$hand" --dp "$dp" --tp "$tp"
    sh "$here/same_losses.sh" "$tmp/gen$name.txt" "$tmp/hand$name.txt" 1e-5 \
        "generated ($name)" "block_hand ($name)" || status=1
done
[ $status = 0 ] && echo "PASS" || echo "FAIL"
exit $status
