#!/usr/bin/env bash
# checked.sh fails what it should: a sanitizer report from a command that
# exits 0, a failing command; and passes a clean one (gradcheck/checked).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$here/checked.sh"
fails=0
expect() { # expect pass|fail CMD...
  local want=$1 got=pass
  shift
  (checked "$@") > /dev/null 2>&1 || got=fail
  if [ "$got" = "$want" ]; then echo "ok   $want: $*"; else echo "FAIL $got, expected $want: $*"; fails=$((fails + 1)); fi
}
expect pass sh -c 'echo fine'
expect fail sh -c 'echo "a.c:3:5: runtime error: signed integer overflow" >&2'
expect fail sh -c 'echo "==1==ERROR: AddressSanitizer: heap-buffer-overflow" >&2'
expect fail sh -c 'echo fine; exit 3'
[ "$fails" = 0 ]
