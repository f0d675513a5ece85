#!/bin/sh
# flagship_hand_meshes.sh FLAGSHIP_HAND MPIRUN: correctness (not timing) test
# of the hand-written flagship: the losses of every step on 1 rank and on the
# 2x2, 4x1 and 1x4 meshes agree to 1e-5 relative, and so do those of the
# --dnnl build of the step (oneDNN GEMMs) on 1 rank and on 2x2.
# ctest bench/flagship_hand_meshes.
set -u
bin=$1 mpirun=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/flagship_meshes.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
run() { # NAME NP DP TP [--dnnl]
    if ! timeout 60 "$mpirun" --allow-run-as-root --oversubscribe -np "$2" \
            "$bin" --dp "$3" --tp "$4" --every 1 ${5:-} > "$tmp/$1.txt" 2> "$tmp/$1.err"; then
        echo "FAIL: flagship_hand on mesh $1 (dp=$3, tp=$4) exited with an error:"
        cat "$tmp/$1.err" "$tmp/$1.txt"
        exit 1
    fi
}
run 1 1 1 1
status=0
for m in 2x2:4:2:2 4x1:4:4:1 1x4:4:1:4; do
    IFS=: read -r name np dp tp <<EOT
$m
EOT
    run "$name" "$np" "$dp" "$tp"
    sh "$here/same_losses.sh" "$tmp/1.txt" "$tmp/$name.txt" 1e-5 "1 rank" "mesh $name" || status=1
done
for m in dnnl1:1:1:1 dnnl2x2:4:2:2; do
    IFS=: read -r name np dp tp <<EOT
$m
EOT
    run "$name" "$np" "$dp" "$tp" --dnnl
    sh "$here/same_losses.sh" "$tmp/1.txt" "$tmp/$name.txt" 1e-5 "1 rank" "$name" || status=1
done
[ $status = 0 ] && echo "PASS" || echo "FAIL"
exit $status
