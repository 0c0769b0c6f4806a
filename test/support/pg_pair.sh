#!/usr/bin/env bash
# A primary and a synchronous streaming standby on loopback, for the
# failover test (test/integration/failover_pgtest.cpp):
#
#   pg_pair.sh start DIR PRIMARY_PORT STANDBY_PORT
#       initdb and start the primary (synchronous_standby_names = standby),
#       take a base backup into the standby, start it, and wait until the
#       primary reports it as its synchronous standby; creates database
#       butlers on the primary.
#   pg_pair.sh kill-primary DIR    immediate shutdown (a crash: no checkpoint)
#   pg_pair.sh promote DIR         promotes the standby to primary (waits)
#   pg_pair.sh stop DIR            stops both, quiet when already stopped
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

cmd=$1 dir=$2

ctl() { as_pg_user "$PGBIN/pg_ctl" "$@"; }

case "$cmd" in
  start)
    p1=$3 p2=$4
    mkdir -p "$dir/primary" "$dir/standby"
    [ "$(id -u)" -ne 0 ] || chown postgres:postgres "$dir" "$dir/primary" "$dir/standby"
    as_pg_user "$PGBIN/initdb" -D "$dir/primary/data" -U postgres --auth=trust \
      -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    common="-c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200 \
            -c wal_level=replica -c max_wal_senders=4 -c hot_standby=on"
    ctl -D "$dir/primary/data" -l "$dir/primary/server.log" -w -t 60 \
      -o "-k $dir/primary -p $p1 $common -c synchronous_commit=on \
          -c synchronous_standby_names=standby" start >/dev/null ||
      { tail -n 30 "$dir/primary/server.log" >&2; die "primary did not start"; }
    as_pg_user "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$p1" -U postgres \
      -D "$dir/standby/data" -R -X stream \
      -d "host=127.0.0.1 port=$p1 user=postgres application_name=standby" \
      >"$dir/basebackup.log" 2>&1 ||
      { cat "$dir/basebackup.log" >&2; die "pg_basebackup failed"; }
    ctl -D "$dir/standby/data" -l "$dir/standby/server.log" -w -t 60 \
      -o "-k $dir/standby -p $p2 $common" start >/dev/null ||
      { tail -n 30 "$dir/standby/server.log" >&2; die "standby did not start"; }
    for _ in $(seq 1 300); do
      state=$("$PGBIN/psql" -h "$dir/primary" -p "$p1" -U postgres -tAc \
        "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'")
      [ "$state" = sync ] && break
      sleep 0.1
    done
    [ "$state" = sync ] || die "the standby did not become synchronous"
    "$PGBIN/psql" -h "$dir/primary" -p "$p1" -U postgres -qc \
      "CREATE DATABASE butlers" >/dev/null
    ;;
  kill-primary)
    ctl -D "$dir/primary/data" -m immediate -w stop >/dev/null ;;
  promote)
    ctl -D "$dir/standby/data" -w -t 60 promote >/dev/null ;;
  stop)
    for s in primary standby; do
      if [ -f "$dir/$s/data/postmaster.pid" ]; then
        ctl -D "$dir/$s/data" -m immediate -w stop >/dev/null 2>&1 || true
      fi
    done ;;
  *) die "unknown command '$cmd'" ;;
esac
