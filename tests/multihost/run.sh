#!/usr/bin/env bash
# run.sh SPMDC PROGRAM.spmd MESH: trains PROGRAM on two "hosts", each a Linux
# network namespace, joined by a veth pair (10.77.0.1 and 10.77.0.2, set up
# only inside the namespaces this script creates), with OpenMPI over TCP: a
# hostfile of the two addresses, `--mca btl tcp,self`, and as the launcher
# agent (plm_rsh_agent) agent.sh, which enters the other namespace with
# `ip netns exec` instead of ssh.  The losses must equal a single-host run's.
# Exit 0 pass, 1 fail, 77 skipped (no CAP_SYS_ADMIN for namespaces, no ip(8)).
# The namespaces (and the veth pair with them) are deleted on every exit.
set -uo pipefail
spmdc=$1 prog=$2 mesh=${3:-dp=2,tp=2}
here=$(cd "$(dirname "$0")" && pwd)
tag=$$
nsa=spmd-mh-$tag-a nsb=spmd-mh-$tag-b
work=$(mktemp -d)

cleanup() {
  ip netns pids "$nsa" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns pids "$nsb" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$nsa" 2>/dev/null
  ip netns del "$nsb" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

command -v ip >/dev/null || skip "no ip(8) (Debian package iproute2)"
ip netns add "$nsa" 2>"$work/err" || skip "cannot create a network namespace (needs CAP_SYS_ADMIN): $(cat "$work/err")"
ip netns add "$nsb" || fail "cannot create a second network namespace"
ip link add "mh${tag}a" type veth peer name "mh${tag}b" 2>"$work/err" ||
  skip "cannot create a veth pair: $(cat "$work/err")"
ip link set "mh${tag}a" netns "$nsa" && ip link set "mh${tag}b" netns "$nsb" || fail "cannot move the veth ends"
for side in a:1 b:2; do
  ns=spmd-mh-$tag-${side%%:*} dev=mh$tag${side%%:*}
  ip netns exec "$ns" ip addr add "10.77.0.${side##*:}/24" dev "$dev" &&
    ip netns exec "$ns" ip link set "$dev" up &&
    ip netns exec "$ns" ip link set lo up || fail "cannot configure $ns"
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
"$spmdc" "$prog" -o "$work/prog" || fail "spmdc failed"
n=1
for kv in ${mesh//,/ }; do n=$((n * ${kv#*=})); done

# the reference: one host
timeout 120 mpirun --oversubscribe -np "$n" "$work/prog" --mesh "$mesh" >"$work/one.out" 2>"$work/one.err" ||
  fail "the single-host run failed: $(tail -20 "$work/one.err")"

# two hosts: mpirun in namespace a starts the ranks on 10.77.0.2 through agent.sh
printf '10.77.0.1 slots=%d\n10.77.0.2 slots=%d\n' $((n / 2)) $((n - n / 2)) >"$work/hosts"
export SPMD_MH_NS_10_77_0_2=$nsb SPMD_MH_NS_10_77_0_1=$nsa SPMD_MH_LOG=$work/agent.log
timeout 180 ip netns exec "$nsa" mpirun --hostfile "$work/hosts" -np "$n" --map-by node \
  --mca plm_rsh_agent "$here/agent.sh" --mca btl tcp,self \
  --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 \
  -x OPENBLAS_NUM_THREADS -x ASAN_OPTIONS \
  "$work/prog" --mesh "$mesh" >"$work/two.out" 2>"$work/two.err" ||
  fail "the two-host run failed: $(tail -30 "$work/two.err")"
grep -q "10.77.0.2" "$work/agent.log" 2>/dev/null || fail "agent.sh never started anything on 10.77.0.2"

echo "== agent.sh started: $(head -c 300 "$work/agent.log")"
python3 - "$work/one.out" "$work/two.out" <<'PY' || exit 1
import re, sys
one, two = (open(f).read().splitlines() for f in sys.argv[1:3])
num = re.compile(r'[-+]?\d+\.?\d*(?:[eE][-+]?\d+)?')
losses = [l for l in one if 'loss' in l]
if not losses or len(one) != len(two):
    sys.exit('FAIL: %d lines on one host, %d on two:\n%s\n---\n%s' % (len(one), len(two), '\n'.join(one), '\n'.join(two)))
for a, b in zip(one, two):
    xa, xb = num.findall(a), num.findall(b)
    if num.sub('#', a) != num.sub('#', b) or len(xa) != len(xb) or any(
            abs(float(p) - float(q)) > 1e-5 * max(abs(float(p)), abs(float(q)), 1e-30) for p, q in zip(xa, xb)):
        sys.exit('FAIL: one host: %r, two hosts: %r' % (a, b))
print('ok: %d lines, the same losses on two hosts over TCP as on one (%s ... %s)' % (len(one), losses[0], losses[-1]))
PY
