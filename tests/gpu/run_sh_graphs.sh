#!/usr/bin/env bash
# gpu/run_sh_graphs: run.sh's graphs part against fake programs (no GPU
# here): a bundle whose gpt_check prints the same numbers with and without
# graphs and whose step region replays after its capture passes; one whose
# numbers differ with graphs, or whose step region stays eager, fails.
#   run_sh_graphs.sh RUN_SH WORKDIR
set -euo pipefail
run=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
# fake NAME MODE: a bundle whose programs print like the flagship; MODE good,
# differ (graphs change a loss) or eager (the step region never replays)
fake() {
  local b=$work/$1 mode=$2
  mkdir -p "$b/progs" "$b/data"
  cp "$run" "$b/run.sh"
  for prog in gpt_check gpt_speed; do
    cat > "$b/progs/$prog" <<SH
#!/bin/sh
for s in 1 2 3 4 5 6 7 8; do
  loss=4.\${s}1
  [ "$mode" = differ ] && [ "\${SPMD_GRAPHS:-1}" = 1 ] && [ \$s = 5 ] && loss=4.49999
  echo "step \$s train \$loss lr 0.001 gnorm 1.5 ms/step 1\${SPMD_GRAPHS:-1}.5 tok/s 1000"
done
if [ "\${SPMD_GRAPHS:-1}" = 1 ]; then
  if [ "$mode" = eager ]; then
    echo "spmd: graph region gpt.spmd:293-304: captured, 0 replays, 7 eager iterations (note)" >&2
  else
    echo "spmd: graph region gpt.spmd:293-304: captured, 6 replays, 0 eager iterations (94 host numbers)" >&2
  fi
  echo "spmd: graph region gpt.spmd:317-317: captured, 0 replays, 0 eager iterations (0 host numbers)" >&2
fi
SH
    chmod +x "$b/progs/$prog"
  done
}
fails=0
check() { # NAME MODE WANT(ok|FAILED)
  fake "$1" "$2"
  local out
  out=$(bash "$work/$1/run.sh" --only graphs --timeout 60 2>&1 || true)
  if grep -q "^graphs: $3" <<<"$out"; then echo "ok: $2 -> graphs: $3"
  else fails=$((fails + 1)); echo "FAIL: $2 should give graphs: $3:"; tail -8 <<<"$out"; fi
}
check good good ok
check differ differ FAILED
check eager eager FAILED
[ $fails = 0 ] && echo "run_sh_graphs: 3 cases ok"
exit $((fails > 0))
