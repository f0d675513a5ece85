#!/bin/sh
# expect_fail.sh PATTERN CMD...: CMD must exit non-zero (not by timeout) and
# its stderr must contain "spmd: error:" and match the extended regex PATTERN.
pattern=$1
shift
err=$(mktemp)
timeout 100 "$@" >/dev/null 2>"$err"
rc=$?
status=0
if [ "$rc" -eq 0 ]; then
    echo "FAIL: exit status 0, expected a failure"; status=1
elif [ "$rc" -eq 124 ]; then
    echo "FAIL: timed out (a rank hung)"; status=1
fi
if ! grep -q "spmd: error: \[rank [0-9]*\]" "$err"; then
    echo "FAIL: no 'spmd: error: [rank N]' line on stderr"; status=1
fi
if ! grep -Eq -e "$pattern" "$err"; then
    echo "FAIL: stderr does not match: $pattern"; status=1
fi
echo "exit status $rc; stderr:"
cat "$err"
rm -f "$err"
exit $status
