#!/usr/bin/env bash
# specbridge's own cost around agent stages (docs/performance.md), measured
# against the test kit's fake Claude Code CLI, which answers in about 3 ms: the
# difference between `specbridge run` and the fake alone with the same argv and
# stdin is what specbridge adds (start-up, detection, records, evidence, the run
# store's check), without the real CLI's 400 ms of noise. Each row keeps HISTORY
# earlier runs in the repository's run store, as a repository used for a while
# does; the store's check compares every file of them around each agent attempt.
# TREE sets how many files the working tree holds besides the pipeline (committed,
# 100 to a folder): each agent attempt's two snapshots ask git about every one.
# BEHIND gives the branch an upstream that many commits ahead of it, as a fetch
# leaves a branch on a busy repository (no commit-graph file).
#
#   benches/agent-overhead.sh                       # HISTORY="0 100 300 1000"
#   HISTORY="0 300" RUNS=40 benches/agent-overhead.sh
#   TREE="0 5000 20000" HISTORY=0 benches/agent-overhead.sh
#   BEHIND=50000 HISTORY=0 benches/agent-overhead.sh
#   OLD=/tmp/specbridge-before benches/agent-overhead.sh   # an older build beside
#   AGENT_MS=400 benches/agent-overhead.sh   # each agent call takes 400 ms more,
#                                            # as the real CLI's do
#
# Needs hyperfine. Nothing leaves the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-30}
HISTORY=${HISTORY:-"0 100 300 1000"}
TREE=${TREE:-0}
BEHIND=${BEHIND:-0}
command -v hyperfine >/dev/null || {
    echo "hyperfine is missing: apt-get install hyperfine" >&2
    exit 2
}
target=${CARGO_TARGET_DIR:-target}
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet -p specbridge
fi
cargo build --release --quiet -p specbridge-testkit --bin fake-claude
bin=$(realpath "${BIN:-$target/release/specbridge}")
fake=$(realpath "$target/release/fake-claude")
AGENT_MS=${AGENT_MS:-0}
scratch=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$scratch"' EXIT
home=$scratch/home
mkdir -p "$home"
if [ "$AGENT_MS" != 0 ]; then
    # The agent's call (`--print`) waits first; detection's `--version` and `--help`
    # do not. Both sides of a row run the same wrapper.
    printf '#!/bin/sh\ncase " $* " in *" --print "*) sleep %s ;; esac\nexec %q "$@"\n' \
        "$(awk -v ms="$AGENT_MS" 'BEGIN { print ms / 1000 }')" "$fake" >"$scratch/slow-claude"
    chmod +x "$scratch/slow-claude"
    fake=$scratch/slow-claude
fi
envs=(env -i "PATH=$PATH" "HOME=$home" 'FAKE_CLAUDE_OUTPUT={"summary":"s","markdown":"# Notes\n"}')

