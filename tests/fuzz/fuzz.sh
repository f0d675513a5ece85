#!/usr/bin/env bash
# Fuzzes spmdc's phases in process with libFuzzer (build with CC=clang and
# -DSPMD_FUZZ=ON; see tests/README.md).
#   fuzz.sh FUZZER SECONDS [WORKDIR [JOBS]]   a campaign: seeds from corpus/ and
#        regress/, the dictionary beside FUZZER; new inputs go to WORKDIR (a
#        temporary one by default), findings to ./fuzz-findings/
#        FUZZ_KEEP_GOING=1: save each finding and go on (long campaigns)
#   fuzz.sh --seeds FUZZER    rebuilds corpus/ from every program under tests/,
#        examples/ and stdlib/, keeping those that add coverage (-merge=1)
# Exits 1 on a finding (crash, sanitizer report, leak, timeout, >2 GB).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

if [ "${1:-}" = "--seeds" ]; then
  fuzzer=$2
  all=$(mktemp -d)
  trap 'rm -rf "$all"' EXIT
  i=0
  while IFS= read -r f; do
    cp "$f" "$all/$(printf %04d $i)-$(basename "$f")"
    i=$((i + 1))
  done < <(find "$top/tests" "$top/examples" "$top/stdlib" -name '*.spmd' -not -path '*/fuzz/*' | sort)
  rm -rf "$here/corpus.new" && mkdir "$here/corpus.new"
  "$fuzzer" -merge=1 -max_len=65536 -timeout=30 "$here/corpus.new" "$all"
  rm -rf "$here/corpus" && mv "$here/corpus.new" "$here/corpus"
  echo "corpus: $(ls "$here/corpus" | wc -l) seeds from $i programs"
  exit 0
fi

fuzzer=$1 seconds=$2 work=${3:-} jobs=${4:-1}
dict="$(dirname "$fuzzer")/spmd.dict"
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work" fuzz-findings
opts=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192
      -dict="$dict" -artifact_prefix="$PWD/fuzz-findings/" -print_final_stats=1)
if [ "${FUZZ_KEEP_GOING:-0}" = 1 ] || [ "$jobs" -gt 1 ]; then
  # fork mode: JOBS fuzzing processes sharing WORKDIR; with FUZZ_KEEP_GOING=1
  # a finding is saved and the campaign goes on (for long runs)
  opts+=(-fork="$jobs")
  [ "${FUZZ_KEEP_GOING:-0}" = 1 ] && opts+=(-ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-}:print_stacktrace=1:halt_on_error=1
status=0
"$fuzzer" "${opts[@]}" "$work" "$here/corpus" "$here/regress" || status=$?
if [ "$status" -ne 0 ]; then
  echo "fuzz: FINDING (exit $status); inputs in $PWD/fuzz-findings:" >&2
  ls -l fuzz-findings >&2
  echo "replay one with: $fuzzer FILE; add it to tests/fuzz/regress/ with the fix" >&2
  exit 1
fi
echo "fuzz: no finding in ${seconds}s"
