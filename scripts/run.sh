#!/usr/bin/env bash
# Installs what is missing, builds, starts (or reuses) a local PostgreSQL
# under .data/pg, and runs a node on config/node.toml in the foreground.
# Ctrl-C stops the node, then the database.
#
#   scripts/run.sh                   config/node.toml
#   scripts/run.sh path/to/node.toml another configuration
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

config=${1:-$ROOT/config/node.toml}
"$ROOT/scripts/setup.sh"
BUILD_TARGET=butlers-node build "$ROOT/build"

pgdir="$ROOT/.data/pg"
port=${BUTLERS_PG_PORT:-5433}
mkdir -p "$ROOT/.data"
if [ -f "$pgdir/data/postmaster.pid" ] &&
    as_pg_user "$PGBIN/pg_ctl" -D "$pgdir/data" status >/dev/null 2>&1; then
  port=$(sed -n 4p "$pgdir/data/postmaster.pid")
  log "reusing PostgreSQL on port $port"
  started_pg=0
else
  log "starting PostgreSQL on port $port ($pgdir)"
  pg_start "$pgdir" "$port"
  started_pg=1
fi
pg_createdb "$pgdir" "$port" butlers

stop_pg() {
  if [ "$started_pg" -eq 1 ]; then
    log "stopping PostgreSQL"
    pg_stop "$pgdir"
  fi
}
trap stop_pg EXIT

export BUTLERS_DATABASE_URL=${BUTLERS_DATABASE_URL:-"host=$pgdir port=$port dbname=butlers user=postgres"}
log "node on $config (Ctrl-C to stop)"
# The node handles SIGINT itself (drain, exit 0); the shell waits for it.
"$ROOT/build/butlers-node" run --config "$config" &
node=$!
trap 'kill -INT $node 2>/dev/null || true' INT TERM
status=0
wait "$node" || status=$?
# A trapped signal interrupts the first wait; wait for the node's exit.
if kill -0 "$node" 2>/dev/null; then
  wait "$node" || status=$?
fi
exit "$status"
