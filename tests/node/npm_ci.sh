#!/usr/bin/env bash
# npm_ci.sh DEST: installs the npm packages of tests/node/package-lock.json
# into DEST/node_modules with `npm ci` (once per lock file), for the tests
# that run under node: the editor grammar test and the SARIF schema check.
# Without node and npm this fails, loudly: scripts/deps.sh installs them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=$1
for tool in node npm; do
  if ! command -v "$tool" > /dev/null; then
    echo "FAIL: '$tool' is not installed: the editor grammar and SARIF schema tests need Node.js 18+ and npm" >&2
    echo "      (bash scripts/deps.sh installs Debian's nodejs and npm)" >&2
    exit 1
  fi
done
mkdir -p "$dest"
if [ -d "$dest/node_modules" ] && cmp -s "$here/package-lock.json" "$dest/package-lock.json"; then
  echo "node_modules are up to date ($dest)"
  exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$dest/"
cd "$dest"
npm ci --no-audit --no-fund --loglevel=error
echo "installed: $(ls node_modules | tr '\n' ' ')"
