#!/bin/sh
# ckpt_same_files.sh REF OTHER...: the checkpoint directories (and the
# REF.single.npy files) saved on different meshes hold byte-identical files.
ref=$1; shift
n=0
for f in "$ref"/*.npy; do
    for d in "$@"; do
        cmp "$f" "$d/$(basename "$f")" || exit 1
        n=$((n + 1))
    done
done
for d in "$@"; do
    cmp "$ref.single.npy" "$d.single.npy" || exit 1
    [ "$(ls "$ref" | wc -l)" -eq "$(ls "$d" | wc -l)" ] || { echo "$d: other files"; exit 1; }
done
[ "$n" -gt 0 ] || { echo "no files compared"; exit 1; }
echo "$n files identical across meshes"
