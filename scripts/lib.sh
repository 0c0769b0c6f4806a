# Shared by scripts/test.sh and scripts/run.sh: build and PostgreSQL helpers.
# shellcheck shell=bash

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# build DIR [extra cmake args...]: configure (once) and build with -j2.
# BUILD_TARGET limits the build to one target (run.sh: just the node).
build() {
  local dir=$1
  shift
  # ccache keys on paths relative to the checkout, so a fresh clone in
  # another directory (CI, a check before a stop) reuses the objects.
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >&2
  else
    cmake "$dir" "$@" >/dev/null
  fi
  if [ -n "${BUILD_TARGET:-}" ]; then
    cmake --build "$dir" -j2 --target "$BUILD_TARGET" >&2
  else
    cmake --build "$dir" -j2 >&2
  fi
}

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on, below
# the kernel's ephemeral range: a port in that range can be the local end of
# an outgoing connection at any moment, and then a server cannot bind it
# ("Address already in use") although nothing listens there.
# Builds butlers-node and the benchmark program $1 in $2 (without
# sanitizers) and sets node_bin and bench_bin to them.
build_node_and_bench() {
  local name=$1 dir=$2
  log "building butlers-node and $name in $dir"
  BUILD_TARGET=butlers-node build "$dir" -DBUTLERS_SANITIZE=
  BUILD_TARGET="$name" build "$dir" -DBUTLERS_SANITIZE=
  node_bin="$dir/butlers-node"
  bench_bin=$(find "$dir" -name "$name" -type f -perm -u+x | head -n 1)
  [ -x "$node_bin" ] || die "no $node_bin after the build"
  [ -n "$bench_bin" ] || die "no $name under $dir"
}

free_port() {
  local port lo=32768 span
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  span=$((lo - 20000))
  # A range that starts below 21000: above the default one's end instead.
  [ "$span" -ge 1000 ] || { lo=65536; span=$((65536 - 61000)); }
  for _ in $(seq 1 100); do
    port=$((lo - span + RANDOM % span))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  die "no free port found"
}

# as_pg_user CMD...: runs CMD as the PostgreSQL owner. initdb refuses root,
# so as root we use the 'postgres' system user the server package creates.
as_pg_user() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# pg_start DIR PORT: initdb DIR/data (if new) and start a server listening on
# a Unix socket in DIR and on 127.0.0.1:PORT. Exports BUTLERS_PG_* for tests.
# PG_EXTRA_OPTS adds server options (e.g. "-c wal_init_zero=off").
pg_start() {
  local dir=$1 port=$2
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres:postgres "$dir"
    # Every parent must be traversable by the server's user.
    local p=$dir
    while [ "$p" != "/" ]; do
      p=$(dirname "$p")
      if ! runuser -u postgres -- test -x "$p"; then
        die "PostgreSQL (user postgres) cannot reach $dir: $p is not traversable"
      fi
    done
  fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_pg_user "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust \
      -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  fi
  as_pg_user "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-k $dir -p $port -c listen_addresses=127.0.0.1 -c fsync=on \
        -c synchronous_commit=on -c max_connections=200 \
        -c shared_buffers=256MB ${PG_EXTRA_OPTS:-}" start >/dev/null ||
    { tail -n 30 "$dir/server.log" >&2; die "PostgreSQL did not start"; }
  export BUTLERS_PG_DIR=$dir BUTLERS_PG_PORT=$port BUTLERS_PG_BIN=$PGBIN
}

# pg_stop DIR: fast shutdown, quiet if it is not running.
pg_stop() {
  local dir=$1
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_pg_user "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
}

# pg_createdb DIR PORT NAME: creates database NAME unless it exists.
pg_createdb() {
  local dir=$1 port=$2 name=$3
  if ! "$PGBIN/psql" -h "$dir" -p "$port" -U postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = '$name'" | grep -q 1; then
    "$PGBIN/psql" -h "$dir" -p "$port" -U postgres -qc "CREATE DATABASE \"$name\"" >/dev/null
  fi
}

