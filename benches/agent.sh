#!/usr/bin/env bash
# One agent stage against a bare `claude -p` with the same argv and stdin, on the
# same scripted model (docs/performance.md): what specbridge adds around the
# agent (detection, records, evidence), in a fresh and in a warm HOME.
#
#   CLAUDE=/path/to/claude benches/agent.sh
#   RUNS=10 SERVER=target/debug/scripted-model-server benches/agent.sh
#   OLD=/tmp/specbridge-before benches/agent.sh   # also an older build, interleaved
#
# Needs hyperfine and the pinned Claude Code CLI (installed by `.ci/run`). Nothing
# leaves the machine: the CLI talks to the scripted model server on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
CLAUDE=${CLAUDE:-${SPECBRIDGE_CLAUDE_BIN:-$HOME/.cache/specbridge/claude-code-2.1.332/node_modules/.bin/claude}}
[ -x "$CLAUDE" ] || {
    echo "no Claude Code CLI at $CLAUDE (set CLAUDE=…)" >&2
    exit 2
}
command -v hyperfine >/dev/null || {
    echo "hyperfine is missing: apt-get install hyperfine" >&2
    exit 2
}
# shellcheck source=benches/model-server.sh
. benches/model-server.sh
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet -p specbridge
fi
bin=$(realpath "${BIN:-$target/release/specbridge}")

cat >"$scratch/script.json" <<'EOF'
[{"type": "structured_output", "input": {"summary": "s", "markdown": "# Notes\n"}, "repeat": "forever"}]
EOF
start_model_server "$scratch/script.json"

repo=$scratch/repo
mkdir -p "$repo/prompts"
git -C "$repo" init -q
git -C "$repo" config user.email bench@example.com
git -C "$repo" config user.name bench
echo "Write short notes." >"$repo/prompts/notes.md"
cat >"$repo/specbridge.yaml" <<EOF
version: 1
name: bench-agent
runner:
  command: $CLAUDE
stages:
  - id: notes
    kind: generate
    prompt: prompts/notes.md
    output: { schema: builtin:document, document: notes.md }
EOF
echo "notes.md" >"$repo/.gitignore"
git -C "$repo" add -A
git -C "$repo" commit -qm pipeline

# The environment both sides run in: only the model server, never the network.
home=$scratch/home
envs=(env -i "PATH=$PATH" "HOME=$home" NO_COLOR=1 "ANTHROPIC_BASE_URL=http://127.0.0.1:$port"
    ANTHROPIC_API_KEY=sk-test DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1
    DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1)
mkdir -p "$home"
"${envs[@]}" "$bin" -C "$repo" run --json >"$scratch/first.json" || {
    echo "the first run failed:" >&2
    cat "$scratch/first.json" >&2
    exit 1
}
attempt=$(ls -d "$repo"/.specbridge/runs/*/stages/notes/attempt-001)
# The argv specbridge spawned (process.json, redacted: no secret is in it here)
# and the prompt it sent on stdin (prompt.md).
python3 - "$attempt" "$scratch" <<'EOF'
import json, shlex, sys
proc = json.load(open(sys.argv[1] + "/process.json"))
argv = proc.get("redactedArgv") or proc["argv"]
# A session id names a session file: each bare call gets a fresh one, as each
# specbridge run does.
words = [shlex.quote(a) for a in argv]
for i, a in enumerate(argv[:-1]):
    if a == "--session-id":
        words[i + 1] = '"$(cat /proc/sys/kernel/random/uuid)"'
open(sys.argv[2] + "/argv", "w").write(" ".join(words))
EOF
cp "$attempt/prompt.md" "$scratch/stdin"
argv=$(cat "$scratch/argv")
envline=$(printf '%q ' "${envs[@]}")
clean_run="rm -rf $repo/.specbridge $repo/notes.md"
fresh_home="rm -rf $home && mkdir -p $home"

# Interleaved: hyperfine alternates nothing, so the pairs are run one after the
# other per round instead, RUNS rounds.
t() { # name prepare command
    hyperfine --style none --runs 1 --command-name "$1" --prepare "$2" --export-csv "$scratch/h.csv" "$3" >/dev/null 2>&1
    awk -F, 'NR == 2 { printf "%s %s %s\n", $2, $5, $6 }' "$scratch/h.csv" >>"$scratch/$1"
}
for home_kind in warm fresh; do
    prep_home=true
    [ "$home_kind" = fresh ] && prep_home=$fresh_home
    for _ in $(seq "$RUNS"); do
        t "sb-$home_kind" "$clean_run && $prep_home" "cd $repo && $envline $bin run --json"
        t "bare-$home_kind" "$prep_home" "cd $repo && $envline $argv <$scratch/stdin"
        if [ -n "${OLD:-}" ]; then
            t "old-$home_kind" "$clean_run && $prep_home" "cd $repo && $envline $(realpath "$OLD") run --json"
        fi
    done
done

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "| HOME | bare \`claude -p\` (wall, median) | specbridge run (wall, median) | ratio | CPU user+sys bare / specbridge (median) |"
echo "|---|---|---|---|---|"
for home_kind in warm fresh; do
    b=$(awk '{ print $1 }' "$scratch/bare-$home_kind" | median)
    s=$(awk '{ print $1 }' "$scratch/sb-$home_kind" | median)
    bc=$(awk '{ print $2 + $3 }' "$scratch/bare-$home_kind" | median)
    sc=$(awk '{ print $2 + $3 }' "$scratch/sb-$home_kind" | median)
    awk -v h="$home_kind" -v b="$b" -v s="$s" -v bc="$bc" -v sc="$sc" 'BEGIN {
        printf "| %s | %.0f ms | %.0f ms | %.2f× | %.0f / %.0f ms |\n", h, b * 1000, s * 1000, s / b, bc * 1000, sc * 1000 }'
done
if [ -n "${OLD:-}" ]; then
    echo
    echo "| HOME | older build (wall, median) | ratio to bare | CPU user+sys (median) |"
    echo "|---|---|---|---|"
    for home_kind in warm fresh; do
        b=$(awk '{ print $1 }' "$scratch/bare-$home_kind" | median)
        o=$(awk '{ print $1 }' "$scratch/old-$home_kind" | median)
        oc=$(awk '{ print $2 + $3 }' "$scratch/old-$home_kind" | median)
        awk -v h="$home_kind" -v b="$b" -v o="$o" -v oc="$oc" 'BEGIN {
            printf "| %s | %.0f ms | %.2f× | %.0f ms |\n", h, o * 1000, o / b, oc * 1000 }'
    done
fi
echo
echo "runs per cell: $RUNS; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
