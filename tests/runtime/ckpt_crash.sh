#!/bin/sh
# ckpt_crash.sh BIN DIR PYTHON MESH MPIRUN...: a rank killed while a checkpoint is
# being saved (after one field; or with every file written, just before the
# rename) leaves the previous checkpoint in DIR complete and loadable; the
# next save replaces it.
bin=$1; dir=$2; py=$3; mesh=$4; shift 4
rm -rf "$dir" "$dir".*
run() { timeout 100 "$@" >"$dir.out" 2>&1; }
fail=0
check() { # check DESCRIPTION WANT(ok|fail) RC
    if [ "$2" = ok ] && [ "$3" -ne 0 ]; then echo "FAIL: $1 (exit $3)"; cat "$dir.out"; fail=1;
    elif [ "$2" = fail ] && { [ "$3" -eq 0 ] || [ "$3" -eq 124 ]; }; then
        echo "FAIL: $1 should have died, exit $3"; cat "$dir.out"; fail=1;
    else echo "ok: $1"; fi
}
run "$@" "$bin" save "$dir" 1 --mesh "$mesh"; check "save seed 1" ok $?
run "$@" "$bin" crash_field "$dir" 2 --mesh "$mesh"; check "last rank killed after the first field" fail $?
run "$@" "$bin" load "$dir" 1 --mesh "$mesh"; check "the old checkpoint loads" ok $?
ls -d "$dir".tmp.* >/dev/null 2>&1 && echo "ok: the partial save stayed under a temporary name" \
    || { echo "FAIL: no temporary directory left by the killed save"; fail=1; }
run "$@" "$bin" crash_commit "$dir" 3 --mesh "$mesh"; check "rank 0 killed before the rename" fail $?
run "$@" "$bin" load "$dir" 1 --mesh "$mesh"; check "the old checkpoint still loads" ok $?
if [ -n "$py" ]; then
    run "$py" "$(dirname "$0")/ckpt_numpy.py" "$dir" 1; check "numpy reads the old checkpoint" ok $?
fi
run "$@" "$bin" save "$dir" 4 --mesh "$mesh"; check "a new save replaces it" ok $?
run "$@" "$bin" load "$dir" 4 --mesh "$mesh"; check "the new checkpoint loads" ok $?
rm -f "$dir.out" "$dir.err"
exit $fail
