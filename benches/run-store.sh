#!/bin/sh
# Speed of the run inspection commands on a folder with many runs, and of
# validation. Builds the release binary, records N runs of a small check pipeline
# in a scratch repository, then times `runs list`, `runs show`, `runs audit --all`
# and `validate` with hyperfine (plain timing when hyperfine is missing).
#
#   benches/run-store.sh           # 300 runs
#   RUNS=1000 benches/run-store.sh
set -eu
cd "$(dirname "$0")/.."
runs=${RUNS:-300}

cargo build --release --quiet
bin=$(pwd)/target/release/specbridge
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git -C "$scratch" init -q
cat > "$scratch/specbridge.yaml" <<'YAML'
version: 1
name: bench
stages:
  - { id: a, kind: check, argv: [echo, a] }
  - { id: b, kind: check, needs: [a], argv: [echo, b] }
  - { id: c, kind: check, needs: [a], argv: [echo, c] }
  - { id: d, kind: check, needs: [b, c], argv: [echo, d] }
YAML
echo "recording $runs runs in $scratch"
i=0
while [ "$i" -lt "$runs" ]; do
    "$bin" -C "$scratch" run --json >/dev/null
    i=$((i + 1))
done

if command -v hyperfine >/dev/null 2>&1; then
    hyperfine -N --warmup 2 --style basic \
        "$bin -C $scratch runs list" \
        "$bin -C $scratch runs show latest" \
        "$bin -C $scratch runs audit latest" \
        "$bin -C $scratch runs audit --all" \
        "$bin -C $scratch validate"
else
    for c in "runs list" "runs show latest" "runs audit --all" "validate"; do
        echo "== $c"
        # shellcheck disable=SC2086
        time "$bin" -C "$scratch" $c >/dev/null
    done
fi
