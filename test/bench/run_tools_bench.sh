#!/usr/bin/env bash
# Tool server benchmark: round trips of `state_put` and `notify` over MCP
# (POST /mcp, keep-alive, loopback) against a running node, beside the
# same upsert made directly through libpqxx on the same PostgreSQL.
#
#   test/bench/run_tools_bench.sh [--puts N] [--notifies N] [--pings N]
#       [--warmup N] [--threads T] [--concurrent-calls N]
#       [--build-dir DIR] [--no-build] [--keep-logs DIR]
#
# setup -> build butlers-node and butlers_tools_bench -> PostgreSQL 15 in a
# temporary directory -> a node with a CLI butler whose `sh` sessions write
# their MCP URL and token and sleep, and an outbox messenger adapter -> T
# (at least 1) requests routed to it, their tokens -> the benchmark (prints
# a Markdown table) -> everything stopped and removed.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

puts=2000
notifies=500
pings=2000
warmup=200
threads=4
concurrent=500
build_dir="$ROOT/build"
no_build=0
keep_logs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --puts) puts=${2:?--puts needs a number}; shift ;;
    --notifies) notifies=${2:?--notifies needs a number}; shift ;;
    --pings) pings=${2:?--pings needs a number}; shift ;;
    --warmup) warmup=${2:?--warmup needs a number}; shift ;;
    --threads) threads=${2:?--threads needs a number}; shift ;;
    --concurrent-calls) concurrent=${2:?--concurrent-calls needs a number}; shift ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    --no-build) no_build=1 ;;
    --keep-logs) keep_logs=${2:?--keep-logs needs a directory}; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[[ $threads =~ ^[0-9]+$ ]] && [ "$threads" -le 16 ] ||
  die "--threads takes 0..16"
# The program checks the other numbers (and the calls one session may make).

if [ "$no_build" -eq 1 ]; then
  node_bin="$build_dir/butlers-node"
  bench_bin=$(find "$build_dir" -name butlers_tools_bench -type f -perm -u+x |
    head -n 1)
  [ -x "$node_bin" ] || die "no $node_bin (--no-build)"
  [ -n "$bench_bin" ] || die "no butlers_tools_bench under $build_dir (--no-build)"
else
  "$ROOT/scripts/setup.sh"
  build_node_and_bench butlers_tools_bench "$build_dir"
fi

work=$(mktemp -d /tmp/butlers-tools-bench.XXXXXX)
chmod 755 "$work"
pgdir="$work/pg"
node_pid=""
cleanup() {
  node_stop "$node_pid"
  node_pid=""
  if [ -n "$keep_logs" ]; then
    mkdir -p "$keep_logs"
    cp "$work"/node.err "$work"/node.out "$work"/node.toml "$keep_logs"/ 2>/dev/null || true
    cp "$pgdir/server.log" "$keep_logs/postgresql.log" 2>/dev/null || true
  fi
  pg_stop "$pgdir"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_pg "$pgdir"
db_url=$bench_db_url
export BUTLERS_DATABASE_URL="$db_url"

# One session per client (at least one): each writes its MCP URL and token
# to tokens/token-<work id> and sleeps; the benchmark ends long before.
sessions=$((threads > 0 ? threads : 1))
mkdir -p "$work/tokens"
tokdir="$work/tokens"
cat >"$work/node.toml" <<EOF
[node]
name = "tools-bench"
log_level = "warn"
drain_deadline_s = 5

[http]
port = 0

[[butler]]
name = "bench"
max_concurrent_sessions = $sessions
session_timeout_s = 1800
max_tool_calls = 10000

[butler.runtime]
kind = "cli"
family = "opencode"
command = ["sh", "-c", "cat > /dev/null; printf '%s\\\\n%s\\\\n' \\"\$BUTLERS_MCP_URL\\" \\"\$BUTLERS_MCP_TOKEN\\" > $tokdir/tmp-\$BUTLERS_WORK_ID && mv $tokdir/tmp-\$BUTLERS_WORK_ID $tokdir/token-\$BUTLERS_WORK_ID; sleep 1200"]

[[messenger.adapter]]
kind = "outbox"
path = "$work/outbox.jsonl"
EOF
"$node_bin" check-config "$work/node.toml" >/dev/null ||
  die "the generated node configuration is invalid"
log "starting the node"
(cd "$work" && exec "$node_bin" run --config "$work/node.toml") \
  >"$work/node.out" 2>"$work/node.err" &
node_pid=$!
node_wait_ready "$node_pid" "$work/node.out" "$work/node.err"
# shellcheck disable=SC2153 # set by node_wait_ready (scripts/lib.sh)
node_port=$NODE_PORT

# Route one request per session; its sh writes the session's token.
for i in $(seq 1 "$sessions"); do
  # A UUIDv7 (route.v1 asks for one): milliseconds, then random bits.
  rnd=$(od -An -N10 -tx1 /dev/urandom | tr -d ' \n')
  ts=$(printf '%012x' "$(date +%s%3N)")
  rid="${ts:0:8}-${ts:8:4}-7${rnd:0:3}-$(printf '%x' $((8 + 0x${rnd:3:1} % 4)))${rnd:4:3}-${rnd:7:12}"
  body='{"schema_version":"route.v1","request_context":{"request_id":"'$rid'","received_at":"'$(date -u +%Y-%m-%dT%H:%M:%SZ)'","source_channel":"api","source_endpoint_identity":"bench","source_sender_identity":"bench-user-'$i'"},"target":{"butler":"bench","tool":"route.execute"},"input":{"prompt":"bench"}}'
  code=$(curl -s -o "$work/route.$i" -w '%{http_code}' -m 10 \
    -H 'Content-Type: application/json' --data-binary "$body" \
    "http://127.0.0.1:$node_port/v1/butlers/bench/route" || true)
  [ "$code" = "202" ] || die "route answered $code: $(cat "$work/route.$i")"
done
log "waiting for $sessions session token(s)"
for _ in $(seq 1 300); do
  n=$(find "$tokdir" -name 'token-*' | wc -l)
  [ "$n" -ge "$sessions" ] && break
  kill -0 "$node_pid" 2>/dev/null || { tail -n 30 "$work/node.err" >&2; die "the node exited"; }
  sleep 0.1
done
[ "$n" -ge "$sessions" ] || { tail -n 30 "$work/node.err" >&2; die "$n of $sessions tokens after 30 s"; }
: >"$work/tokens.txt"
for f in "$tokdir"/token-*; do
  url=$(sed -n 1p "$f")
  [ "$url" = "http://127.0.0.1:$node_port/mcp" ] || die "session MCP URL '$url', not 127.0.0.1:$node_port"
  sed -n 2p "$f" >>"$work/tokens.txt"
done

echo "## Tool round trips over MCP (loopback, keep-alive; $puts state_put per row, $notifies notify, $warmup warm-up)"
echo
rc=0
timeout 900 "$bench_bin" "$node_port" "$db_url" "$work/tokens.txt" \
  --puts "$puts" --notifies "$notifies" --pings "$pings" --warmup "$warmup" \
  --threads "$threads" --concurrent-calls "$concurrent" || rc=$?
lines=$(wc -l <"$work/outbox.jsonl" 2>/dev/null || echo 0)
echo "outbox lines written: $lines"
[ "$rc" -eq 0 ] || die "the benchmark failed ($rc); node log tail: $(tail -n 5 "$work/node.err")"
