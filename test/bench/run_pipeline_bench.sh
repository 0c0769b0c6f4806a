#!/usr/bin/env bash
# Pipeline benchmark: the whole path of a message — POST /v1/ingest, the
# inbox in PostgreSQL, the claim, the rules router, a no-op scripted butler,
# `parsed` — timed from the database's own timestamps, against graphile-worker
# running no-op jobs on the same PostgreSQL.
#
#   test/bench/run_pipeline_bench.sh [--messages N] [--rate R]
#                                    [--latency-seconds S] [--skip-baseline]
#                                    [--skip-seed] [--no-build]
#                                    [--build-dir DIR] [--keep-logs DIR]
#                                    [--fairness sender|channel|off]
#
#   (a) processing throughput: N messages (--messages, default 20,000) sent
#       as fast as the node takes them (butlers_ingest_load, 256
#       connections, every request due at once), routed by keyword to one
#       butler (scripted, turn_ms = 0, 64 sessions); msg/s from the first
#       receipt (min received_at) to the last `parsed` (max completed_at),
#       and the count of every lifecycle_state.
#   (b) latency at R msg/s open loop (--rate, default 200) for S s
#       (--latency-seconds, default 20) after a 2 s warm-up, on a new node
#       and emptied tables: received -> claimed (progress_at) -> work
#       accepted (route_work.created_at) -> session start (started_at) ->
#       parsed (completed_at), p50/p99/max by percentile_cont in SQL.
#   (c) the baseline, unless --skip-baseline: graphile-worker (pinned in
#       test/bench/pipeline/package.json, npm-installed there when missing)
#       on its own database of the same PostgreSQL: N pre-enqueued no-op
#       jobs, concurrency 10, maxPoolSize 12, completeJobBatchDelay 0,
#       jobs/s from the first job start to the last completion; then
#       enqueue -> handler start at R jobs/s for S s after 2 s of warm-up.
#   (d) the latency table of spec 000 §2.4 through the whole pipeline,
#       unless --skip-seed: ten messages posted at once, sessions of 500 ms,
#       one butler with 1, 3 and 10 slots and ten butlers with one slot each
#       (one message routed to each by keyword), each row on a node of its
#       own: makespan (last completed_at - first received_at) against the
#       ideal (ceil(10 / slots) x 500 ms; 500 ms for ten butlers).
#
#   Every node runs `[switchboard] fairness` as --fairness says (default
#   "sender", the shipped default); "off" shows what fair admission costs.
#   Every node first takes one warm-up message per butler through the
#   whole path (left out of every figure) and starts on emptied tables.
#   Processing counts only `parsed` messages; a loud WARNING row says when
#   some did not get there.
#
#   setup -> build butlers-node and butlers_ingest_load (not with
#   --no-build: the binaries already in --build-dir, default build/) ->
#   PostgreSQL 15 in a temporary directory -> (a) to (d) -> Markdown tables
#   and the targets, met or not. Node.js and npm are needed for (c) only.
#
# Every wait is bounded (processing: max(120 s, N / 50 s)); everything runs
# on loopback; the temporary directory, the node and PostgreSQL are removed
# on exit, failure or Ctrl-C. With --keep-logs, each node's configuration
# and stderr, the load generator's and graphile-worker's stderr and
# PostgreSQL's log are copied to DIR first.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

messages=20000
rate=200
latency_seconds=20
skip_baseline=0
skip_seed=0
no_build=0
keep_logs=""
fairness=sender
build_dir="$ROOT/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --messages) messages=${2:?--messages needs a number}; shift ;;
    --messages=*) messages=${1#--messages=} ;;
    --rate) rate=${2:?--rate needs messages per second}; shift ;;
    --rate=*) rate=${1#--rate=} ;;
    --latency-seconds) latency_seconds=${2:?--latency-seconds needs seconds}; shift ;;
    --latency-seconds=*) latency_seconds=${1#--latency-seconds=} ;;
    --skip-baseline) skip_baseline=1 ;;
    --skip-seed) skip_seed=1 ;;
    --no-build) no_build=1 ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    --build-dir=*) build_dir=${1#--build-dir=} ;;
    --keep-logs) keep_logs=${2:?--keep-logs needs a directory}; shift ;;
    --keep-logs=*) keep_logs=${1#--keep-logs=} ;;
    --fairness) fairness=${2:?--fairness needs sender, channel or off}; shift ;;
    --fairness=*) fairness=${1#--fairness=} ;;
    -h|--help) awk 'NR > 1 && /^set -euo/ { exit } NR > 1' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
for v in messages rate latency_seconds; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "--${v//_/-} takes a whole number"
done
if [ "$messages" -lt 10 ] || [ "$messages" -gt 1000000 ]; then
  die "--messages takes 10..1000000"
