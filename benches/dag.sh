#!/usr/bin/env bash
# The engine's own cost on DAGs of no-op check stages (docs/performance.md):
# per-stage cost above the fork floor for chain, wide and random DAGs, start-up,
# validate and dry-run, no-op resume, `runs show`, and peak RSS.
#
#   benches/dag.sh                                  # sizes 50 200 1000 10000
#   SIZES="50 200" SHAPES=chain RUNS=3 benches/dag.sh
#   SANDBOX=off SIZES= PLAN_SHAPES="chain wide random" PLAN_SIZES="1000 5000 10000" SHOW_SIZES= benches/dag.sh
#
# Needs hyperfine (Debian package `hyperfine`) and GNU time (`/usr/bin/time`);
# with a C compiler the floor loop is benches/group-floor.c (FLOOR=xargs: `xargs`).
# Prints Markdown tables; every number is a hyperfine mean over RUNS runs.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES-"50 200 1000 10000"}
SHAPES=${SHAPES:-"chain wide random"}
RUNS=${RUNS:-5}
# Untimed runs before the timed ones (0 for the largest sizes, where one run
# takes minutes and the caches are warm anyway).
WARMUP=${WARMUP:-1}
# validate and dry-run sizes; `runs show` and no-op resume need a full run first
# (an empty list leaves the rows out).
PLAN_SIZES=${PLAN_SIZES-"1000 10000"}
# The shapes validated and planned at those sizes: a quadratic step can hide in
# one shape only (a stage that all others need made validation quadratic).
PLAN_SHAPES=${PLAN_SHAPES:-random}
SHOW_SIZES=${SHOW_SIZES-"200 1000"}
command -v hyperfine >/dev/null || {
    echo "hyperfine is missing: apt-get install hyperfine" >&2
    exit 2
}

# BIN=path times another build (an older one, to compare) instead of this tree's.
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet -p specbridge
fi
bin=$(realpath "${BIN:-${CARGO_TARGET_DIR:-target}/release/specbridge}")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# A committed repository holding a generated pipeline.
repo() { # shape n
    local d=$scratch/$1-$2
    mkdir -p "$d/out"
    git -C "$d" init -q
    git -C "$d" config user.email bench@example.com
    git -C "$d" config user.name bench
    echo "out/" >"$d/.gitignore"
    benches/gen-dag.sh "$1" "$2" >"$d/specbridge.yaml"
    git -C "$d" add -A
    git -C "$d" commit -qm pipeline
    echo "$d"
}

# Mean seconds of a command (hyperfine), after `prepare` before each run. The
# mean user + system CPU seconds of the last call are kept in $scratch/cpu: on a
# loaded machine wall time mostly measures the others (docs/performance.md).
mean() { # prepare command
    local csv=$scratch/h.csv
    hyperfine --style none --warmup "$WARMUP" --runs "$RUNS" --prepare "$1" \
        --command-name timed --export-csv "$csv" "$2" >/dev/null 2>&1
    awk -F, 'NR == 2 { print $5 + $6 }' "$csv" >"$scratch/cpu"
    awk -F, 'NR == 2 { print $2 }' "$csv"
}

# " (CPU n ms)" of the last `mean`.
cpu() { awk '{ printf " (CPU %.1f ms)", $1 * 1000 }' "$scratch/cpu"; }

# Peak resident set size in MiB of one run of a command.
rss() { # command…
    /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1 | awk '{ printf "%.1f", $1 / 1024 }'
}

ms() { awk -v s="$1" 'BEGIN { printf "%.1f", s * 1000 }'; }

# The median of a file of nanosecond counts, one a line, in seconds.
median_s() {
    sort -n "$1" | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m / 1e9 }'
}

# Before each timed run: a fresh out/ (every stage creates its file, as in the
# floor below). Nothing is deleted while the rounds run: the old out/ is moved
# aside, into a folder removed with the scratch one at the end, and earlier
# runs are kept, as a user keeps them. On ext4 without a journal the inode
# allocator reads past every inode freed in the last half minute, so files
# deleted right before a run make the run's new files slower to create, the
# more so for the side that creates more of them (docs/performance.md).
aside=$scratch/aside
mkdir -p "$aside"
clean() { echo "mv $1/out \$(mktemp -d -p $aside) && mkdir $1/out"; }
# The same, now.
fresh_out() { eval "$(clean "$1")"; }

