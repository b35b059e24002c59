#!/usr/bin/env bash
# Two builds of specbridge on the same command, strictly interleaved: A, B, B,
# A, A, B, … so that a machine whose speed drifts over seconds or minutes (a
# shared VM does) slows both alike. hyperfine with two commands runs all of one
# and then all of the other, which on such a machine measures the drift.
#
#   benches/ab.sh OLD_BIN NEW_BIN DIR 'validate'
#   PREPARE='bash restore.sh' RUNS=40 benches/ab.sh OLD NEW DIR 'resume latest --json'
#
# DIR is where the command runs (`-C DIR`); PREPARE runs before every timed run
# (untimed). Prints the median and mean of each build and the ratio of medians.
set -euo pipefail
[ $# -eq 4 ] || {
    echo "usage: $0 A_BIN B_BIN DIR 'ARGS'" >&2
    exit 2
}
a=$1 b=$2 dir=$3 args=$4
RUNS=${RUNS:-30}
PREPARE=${PREPARE:-true}
times=$(mktemp)
trap 'rm -f "$times"' EXIT

one() { # label bin
    bash -c "$PREPARE"
    local t0 t1
    t0=$(date +%s%N)
    # shellcheck disable=SC2086 # ARGS is a command line, split on purpose
    "$2" -C "$dir" $args >/dev/null 2>&1 || true
    t1=$(date +%s%N)
    echo "$1 $(((t1 - t0) / 1000))" >>"$times"
}

# One untimed run of each: caches warm for both.
one warm "$a"
one warm "$b"
: >"$times"
for i in $(seq "$RUNS"); do
    if [ $((i % 2)) -eq 1 ]; then
        one A "$a"
        one B "$b"
    else
        one B "$b"
        one A "$a"
    fi
done

awk '
    { t[$1, ++n[$1]] = $2 / 1000; sum[$1] += $2 / 1000 }
    function median(k,    i, j, v, m, tmp) {
        m = n[k]
        for (i = 1; i <= m; i++) v[i] = t[k, i]
        for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
            tmp = v[j]; v[j] = v[j - 1]; v[j - 1] = tmp
        }
        return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    END {
        ma = median("A"); mb = median("B")
        printf "A median %.1f ms, mean %.1f ms (%d runs)\n", ma, sum["A"] / n["A"], n["A"]
        printf "B median %.1f ms, mean %.1f ms (%d runs)\n", mb, sum["B"] / n["B"], n["B"]
        printf "B / A (medians): %.3f\n", mb / ma
    }
' "$times"
