#!/usr/bin/env bash
# Installs the Debian packages spmdc needs, if any is missing (run as root,
# or with sudo available).  Run by main.sh and test.sh.  `fortunes` is
# the text the main job's GPT learns, python3-matplotlib plots its losses.
#   bash scripts/deps.sh          what the main job needs (and the test tools)
#   bash scripts/deps.sh --test   also python3-torch, the PyTorch oracle of the
#                                 tests (gpt/torch, numerics/torch_semantics, the
#                                 bf16 comparisons; about 80 s to install)
set -euo pipefail
SPMD_PACKAGES="cmake make gcc re2c bison libopenmpi-dev openmpi-bin libcriterion-dev
  libopenblas-dev libdnnl-dev libsleef-dev libcjson-dev pkg-config python3 python3-numpy python3-matplotlib
  fortunes"
missing=()
# the test suite's: clang and libFuzzer (the clang build, tests/fuzz), ip
# (tests/multihost), unshare (tests/faults); GNU time (/usr/bin/time -v: peak
# memory per rank in bench/tp_mlp_startup_mem.sh); python3-mpi4py (the
# Python module's tests under mpirun python3, tests/python)
SPMD_PACKAGES="$SPMD_PACKAGES clang libclang-rt-14-dev iproute2 util-linux time python3-mpi4py"
if [ "${1:-}" = "--test" ]; then
  SPMD_PACKAGES="$SPMD_PACKAGES python3-torch"
fi
for p in $SPMD_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm, for the tests that run under node (tests/node: the editor
# grammar, the SARIF schema); a machine that has them from elsewhere (such as
# NodeSource's nodejs, which brings its own npm) keeps those.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
