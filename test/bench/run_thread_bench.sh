#!/usr/bin/env bash
# Thread benchmark: (a) idle thread actors — creation rate and
# resident memory for 100,000 and 1,000,000 threads, bytes per thread;
# (b) steer latency over loopback HTTP against a scripted run.
#
#   test/bench/run_thread_bench.sh [--threads K] [--steers N] [--turn-ms T]
#                                  [--build-dir DIR]
#
# setup -> build butlers-node and butlers_thread_bench -> (a) in-process,
# one process per size -> PostgreSQL 15 in a temporary directory -> a node
# on a free loopback port -> (b) -> everything stopped and removed.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

threads=8
steers=1000
turn_ms=50
build_dir="$ROOT/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=${2:?--threads needs a number}; shift ;;
    --steers) steers=${2:?--steers needs a number}; shift ;;
    --turn-ms) turn_ms=${2:?--turn-ms needs milliseconds}; shift ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[[ $threads =~ ^[0-9]+$ ]] && [ "$threads" -ge 1 ] && [ "$threads" -le 64 ] ||
  die "--threads takes 1..64"
[[ $steers =~ ^[0-9]+$ ]] && [ "$steers" -ge 10 ] && [ "$steers" -le 100000 ] ||
  die "--steers takes 10..100000"
[[ $turn_ms =~ ^[0-9]+$ ]] && [ "$turn_ms" -ge 1 ] && [ "$turn_ms" -le 10000 ] ||
  die "--turn-ms takes 1..10000"

"$ROOT/scripts/setup.sh"
build_node_and_bench butlers_thread_bench "$build_dir"

echo "## (a) idle thread actors"
echo
echo "| threads | live | created/s | seconds | RSS before MiB | RSS after MiB | bytes/thread |"
echo "|---|---|---|---|---|---|---|"
for n in 100000 1000000; do
  timeout 600 "$bench_bin" idle "$n"
done
echo

work=$(mktemp -d /tmp/butlers-thread-bench.XXXXXX)
chmod 755 "$work"
pgdir="$work/pg"
node_pid=""

# stop_node: stops the node (lib.sh's node_stop) and forgets it.
stop_node() {
  node_stop "$node_pid"
  node_pid=""
}

cleanup() {
  stop_node
  pg_stop "$pgdir"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_pg "$pgdir"
export BUTLERS_DATABASE_URL="$bench_db_url"

# Runs long enough to take every steer: the steers take about
# steers x 11 ms spread over the threads.
turns=$(( steers * 12 / turn_ms + 100 ))
cat >"$work/node.toml" <<EOF
[node]
name = "thread-bench"
log_level = "warn"
drain_deadline_s = 5

[http]
port = 0
threads = 1

[scheduler]
threads = 2

[[butler]]
name = "general"
max_concurrent_sessions = $threads
session_timeout_s = 3600

[butler.runtime]
turn_ms = $turn_ms
turns = $turns
EOF
"$node_bin" check-config "$work/node.toml" >/dev/null ||
  die "the generated node configuration is invalid"
log "starting the node"
# In the temporary directory: replies go to the default outbox,
# outbox.jsonl in the node's working directory.
(cd "$work" && exec "$node_bin" run --config "$work/node.toml") \
  >"$work/node.out" 2>"$work/node.err" &
node_pid=$!
node_wait_ready "$node_pid" "$work/node.out" "$work/node.err"
# shellcheck disable=SC2153 # set by node_wait_ready (scripts/lib.sh)
node_port=$NODE_PORT

echo "## (b) steer latency ($threads threads, $steers steers, turn_ms $turn_ms)"
echo
timeout 600 "$bench_bin" steer "$node_port" --threads "$threads" \
  --steers "$steers"
