#!/usr/bin/env bash
# Butler benchmark: the latency table of spec 000 §2.4 (ten concurrent
# messages, scripted runtime) and route accept latency while the target
# butler is busy, against a throwaway PostgreSQL.
#
#   test/bench/run_butler_bench.sh [--turn-ms T] [--accepts N]
#                                  [--build-dir DIR]
#
# setup -> build butlers_butler_bench -> PostgreSQL 15 in a temporary
# directory -> the benchmark (prints Markdown tables) -> everything removed.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

turn_ms=200
accepts=1000
build_dir="$ROOT/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --turn-ms) turn_ms=${2:?--turn-ms needs milliseconds}; shift ;;
    --accepts) accepts=${2:?--accepts needs a number}; shift ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[[ $turn_ms =~ ^[0-9]+$ ]] && [ "$turn_ms" -ge 1 ] && [ "$turn_ms" -le 60000 ] ||
  die "--turn-ms takes 1..60000"
[[ $accepts =~ ^[0-9]+$ ]] && [ "$accepts" -ge 10 ] && [ "$accepts" -le 1000000 ] ||
  die "--accepts takes 10..1000000"

"$ROOT/scripts/setup.sh"
log "building butlers_butler_bench in $build_dir"
BUILD_TARGET=butlers_butler_bench build "$build_dir" -DBUTLERS_SANITIZE=
bench_bin=$(find "$build_dir" -name butlers_butler_bench -type f -perm -u+x |
  head -n 1)
[ -n "$bench_bin" ] || die "no butlers_butler_bench under $build_dir"

work=$(mktemp -d /tmp/butlers-butler-bench.XXXXXX)
chmod 755 "$work"
pgdir="$work/pg"
cleanup() {
  pg_stop "$pgdir"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_pg "$pgdir"
timeout 600 "$bench_bin" \
  "$bench_db_url" \
  --turn-ms "$turn_ms" --accepts "$accepts"