one=$(repo chain 1)
t_one=$(mean "$(clean "$one")" "$bin -C $one run --json")
c_one=$(cpu)
four=$(repo wide 4)
t_four=$(mean "$(clean "$four")" "$bin -C $four run --json")
c_four=$(cpu)
# The fork floor: the same command spawned from a plain loop, creating the same
# files. A confined stage's floor wraps it in the bubblewrap argv the engine
# recorded for the one-stage run (process.json, `sandbox.wrapperArgv`), so that
# "above the floor" is the engine's own cost whatever the confinement.
floor_n=200
floor_dir=$scratch/floor
# The folders the engine's argv binds read-only must exist in the floor's too.
mkdir -p "$floor_dir/out" "$floor_dir/.git" "$floor_dir/.specbridge"
# The loop is benches/group-floor.c where a C compiler is found: one fork and
# exec a stage, and the next only once every process the last one left has
# ended, as the engine waits for a stage's whole process group (`xargs` waits
# for its child only, which under bubblewrap is the outer of its two
# processes, and costs more a command of its own). FLOOR=xargs uses `xargs`,
# as this script did before; its floor is timed beside the other either way.
looper=xargs
if [ "${FLOOR:-}" != xargs ] && command -v cc >/dev/null; then
    cc -O2 -o "$scratch/group-floor" benches/group-floor.c
    looper=group-floor
