#!/usr/bin/env bash
# The main job: installs missing packages, builds spmdc, and runs the
# flagship example.  Until lowering to C lands (issue 6), this type-checks the
# flagship model and prints its syntax tree instead of training it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"
example=examples/mlp_tp.spmd
echo "== spmdc --check $example"
build/compiler/spmdc --check "$example" && echo "accepted"
echo "== spmdc --dump-ast $example"
build/compiler/spmdc --dump-ast "$example"
