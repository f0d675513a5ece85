#!/bin/sh
# resume.sh SPMDC PYTHON WORKDIR MPIRUN...: a record checkpoint in use
# (resume.spmd). On mesh dp=2,tp=2 a run trains 10 steps, saving its whole
# state at step 5 (ck/mid) and at the end (ck/final). Then, from ck/mid:
#  - resuming on the same mesh ends with the same bytes in every file;
#  - resuming on 1 rank, on dp=1,tp=4 and on tp=3 (dp=1 and 2: uneven
#    shards, SPEC 4: the sequence of 8 and the hidden width of 32 split
#    3, 3, 2 and 11, 11, 10)
#    ends within float tolerance;
#  - NumPy reads every file of the checkpoint with its global shape;
#  - a run killed (SIGKILL, the whole job) while it saves over ck/mid again
#    and again leaves a checkpoint that a new run resumes from.
spmdc=$1; py=$2; work=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work" || exit 1
fail=0
say() { echo "$*"; }
bad() { echo "FAIL: $*"; fail=1; }
go() { # go DIR NP MESH PROG
    (cd "$1" && timeout 120 "$MPIRUN" ${MPIARGS} -np "$2" "$4" --mesh "$3" >out 2>err)
}
MPIRUN=$1; shift; MPIARGS="$*"
# resumed runs are compared byte for byte with the first one, so every run
# uses the same f32 GEMM library: pinned, not timed afresh (runtime/gemm.c)
SPMD_GEMM=${SPMD_GEMM:-dnnl}; export SPMD_GEMM
"$spmdc" "$here/resume.spmd" -o "$work/prog" || { bad "compiling resume.spmd"; exit 1; }
"$spmdc" -D SAVES=1000 "$here/resume.spmd" -o "$work/prog_saves" || { bad "compiling with SAVES"; exit 1; }

mkdir "$work/a"
go "$work/a" 4 dp=2,tp=2 "$work/prog" || { bad "the first run"; cat "$work/a/err"; exit 1; }
[ -d "$work/a/ck/mid" ] && [ -d "$work/a/ck/final" ] || { bad "no ck/mid or ck/final"; exit 1; }
ls -d "$work"/a/ck/*.tmp.* >/dev/null 2>&1 && bad "temporary directories left behind"
"$py" "$here/check.py" shapes "$work/a/ck/mid" || bad "NumPy reading ck/mid"

resume() { # resume NAME NP MESH: a new run from a copy of a's ck/mid
    mkdir -p "$work/$1/ck" && cp -r "$work/a/ck/mid" "$work/$1/ck/"
    go "$work/$1" "$2" "$3" "$work/prog" || { bad "resuming on $3"; cat "$work/$1/err"; return 1; }
    grep -q "^resumed at step 5$" "$work/$1/out" || { bad "$3 did not resume from ck/mid"; return 1; }
}
if resume same 4 dp=2,tp=2; then
    if diff -r "$work/a/ck/final" "$work/same/ck/final" >/dev/null; then
        say "ok: resumed on the same mesh, every file of ck/final byte-identical"
    else
        bad "resumed on the same mesh, but ck/final differs"
    fi
    # the losses of steps 5..9 are those of the uninterrupted run, to the digit
    grep '^step [5-9] ' "$work/a/out" >"$work/a/tail"
    grep '^step ' "$work/same/out" | cmp -s - "$work/a/tail" || bad "the resumed losses differ"
fi
for m in "1 dp=1,tp=1" "4 dp=1,tp=4" "3 dp=1,tp=3" "6 dp=2,tp=3"; do
    set -- $m
    name=$(echo "$2" | tr ',=' '__')
    resume "$name" "$1" "$2" &&
        "$py" "$here/check.py" close "$work/a/ck/final" "$work/$name/ck/final" 1e-4 ||
        bad "resumed on $2"
done

# killed while saving: the job saves ck/mid over and over; SIGKILL it whole
mkdir -p "$work/k"
(cd "$work/k" && exec setsid timeout 300 "$MPIRUN" ${MPIARGS} -np 4 "$work/prog_saves" --mesh dp=2,tp=2 >out 2>err) &
job=$!
# it saves ck/final just before the loop of saves: once that is there, let
# it save for a while (a save takes tens of milliseconds here), then kill
n=0
while [ $n -lt 1200 ] && [ ! -d "$work/k/ck/final" ]; do
    sleep 0.1; n=$((n + 1))
done
sleep 1.5
# setsid made the job's pid its process group: mpirun and every rank
"$py" -c "import os, signal; os.killpg($job, signal.SIGKILL)" || bad "could not kill the job"
wait $job 2>/dev/null
last=$(grep '^saved ' "$work/k/out" | tail -1)
say "killed the saving job after '$last'"
[ -n "$last" ] || bad "the saving job never saved"
rm -rf "$work/k2"; mkdir -p "$work/k2/ck"
cp -r "$work/k/ck/mid" "$work/k2/ck/" 2>/dev/null || bad "no ck/mid after the kill"
go "$work/k2" 4 dp=2,tp=2 "$work/prog" && grep -q "^resumed at step 5$" "$work/k2/out" &&
    say "ok: the checkpoint left by the killed job loads ($(ls -d "$work"/k/ck/mid.tmp.* 2>/dev/null | wc -l) partial save left aside)" ||
    { bad "resuming after the kill"; cat "$work/k2/err"; }
[ $fail -eq 0 ] && say "PASS"
exit $fail
