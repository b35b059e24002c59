#!/usr/bin/env bash
# A spec-to-task fan-out against the test kit's fake Claude Code CLI
# (docs/performance-log.md, "A fan-out of hundreds of tasks"): one generate stage
# plans N tasks, one execute stage runs once per task (`forEach`). Every agent
# attempt ends with the check of the run's own records, which read every record
# of the run until it carried what it had found from one attempt to the next:
# the run's time per task grew with N. Prints the median run and its time per
# task for each N; with OLD set, an older build's runs alternate with this one's.
#
#   benches/fanout.sh                          # SIZES="100 200 400", RUNS=3
#   OLD=/tmp/specbridge-before SIZES="200 400" benches/fanout.sh
#   DETAILS=2000 SIZES=400 benches/fanout.sh   # each task's details that long (bytes)
#
# Nothing leaves the machine; each run gets a new repository.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-"100 200 400"}
# The length of each planned task's `details`: a plan as rich as a real one is
# hundreds of kilobytes, and every instance reads it.
DETAILS=${DETAILS:-1}
RUNS=${RUNS:-3}
target=${CARGO_TARGET_DIR:-target}
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet -p specbridge
fi
cargo build --release --quiet -p specbridge-testkit --bin fake-claude
bin=$(realpath "${BIN:-$target/release/specbridge}")
fake=$(realpath "$target/release/fake-claude")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# A committed repository whose pipeline fans out over the N tasks the fake's
# script answers the planning stage with; every task's attempt gets a minimal
# result made from its schema.
repo() { # n dir
    local n=$1 d=$2
    mkdir -p "$d/prompts"
    git -C "$d" init -q
    git -C "$d" config user.email bench@example.com
    git -C "$d" config user.name bench
    cat >"$d/specbridge.yaml" <<EOF
version: 1
name: fanout-$n
runner:
  kind: claude-code
  command: $fake
  tools: [Read]
stages:
  - id: tasks
    kind: generate
    prompt: prompts/tasks.md
    output: { schema: "builtin:tasks" }
  - id: implement
    kind: execute
    needs: [tasks]
    forEach: { stage: tasks, items: /tasks }
    prompt: prompts/implement.md
    output: { schema: "builtin:task-result" }
EOF
    echo "PLAN-THE-TASKS" >"$d/prompts/tasks.md"
    echo 'Do task {{ item.id }}: {{ item.title }}' >"$d/prompts/implement.md"
    git -C "$d" add -A
    git -C "$d" commit -qm pipeline
    # Outside the repository: the fake's script state is no record of the run.
    python3 - "$n" "$DETAILS" >"$d.script.json" <<'EOF'
import json, sys
n, details = int(sys.argv[1]), int(sys.argv[2])
tasks = [{"id": f"t{i}", "title": f"task {i}", "details": "d" * details, "dependsOn": [],
          "requirements": ["r1"]} for i in range(n)]
plan = {"match": "PLAN-THE-TASKS",
        "output": {"summary": "s", "markdown": "m", "tasks": tasks}}
print(json.dumps([plan] + ["success"] * n))
EOF
}

# Seconds of one run of `bin` on a new repository of n tasks.
one() { # bin n
    local d
    d=$(mktemp -d "$scratch/run-XXXXXX")
    repo "$2" "$d"
    local t0 t1
    t0=$(date +%s%N)
    (cd "$d" && env -i "PATH=$PATH" "HOME=$scratch" "FAKE_CLAUDE_SCRIPT=$d.script.json" \
        "$1" run >/dev/null 2>&1) || true
    t1=$(date +%s%N)
    local done
    done=$(cd "$d" && "$1" runs show latest --json 2>/dev/null |
        python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["stages"] if s["stageId"].startswith("implement.") and s["status"] != "blocked"))' || echo "?")
    echo "$(((t1 - t0) / 1000000)) $done"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "| build | tasks | run (median of $RUNS) | a task | instances recorded |"
echo "|---|---|---|---|---|"
for n in $SIZES; do
    : >"$scratch/new" >"$scratch/old"
    for _ in $(seq "$RUNS"); do
        one "$bin" "$n" >>"$scratch/new"
        if [ -n "${OLD:-}" ]; then
            one "$(realpath "$OLD")" "$n" >>"$scratch/old"
        fi
    done
    for side in old new; do
        [ -s "$scratch/$side" ] || continue
        ms=$(cut -d' ' -f1 "$scratch/$side" | median)
        recorded=$(cut -d' ' -f2 "$scratch/$side" | sort -u | tr '\n' ' ')
        label=$([ "$side" = new ] && echo "this tree" || echo "OLD")
        echo "| $label | $n | $ms ms | $(awk -v ms="$ms" -v n="$n" 'BEGIN { printf "%.1f", ms / n }') ms | $recorded|"
    done
done