fi
floor_loop() { # n wrapper…
    local n=$1 w=""
    shift
    [ $# -gt 0 ] && w="$* "
    if [ "$looper" = group-floor ]; then
        echo "sh -c 'cd $floor_dir && $scratch/group-floor $n $w sh -c \"true && touch out/s{}\"'"
    else
        echo "sh -c 'cd $floor_dir && seq $n | xargs -I{} $w sh -c \"true && touch out/s{}\"'"
    fi
}
# Seconds a command of a floor loop of floor_n that took $1 seconds; " (CPU n
# ms)" a command of the last `mean`.
per_command() { awk -v t="$1" -v n="$floor_n" 'BEGIN { print t / n }'; }
cpu_per_command() { awk -v n="$floor_n" '{ printf " (CPU %.2f ms)", $1 * 1000 / n }' "$scratch/cpu"; }
# The `xargs` loop of earlier tables, timed beside group-floor's: a table row,
# nothing when `xargs` is the loop anyway.
xargs_row() { # label wrapper…
    local label=$1 t
    shift
    [ "$looper" = group-floor ] || return 0
    t=$(mean "$(clean "$floor_dir")" "$(looper=xargs floor_loop "$floor_n" "$@")")
    echo "| $label | $(ms "$(per_command "$t")") ms$(cpu_per_command) |"
}
t_floor=$(mean "$(clean "$floor_dir")" "$(floor_loop "$floor_n")")
c_floor=$(cpu_per_command)
floor=$(per_command "$t_floor")
xfloor_row=$(xargs_row "the same from \`xargs\` (the floor of earlier tables)")
wrapper=$(jq -r '.sandbox.wrapperArgv // [] | join(" ")' \
    "$(ls -d "$one"/.specbridge/runs/*/stages/s0/attempt-001 | head -1)/process.json")
floor_kind="unconfined"
if [ -n "$wrapper" ]; then
    # The recorded argv binds the one-stage repository; bind the floor's instead.
    wrapper=${wrapper//$one/$floor_dir}
    t_cfloor=$(mean "$(clean "$floor_dir")" "$(floor_loop "$floor_n" "$wrapper")")
    c_cfloor=$(cpu_per_command)
    cfloor=$(per_command "$t_cfloor")
    floor_kind="confined"
    xcfloor_row=$(xargs_row "the same from \`xargs\`" "$wrapper")
fi
# One row of the per-stage table: the run of N stages and the floor loop of the
# same N, one right after the other, RUNS times (after WARMUP untimed pairs).
# This machine's speed moves by a fifth between minutes; a floor timed minutes
# before its row measured that drift, not the engine. Prints the medians of the
# run and of the floor, in seconds; GNU time appends each run's peak RSS and
# CPU seconds to $scratch/rss.
pair() { # dir n
    local d=$1 n=$2 i t0 t1 t2 t3 floor_cmd
    floor_cmd=$(floor_loop "$n" ${wrapper:+"$wrapper"})
    : >"$scratch/runs"
    : >"$scratch/floors"
    : >"$scratch/rss"
    for i in $(seq $((WARMUP + RUNS))); do
        fresh_out "$d"
        t0=$(date +%s%N)
        /usr/bin/time -f "%M %U %S" -a -o "$scratch/rss" \
            "$bin" -C "$d" run --concurrency 1 --json >/dev/null 2>&1 || true
        t1=$(date +%s%N)
        fresh_out "$floor_dir"
        t2=$(date +%s%N)
        bash -c "$floor_cmd" >/dev/null 2>&1
        t3=$(date +%s%N)
        if [ "$i" -gt "$WARMUP" ]; then
            echo $((t1 - t0)) >>"$scratch/runs"
            echo $((t3 - t2)) >>"$scratch/floors"
        fi
    done
    echo "$(median_s "$scratch/runs") $(median_s "$scratch/floors")"
}

echo "## Fixed costs"
echo
echo "| what | mean (CPU user + sys) |"
echo "|---|---|"
echo "| fork floor per stage (\`sh -c 'true && touch'\` from a loop, \`$looper\`) | $(ms "$floor") ms$c_floor |"
if [ -n "$xfloor_row" ]; then echo "$xfloor_row"; fi
if [ "$floor_kind" = confined ]; then
    echo "| confined fork floor (the same in the engine's \`bwrap\` argv) | $(ms "$cfloor") ms$c_cfloor |"
    if [ -n "$xcfloor_row" ]; then echo "$xcfloor_row"; fi
    floor=$cfloor
fi
echo "| run of 1 check stage | $(ms "$t_one") ms$c_one |"
echo "| run of 4 check stages (wide) | $(ms "$t_four") ms$c_four |"
echo "| start-up of the 4-stage run (less 4 × $floor_kind floor) | $(ms "$(awk -v t="$t_four" -v f="$floor" 'BEGIN { print t - 4 * f }')") ms |"
echo
echo "## Per-stage cost (run of N check stages, concurrency 1)"
echo
echo "Medians of $RUNS runs, each followed by the $floor_kind floor loop (\`$looper\`) of the same N."
echo
echo "| shape | N | run (CPU) | per stage | floor per stage | above it | peak RSS |"
echo "|---|---|---|---|---|---|---|"
for shape in $SHAPES; do
    for n in $SIZES; do
        d=$(repo "$shape" "$n")
        read -r t tf < <(pair "$d" "$n")
        # Peak RSS and CPU from the runs themselves, so that a large DAG is not
        # run once more only to measure them.
        r=$(sort -n "$scratch/rss" | tail -1 | awk '{ printf "%.1f", $1 / 1024 }')
        c=$(tail -n "$RUNS" "$scratch/rss" | awk '{ s += $2 + $3 } END { printf " (CPU %.1f ms)", s * 1000 / NR }')
        per=$(awk -v t="$t" -v o="$t_one" -v n="$n" 'BEGIN { print (t - o) / (n - 1) }')
        f=$(awk -v t="$tf" -v n="$n" 'BEGIN { print t / n }')
        above=$(awk -v p="$per" -v f="$f" 'BEGIN { print p - f }')
        echo "| $shape | $n | $(ms "$t") ms$c | $(ms "$per") ms | $(ms "$f") ms | $(ms "$above") ms | $r MiB |"
    done
done
echo
echo "## Planning and inspection"
echo
echo "| what | mean (CPU) | peak RSS |"
echo "|---|---|---|"
for shape in $PLAN_SHAPES; do
    for n in $PLAN_SIZES; do
        d=$scratch/$shape-$n
        [ -d "$d" ] || d=$(repo "$shape" "$n")
        echo "| validate, $shape $n | $(ms "$(mean true "$bin -C $d validate")") ms$(cpu) | $(rss "$bin" -C "$d" validate) MiB |"
        echo "| run --dry-run, $shape $n | $(ms "$(mean true "$bin -C $d run --dry-run")") ms$(cpu) | $(rss "$bin" -C "$d" run --dry-run) MiB |"
    done
done
for n in $SHOW_SIZES; do
    d=$scratch/random-$n
    [ -d "$d" ] || d=$(repo random "$n")
    # One complete run to show and to resume.
    [ -d "$d/.specbridge" ] || "$bin" -C "$d" run --json >/dev/null 2>&1
    echo "| runs show latest, random $n | $(ms "$(mean true "$bin -C $d runs show latest")") ms$(cpu) | $(rss "$bin" -C "$d" runs show latest) MiB |"
    # A resume records itself in the run (its decisions, a resume entry): each
    # timed resume starts from the run as it was finished, or the later ones would
    # audit and read the earlier resumes' records too.
    latest=$(ls -d "$d"/.specbridge/runs/* | sort | tail -1)
    rm -rf "$scratch/finished-run"
    cp -a "$latest" "$scratch/finished-run"
    printf 'mv %q "$(mktemp -d -p %q)" && cp -a %q %q\n' "$latest" "$aside" "$scratch/finished-run" "$latest" >"$scratch/restore.sh"
    t_resume=$(mean "bash $scratch/restore.sh" "$bin -C $d resume latest --json")
    c_resume=$(cpu)
    bash "$scratch/restore.sh"
    echo "| resume latest (nothing to redo), random $n | $(ms "$t_resume") ms$c_resume | $(rss "$bin" -C "$d" resume latest --json) MiB |"
done
echo
echo "load average at the end: $(cut -d" " -f1-3 /proc/loadavg)"