fi
if [ "$rate" -lt 1 ] || [ "$rate" -gt 100000 ]; then
  die "--rate takes 1..100000"
fi
if [ "$latency_seconds" -lt 1 ] || [ "$latency_seconds" -gt 3600 ]; then
  die "--latency-seconds takes 1..3600"
fi
case "$fairness" in
  sender|channel|off) ;;
  *) die "--fairness takes sender, channel or off, got '$fairness'" ;;
esac
if [ -n "$keep_logs" ]; then
  mkdir -p "$keep_logs" || die "cannot create --keep-logs directory $keep_logs"
  keep_logs=$(cd "$keep_logs" && pwd)
fi

started_at=$SECONDS
# The machine's load when the run starts and ends, printed with the tables:
# anything else busy on the cores (a compiler) shows in every figure.
read -r load_start _ </proc/loadavg || load_start="?"
# Warm-up of the open-loop runs (b) and (c): requests in their first
# seconds are sent but not measured.
warmup=2
# Part (a) sends every request due at once: the load generator then keeps
# its 256 connections busy until all are answered (at most 10 s past the
# window; a remainder goes out in another round).
ingest_rate=1000000
ingest_connections=256
# Part (d): the session length and the messages posted at once.
seed_turn_ms=500
seed_messages=10

"$ROOT/scripts/setup.sh"

if [ "$no_build" = 0 ]; then
  log "building butlers-node and butlers_ingest_load in $build_dir"
  BUILD_TARGET=butlers-node build "$build_dir" -DBUTLERS_SANITIZE=
  BUILD_TARGET=butlers_ingest_load build "$build_dir" -DBUTLERS_SANITIZE=
fi
node_bin="$build_dir/butlers-node"
[ -x "$node_bin" ] || die "no $node_bin (build it, or drop --no-build)"
load_bin=$(find "$build_dir" -name butlers_ingest_load -type f -perm -u+x 2>/dev/null |
  head -n 1)
[ -n "$load_bin" ] || die "no butlers_ingest_load under $build_dir (build it, or drop --no-build)"

gw_dir="$ROOT/test/bench/pipeline"
if [ "$skip_baseline" = 0 ]; then
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    die "the graphile-worker baseline needs Node.js and npm (or use --skip-baseline)"
  fi
fi

work=$(mktemp -d /tmp/butlers-pipeline-bench.XXXXXX)
chmod 755 "$work"
pgdir="$work/pg"
node_pid=""
# Both binaries run from copies in the temporary directory, so a rebuild of
# the build directory during the run changes nothing under it.
if ! cp "$node_bin" "$work/butlers-node" ||
    ! cp "$load_bin" "$work/butlers_ingest_load"; then
  rm -rf "$work"
  die "cannot copy the binaries from $build_dir"
fi
node_bin_source=$node_bin
node_bin="$work/butlers-node"
load_bin="$work/butlers_ingest_load"
"$node_bin" --version >/dev/null 2>&1 ||
  { rm -rf "$work"; die "$node_bin_source does not run (is a build writing it?)"; }

# stop_node: stops the node (lib.sh's node_stop) and forgets it.
stop_node() {
  node_stop "$node_pid"
  node_pid=""
}

