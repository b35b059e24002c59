# Sourced by the benches that run the real CLI against the scripted model server
# (agent.sh, claude-tmp-race.sh). After sourcing, `scratch` is a folder removed
# on exit, and `start_model_server SCRIPT` serves SCRIPT on 127.0.0.1, sets
# `port`, and has the server stopped on exit. SERVER=path uses another build of
# the server instead of building this tree's.
target=${CARGO_TARGET_DIR:-target}
if [ -z "${SERVER:-}" ]; then
    cargo build --release --quiet -p specbridge-testkit --bin scripted-model-server
fi
server=$(realpath "${SERVER:-$target/release/scripted-model-server}")
scratch=$(mktemp -d)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT

start_model_server() { # script
    "$server" --script "$1" --port-file "$scratch/port" 2>/dev/null &
    server_pid=$!
    for _ in $(seq 100); do [ -s "$scratch/port" ] && break; sleep 0.05; done
    port=$(cat "$scratch/port")
}
