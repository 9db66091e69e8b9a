#!/usr/bin/env bash
# Extract CPython's own regression tests (Lib/test) from the Debian source
# tarball the own build was made from, for internal/conformance/cpython:
#   $AIRLOCK_CACHE_DIR/cpython-tests/<sha256 of the tarball>/test/
# The stdlib zip leaves Lib/test out; the tests must be those of the
# build's own sources, so the folder is keyed by the tarball's sha256,
# which build.json records. A folder already there is kept (seconds).
# The tarball is the one scripts/build-python.sh fetched with apt-get source
# into its chroot; when it is gone (a pruned cache) it is fetched again
# there, verified by apt against the archive's signed index. Needs root
# only for that.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
ROOT="$CACHE/build/trixie-root"
# The pins are build-python.sh's: one source of truth for the version.
PY_PKG=$(sed -n 's/^PY_PKG=//p' scripts/build-python.sh)
PY_VER=$(sed -n 's/^PY_VER=//p' scripts/build-python.sh)
UPSTREAM=${PY_VER%-*}
TARBALL="$ROOT/src/${PY_PKG}_${UPSTREAM}.orig.tar.xz"

if [ ! -f "$TARBALL" ]; then
	[ -d "$ROOT" ] || { echo "cpython-tests: no build chroot at $ROOT: run scripts/build-python.sh first" >&2; exit 1; }
	[ "$(id -u)" -eq 0 ] || { echo "cpython-tests: $TARBALL is missing; fetching it again needs root (chroot): try sudo" >&2; exit 1; }
	echo "cpython-tests: $TARBALL is missing: apt-get source $PY_PKG=$PY_VER in the build chroot" >&2
	cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
	mkdir -p "$ROOT/src"
	chroot "$ROOT" sh -c "cd /src && apt-get update -qq && apt-get source -qq --download-only $PY_PKG=$PY_VER" >&2
	[ -f "$TARBALL" ] || { echo "cpython-tests: apt-get source did not give $TARBALL" >&2; exit 1; }
fi

SHA=$(sha256sum "$TARBALL" | cut -c1-64)
OUT="$CACHE/cpython-tests/$SHA"
if [ -f "$OUT/.complete" ]; then
	echo "cpython-tests: up to date: $OUT/test"
	exit 0
fi
rm -rf "$OUT.part" && mkdir -p "$OUT.part"
# Only Lib/test: the rest of the tree is the stdlib zip's already.
tar -xJf "$TARBALL" -C "$OUT.part" --strip-components=2 --wildcards "*/Lib/test/*"
[ -f "$OUT.part/test/__init__.py" ] || { echo "cpython-tests: no Lib/test/__init__.py in $TARBALL" >&2; exit 1; }
touch "$OUT.part/.complete"
rm -rf "$OUT" && mv "$OUT.part" "$OUT"
echo "cpython-tests: $OUT/test ($(find "$OUT/test" -type f | wc -l) files)"