# A committed repository with `stages` generate stages in a chain and `files`
# more files, 100 to a folder under src/.
repo() { # stages files
    local d=$scratch/repo-$1-$2 i
    mkdir -p "$d/prompts"
    python3 - "$d/src" "$2" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    folder = os.path.join(root, f"d{i // 100:04d}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"f{i}.rs"), "w") as f:
        f.write(f"pub fn f{i}() {{}}\n")
EOF
    git -C "$d" init -q
    git -C "$d" config user.email bench@example.com
    git -C "$d" config user.name bench
    {
        printf 'version: 1\nname: bench-agent\nrunner:\n  command: %s\nstages:\n' "$fake"
        for i in $(seq "$1"); do
            echo "Write part $i." >"$d/prompts/p$i.md"
            printf '  - id: p%s\n    kind: generate\n' "$i"
            [ "$i" -gt 1 ] && printf '    needs: [p%s]\n' $((i - 1))
            printf '    prompt: prompts/p%s.md\n' "$i"
            printf '    output: { schema: builtin:document, document: out/p%s.md }\n' "$i"
        done
    } >"$d/specbridge.yaml"
    echo "out/" >"$d/.gitignore"
    git -C "$d" add -A
    # No maintenance started behind the commit (20,000 loose objects start
    # one): its repack would run beside the timed runs.
    git -C "$d" -c maintenance.auto=false commit -qm pipeline
    if [ "$BEHIND" -gt 0 ]; then
        git -C "$d" remote add origin .
        python3 - "$BEHIND" "$(git -C "$d" rev-parse HEAD)" <<'EOF' | git -C "$d" fast-import --quiet
import sys
n, base = int(sys.argv[1]), sys.argv[2]
w = sys.stdout.write
for i in range(1, n + 1):
    msg = f"upstream {i}"
    w(f"commit refs/remotes/origin/main\nmark :{i}\n")
    w(f"committer u <u@example.com> {1600000000 + i} +0000\ndata {len(msg)}\n{msg}\n")
    w(f"from {base}\n" if i == 1 else f"from :{i - 1}\n")
    w(f"M 644 inline upstream.txt\ndata {len(str(i)) + 1}\n{i}\n\n")
EOF
        git -C "$d" branch -q --set-upstream-to=origin/main
    fi
    echo "$d"
}

# The store of `dir` holds exactly `n` earlier runs (copies of its first run,
# kept in $scratch/first-run, named so that `clean` keeps them), and nothing else.
history() { # dir n
    local runs=$1/.specbridge/runs i
    find "$runs" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
    for i in $(seq "$2"); do cp -a "$scratch/first-run" "$runs/h-$i"; done
}

# Before each timed run: the documents and the run just made go, the history
# stays (a script: hyperfine runs its --prepare command without a shell here).
clean() { # dir
    printf 'rm -rf %q/out\nfind %q/.specbridge/runs -mindepth 1 -maxdepth 1 ! -name "h-*" -exec rm -rf {} +\n' \
        "$1" "$1" >"$scratch/clean.sh"
    echo "bash $scratch/clean.sh"
}

mean_ms() { # prepare command
    hyperfine -N --style none --warmup 3 --runs "$RUNS" --prepare "$1" \
        --export-csv "$scratch/h.csv" "$2" >/dev/null 2>&1
    awk -F, 'NR == 2 { printf "%.1f", $2 * 1000 }' "$scratch/h.csv"
}

[ "$BEHIND" -gt 0 ] && echo "The branch is $BEHIND commits behind its upstream." && echo
echo "| files in the tree | earlier runs in the store | stages | files in the store | fake CLI alone (× stages) | specbridge run | specbridge's own cost a stage |${OLD:+ older build, own cost a stage |}"
echo "|---|---|---|---|---|---|---|${OLD:+---|}"
for tree in $TREE; do
    for stages in 1 3; do
        d=$(repo "$stages" "$tree")
        "${envs[@]}" "$bin" -C "$d" run --json >"$scratch/first.json" || {
            echo "the first run failed:" >&2
            cat "$scratch/first.json" >&2
            exit 1
        }
        attempt=$(ls -d "$d"/.specbridge/runs/*/stages/p1/attempt-001)
        rm -rf "$scratch/first-run"
        cp -a "$(dirname "$(dirname "$(dirname "$attempt")")")" "$scratch/first-run"
        # The argv specbridge spawned (no secret in it here) and the prompt it sent.
        python3 - "$attempt" "$scratch/argv" <<'EOF'
import json, shlex, sys
proc = json.load(open(sys.argv[1] + "/process.json"))
open(sys.argv[2], "w").write(" ".join(shlex.quote(a) for a in proc["redactedArgv"]))
EOF
        cp "$attempt/prompt.md" "$scratch/stdin"
        # Both sides start from the same wrapper script, so that its cost cancels.
        { printf 'exec '; printf '%q ' "${envs[@]}"; cat "$scratch/argv"; printf ' <%q\n' "$scratch/stdin"; } >"$scratch/bare.sh"
        { printf 'exec '; printf '%q ' "${envs[@]}"; printf '"$1" -C %q run --json\n' "$d"; } >"$scratch/sb.sh"
        bare=$(mean_ms true "bash $scratch/bare.sh")
        for n in $HISTORY; do
            history "$d" "$n"
            files=$(find "$d/.specbridge" -type f | wc -l)
            sb=$(mean_ms "$(clean "$d")" "bash $scratch/sb.sh $bin")
            row=$(awk -v b="$bare" -v s="$sb" -v k="$stages" 'BEGIN { printf "%.1f ms | %.1f ms | %.1f ms", b * k, s, (s - b * k) / k }')
            old=
            if [ -n "${OLD:-}" ]; then
                o=$(mean_ms "$(clean "$d")" "bash $scratch/sb.sh $(realpath "$OLD")")
                old=$(awk -v b="$bare" -v o="$o" -v k="$stages" 'BEGIN { printf " %.1f ms |", (o - b * k) / k }')
            fi
            echo "| $tree | $n | $stages | $files | $row |$old"
        done
    done
done
echo
echo "runs per cell: $RUNS; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
