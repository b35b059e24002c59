#!/usr/bin/env bash
# Reproduces the CLI behaviour behind the per-invocation temporary folder
# (docs/claude-code-runner.md, "A temporary folder per invocation"): N concurrent
# `claude -p` with the same `--settings`, each running `echo hi` in the CLI's
# sandbox a few times, once sharing the default temporary folder and once with a
# `CLAUDE_CODE_TMPDIR` each. Prints, per round, how many shell commands failed.
#
#   CLAUDE=~/.cache/specbridge/claude-code-2.1.332/node_modules/.bin/claude benches/claude-tmp-race.sh
#   N=6 ROUNDS=3 TURNS=4 benches/claude-tmp-race.sh
#
# Needs bubblewrap and socat (the CLI's sandbox). Nothing leaves the machine: the
# CLI talks to the scripted model server on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-6}
ROUNDS=${ROUNDS:-3}
TURNS=${TURNS:-4}
CLAUDE=${CLAUDE:-$HOME/.cache/specbridge/claude-code-2.1.332/node_modules/.bin/claude}
[ -x "$CLAUDE" ] || {
    echo "no Claude Code CLI at $CLAUDE (set CLAUDE=…; .ci/install-claude-code installs it)" >&2
    exit 2
}
# shellcheck source=benches/model-server.sh
. benches/model-server.sh

# Every request gets a Bash call: each CLI runs it until --max-turns.
cat >"$scratch/script.json" <<'EOF'
[{"type": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo hi", "description": "say hi"}}], "repeat": "forever"}]
EOF
start_model_server "$scratch/script.json"
settings='{"sandbox":{"enabled":true,"failIfUnavailable":true,"autoAllowBashIfSandboxed":true,"allowUnsandboxedCommands":false}}'

round() { # private(0|1) → "failed/total"
    local i d
    for i in $(seq "$N"); do
        d=$scratch/w$i
        rm -rf "$d"
        mkdir -p "$d/home" "$d/repo" "$d/tmp"
        git -C "$d/repo" init -q
        local own=()
        [ "$1" = 1 ] && own=("CLAUDE_CODE_TMPDIR=$d/tmp")
        (cd "$d/repo" && env -i "PATH=$PATH" "HOME=$d/home" NO_COLOR=1 \
            "ANTHROPIC_BASE_URL=http://127.0.0.1:$port" ANTHROPIC_API_KEY=sk-test \
            DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
            "${own[@]}" "$CLAUDE" -p --output-format stream-json --verbose \
            --max-turns "$TURNS" --allowedTools Bash --settings "$settings" go \
            </dev/null >"$d/out.jsonl" 2>/dev/null) &
    done
    wait
    # Tool results that are errors; the CLI's own result event at --max-turns is
    # not one of them.
    python3 - "$scratch" "$N" <<'EOF'
import json, sys
failed = total = 0
for i in range(1, int(sys.argv[2]) + 1):
    for line in open(f"{sys.argv[1]}/w{i}/out.jsonl"):
        event = json.loads(line)
        if event.get("type") != "user":
            continue
        for block in event["message"].get("content", []):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                total += 1
                failed += bool(block.get("is_error"))
print(f"{failed}/{total}")
EOF
}

echo "| round | shared temporary folder: failed shell commands | a folder each |"
echo "|---|---|---|"
for r in $(seq "$ROUNDS"); do
    echo "| $r | $(round 0) | $(round 1) |"
done