# bench_pg DIR: starts a throwaway PostgreSQL in DIR on a free port with a
# database butlers_bench, and sets bench_db_url to its libpq URL.
bench_pg() {
  local dir=$1 port
  port=$(free_port)
  log "starting PostgreSQL on port $port ($dir)"
  pg_start "$dir" "$port"
  pg_createdb "$dir" "$port" butlers_bench
  bench_db_url="host=$dir port=$port dbname=butlers_bench user=postgres"
}

# node_wait_ready PID OUT ERR: waits for a node started in the background
# (its stdout in OUT, stderr in ERR) to print its listening line, then for
# GET /readyz to answer 200 (database reachable and migrated). Sets
# NODE_PORT to the port it listens on. Dies with ERR's tail if the node
# exits first or takes longer than 60 s to listen or 30 s to be ready.
node_wait_ready() {
  local pid=$1 out=$2 err=$3 line code _
  node_not_ready() { tail -n 30 "$err" >&2 || true; die "$1"; }
  for _ in $(seq 1 600); do
    grep -q '"event":"listening"' "$out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || node_not_ready "the node exited on start"
    sleep 0.1
  done
  line=$(grep -m 1 '"event":"listening"' "$out" || true)
  [ -n "$line" ] || node_not_ready "the node did not print its listening line in 60 s"
  NODE_PORT=$(sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p' <<<"$line")
  [ -n "$NODE_PORT" ] || node_not_ready "no port in '$line'"
  for _ in $(seq 1 300); do
    code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' \
      "http://127.0.0.1:$NODE_PORT/readyz" || true)
    [ "$code" = "200" ] && return 0
    kill -0 "$pid" 2>/dev/null || node_not_ready "the node exited before it was ready"
    sleep 0.1
  done
  node_not_ready "GET /readyz did not answer 200 within 30 s"
}

# node_stop PID: stops a node started in the background: SIGTERM, then up
# to 15 s (its drain deadline of 10 s, the watchdog's 2 s and some slack),
# then SIGKILL; reaps it. Quiet when PID is empty or already gone.
node_stop() {
  local pid=$1 _
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "node did not stop within 15 s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

# post_at_once DIR PORT ID_PREFIX SENDER TEXT...: posts one ingest.v1
# message per TEXT to the node on PORT, all at once (one curl, parallel
# connections), from SENDER, with event ids ID_PREFIX-1, ID_PREFIX-2, ...;
# the bodies and the curl config go under DIR. Returns 1, naming the
# answers, unless every answer is 202.
post_at_once() {
  local dir=$1 port=$2 prefix=$3 sender=$4 text i=0 observed cfg codes
  shift 4
  observed=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  cfg="$dir/$prefix.curl"
  : >"$cfg"
  for text in "$@"; do
    i=$((i + 1))
    local id="$prefix-$i"
    printf '{"schema_version":"ingest.v1","source":{"channel":"api","provider":"internal","endpoint_identity":"bench"},"event":{"external_event_id":"%s","observed_at":"%s"},"sender":{"identity":"%s"},"payload":{"raw":{},"normalized_text":"%s"},"control":{"idempotency_key":"%s"}}' \
      "$id" "$observed" "$sender" "$text" "$id" >"$dir/$prefix.$i.json"
    [ "$i" -eq 1 ] || echo "next" >>"$cfg"
    cat >>"$cfg" <<EOF
url = "http://127.0.0.1:$port/v1/ingest"
header = "Content-Type: application/json"
data-binary = "@$dir/$prefix.$i.json"
output = "/dev/null"
write-out = "%{http_code}\n"
max-time = 10
EOF
  done
  codes=$(curl --no-progress-meter --parallel --parallel-immediate \
    --parallel-max "$i" -K "$cfg" || true)
  if [ "$(grep -c '^202$' <<<"$codes")" -ne "$i" ]; then
    log "POST /v1/ingest answered $(tr '\n' ' ' <<<"$codes")instead of $i x 202"
    return 1
  fi
}
