#!/usr/bin/env bash
# Cluster benchmark: route.execute accept round trip p50/p99 and routed
# messages/s to a butler on another node (two actor systems over loopback
# TCP through CAF's middleman), beside the same figures in-process, against
# a throwaway PostgreSQL.
#
#   test/bench/run_cluster_bench.sh [--calls N] [--messages M]
#                                   [--policy stealing|sharing|both]
#                                   [--build-dir DIR]
#
# setup -> build butlers_cluster_bench -> PostgreSQL 15 in a temporary
# directory -> the benchmark (prints Markdown tables) -> everything removed.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

calls=2000
messages=3000
policy=both
build_dir="$ROOT/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --calls) calls=${2:?--calls needs a number}; shift ;;
    --messages) messages=${2:?--messages needs a number}; shift ;;
    --policy) policy=${2:?--policy needs stealing, sharing or both}; shift ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[[ $calls =~ ^[0-9]+$ ]] && [ "$calls" -ge 10 ] && [ "$calls" -le 1000000 ] ||
  die "--calls takes 10..1000000"
[[ $messages =~ ^[0-9]+$ ]] && [ "$messages" -ge 10 ] &&
  [ "$messages" -le 1000000 ] || die "--messages takes 10..1000000"
case "$policy" in
  stealing|sharing) policies=("$policy") ;;
  both) policies=(stealing sharing) ;;
  *) die "--policy takes stealing, sharing or both" ;;
esac

"$ROOT/scripts/setup.sh"
log "building butlers_cluster_bench in $build_dir"
BUILD_TARGET=butlers_cluster_bench build "$build_dir" -DBUTLERS_SANITIZE=
bench_bin=$(find "$build_dir" -name butlers_cluster_bench -type f -perm -u+x |
  head -n 1)
[ -n "$bench_bin" ] || die "no butlers_cluster_bench under $build_dir"

work=$(mktemp -d /tmp/butlers-cluster-bench.XXXXXX)
chmod 755 "$work"
pgdir="$work/pg"
cleanup() {
  pg_stop "$pgdir"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_pg "$pgdir"
for p in "${policies[@]}"; do
  timeout 600 "$bench_bin" \
    "$bench_db_url" \
    --calls "$calls" --messages "$messages" --policy "$p" 2>/dev/null
  echo
done
