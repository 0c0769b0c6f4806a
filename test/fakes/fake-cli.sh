# Shared body of fake-claude, fake-codex and fake-opencode: sourced by them
# after they define emit_ok, emit_error and emit_partial (each prints its
# family's output shape), never run by itself. POSIX sh only.
#
# The prompt comes from stdin; when stdin is empty, the last argument is the
# prompt. Behaviour is switched by the environment:
#
#   FAKE_CLI_MODE         ok (default): answer "answer: <prompt>", exit 0
#                         error: the family's error shape, exit 1
#                         garbage: text that is not the family's shape, exit 0
#                         crash: a truncated answer, exit 3
#                         segv: a truncated answer, then die of SIGSEGV
#                         hang: start a child (sleep 1000) and wait forever
#                         flood: start a child (sleep 1000), then write
#                         stdout forever (yes)
#   FAKE_CLI_PIDFILE      hang, flood: once the sleeping child runs, write
#                         the shell's pid and the child's pid here, one per
#                         line (atomically, via rename)
#   FAKE_CLI_IGNORE_TERM  hang: 1 = the shell and its child ignore SIGTERM,
#                         so only SIGKILL ends them
#   FAKE_CLI_DELAY_MS     ok, error: sleep this long before answering
#   FAKE_CLI_SHAPE        fake-codex only: "legacy" prints the pre-2025-09
#                         {"msg":{...}} lines instead of item events
#   FAKE_CLI_STDERR       printed to stderr before anything else

prompt=$(cat)
if [ -z "$prompt" ]; then
  for arg in "$@"; do
    prompt=$arg
  done
fi

# JSON string contents: escapes backslash, quote, tab, CR and newline.
json_escape() {
  printf '%s' "$1" \
    | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' \
          -e "s/$(printf '\t')/\\\\t/g" -e "s/$(printf '\r')/\\\\r/g" \
    | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }'
}

# Whether the arguments ask for JSON events (opencode run --format json).
json_format=0
prev=
for arg in "$@"; do
  if [ "$arg" = "--format=json" ] || { [ "$prev" = "--format" ] && [ "$arg" = "json" ]; }; then
    json_format=1
  fi
  prev=$arg
done

write_pids() {
  if [ -n "${FAKE_CLI_PIDFILE:-}" ]; then
    printf '%s\n%s\n' "$$" "$1" > "$FAKE_CLI_PIDFILE.tmp"
    mv "$FAKE_CLI_PIDFILE.tmp" "$FAKE_CLI_PIDFILE"
  fi
}

delay() {
  if [ -n "${FAKE_CLI_DELAY_MS:-}" ]; then
    sleep "$((FAKE_CLI_DELAY_MS / 1000)).$(printf '%03d' $((FAKE_CLI_DELAY_MS % 1000)))"
  fi
}

if [ -n "${FAKE_CLI_STDERR:-}" ]; then
  printf '%s\n' "$FAKE_CLI_STDERR" >&2
fi

case "${FAKE_CLI_MODE:-ok}" in
  ok)
    delay
    emit_ok "answer: $prompt"
    exit 0
    ;;
  error)
    delay
    emit_error "fake error: $prompt"
    exit 1
    ;;
  garbage)
    printf 'garbage: not the expected {"shape\n\377\376 ]]}}\n'
    exit 0
    ;;
  crash)
    emit_partial
    exit 3
    ;;
  segv)
    emit_partial
    ulimit -c 0 # no core file in the test's directory
    kill -s SEGV $$
    ;;
  hang)
    if [ "${FAKE_CLI_IGNORE_TERM:-}" = 1 ]; then
      trap '' TERM # inherited by the child, too
    fi
    sleep 1000 &
    write_pids $!
    wait
    ;;
  flood)
    # The pids are written before the first byte, so a test can check the
    # group even when the output limit trips at once.
    sleep 1000 &
    write_pids $!
    yes "flood flood flood flood flood flood flood flood"
    ;;
  *)
    printf 'fake cli: unknown FAKE_CLI_MODE %s\n' "$FAKE_CLI_MODE" >&2
    exit 2
    ;;
esac
