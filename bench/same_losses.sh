#!/bin/sh
# same_losses.sh A.txt B.txt RTOL [NAME_A NAME_B]: the `step S loss L` lines
# of two runs agree: the same steps in the same order, and every loss to RTOL
# relative (to max(|a|, |b|, 1e-30)). Other lines are ignored. Prints the
# differing lines and exits 1 on a mismatch or when either run printed none.
a=$1 b=$2 rtol=$3 na=${4:-$1} nb=${5:-$2}
[ $# -ge 3 ] || { echo "usage: same_losses.sh A.txt B.txt RTOL [NAME_A NAME_B]" >&2; exit 2; }
la=$(mktemp) lb=$(mktemp)
trap 'rm -f "$la" "$lb"' EXIT
grep '^step [0-9][0-9]* loss ' "$a" > "$la" || true
grep '^step [0-9][0-9]* loss ' "$b" > "$lb" || true
awk -v rtol="$rtol" -v na="$na" -v nb="$nb" -v fa="$la" -v fb="$lb" '
function abs(v) { return v < 0 ? -v : v }
BEGIN {
    na_lines = 0; while ((getline l < fa) > 0) A[++na_lines] = l
    nb_lines = 0; while ((getline l < fb) > 0) Bl[++nb_lines] = l
    bad = 0
    num = "^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$"
    if (na_lines == 0 || nb_lines == 0) {
        printf "no `step S loss L` lines: %s printed %d, %s printed %d\n", na, na_lines, nb, nb_lines
        exit 1
    }
    if (na_lines != nb_lines) {
        printf "%s printed %d loss lines, %s printed %d\n", na, na_lines, nb, nb_lines; bad = 1
    }
    n = na_lines < nb_lines ? na_lines : nb_lines
    worst = 0
    for (i = 1; i <= n; i++) {
        split(A[i], x, " "); split(Bl[i], y, " ")
        if (x[2] != y[2]) { printf "line %d: %s has step %s, %s has step %s\n", i, na, x[2], nb, y[2]; bad = 1; continue }
        if (x[4] !~ num || y[4] !~ num) {
            printf "step %s: loss %s (%s) vs %s (%s): not a finite number\n", x[2], x[4], na, y[4], nb; bad = 1; continue
        }
        m = abs(x[4]); if (abs(y[4]) > m) m = abs(y[4]); if (m < 1e-30) m = 1e-30
        rel = abs(x[4] - y[4]) / m
        if (rel > worst) worst = rel
        if (rel > rtol) {
            printf "step %s: loss %s (%s) vs %s (%s): relative difference %.3g > %g\n", x[2], x[4], na, y[4], nb, rel, rtol
            bad = 1
        }
    }
    if (!bad) printf "same losses (%d lines, largest relative difference %.3g <= %g): %s, %s\n", n, worst, rtol, na, nb
    exit bad
}'
