#!/usr/bin/env bash
# Compile Airlock's own WASI conformance programs (internal/conformance/wasi-c/*.c)
# to wasm32-wasi command modules with Debian's clang-19 and wasi-libc, in the
# chroot scripts/build-python.sh makes, into
#   $AIRLOCK_CACHE_DIR/wasi-c/<key>/NAME.wasm
# <key> is the first 16 hex digits of the sha256 of this script's and the
# sources' sha256 lines (internal/conformance/wasic_test.go computes the same
# key to find them). Up to date, it only prints where they are.
# Needs root (chroot) and the chroot; scripts/setup.sh calls it after the
# Python build.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
ROOT="$CACHE/build/trixie-root"
SRCDIR=internal/conformance/wasi-c

# The Go test hashes the same lines: "<sha256>  <name>\n" for this script,
# then for each source in byte order of its name.
KEY=$({
	sha256sum scripts/build-wasi-c.sh
	(cd "$SRCDIR" && LC_ALL=C ls | while read -r f; do [ -f "$f" ] && sha256sum "$f"; done)
} | sha256sum | cut -c1-16)
OUT="$CACHE/wasi-c/$KEY"
if [ -f "$OUT/.complete" ]; then
	echo "build-wasi-c: up to date: $OUT"
	exit 0
fi

[ -x "$ROOT/usr/bin/clang-19" ] && [ -f "$ROOT/usr/lib/wasm32-wasi/libc.a" ] ||
	{ echo "build-wasi-c: no toolchain chroot at $ROOT (clang-19, wasi-libc): run scripts/build-python.sh first (scripts/setup.sh does)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "build-wasi-c: needs root to enter the chroot at $ROOT; try sudo" >&2; exit 1; }

# Built in a scratch directory of this process's own inside the chroot,
# then moved into place whole, so a failed build leaves no half-filled key
# directory and two builds at once (two CI runs on one machine) do not mix.
WORK=/wasi-c-build.$$
rm -rf "$ROOT$WORK" && mkdir -p "$ROOT$WORK/src" "$ROOT$WORK/out"
cp "$SRCDIR"/*.c "$SRCDIR"/*.h "$ROOT$WORK/src/"
# Debian installs wasi-libc under the wasm32-wasi triple (as build-python.sh
# spells it); -Werror keeps a check from silently comparing the wrong type.
chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 sh -c "
	set -e
	cd $WORK/src
	for c in *.c; do
		[ \"\$c\" = check.c ] && continue
		clang-19 --target=wasm32-wasi -O1 -Wl,--strip-debug -Wall -Wextra -Werror -Wno-unused-parameter -o ../out/\${c%.c}.wasm \"\$c\" check.c
	done
"
mkdir -p "$CACHE/wasi-c"
PART="$OUT.part.$$"
rm -rf "$PART" && mkdir -p "$PART"
cp "$ROOT$WORK"/out/*.wasm "$PART/"
touch "$PART/.complete"
rm -rf "$ROOT$WORK"
# A key directory without .complete is not ours to keep.
[ -f "$OUT/.complete" ] || rm -rf "$OUT"
if ! mv -T "$PART" "$OUT" 2>/dev/null; then
	# Another build of the same sources finished first: its programs are these.
	rm -rf "$PART"
	[ -f "$OUT/.complete" ] || { echo "build-wasi-c: could not move the programs into $OUT" >&2; exit 1; }
fi
# Older keys' programs are dropped, but for the 8 newest: other checkouts
# sharing the cache (other branches) keep theirs, and the cache stays small.
ls -dt "$CACHE"/wasi-c/*/ | grep -E '/[0-9a-f]{16}/$' | tail -n +9 | while read -r d; do rm -rf "$d"; done || true
echo "build-wasi-c: built $(ls "$OUT"/*.wasm | wc -l) programs into $OUT"
