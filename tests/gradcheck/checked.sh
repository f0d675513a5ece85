# Sourced by run.sh and bf16/run_bf16.sh: `checked CMD...` runs CMD with
# its output shown and fails (exit 1) on a sanitizer report in it, even if
# CMD exited 0 (tests/README.md: the harnesses fail a test on any report);
# undefined behaviour stops a program (halt_on_error; the sanitizer build
# also compiles with -fno-sanitize-recover=undefined). Needs $work.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:exitcode=98:print_stacktrace=1}
checked() {
  local rc=0
  "$@" 2>&1 | tee "$work/checked.log" || rc=${PIPESTATUS[0]}
  if grep -Eq 'runtime error:|ERROR: (Address|Leak|Thread|Memory|UndefinedBehavior)Sanitizer' "$work/checked.log"; then
    echo "FAIL: a sanitizer report from: $*" >&2
    exit 1
  fi
  return "$rc"
}
