#!/usr/bin/env bash
# specbridge against Snakemake on the same generated DAGs of no-op stages
# (benches/gen-dag.sh), one core each (CONCURRENCY=n: n stages and n cores at
# once), interleaved run by run so that both see the same machine load; prints
# the median of each and their ratio.
#
#   benches/snakemake.sh --install      # first time: Snakemake into a venv (PyPI)
#   benches/snakemake.sh                # sizes 50 200 1000, shapes chain wide random
#   SIZES="50" RUNS=3 benches/snakemake.sh
#   WARMUP=0 benches/snakemake.sh       # no untimed first run of each tool
#   CONCURRENCY=2 SHAPES="wide random" benches/snakemake.sh
#   FLOOR=0 benches/snakemake.sh        # without the floor columns
#
# One at a time (CONCURRENCY=1, the default) and with a C compiler, the same N
# commands are also run from a plain loop (benches/group-floor.c, as in
# benches/dag.sh), interleaved with the two tools: "Snakemake ÷ floor" is the
# ratio an engine that cost nothing beyond its commands would reach in those
# minutes, the ceiling of the ratio column.
#
# The venv lives in the target folder (git-ignored); without --install a
# `snakemake` already on PATH is used.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-"50 200 1000"}
SHAPES=${SHAPES:-"chain wide random"}
RUNS=${RUNS:-5}
# Untimed runs of each tool on each DAG before the timed ones, as dag.sh's
# hyperfine warm-up: a new repository's first runs are the slowest here (a
# chain of 200 took 0.87 and 0.92 s in its first two runs, 0.56–0.59 s in its
# seventh and eighth, 2026-12-06 22:30, after an evening of large deletions).
WARMUP=${WARMUP:-1}
CONCURRENCY=${CONCURRENCY:-1}
venv=$(realpath -m "${CARGO_TARGET_DIR:-target}/snakemake-venv")

if [ "${1:-}" = "--install" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet snakemake
fi
if [ -x "$venv/bin/snakemake" ]; then
    snakemake=$venv/bin/snakemake
elif command -v snakemake >/dev/null; then
    snakemake=$(command -v snakemake)
else
    echo "no snakemake: run benches/snakemake.sh --install (installs it into $venv)" >&2
    exit 2
fi

# BIN=path times another build (an older one, to compare) instead of this tree's.
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet -p specbridge
fi
bin=$(realpath "${BIN:-${CARGO_TARGET_DIR:-target}/release/specbridge}")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# What a run leaves is moved here rather than deleted, and goes with the
# scratch folder at the end (below).
aside=$scratch/aside
mkdir -p "$aside"
away() { mv "$@" "$(mktemp -d -p "$aside")"; }

# The floor loop, where it applies (above).
floor=""
if [ "${FLOOR:-1}" != 0 ] && [ "$CONCURRENCY" = 1 ] && command -v cc >/dev/null; then
    cc -O2 -o "$scratch/group-floor" benches/group-floor.c
    floor=$scratch/group-floor
fi

now() { date +%s%N; }
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "Snakemake $("$snakemake" --version), specbridge $("$bin" --version | awk '{ print $NF }'), $RUNS interleaved runs each after $WARMUP untimed, $CONCURRENCY at once"
echo
if [ -n "$floor" ]; then
    echo "| shape | N | specbridge | Snakemake | ratio | floor | Snakemake ÷ floor |"
    echo "|---|---|---|---|---|---|---|"
else
    echo "| shape | N | specbridge | Snakemake | ratio |"
    echo "|---|---|---|---|---|"
fi
for shape in $SHAPES; do
    for n in $SIZES; do
        sb=$scratch/sb-$shape-$n
        sm=$scratch/sm-$shape-$n
        mkdir -p "$sb/out" "$sm/out"
        git -C "$sb" init -q
        git -C "$sb" config user.email bench@example.com
        git -C "$sb" config user.name bench
        echo "out/" >"$sb/.gitignore"
        benches/gen-dag.sh "$shape" "$n" >"$sb/specbridge.yaml"
        git -C "$sb" add -A
        git -C "$sb" commit -qm pipeline
        benches/gen-dag.sh "$shape" "$n" snakemake >"$sm/Snakefile"
        fl=$scratch/floor-$shape-$n
        mkdir -p "$fl/out"
        : >"$scratch/sb.times"
        : >"$scratch/sm.times"
        : >"$scratch/fl.times"
        for i in $(seq $((WARMUP + RUNS))); do
            # Earlier runs are kept, as a user keeps them and as benches/dag.sh
            # does, and each tool's last output and state are moved aside, not
            # deleted: on ext4 without a journal the inode allocator reads past
            # every inode freed in the last half minute, so deleting hundreds of
            # files right before a run makes its own new files slower to create.
            away "$sb/out" && mkdir "$sb/out"
            # Both tools' output goes nowhere (a `sandbox: off` stage warns on
            # stderr each run); specbridge's stderr is kept to say why it failed.
            t0=$(now)
            if ! "$bin" -C "$sb" run --concurrency "$CONCURRENCY" --json >/dev/null 2>"$scratch/sb.err"; then
                cat "$scratch/sb.err" >&2
                exit 1
            fi
            [ "$i" -le "$WARMUP" ] || echo $(($(now) - t0)) >>"$scratch/sb.times"
            if [ -d "$sm/.snakemake" ]; then away "$sm/.snakemake"; fi
            away "$sm/out" && mkdir "$sm/out"
            t0=$(now)
            (cd "$sm" && "$snakemake" --cores "$CONCURRENCY" --quiet all >/dev/null 2>&1)
            [ "$i" -le "$WARMUP" ] || echo $(($(now) - t0)) >>"$scratch/sm.times"
            if [ -n "$floor" ]; then
                away "$fl/out" && mkdir "$fl/out"
                t0=$(now)
                (cd "$fl" && "$floor" "$n" sh -c "true && touch out/s{}" >/dev/null 2>&1)
                [ "$i" -le "$WARMUP" ] || echo $(($(now) - t0)) >>"$scratch/fl.times"
            fi
        done
        a=$(median <"$scratch/sb.times")
        b=$(median <"$scratch/sm.times")
        row=$(awk -v s="$shape" -v n="$n" -v a="$a" -v b="$b" \
            'BEGIN { printf "| %s | %d | %.3f s | %.3f s | %.1f× |", s, n, a / 1e9, b / 1e9, b / a }')
        if [ -n "$floor" ]; then
            f=$(median <"$scratch/fl.times")
            row=$row$(awk -v f="$f" -v b="$b" 'BEGIN { printf " %.3f s | %.1f× |", f / 1e9, b / f }')
        fi
        echo "$row"
    done
done