cleanup() {
  stop_node
  pg_stop "$pgdir"
  if [ -n "$keep_logs" ]; then
    cp "$work"/*.node.err "$work"/*.toml "$work"/*.log "$keep_logs/" 2>/dev/null || true
    cp "$pgdir/server.log" "$keep_logs/postgresql.log" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# -- graphile-worker ------------------------------------------------------------

# The installed version of graphile-worker under DIR, or nothing.
gw_installed() {
  node -e 'try { console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).version) } catch (e) {}' \
    "$1/node_modules/graphile-worker/package.json"
}
gw_version=""
if [ "$skip_baseline" = 0 ]; then
  gw_pin=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).dependencies["graphile-worker"])' \
    "$gw_dir/package.json")
  if [ "$(gw_installed "$gw_dir")" != "$gw_pin" ]; then
    # Into the folder itself (node_modules is git-ignored, and kept for the
    # next run); into a copy when the folder is not writable.
    if [ ! -w "$gw_dir" ]; then
      mkdir "$work/pipeline"
      cp "$gw_dir"/package.json "$gw_dir"/package-lock.json "$gw_dir"/*.mjs \
        "$work/pipeline/" 2>/dev/null || true
      gw_dir="$work/pipeline"
    fi
    log "installing graphile-worker $gw_pin into $gw_dir"
    (cd "$gw_dir" && timeout 600 npm install --no-audit --no-fund) >&2 ||
      die "npm install of graphile-worker failed (or use --skip-baseline)"
  fi
  gw_version=$(gw_installed "$gw_dir")
  [ "$gw_version" = "$gw_pin" ] ||
    die "graphile-worker $gw_pin is not installed in $gw_dir (found '$gw_version')"
fi

# -- PostgreSQL -----------------------------------------------------------------

pg_port=$(free_port)
log "starting PostgreSQL on port $pg_port ($pgdir)"
# New WAL segments are not zero-filled and old ones are kept for
# recycling; a large max_wal_size keeps checkpoints out of the runs. (pg_ctl
# runs the options through a shell: one line, no spaces inside a value.)
PG_EXTRA_OPTS="-c wal_init_zero=off -c min_wal_size=1GB -c max_wal_size=4GB -c log_checkpoints=on" \
  pg_start "$pgdir" "$pg_port"
pg_createdb "$pgdir" "$pg_port" butlers_bench
pg_createdb "$pgdir" "$pg_port" graphile_bench
# The node reaches PostgreSQL over its Unix socket, as graphile-worker does.
export BUTLERS_DATABASE_URL="host=$pgdir port=$pg_port dbname=butlers_bench user=postgres"

psql_bench() {
  "$PGBIN/psql" -X -h "$pgdir" -p "$pg_port" -U postgres -d butlers_bench \
    -v ON_ERROR_STOP=1 -qtAF '|' -c "$1"
}

# -- the node -------------------------------------------------------------------

node_port=$(free_port)
while [ "$node_port" = "$pg_port" ]; do node_port=$(free_port); done
node_no=0
node_err=/dev/null
toml=""

node_failed() {
  tail -n 30 "$node_err" >&2 || true
  die "$1"
}

# write_toml NAME: starts $work/NAME.toml (config/node.toml's settings,
# which are the defaults, without its example butlers) and sets `toml`;
# butler_toml appends the butlers.
write_toml() {
  toml="$work/$1.toml"
  cat >"$toml" <<EOF
# Generated by test/bench/run_pipeline_bench.sh ($1).
[node]
name = "pipeline-bench"
log_level = "warn"

[http]
bind = "127.0.0.1"
port = $node_port
max_connections = 4096

[switchboard]
# Admission far above the load generator's 256 connections: no 429.
max_in_flight = 100000
fairness = "$fairness"
queue_capacity = 10000
workers = 32

[router]
kind = "rules"

[messenger]
# Every session's reply is a delivery: room for all of them, so the
# butler's hand-over is never refused.
max_pending = 100000

[[connector]]
name = "bench"
type = "http"
endpoint_identity = "bench"
max_in_flight = 10000
EOF
}

# butler_toml NAME KEYWORDS SLOTS TURN_MS: one scripted butler; KEYWORDS is
# a TOML array.
butler_toml() {
  cat >>"$toml" <<EOF

[[butler]]
name = "$1"
description = "No-op butler of the pipeline benchmark."
keywords = $2
max_concurrent_sessions = $3
max_pending = 100000
[butler.runtime]
kind = "scripted"
turn_ms = $4
turns = 1
fail_rate = 0.0
EOF
}

# start_node: starts the node on `toml` (checked first), waits for its
# listening line and readiness.
start_node() {
  "$node_bin" check-config "$toml" >"$work/check-config.out" 2>&1 ||
    { cat "$work/check-config.out" >&2; die "butlers-node check-config $toml failed"; }
  node_no=$((node_no + 1))
  node_err="$work/$node_no.node.err"
  log "starting node $node_no on 127.0.0.1:$node_port ($(basename "$toml"))"
  # In the temporary directory: the messenger's default outbox adapter
  # appends the replies to outbox.jsonl in the working directory.
  # stdout in a file of its own per node: a reused file could still show
  # the previous node's listening line when the wait starts.
  (cd "$work" && exec "$node_bin" run --config "$toml") \
    >"$work/$node_no.node.out" 2>"$node_err" &
  node_pid=$!
  node_wait_ready "$node_pid" "$work/$node_no.node.out" "$node_err"
  [ "$NODE_PORT" = "$node_port" ] || node_failed "the node listens on $NODE_PORT, not $node_port"
}

# reset_tables: empties every table the node writes while it ingests and
# routes (the node must be stopped), then checkpoints.
reset_tables() {
  psql_bench "TRUNCATE message_inbox, inbox_dedupe, inbox_transitions,
    routing_log, route_work, fanout_plans, fanout_execution_log,
    dead_letters, operator_audit" >/dev/null
  psql_bench "CHECKPOINT" >/dev/null
}

post_no=0
# post_once SENDER TEXT...: post_at_once (scripts/lib.sh) to this node, with
# event ids unique to this run; dies unless every answer is 202.
post_once() {
  post_no=$((post_no + 1))
  post_at_once "$work" "$node_port" "pipeline-$$-$post_no" "$@" ||
    node_failed "posting $(($# - 1)) message(s) at once failed"
}

# wait_terminal FILTER EXPECTED TIMEOUT_S: polls every 200 ms until at least
# EXPECTED rows of message_inbox match FILTER (an SQL condition) and all of
# them are terminal, for at most TIMEOUT_S seconds. Sets wait_total and
# wait_done; returns 1 on timeout.
wait_terminal() {
  local filter=$1 expected=$2 timeout_s=$3 end row next_note
  end=$((SECONDS + timeout_s))
  next_note=$((SECONDS + 10))
  while :; do
    row=$(psql_bench "SELECT count(*), count(*) FILTER (WHERE lifecycle_state
        IN ('parsed', 'errored', 'cancelled')) FROM message_inbox WHERE $filter")
    wait_total=${row%%|*}
    wait_done=${row##*|}
    if [ "$wait_total" -ge "$expected" ] && [ "$wait_done" -eq "$wait_total" ]; then
      return 0
    fi
    kill -0 "$node_pid" 2>/dev/null || node_failed "the node died ($wait_done of $wait_total terminal)"
    [ "$SECONDS" -lt "$end" ] || return 1
    if [ "$SECONDS" -ge "$next_note" ]; then
      log "waiting: $wait_done of $wait_total messages terminal ($expected expected)"
      next_note=$((SECONDS + 10))
    fi
    sleep 0.2
  done
}

# warm_up KEYWORD...: one message per keyword (sender "warmup"), all at
# once, through the whole path before anything is measured; dies unless
# each ends parsed within 60 s.
warm_up() {
  local texts=() k
  for k in "$@"; do texts+=("$k warm-up message"); done
  post_once warmup "${texts[@]}"
  wait_terminal "source_sender_identity = 'warmup'" "$#" 60 ||
    node_failed "the warm-up messages did not end within 60 s"
  [ "$(psql_bench "SELECT count(*) FROM message_inbox WHERE source_sender_identity = 'warmup' AND lifecycle_state = 'parsed'")" -eq "$#" ] ||
    node_failed "a warm-up message did not end parsed: $(psql_bench "SELECT lifecycle_state, error_class, error_message FROM message_inbox WHERE source_sender_identity = 'warmup'" | tr '\n' ' ')"
}

# field NAME LINE: the value of NAME=... in a RESULT line.
field() {
  sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"
}
# fmt X [PLACES]: X with PLACES decimals (default 2), "-" when empty.
fmt() {
  if [ -z "$1" ]; then echo "-"; return; fi
  awk -v a="$1" -v p="${2:-2}" 'BEGIN { printf "%.*f", p, a }'
}
# ratio A B [PLACES]: A / B with PLACES decimals (default 2).
ratio() {
  awk -v a="$1" -v b="$2" -v p="${3:-2}" \
    'BEGIN { printf "%.*f", p, (b > 0 ? a / b : 0) }'
}
# verdict X OP LIMIT: "met" or "not met", on the unrounded figures.
verdict() {
  if [ -z "$1" ]; then echo "not measured"; return; fi
  awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN {
    ok = (op == ">=") ? (a >= b) : (a <= b)
    print (ok ? "met" : "not met")
  }'
}

# The butler of parts (a) and (b). The rules router matches whole words,
# case-folded; the load generator's six texts are fixed (test/bench/
# ingest_load.cpp) and each contains "my", "the" or "i", so with "bench"
# (the warm-up messages) these send every message to this butler, one
# segment each, and nothing to `general`.
pipeline_keywords='["bench", "my", "the", "i"]'
measured="source_sender_identity LIKE 'user-%'"

# -- (a) processing throughput ------------------------------------------------------

write_toml pipeline
butler_toml bench "$pipeline_keywords" 64 0
"$node_bin" migrate --config "$toml" >/dev/null || die "butlers-node migrate failed"
reset_tables
start_node
warm_up bench

log "(a): sending $messages messages as fast as the node takes them"
a_429=0
a_errors=0
a_rounds=0
: >"$work/load.log"
while [ "$a_rounds" -lt 10 ]; do
  have=$(psql_bench "SELECT count(*) FROM message_inbox WHERE $measured")
  missing=$((messages - have))
  [ "$missing" -gt 0 ] || break
  a_rounds=$((a_rounds + 1))
  # (missing + 0.5) / rate: the generator sends floor(duration x rate).
  dur=$(awk -v n="$missing" -v r="$ingest_rate" 'BEGIN { printf "%.12f", (n + 0.5) / r }')
  out=$(timeout --kill-after=5 60 "$load_bin" --port "$node_port" \
    --connections "$ingest_connections" --rate "$ingest_rate" \
    --duration "$dur" --warmup 0 2>>"$work/load.log") ||
    node_failed "butlers_ingest_load failed in part (a)"
  result=$(grep '^RESULT ' <<<"$out" || true)
  [ -n "$result" ] || die "no RESULT line from butlers_ingest_load"
  printf '(a) round %s: %s\n' "$a_rounds" "$result" >>"$work/load.log"
  a_429=$((a_429 + $(field status_429 "$result")))
  a_errors=$((a_errors + $(field errors "$result")))
  # Requests cut off by the generator's deadline may still commit.
  [ "$(field errors "$result")" = 0 ] || sleep 1
done
a_sent=$(psql_bench "SELECT count(*) FROM message_inbox WHERE $measured")
a_timeout=$((messages / 50))
[ "$a_timeout" -ge 120 ] || a_timeout=120
log "(a): $a_sent messages stored in $a_rounds round(s); waiting up to $a_timeout s for all to end"
a_complete=1
wait_terminal "$measured" "$a_sent" "$a_timeout" || a_complete=0

IFS='|' read -r a_n a_parsed a_proc_s a_ingest_s < <(psql_bench "
  SELECT count(*), count(*) FILTER (WHERE lifecycle_state = 'parsed'),
         extract(epoch FROM max(completed_at) FILTER (WHERE lifecycle_state = 'parsed')
                            - min(received_at)),
         extract(epoch FROM max(received_at) - min(received_at))
  FROM message_inbox WHERE $measured")
a_rate=$(awk -v n="$a_parsed" -v s="$a_proc_s" 'BEGIN { if (s > 0) printf "%.6f", n / s }')
a_ingest_rate=$(awk -v n="$a_n" -v s="$a_ingest_s" 'BEGIN { if (s > 0) printf "%.6f", n / s }')
a_states=$(psql_bench "SELECT lifecycle_state || ' ' || count(*) FROM message_inbox
  WHERE $measured GROUP BY lifecycle_state ORDER BY lifecycle_state" | paste -sd ',' - | sed 's/,/, /g')
a_butlers=$(psql_bench "SELECT w.butler || ' (' || w.trigger_source || ') ' || count(*) FROM route_work w
  JOIN message_inbox m USING (request_id) WHERE m.$measured
  GROUP BY w.butler, w.trigger_source ORDER BY 1" | paste -sd ',' - | sed 's/,/, /g')
a_dead=$(psql_bench "SELECT count(*) FROM dead_letters")
kill -0 "$node_pid" 2>/dev/null || node_failed "the node died during part (a)"
stop_node

# -- (b) latency at R msg/s ------------------------------------------------------------

reset_tables
start_node
warm_up bench
log "(b): $rate msg/s open loop for $warmup + $latency_seconds s"
out=$(timeout --kill-after=5 $((warmup + latency_seconds + 40)) "$load_bin" \
  --port "$node_port" --connections 64 --rate "$rate" \
  --duration "$latency_seconds" --warmup "$warmup" 2>>"$work/load.log") ||
  node_failed "butlers_ingest_load failed in part (b)"
b_result=$(grep '^RESULT ' <<<"$out" || true)
[ -n "$b_result" ] || die "no RESULT line from butlers_ingest_load"
printf '(b): %s\n' "$b_result" >>"$work/load.log"
b_sent=$(psql_bench "SELECT count(*) FROM message_inbox WHERE $measured")
b_timeout=$((b_sent / 50))
[ "$b_timeout" -ge 60 ] || b_timeout=60
b_complete=1
wait_terminal "$measured" "$b_sent" "$b_timeout" || b_complete=0
b_states=$(psql_bench "SELECT lifecycle_state || ' ' || count(*) FROM message_inbox
  WHERE $measured GROUP BY lifecycle_state ORDER BY lifecycle_state" | paste -sd ',' - | sed 's/,/, /g')
# Each interval in ms over the parsed messages received after the warm-up,
# with the first work item of the message's route to `bench`.
psql_bench "
  WITH m AS (
    SELECT request_id, received_at, progress_at, completed_at, lifecycle_state
    FROM message_inbox WHERE $measured
  ), w AS (
    SELECT request_id, min(created_at) AS accepted, min(started_at) AS started
    FROM route_work WHERE butler = 'bench' AND trigger_source = 'route'
    GROUP BY request_id
  ), j AS (
    SELECT m.*, w.accepted, w.started FROM m JOIN w USING (request_id)
    WHERE m.lifecycle_state = 'parsed'
      AND m.received_at >= (SELECT min(received_at) FROM m) + interval '$warmup seconds'
  )
  SELECT x.ord, x.label, count(*),
         percentile_cont(0.5) WITHIN GROUP (ORDER BY x.ms),
         percentile_cont(0.99) WITHIN GROUP (ORDER BY x.ms), max(x.ms)
  FROM j CROSS JOIN LATERAL (VALUES
    (1, 'received → claimed', extract(epoch FROM j.progress_at - j.received_at) * 1000),
    (2, 'claimed → work accepted', extract(epoch FROM j.accepted - j.progress_at) * 1000),
    (3, 'work accepted → session start', extract(epoch FROM j.started - j.accepted) * 1000),
    (4, 'session start → parsed', extract(epoch FROM j.completed_at - j.started) * 1000),
    (5, 'received → session start', extract(epoch FROM j.started - j.received_at) * 1000),
    (6, 'received → parsed (end to end)', extract(epoch FROM j.completed_at - j.received_at) * 1000)
  ) AS x(ord, label, ms)
  GROUP BY x.ord, x.label ORDER BY x.ord" >"$work/b.rows"
# b_stat ORD COLUMN: a figure of row ORD (3 count, 4 p50, 5 p99, 6 max).
b_stat() { awk -F '|' -v o="$1" -v c="$2" '$1 == o { print $c }' "$work/b.rows"; }
kill -0 "$node_pid" 2>/dev/null || node_failed "the node died during part (b)"
stop_node

# -- (c) graphile-worker -----------------------------------------------------------------

gw_note=""
if [ "$skip_baseline" = 0 ]; then
  # The libpq variables: graphile-worker hands them to node-postgres when it
  # has no connection string (DATABASE_URL unset), over the Unix socket.
  gw_run() {
    (cd "$gw_dir" && env -u DATABASE_URL PGHOST="$pgdir" PGPORT="$pg_port" \
      PGUSER=postgres PGDATABASE=graphile_bench NO_LOG_SUCCESS=1 \
      timeout --kill-after=5 "$1" node gw_bench.mjs "${@:2}" 2>>"$work/graphile.log")
  }
  c_timeout=$((messages / 50))
  [ "$c_timeout" -ge 120 ] || c_timeout=120
  log "(c): graphile-worker $gw_version, $messages pre-enqueued no-op jobs"
  out=$(gw_run $((c_timeout + 120)) throughput --jobs "$messages" \
    --concurrency 10 --max-pool 12 --complete-job-batch-delay 0 \
    --timeout "$c_timeout") ||
    { tail -n 20 "$work/graphile.log" >&2; die "the graphile-worker throughput run failed"; }
  c_tp=$(grep '^RESULT ' <<<"$out" || true)
  [ -n "$c_tp" ] || die "no RESULT line from the graphile-worker throughput run"
  log "(c): graphile-worker at $rate jobs/s open loop for $warmup + $latency_seconds s"
  out=$(gw_run $((warmup + latency_seconds + 180)) latency --rate "$rate" \
    --seconds "$latency_seconds" --warmup "$warmup" --concurrency 10 \
    --max-pool 12 --complete-job-batch-delay 0 --timeout 60) ||
    { tail -n 20 "$work/graphile.log" >&2; die "the graphile-worker latency run failed"; }
  c_lat=$(grep '^RESULT ' <<<"$out" || true)
  [ -n "$c_lat" ] || die "no RESULT line from the graphile-worker latency run"
  c_rate=$(field jobs_per_s "$c_tp")
  node_version=$(field node "$c_tp")
  case "$(printf '%s\n%s\n' "${node_version#v}" 22.18.0 | sort -V | head -n 1)" in
    22.18.0) ;;
    *) gw_note="graphile-worker $gw_version declares Node.js >= 22.18.0; this ran on $node_version." ;;
  esac
fi

# -- (d) the seed table -------------------------------------------------------------------

seed_rows=()
seed_ratios=()
# seed_row LABEL SLOTS IDEAL_MS KEYWORD...: a fresh node with one butler per
# KEYWORD (named after it, SLOTS sessions of seed_turn_ms), one warm-up
# message per butler, then seed_messages messages posted at once, message
# i naming keyword i mod the number of keywords.
seed_row() {
  local label=$1 slots=$2 ideal=$3 k texts=() i n row count parsed makespan lat r
  shift 3
  stop_node
  reset_tables
  write_toml "seed-$((${#seed_rows[@]} + 1))"
  for k in "$@"; do butler_toml "$k" "[\"$k\"]" "$slots" "$seed_turn_ms"; done
  start_node
  warm_up "$@"
  n=$#
  local kw=("$@")
  for i in $(seq 0 $((seed_messages - 1))); do
    texts+=("${kw[$((i % n))]} seed message $i")
  done
  log "(d): $label"
  post_once seed "${texts[@]}"
  wait_terminal "source_sender_identity = 'seed'" "$seed_messages" 60 || true
  row=$(psql_bench "
    SELECT count(*), count(*) FILTER (WHERE lifecycle_state = 'parsed'),
           extract(epoch FROM max(completed_at) - min(received_at)) * 1000,
           string_agg(round((extract(epoch FROM completed_at - received_at) * 1000)::numeric)::text,
                      ' ' ORDER BY completed_at, received_at)
    FROM message_inbox WHERE source_sender_identity = 'seed'")
  IFS='|' read -r count parsed makespan lat <<<"$row"
  stop_node
  r=$(ratio "$makespan" "$ideal" 9)
  if [ "$parsed" -ne "$seed_messages" ]; then
    seed_rows+=("| **WARNING** $label: $parsed of $seed_messages parsed ($count stored) | $lat | $(fmt "$makespan" 1) | $ideal | $(fmt "$r" 3) |")
    seed_ratios+=(999)
  else
    seed_rows+=("| $label | $lat | $(fmt "$makespan" 1) | $ideal | $(fmt "$r" 3) |")
    seed_ratios+=("$r")
  fi
}
if [ "$skip_seed" = 0 ]; then
  for slots in 1 3 10; do
    # ceil(messages / slots) rounds of one session each.
    rounds=$(((seed_messages + slots - 1) / slots))
    seed_row "one butler, max_concurrent_sessions = $slots" "$slots" \
      $((rounds * seed_turn_ms)) bench
  done
  seed_row "ten butlers, max_concurrent_sessions = 1" 1 "$seed_turn_ms" \
    bench0 bench1 bench2 bench3 bench4 bench5 bench6 bench7 bench8 bench9
fi

pg_stop "$pgdir"

# -- the tables -----------------------------------------------------------------------------

read -r load_end _ </proc/loadavg || load_end="?"
echo
echo "Pipeline benchmark: $(nproc) cores (1-minute load average $load_start at the start, $load_end at the end), PostgreSQL 15 on a Unix socket, $("$node_bin" --version 2>/dev/null | head -n 1) from $build_dir"
echo
echo "### (a) Processing throughput: $messages messages, one scripted butler (turn_ms = 0, 64 sessions), switchboard workers = 32, queue_capacity = 10000, fairness = \"$fairness\""
echo
echo "| measure | messages | seconds | msg/s |"
echo "|---|---|---|---|"
echo "| processing: first receipt → last parsed | $a_parsed | $(fmt "$a_proc_s" 3) | $(fmt "$a_rate" 1) |"
echo "| ingest: first → last receipt (for reference) | $a_n | $(fmt "$a_ingest_s" 3) | $(fmt "$a_ingest_rate" 1) |"
if [ "$a_complete" = 0 ] || [ "$a_parsed" -ne "$a_n" ] || [ "$a_n" -lt "$messages" ]; then
  echo "| **WARNING: NOT ALL MESSAGES PARSED** ($a_parsed parsed of $a_n stored, $messages wanted$([ "$a_complete" = 1 ] || echo ", still open after $a_timeout s")) | $a_n | | |"
fi
echo
echo "lifecycle_state: $a_states. Work items by butler: ${a_butlers:-none}. Dead letters: $a_dead. Load generator: $a_rounds round(s), $a_429 answers 429, $a_errors without an answer."
echo
echo "### (b) Latency at $rate msg/s open loop, $latency_seconds s after $warmup s of warm-up (from the database's timestamps)"
echo
echo "| interval | messages | p50 ms | p99 ms | max ms |"
echo "|---|---|---|---|---|"
awk -F '|' '{ printf "| %s | %s | %.2f | %.2f | %.2f |\n", $2, $3, $4, $5, $6 }' "$work/b.rows"
b_n=$(b_stat 6 3)
if [ "$b_complete" = 0 ] || [ "$b_states" != "parsed $b_sent" ]; then
  echo "| **WARNING: NOT ALL MESSAGES PARSED** ($b_states) | $b_sent | | | |"
fi
echo
echo "lifecycle_state: $b_states; measured: ${b_n:-0}. The load generator's HTTP answers (202 once durable): p50 $(field p50_ms "$b_result") ms, p99 $(field p99_ms "$b_result") ms, max $(field max_ms "$b_result") ms; 429: $(field status_429 "$b_result"), errors: $(field errors "$b_result")."

proc_ratio=""
if [ "$skip_baseline" = 0 ]; then
  proc_ratio=$(ratio "$a_rate" "$c_rate" 9)
  echo
  echo "### (c) Baseline: graphile-worker $gw_version, no-op jobs, concurrency 10, maxPoolSize 12, completeJobBatchDelay 0 (localQueue off), own database on the same PostgreSQL"
  echo
  echo "| system | jobs / messages | seconds | per second |"
  echo "|---|---|---|---|"
  echo "| Butlers: ingest → parsed, part (a) | $a_parsed | $(fmt "$a_proc_s" 3) | $(fmt "$a_rate" 1) |"
  echo "| graphile-worker: pre-enqueued, first job start → last completion | $(field jobs "$c_tp") | $(fmt "$(field seconds "$c_tp")" 3) | $(fmt "$c_rate" 1) |"
  echo "| **ratio Butlers / graphile-worker** | | | **$(fmt "$proc_ratio" 2)** |"
  echo
  echo "| at $rate/s open loop, $latency_seconds s | measured | p50 ms | p99 ms | max ms |"
  echo "|---|---|---|---|---|"
  echo "| Butlers: received → session start | $(b_stat 5 3) | $(fmt "$(b_stat 5 4)") | $(fmt "$(b_stat 5 5)") | $(fmt "$(b_stat 5 6)") |"
  echo "| Butlers: received → parsed | $(b_stat 6 3) | $(fmt "$(b_stat 6 4)") | $(fmt "$(b_stat 6 5)") | $(fmt "$(b_stat 6 6)") |"
  echo "| graphile-worker: enqueue (addJob called) → handler start | $(field jobs "$c_lat") | $(fmt "$(field p50_ms "$c_lat")") | $(fmt "$(field p99_ms "$c_lat")") | $(fmt "$(field max_ms "$c_lat")") |"
  echo
  echo "Option names in graphile-worker $gw_version: concurrency (the run() option; preset worker.concurrentJobs) and maxPoolSize exist as run() options; completeJobBatchDelay exists only as preset.worker.completeJobBatchDelay (default -1, off), set there. Enqueue errors in the latency run: $(field errors "$c_lat")."
  [ -z "$gw_note" ] || echo "$gw_note"
fi

if [ "$skip_seed" = 0 ]; then
  echo
  echo "### (d) Spec 000 §2.4 through the whole pipeline: $seed_messages messages posted at once, scripted sessions of $seed_turn_ms ms, each row on a fresh node"
  echo
  echo "| scenario | latency of messages 1..$seed_messages, received → parsed (ms) | makespan (ms) | ideal (ms) | makespan / ideal |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${seed_rows[@]}"
fi

# -- the targets --------------------------------------------------------------------------

echo
echo "### Targets"
echo
if [ "$skip_baseline" = 0 ]; then
  echo "- processing ratio Butlers / graphile-worker ≥ 1.0: $(fmt "$proc_ratio" 3) — $(verdict "$proc_ratio" ">=" 1.0) (goal ≥ 3: $(verdict "$proc_ratio" ">=" 3.0))"
else
  echo "- processing ratio Butlers / graphile-worker ≥ 1.0 (goal 3): not measured (--skip-baseline); Butlers alone $(fmt "$a_rate" 1) msg/s"
fi
b_claim_p50=$(b_stat 1 4)
b_claim_p99=$(b_stat 1 5)
b_e2e_p50=$(b_stat 6 4)
b_e2e_p99=$(b_stat 6 5)
echo "- received → claimed p50 ≤ 2 ms: $(fmt "$b_claim_p50") ms — $(verdict "$b_claim_p50" "<=" 2); p99 ≤ 10 ms: $(fmt "$b_claim_p99") ms — $(verdict "$b_claim_p99" "<=" 10)"
echo "- received → parsed p50 ≤ 10 ms: $(fmt "$b_e2e_p50") ms — $(verdict "$b_e2e_p50" "<=" 10); p99 ≤ 50 ms: $(fmt "$b_e2e_p99") ms — $(verdict "$b_e2e_p99" "<=" 50)"
if [ "$skip_seed" = 0 ]; then
  worst=$(printf '%s\n' "${seed_ratios[@]}" | sort -g | tail -n 1)
  echo "- seed makespan ≤ 1.05 × ideal in every row: worst $(fmt "$worst" 3) — $(verdict "$worst" "<=" 1.05)"
else
  echo "- seed makespan ≤ 1.05 × ideal: not measured (--skip-seed)"
fi
if [ "$a_complete" = 0 ] || [ "$a_parsed" -ne "$a_n" ] || [ "$b_complete" = 0 ] || [ "$b_states" != "parsed $b_sent" ]; then
  echo "- **WARNING: some messages did not end parsed; see the tables above**"
fi
# What the nodes logged at warn and error level (log_level = "warn").
log_warn=$(cat "$work"/*.node.err 2>/dev/null | grep -c '"level":"warn' || true)
log_error=$(cat "$work"/*.node.err 2>/dev/null | grep -cE '"level":"(error|critical)' || true)
echo
echo "Node logs: $log_warn warning and $log_error error lines over $node_no node runs$([ -n "$keep_logs" ] && echo " (kept in $keep_logs)")."
echo "Run took $((SECONDS - started_at)) s."
