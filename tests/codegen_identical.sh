#!/bin/bash
# tests/codegen_identical.sh [REF] [BUILD]: the proof that a refactoring of
# the compiler changes nothing it generates.  Builds spmdc at git revision
# REF (default main) in a temporary worktree, then dumps the -S output and
# --dump-ir of every accepted program under tests/, examples/, stdlib/ and
# docs/ with it and with BUILD/compiler/spmdc (default build/, the working
# tree's), and compares them byte for byte (codegen_identical.py).  Exits 1
# on any difference.  With CODEGEN_IDENTICAL_CACHE=DIR, REF's compiler and
# dump are kept in DIR/<commit> and reused by the next run.
set -euo pipefail
ref=${1:-main}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${2:-$root/build}" && pwd)
sha=$(git -C "$root" rev-parse "$ref")
tmp=$(mktemp -d)
base=${CODEGEN_IDENTICAL_CACHE:+$CODEGEN_IDENTICAL_CACHE/$sha}
base=${base:-$tmp/base}
trap 'git -C "$root" worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
if [ ! -x "$base/spmdc" ]; then
  git -C "$root" worktree add --detach "$tmp/src" "$sha" >/dev/null 2>&1
  cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  # the compiler only: spmdc_core, then spmdc's main.c and link line (the
  # spmdc target would also build the runtime, which -S does not need)
  cmake --build "$tmp/build" -j2 --target spmdc_core >/dev/null
  make -C "$tmp/build/compiler" main.c.o >/dev/null
  (cd "$tmp/build/compiler" && sh CMakeFiles/spmdc.dir/link.txt)
  mkdir -p "$base"
  cp "$tmp/build/compiler/spmdc" "$base/spmdc.tmp"
  rm -rf "$base/dump"
  python3 "$root/tests/codegen_identical.py" dump "$base/spmdc.tmp" "$base/dump" "$root"
  mv "$base/spmdc.tmp" "$base/spmdc"
fi
echo "base: spmdc at $ref (${sha:0:7}); new: $build/compiler/spmdc"
python3 "$root/tests/codegen_identical.py" dump "$build/compiler/spmdc" "$tmp/new" "$root"
python3 "$root/tests/codegen_identical.py" compare "$base/dump" "$tmp/new"
