#!/usr/bin/env bash
# Builds the libFuzzer targets of test/fuzz (clang, in build-fuzz/) and runs
# one or every target for SECONDS each (default 60), one after another:
#
#   scripts/fuzz.sh                 every target, 60 s each
#   scripts/fuzz.sh all 600         every target, 10 minutes each
#   scripts/fuzz.sh ingest_diff 30  one target
#   scripts/fuzz.sh --list          the targets
#
# Each run starts from a copy of test/fuzz/corpus/<target> in
# build-fuzz/work/<target>/ (so the repository's corpus changes only on
# purpose) and ends with one Markdown table row per target: executions,
# exec/s, coverage (libFuzzer's final cov: and ft:) and crashes. Exits
# non-zero when any target found a crash, leak, hang or OOM, after printing
# the path of the file that reproduces it (run the target binary on it).
# BUTLERS_FUZZ_BUILD_DIR overrides build-fuzz/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fuzz_dir="$ROOT/test/fuzz"
build_dir="${BUTLERS_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"

targets=(ingest_fast ingest_full ingest_diff schema turn_body cli_output
         claude_stream codex_app_server cli_router route config cron sse
         model_stream telegram_update mail worker_wire slack_event)

# Longest input per target: a few times the largest real one.
max_len() {
  case "$1" in
    cron) echo 256 ;;
    turn_body|worker_wire) echo 4096 ;;
    mail) echo 65536 ;;
    *) echo 16384 ;;
  esac
}

dict() {
  case "$1" in
    config) echo toml ;;
    cron) echo cron ;;
    sse|model_stream) echo sse ;;
    mail) echo mail ;;
    *) echo json ;;
  esac
}

which="${1:-all}"
seconds="${2:-60}"
case "$which" in
  -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
  --list) printf '%s\n' "${targets[@]}"; exit 0 ;;
  all) run=("${targets[@]}") ;;
  *)
    [[ " ${targets[*]} " == *" $which "* ]] ||
      die "unknown target '$which' (see --list)"
    run=("$which") ;;
esac
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] ||
  die "SECONDS must be a positive integer, got '$seconds'"
command -v clang++ >/dev/null || die "clang++ missing: run scripts/setup.sh"

export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
started=$(date +%s)
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$build_dir" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUTLERS_FUZZ=ON >&2
fi
build_target=fuzz_all
[ ${#run[@]} -eq 1 ] && build_target="fuzz_${run[0]}"
nice -n 5 cmake --build "$build_dir" -j2 --target "$build_target" >&2
log "built $build_target in $(( $(date +%s) - started )) s"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

rows=()
failed=0
for t in "${run[@]}"; do
  work="$build_dir/work/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp "$fuzz_dir/corpus/$t/"* "$work/corpus/"
  log "fuzzing $t for $seconds s"
  rc=0
  (cd "$work" && nice -n 10 "$build_dir/fuzz_$t" \
     -max_total_time="$seconds" -max_len="$(max_len "$t")" \
     -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
     -dict="$fuzz_dir/dict/$(dict "$t").dict" \
     -artifact_prefix="$work/artifacts/" corpus >"$work/log" 2>&1) || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
  cov=$( (grep -o 'cov: [0-9]*' "$work/log" || true) | tail -1 | cut -d' ' -f2)
  ft=$( (grep -o 'ft: [0-9]*' "$work/log" || true) | tail -1 | cut -d' ' -f2)
  found=$(find "$work/artifacts" -type f | wc -l)
  if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
    failed=1
    log "$t FAILED (exit $rc); log: $work/log"
    find "$work/artifacts" -type f -printf "$(basename "$0"): crash file: %p\n" >&2
    grep -m3 -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$work/log" >&2 || true
  fi
  result=$found
  [ "$rc" -ne 0 ] && [ "$found" -eq 0 ] && result="failed (exit $rc)"
  rows+=("| $t | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | $result |")
done

echo
echo "Fuzzing, $seconds s per target ($(date -u +%Y-%m-%d), $(nproc) cores):"
echo
echo "| target | executions | exec/s | cov | ft | crashes |"
echo "|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
log "whole fuzz step: $(( $(date +%s) - started )) s"
exit "$failed"
