#!/usr/bin/env bash
# agent.sh HOST COMMAND...: OpenMPI's launcher agent (plm_rsh_agent) for
# tests/multihost/run.sh: instead of ssh, runs COMMAND (one shell command
# line, as ssh would) inside the network namespace of HOST, named by
# $SPMD_MH_NS_<HOST with dots as underscores>.
set -u
host=$1
shift
var=SPMD_MH_NS_${host//./_}
ns=${!var:-}
[ -n "$ns" ] || { echo "agent.sh: no namespace for host '$host'" >&2; exit 255; }
echo "$host -> $ns: $*" >>"${SPMD_MH_LOG:-/dev/null}"
exec ip netns exec "$ns" sh -c "$*"
