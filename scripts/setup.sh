#!/usr/bin/env bash
# Installs every Debian package Butlers needs to build, test and run.
# Idempotent: packages already present are not touched, and apt-get is
# only called when something is missing. This is the only install step.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake pkg-config ccache clang-format clang-tidy
  # clang with libFuzzer and its sanitizer runtimes: scripts/fuzz.sh (test/fuzz)
  clang libclang-rt-14-dev
  # libraries (Debian 12: CAF 0.17.6, libpqxx 6.4.5, RapidJSON 1.1)
  libcaf-dev libssl-dev libpqxx-dev libpq-dev rapidjson-dev
  librestinio-dev libasio-dev libhttp-parser-dev libfmt-dev
  libtomlplusplus-dev libspdlog-dev libcli11-dev
  # outbound HTTP(S) and SMTP; MIME parsing of incoming mail
  libcurl4-openssl-dev libgmime-3.0-dev
  # the node's allocator (CMake option BUTLERS_JEMALLOC)
  libjemalloc-dev
  libgtest-dev libgmock-dev googletest
  # PostgreSQL 15 server and client tools (initdb, pg_ctl, psql, pgbench)
  postgresql-15 postgresql-client-15 postgresql-contrib
  # used by the scripts and integration tests
  curl procps util-linux
  # the Python worker of test/fixtures/workers (standard library only)
  python3
  # the cluster TLS test and the HTTPS client tests make their CA and
  # certificates with it
  openssl
  # the dashboard browser test (headless, over the DevTools pipe)
  chromium
  # the MCP conformance test runs the official TypeScript SDK's client
  # (test/mcp, installed from the npm registry by the test; test-only)
  nodejs
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
      grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# npm comes with some builds of nodejs (NodeSource's) and is a package of
# its own in Debian's.
if ! command -v npm >/dev/null; then
  missing+=(npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
