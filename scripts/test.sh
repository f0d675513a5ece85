#!/usr/bin/env bash
# The whole test suite: installs missing packages, builds spmdc and libspmdrt,
# runs every test with ctest, then builds with clang (-Werror, a test subset
# and a 60 s fuzz campaign), then runs the tests again in an ASan+UBSan build
# (less those whose sanitized code another test runs there: tests/README.md).
#   bash scripts/test.sh            all three builds
#   bash scripts/test.sh --quick    the normal build only
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --test
# the PyTorch oracle tests (gpt/torch, numerics/torch_semantics, the bf16
# comparisons) would skip without it: here they must run
/usr/bin/python3 -c 'import torch' || { echo "test.sh: python3-torch is missing" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
jobs=$(nproc)

run_suite() { # build-dir cmake-args...
  local dir=$1; shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  # Every test runs once; only one whose mpirun failed to start (Open MPI's
  # start-up messages) runs again, and those are listed at the end
  # (scripts/run_ctest.py); any other failure fails the suite.
  (cd "$dir" && /usr/bin/python3 ../scripts/run_ctest.py -j "$jobs" --output-on-failure --timeout 900)
}

# clang: the whole project must build with clang -Werror too; then the tests
# that exercise what the compiler choice changes (unit tests, goldens, the
# generated C compiled by clang), and a 60 s fuzz campaign of the compiler
# under libFuzzer+ASan+UBSan (tests/README.md, "Fuzzing").
run_clang() {
  CC=clang cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_FUZZ=ON >/dev/null
  cmake --build build-clang -j "$jobs"
  (cd build-clang && OMPI_CC=clang /usr/bin/python3 ../scripts/run_ctest.py -j "$jobs" --output-on-failure \
     --timeout 900 -R '^(unit/|golden/|codegen_corpus$|fuzz/)')
}

run_suite build
if [ "${1:-}" != "--quick" ]; then
  run_clang
  # MPI's own allocations are not ours to fix: leak checks are off under mpirun
  # (tests that run spmdc itself turn them back on).
  ASAN_OPTIONS=detect_leaks=0:exitcode=99 run_suite build-asan -DSPMD_SANITIZE=ON
fi
echo "all tests passed"
