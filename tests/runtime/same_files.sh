#!/bin/sh
# same_files.sh DIR REF OTHER...: the .npy files that the RNG test saved under
# prefix REF (one rank) must be byte-identical to those saved under each OTHER
# prefix (other meshes and shardings).
dir=$1; ref=$2; shift 2
n=0
for f in "$dir/${ref}"_*.npy; do
    base=${f#"$dir/${ref}_"}
    for m in "$@"; do
        cmp "$f" "$dir/${m}_$base" || exit 1
        n=$((n + 1))
    done
done
[ "$n" -gt 0 ] || { echo "no files compared"; exit 1; }
echo "$n files identical across meshes"
