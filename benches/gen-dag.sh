#!/bin/sh
# Writes a pipeline of N no-op check stages in one of three shapes, for the DAG
# benchmarks (benches/dag.sh, benches/snakemake.sh).
#
#   benches/gen-dag.sh SHAPE N [specbridge|snakemake] > FILE
#
# SHAPE: chain  (s1 needs s0, s2 needs s1, …),
#        wide   (s0, then every other stage needs s0 only),
#        random (each stage needs up to 3 earlier stages, fixed seed 7).
# Each stage runs `sh -c 'true && touch out/s<i>'` (out/ is git-ignored), the
# command the Snakemake rules run too. SANDBOX=off writes `sandbox: off` on every
# check stage: bubblewrap's namespaces cost more per stage than the engine
# (docs/performance.md), and Snakemake runs its rules unconfined.
set -eu
shape=$1
n=$2
flavour=${3:-specbridge}
case "$shape" in chain | wide | random) ;; *)
    echo "unknown shape $shape (chain, wide, random)" >&2
    exit 2
    ;;
esac
awk -v shape="$shape" -v n="$n" -v flavour="$flavour" -v sandbox="${SANDBOX:-}" '
function needs(i,    k, j, seen, out, c) {
    if (i == 0) return ""
    if (shape == "chain") return "s" (i - 1)
    if (shape == "wide") return "s0"
    c = 1 + int(rand() * 3)
    out = ""
    split("", seen)
    for (k = 0; k < c; k++) {
        j = int(rand() * i)
        if (!(j in seen)) { seen[j] = 1; out = out (out == "" ? "" : " ") "s" j }
    }
    return out
}
BEGIN {
    srand(7)
    if (flavour == "specbridge") {
        print "version: 1"
        print "name: bench-" shape "-" n
        print "stages:"
    } else {
        printf "rule all:\n    input: expand(\"out/s{i}\", i=range(%d))\n\n", n
    }
    for (i = 0; i < n; i++) {
        d = needs(i)
        m = split(d, ds, " ")
        if (flavour == "specbridge") {
            list = ""
            for (k = 1; k <= m; k++) list = list (k > 1 ? ", " : "") ds[k]
            extra = sandbox == "off" ? ", sandbox: off" : ""
            printf "  - { id: s%d, kind: check, needs: [%s], argv: [sh, -c, \"true && touch out/s%d\"]%s }\n", i, list, i, extra
        } else {
            list = ""
            for (k = 1; k <= m; k++) list = list (k > 1 ? ", " : "") "\"out/" ds[k] "\""
            printf "rule s%d:\n    input: [%s]\n    output: \"out/s%d\"\n    shell: \"true && touch out/s%d\"\n\n", i, list, i, i
        }
    }
}'
