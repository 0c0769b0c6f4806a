#!/usr/bin/env bash
# Client library benchmark: submit latency (enqueue ack, with and without
# the spool's fsync) and end-to-end throughput through butlers_client
# against a node on a throwaway PostgreSQL.
#
#   test/bench/run_client_bench.sh [--ops N] [--keys K] [--shards S]
#                                  [--build-dir DIR]
#
# setup -> build butlers-node and butlers_client_bench -> PostgreSQL 15 in a
# temporary directory -> a node -> the benchmark (a Markdown table) ->
# everything removed.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

ops=20000
keys=64
shards=4
build_dir="$ROOT/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --ops) ops=${2:?--ops needs a number}; shift ;;
    --keys) keys=${2:?--keys needs a number}; shift ;;
    --shards) shards=${2:?--shards needs a number}; shift ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[[ $ops =~ ^[0-9]+$ ]] && [ "$ops" -ge 100 ] && [ "$ops" -le 10000000 ] ||
  die "--ops takes 100..10000000"
[[ $keys =~ ^[0-9]+$ ]] && [ "$keys" -ge 1 ] && [ "$keys" -le 100000 ] ||
  die "--keys takes 1..100000"
[[ $shards =~ ^[0-9]+$ ]] && [ "$shards" -ge 1 ] && [ "$shards" -le 256 ] ||
  die "--shards takes 1..256"

"$ROOT/scripts/setup.sh"
build_node_and_bench butlers_client_bench "$build_dir"

work=$(mktemp -d /tmp/butlers-client-bench.XXXXXX)
chmod 755 "$work"
pgdir="$work/pg"
node_pid=""
cleanup() {
  node_stop "$node_pid"
  pg_stop "$pgdir"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_pg "$pgdir"
export BUTLERS_DATABASE_URL="$bench_db_url"

cat >"$work/node.toml" <<TOML
[node]
name = "client-bench"
log_level = "warn"
drain_deadline_s = 5

[http]
port = 0

[scheduler]
threads = 2

[[butler]]
name = "general"
max_concurrent_sessions = 16
max_pending = 100000

[butler.runtime]
turn_ms = 0
TOML
"$node_bin" check-config "$work/node.toml" >/dev/null ||
  die "the generated node configuration is invalid"
log "starting the node"
(cd "$work" && exec "$node_bin" run --config "$work/node.toml") \
  >"$work/node.out" 2>"$work/node.err" &
node_pid=$!
node_wait_ready "$node_pid" "$work/node.out" "$work/node.err"
# shellcheck disable=SC2153 # set by node_wait_ready (scripts/lib.sh)
node_port=$NODE_PORT

echo "## client library: submit latency and end-to-end throughput"
echo
timeout 1200 "$bench_bin" "$node_port" --ops "$ops" --keys "$keys" \
  --shards "$shards" --spool "$work"
