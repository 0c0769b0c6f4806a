#!/usr/bin/env bash
# The whole suite against a throwaway PostgreSQL:
#   setup -> configure -> build (-j2) -> start PostgreSQL 15 in a temporary
#   directory on a free port -> every test through ctest -> tear down.
#
#   scripts/test.sh                              RelWithDebInfo in build/
#   scripts/test.sh --sanitize=address,undefined  build-address-undefined/
#   scripts/test.sh --sanitize=thread             build-tsan/
#   scripts/test.sh -- -R Uuid                    extra arguments for ctest
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sanitize=""
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize=*) sanitize=${1#--sanitize=} ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

"$ROOT/scripts/setup.sh"

build_dir="$ROOT/build"
cmake_args=(-DBUTLERS_SANITIZE=)
case "$sanitize" in
  "") ;;
  address,undefined|undefined,address|address|undefined)
    build_dir="$ROOT/build-$(echo "$sanitize" | tr , -)"
    cmake_args=("-DBUTLERS_SANITIZE=$(echo "$sanitize" | tr , ';')") ;;
  thread)
    build_dir="$ROOT/build-tsan"
    # CAF itself instrumented (scripts/caf-tsan.sh: Debian's source, built
    # once), so TSan sees the synchronization of every message handoff.
    caf_lib=$("$ROOT/scripts/caf-tsan.sh" "$build_dir/caf")
    cmake_args=("-DBUTLERS_SANITIZE=thread"
                "-DCAF_CORE_LIBRARY=$caf_lib/libcaf_core.so"
                "-DCAF_IO_LIBRARY=$caf_lib/libcaf_io.so"
                "-DCAF_OPENSSL_LIBRARY=$caf_lib/libcaf_openssl.so") ;;
  *) die "--sanitize takes address,undefined or thread" ;;
esac

log "building in $build_dir"
if [ -z "$sanitize" ]; then
  build "$build_dir" "${cmake_args[@]}"
else
  # Under a sanitizer only what the suite runs (the test binaries pull in
  # the node, the client and the fakes): no benchmarks, no header checks.
  BUILD_TARGET=butlers_unit_tests build "$build_dir" "${cmake_args[@]}"
  BUILD_TARGET=butlers_pg_tests build "$build_dir" "${cmake_args[@]}"
  # format and tidy read the sources, not the build: the normal run has
  # them, and they would only cost time here.
  ctest_args=(-LE style "${ctest_args[@]}")
fi

pgdir=$(mktemp -d /tmp/butlers-test-pg.XXXXXX)
chmod 755 "$pgdir"
cleanup() {
  pg_stop "$pgdir"
  rm -rf "$pgdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(free_port)
log "starting PostgreSQL on port $port ($pgdir)"
pg_start "$pgdir" "$port"
pg_createdb "$pgdir" "$port" butlers_test
export BUTLERS_TEST_DATABASE_URL="host=$pgdir port=$port dbname=butlers_test user=postgres"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/test/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# history_size=7: the previous access of a race keeps its stack (without it
# TSan prints "failed to restore the stack", and the report can be neither
# judged nor matched by test/tsan.supp).
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:history_size=7:second_deadlock_stack=1:suppressions=$ROOT/test/tsan.supp}

log "running the suite"
cd "$build_dir"
ctest --output-on-failure --no-tests=error "${ctest_args[@]}"
