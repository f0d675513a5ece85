#!/usr/bin/env bash
# Installs the Debian packages spmdc needs, if any is missing (run as root,
# or with sudo available).  Sourced by main.sh and test.sh.
set -euo pipefail
SPMD_PACKAGES="cmake make gcc re2c bison libopenmpi-dev openmpi-bin libcriterion-dev
  libopenblas-dev libdnnl-dev pkg-config python3 python3-numpy"
missing=()
for p in $SPMD_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
