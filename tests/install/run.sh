#!/usr/bin/env bash
# run.sh MODE BUILD_DIR: installs the build into a temporary prefix and uses
# it from outside the repository, as a user would (docs/install.md).
#   cmake     an out-of-tree CMake project (consumer/): find_package(spmdc)
#             and spmd_add_executable build the model; it runs on 2 ranks and
#             prints what the build tree's spmdc makes of the same model; the
#             depfile rebuilds it when an imported module changes, and only then
#   pkgconfig a plain Makefile (makefile/) with pkg-config --cflags --libs spmdrt
#   relocate  the installed prefix is moved; spmdc still finds its standard
#             library and runtime there (not in the build tree), and so does
#             pkg-config
set -euo pipefail
mode=$1
build=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1 ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
unset SPMDC_STDLIB SPMDC_RT_INCLUDE SPMDC_RT_LIB SPMDC_BLAS_LIB SPMDC_SLEEF_LIB
mpirun=(mpirun --oversubscribe -np 2)

fail() { echo "FAIL: $*" >&2; exit 1; }
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND (exit $?)" >&2' ERR

# The expected output: the build tree's spmdc on the same model.
expected() {
  "$build/compiler/spmdc" -I "$here/consumer/layers" -D STEPS=3 "$here/consumer/model.spmd" -o "$work/expected"
  timeout 60 "${mpirun[@]}" "$work/expected" --mesh dp=1,tp=2 > "$work/expected.txt" 2> "$work/expected.err" \
    || { cat "$work/expected.txt" "$work/expected.err"; fail "the build tree's model failed"; }
  grep -q "step 2 loss" "$work/expected.txt" || fail "the build tree's model printed no losses"
}

# Runs ./PROG on 2 ranks and compares its output with expected().
check_run() {
  timeout 60 "${mpirun[@]}" "$1" --mesh dp=1,tp=2 > "$work/got.txt" 2> "$work/got.err" \
    || { cat "$work/got.txt" "$work/got.err"; fail "$1 failed"; }
  diff -u "$work/expected.txt" "$work/got.txt" || fail "$1 prints other losses than the build tree's spmdc"
  echo "ok: $1 on 2 ranks"
  cat "$work/got.txt"
}

mtime() { stat -c %Y.%y "$1"; }

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cp -r "$here/consumer" "$here/makefile" "$work/"
expected

case $mode in
cmake)
  cd "$work/consumer"
  cmake -S . -B build -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" \
    || { cat "$work/configure.log"; fail "configure"; }
  cmake --build build -v > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }
  grep -q "$work/prefix/bin/spmdc -S $work/consumer/model.spmd" "$work/build.log" \
    || { cat "$work/build.log"; fail "the model was not compiled by the installed spmdc"; }
  check_run build/model
  c=build/model.spmd.c
  before=$(mtime "$c")
  sleep 1.1
  cmake --build build > /dev/null
  [ "$(mtime "$c")" = "$before" ] || fail "a build with nothing changed ran spmdc again"
  touch layers/mlp_block.spmd
  cmake --build build > /dev/null
  [ "$(mtime "$c")" != "$before" ] || fail "changing the imported module layers/mlp_block.spmd did not rerun spmdc"
  echo "ok: the depfile reruns spmdc when an imported module changes, and only then"
  check_run build/model
  # spmd_add_library's libmodel_lib.so from Python (the installed package):
  # the model's first loss, as the program prints it (not in the sanitizer
  # build: Python would need the sanitizers' runtime preloaded)
  [ -f build/libmodel_lib.so ] && [ -f build/libmodel_lib.h ] || fail "spmd_add_library built no libmodel_lib.so and .h"
  if [ -n "${SPMD_INSTALL_NO_PYTHON:-}" ]; then
    echo "ok: spmd_add_library built libmodel_lib.so (Python's call of it is left to the normal build)"
  else
    PYTHONPATH="$work/prefix/share/spmdc/python" timeout 60 "${mpirun[@]}" /usr/bin/python3 -c "
import spmdc
lib = spmdc.load('build/libmodel_lib.so', mesh='dp=1,tp=2')
x, t, w1, w2 = lib.start()
loss = lib.loss_of(x, t, w1, w2).item()
if lib.rank == 0:
    print('step 0 loss %.6g' % loss)" > "$work/lib.txt" || { cat "$work/lib.txt"; fail "Python on libmodel_lib.so"; }
    grep -x "$(cat "$work/lib.txt")" "$work/expected.txt" > /dev/null \
      || { cat "$work/lib.txt" "$work/expected.txt"; fail "libmodel_lib.so's first loss is not the program's"; }
    echo "ok: spmd_add_library's library, called from Python, gives the program's first loss: $(cat "$work/lib.txt")"
  fi
  ;;
pkgconfig)
  cd "$work/makefile"
  export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
  make > "$work/make.log" 2>&1 || { cat "$work/make.log"; fail "make"; }
  cat "$work/make.log"
  # grep reads all of ldd's output (no -q): with pipefail, grep -q leaving
  # early would kill ldd with SIGPIPE and fail the check at random.
  ldd ./model > "$work/ldd.txt"
  grep "libspmdrt.so.0 => $work/prefix/" "$work/ldd.txt" > /dev/null || { cat "$work/ldd.txt"; fail "./model does not use the installed libspmdrt.so"; }
  check_run ./model
  before=$(mtime model.c)
  sleep 1.1
  touch ../consumer/layers/mlp_block.spmd
  make > "$work/make2.log" 2>&1 || { cat "$work/make2.log"; fail "make after a change"; }
  [ "$(mtime model.c)" != "$before" ] || fail "spmdc -MD: make did not rebuild after the imported module changed"
  echo "ok: spmdc -MD dependencies rebuild the model"
  ;;
relocate)
  mv "$work/prefix" "$work/moved"
  spmdc="$work/moved/bin/spmdc"
  "$spmdc" --print-paths > "$work/paths.txt"
  cat "$work/paths.txt"
  grep -qx "layout: installed" "$work/paths.txt" || fail "the moved spmdc does not see its installation"
  for what in "stdlib: $work/moved/share/spmdc/stdlib" "runtime include: $work/moved/include" \
              "runtime library: $work/moved/lib/libspmdrt.a"; do
    grep -qxF "$what" "$work/paths.txt" || fail "expected '$what'"
  done
  # the model imports `jax` from the standard library
  "$spmdc" -I "$work/consumer/layers" -D STEPS=3 "$work/consumer/model.spmd" -o "$work/model"
  check_run "$work/model"
  prefix=$(PKG_CONFIG_PATH="$work/moved/lib/pkgconfig" pkg-config --variable=prefix spmdrt)
  [ "$(cd "$prefix" && pwd)" = "$work/moved" ] || fail "spmdrt.pc points at '$prefix', not the moved prefix"
  echo "ok: spmdrt.pc follows the move"
  ;;
*)
  fail "unknown mode '$mode'"
  ;;
esac
