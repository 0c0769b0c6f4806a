#!/usr/bin/env bash
# Builds CAF 0.17.6 under ThreadSanitizer for `scripts/test.sh
# --sanitize=thread`, into DEST (default build-tsan/caf):
#
#   scripts/caf-tsan.sh [DEST]     prints DEST/lib when done
#
# Why: Debian's libcaf is not instrumented, so TSan cannot see the
# synchronization inside CAF's mailboxes and scheduler, reports every
# message handoff between two actors as a race and spends nearly all of a
# node's CPU on those reports (perf: 93 % in __tsan::FindRacyAddress).
# Against an instrumented CAF it sees every handoff and needs no CAF
# suppressions, so a race in our actors' code is reported, not hidden.
#
# What: the very source Debian 12 builds its libcaf packages from (the
# upstream tarball of actor-framework 0.17.6-2.1, from deb.debian.org,
# checked against the SHA-256 in Debian's .dsc), with every header replaced
# by the one installed in /usr/include (Debian's only change to a header
# adds `#include <limits>`), configured as Debian's build_config.hpp says
# (log level QUIET, exceptions and memory management on), compiled with
# -fsanitize=thread. The result has Debian's sonames; the TSan build links
# it instead of /usr/lib's (scripts/test.sh passes CAF_*_LIBRARY), and the
# headers stay Debian's. Only the TSan test build uses it; the product links
# Debian's package. Once built (a stamp records the tarball's hash) it is
# reused. About 10 min on 2 cores the first time, with ccache far less.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

dest=${1:-$ROOT/build-tsan/caf}
version=0.17.6
tarball=actor-framework_${version}.orig.tar.gz
url=http://deb.debian.org/debian/pool/main/a/actor-framework/$tarball
sha256=e2bf5bd243f08bb7d8adde197cfe3e6d71314ed3378fe0692f8932f4c3b3928c

if [ -f "$dest/stamp" ] && [ "$(cat "$dest/stamp")" = "$sha256" ] &&
   [ -f "$dest/lib/libcaf_core.so.$version" ]; then
  echo "$dest/lib"
  exit 0
fi

mkdir -p "$dest"
if [ ! -f "$dest/$tarball" ] ||
   ! echo "$sha256  $dest/$tarball" | sha256sum -c --status; then
  log "downloading $url"
  curl -fsSL --retry 3 -o "$dest/$tarball.part" "$url" ||
    die "could not download $url"
  mv "$dest/$tarball.part" "$dest/$tarball"
fi
echo "$sha256  $dest/$tarball" | sha256sum -c --status ||
  die "$dest/$tarball does not have the SHA-256 of Debian's .dsc ($sha256)"

src="$dest/src"
rm -rf "$src" "$dest/build" "$dest/lib"
mkdir -p "$src"
tar xzf "$dest/$tarball" -C "$src" --strip-components=1
# Compile against exactly the headers our code is compiled against.
for lib in core io openssl; do
  (cd "$src/libcaf_$lib" && find caf -name '*.hpp' | while read -r h; do
     if [ -f "/usr/include/$h" ]; then cp "/usr/include/$h" "$h"; fi
   done)
done

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
log "building CAF $version with -fsanitize=thread in $dest/build"
cmake -S "$src" -B "$dest/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_OPENCL=yes \
  -DCAF_NO_PYTHON=yes -DCAF_NO_TOOLS=yes -DCAF_NO_SUMMARY=yes \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" "${launcher[@]}" >&2
cmp -s "$dest/build/libcaf_core/caf/detail/build_config.hpp" \
  /usr/include/caf/detail/build_config.hpp ||
  die "CAF's build_config.hpp differs from Debian's: the libraries would not match its headers"
cmake --build "$dest/build" -j2 --target libcaf_core_shared libcaf_io_shared \
  libcaf_openssl_shared >&2
mkdir -p "$dest/lib"
find "$dest/build" -name "libcaf_*.so*" -exec cp -P {} "$dest/lib/" \;
[ -f "$dest/lib/libcaf_core.so.$version" ] ||
  die "no libcaf_core.so.$version after the build"
echo "$sha256" >"$dest/stamp"
echo "$dest/lib"
