#!/usr/bin/env bash
# scripts/run_ctest.py on a small ctest project: a test skipped by its exit
# code (77) is not a failure; a test that was not run (its executable
# missing) is one, and fails the run (it was dropped, and ctest's status
# lost, when another test was retried).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(run_ctest_selftest NONE)
enable_testing()
add_test(NAME skip COMMAND sh -c "exit 77")
set_tests_properties(skip PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME ok COMMAND true)
if(WITH_MISSING)
  add_test(NAME missing COMMAND /nonexistent/program)
endif()
CM
cmake -S "$work" -B "$work/b" > /dev/null
(cd "$work/b" && python3 "$root/scripts/run_ctest.py" > "$work/log" 2>&1) || { cat "$work/log"; echo "FAIL: a skip failed the run"; exit 1; }
echo "ok   a test skipped with exit 77 passes the run"
cmake -S "$work" -B "$work/b" -DWITH_MISSING=ON > /dev/null
if (cd "$work/b" && python3 "$root/scripts/run_ctest.py" > "$work/log" 2>&1); then
  cat "$work/log"; echo "FAIL: a test that was not run passed the run"; exit 1
fi
grep -q '^  missing$' "$work/log" || { cat "$work/log"; echo "FAIL: the test not run is not listed"; exit 1; }
echo "ok   a test not run (its executable missing) fails the run and is listed"
