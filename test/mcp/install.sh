#!/usr/bin/env bash
# Installs the official MCP TypeScript SDK, exactly as test/mcp/
# package-lock.json pins it, and the client scripts of this folder into DIR
# (a folder of the build tree: test/integration/mcp_sdk_pgtest.cpp passes
# <build>/test/mcp-sdk). Test-only; nothing of it is part of the product.
#
#   test/mcp/install.sh DIR
#
# Idempotent and fast when done: the scripts are copied every time, and
# `npm ci` runs only when DIR/node_modules was installed from another
# package-lock.json (a copy of the one used is kept as the stamp) or the
# SDK there is not the pinned version. Concurrent runs wait for each other
# (flock). Fails, saying why, without Node.js and npm or when npm ci fails.
#
# To move to another SDK version: change the exact pin in package.json, run
# `npm install --package-lock-only --no-audit --no-fund` here (it rewrites
# package-lock.json and installs nothing), and commit both files.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${1:?usage: install.sh DIR}
die() { printf 'test/mcp/install.sh: error: %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null || die "Node.js (node) is not on PATH; the MCP SDK conformance test needs it"
command -v npm >/dev/null || die "npm is not on PATH; the MCP SDK conformance test needs it"

mkdir -p "$dir"
exec 9>"$dir/.install.lock"
flock -w 600 9 || die "another install into $dir holds $dir/.install.lock"

cp "$src/package.json" "$src/package-lock.json" "$src"/*.mjs "$dir/"

# The SDK version package.json pins, and the one installed in DIR ("" if
# none).
pinned=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).dependencies["@modelcontextprotocol/sdk"])' \
  "$src/package.json")
installed() {
  node -e 'try { console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).version) } catch (e) { console.log("") }' \
    "$dir/node_modules/@modelcontextprotocol/sdk/package.json"
}

stamp="$dir/node_modules/.butlers-package-lock.json"
if cmp -s "$src/package-lock.json" "$stamp" && [ "$(installed)" = "$pinned" ]; then
  exit 0
fi
echo "test/mcp/install.sh: npm ci of @modelcontextprotocol/sdk $pinned into $dir" >&2
(cd "$dir" && timeout 180 npm ci --no-audit --no-fund --ignore-scripts \
  --loglevel=error) >&2 ||
  die "npm ci in $dir failed (is the npm registry reachable, or the package in ~/.npm?)"
[ "$(installed)" = "$pinned" ] ||
  die "@modelcontextprotocol/sdk $pinned is not in $dir/node_modules after npm ci (found '$(installed)')"
cp "$src/package-lock.json" "$stamp"
