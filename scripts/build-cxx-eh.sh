#!/usr/bin/env bash
# Build C++ exceptions for wasm32-wasi without the exception-handling
# proposal (RATIONALE, "C++ exceptions"), in the chroot
# scripts/build-python.sh makes, into
#   $AIRLOCK_CACHE_DIR/cxx-eh/<key>/
#     lib/libc++abi.a   LLVM 19.1.7's libc++abi built with -fexceptions and
#                       LLVM's Emscripten-style lowering, its unwinder and
#                       personality replaced by scripts/cxx-eh/eh_runtime.cpp,
#                       with sjlj_runtime.c's setjmp/longjmp
#     lib/libc++.a      LLVM 19.1.7's libc++ built the same way (the objects
#                       of Debian's wasm32 libc++.a, whose code was compiled
#                       without exceptions: where it threw, it aborted)
#     lib/libairlock_sjlj.a  scripts/cxx-eh/sjlj_runtime.c alone, for C
#     include/setjmp.h  scripts/cxx-eh/setjmp.h, ahead of wasi-libc's
#     test/NAME.wasm    internal/conformance/cxx-eh/*.cpp and *.c linked
#                       against them
#     build.json        the source's pin and sha256, the flags
# <key> is the first 16 hex digits of the sha256 of "<sha256>  <path>"
# lines for this script, then scripts/cxx-eh/*, then
# internal/conformance/cxx-eh/*, each in byte order of its name
# (internal/conformance/cxxeh_test.go computes the same key to find them).
# Up to date, it only prints where they are. With --print-dir, the
# directory is the only thing on stdout (build-python.sh reads it).
#
# A program uses it by compiling its C++ with $CXXEH_FLAGS below and
# linking with $CXXEH_LDFLAGS: the host then serves its env.invoke_* and
# airlock_eh.unwind imports (internal/engine/cxxeh.go). C that calls
# setjmp compiles with $SJLJ_FLAGS and -isystem <dir>/include, and links
# -lairlock_sjlj (or -lc++abi) with $CXXEH_LDFLAGS.
#
# The source is Debian's llvm-toolchain-19 orig tarball (164 MB; only
# libcxxabi/, libcxx/src/ and libunwind/include/ are unpacked),
# fetched by apt in the chroot and checked against the sha256 pinned here,
# which is the one
# trixie's signed Sources index lists. Takes ~1 min on 2 cores after the
# download (unpacking the tarball ~15 s, compiling ~40 s).
# Needs root (chroot) and the chroot; scripts/setup.sh calls it after the
# Python build.
set -euo pipefail
cd "$(dirname "$0")/.."

LLVM_SRC_PKG=llvm-toolchain-19
LLVM_SRC_VER=1:19.1.7-3
LLVM_ORIG=llvm-toolchain-19_19.1.7.orig.tar.xz
LLVM_ORIG_SHA256=ae498f3bc58ae2d9f64ef5f0c035c4240152bf015a5b7738b15c22e93bdc97ce
# The wasm features are build-python.sh's.
WASM_FEATURES="-mbulk-memory -mnontrapping-fptoint -msign-ext -mmutable-globals"
# Every object of a program using exceptions, libc++abi's included, is
# compiled with these: landing pads become invoke_ calls and __THREW__
# checks. The setjmp/longjmp lowering is on too, so that C++ calling
# setjmp works and its handlers let a longjmp by.
CXXEH_FLAGS="-fexceptions -mllvm -enable-emscripten-cxx-exceptions -mllvm -enable-emscripten-sjlj $WASM_FEATURES"
# C calling setjmp: each call of a setjmp's function that may longjmp
# becomes an invoke_ call, setjmp and longjmp calls into the runtime.
SJLJ_FLAGS="-mllvm -enable-emscripten-sjlj $WASM_FEATURES"
# The host restores the stack pointer after an unwind and calls the
# table's functions: both must be exported.
CXXEH_LDFLAGS="-Wl,--export=__stack_pointer -Wl,--export-table"

PRINT_DIR=0
[ "${1:-}" = --print-dir ] && PRINT_DIR=1
CACHE="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
ROOT="$CACHE/build/trixie-root"
RUNTIME_DIR=scripts/cxx-eh
TEST_DIR=internal/conformance/cxx-eh

KEY=$({
	sha256sum scripts/build-cxx-eh.sh
	for d in "$RUNTIME_DIR" "$TEST_DIR"; do
		(LC_ALL=C ls "$d" | while read -r f; do [ -f "$d/$f" ] && sha256sum "$d/$f"; done)
	done
} | sha256sum | cut -c1-16)
OUT="$CACHE/cxx-eh/$KEY"
if [ -f "$OUT/.complete" ]; then
	if [ $PRINT_DIR -eq 1 ]; then echo "$OUT"; else echo "build-cxx-eh: up to date: $OUT"; fi
	exit 0
fi

[ -x "$ROOT/usr/bin/clang-19" ] && [ -f "$ROOT/usr/lib/wasm32-wasi/libc++.a" ] ||
	{ echo "build-cxx-eh: no toolchain chroot at $ROOT (clang-19, wasi-libc, libc++): run scripts/build-python.sh first (scripts/setup.sh does)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "build-cxx-eh: needs root to enter the chroot at $ROOT; try sudo" >&2; exit 1; }
start=$(date +%s)
log() { echo "build-cxx-eh: [$(($(date +%s) - start))s] $*" >&2; }

# --- the source, through apt (checked against the signed index), kept in
# the chroot beside build-python.sh's sources for the next key.
SRC=/src-cxx-eh
mkdir -p "$ROOT$SRC"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
if ! echo "$LLVM_ORIG_SHA256  $ROOT$SRC/$LLVM_ORIG" | sha256sum --quiet -c 2>/dev/null; then
	log "apt-get source $LLVM_SRC_PKG=$LLVM_SRC_VER (the orig tarball, 164 MB)"
	# Only the upstream tarball is used (Debian's packaging is not), so a
	# mirror without the .dsc still serves; the tarball is checked below.
	chroot "$ROOT" sh -c "cd $SRC && apt-get source -qq --download-only $LLVM_SRC_PKG=$LLVM_SRC_VER" >"$CACHE/build/cxx-eh-source.log" 2>&1 || true
fi
indexed=$(chroot "$ROOT" apt-cache showsrc "$LLVM_SRC_PKG" 2>/dev/null |
	awk -v f="$LLVM_ORIG" '/^Checksums-Sha256:/{on=1; next} /^[^ ]/{on=0} on && $3==f && !seen {print $1; seen=1}')
[ "$indexed" = "$LLVM_ORIG_SHA256" ] ||
	{ echo "build-cxx-eh: the archive index lists sha256 '${indexed:-none}' for $LLVM_ORIG, not the pinned $LLVM_ORIG_SHA256" >&2; exit 1; }
echo "$LLVM_ORIG_SHA256  $ROOT$SRC/$LLVM_ORIG" | sha256sum --quiet -c 2>/dev/null ||
	{ echo "build-cxx-eh: $LLVM_ORIG is missing or its sha256 is not $LLVM_ORIG_SHA256 (apt's log: $CACHE/build/cxx-eh-source.log)" >&2; tail -5 "$CACHE/build/cxx-eh-source.log" >&2 || true; exit 1; }

# --- build in a scratch directory of this process's own inside the
# chroot, moved into place whole (as build-wasi-c.sh does).
WORK=/cxx-eh-build.$$
rm -rf "$ROOT$WORK" && mkdir -p "$ROOT$WORK/src" "$ROOT$WORK/runtime" "$ROOT$WORK/test" "$ROOT$WORK/out/lib" "$ROOT$WORK/out/include" "$ROOT$WORK/out/test"
trap 'rm -rf "$ROOT$WORK"' EXIT
cp "$RUNTIME_DIR"/* "$ROOT$WORK/runtime/"
cp "$TEST_DIR"/*.cpp "$TEST_DIR"/*.c "$ROOT$WORK/test/"
log "unpack libcxxabi, libcxx's sources and libunwind's headers"
tar -xf "$ROOT$SRC/$LLVM_ORIG" -C "$ROOT$WORK/src" --strip-components=1 \
	--wildcards 'llvm-toolchain-19_19.1.7/libcxxabi/*' 'llvm-toolchain-19_19.1.7/libunwind/include/*' 'llvm-toolchain-19_19.1.7/libcxx/src/*'
log "compile libc++abi, libc++ and the runtime"
cat >"$ROOT$WORK/build.sh" <<'EOS'
set -eu
cd "$WORK"
ABI=src/libcxxabi
# libc++abi's CMake list for a static library with exceptions
# (libcxxabi/src/CMakeLists.txt), but for cxa_personality.cpp, whose work
# eh_runtime.cpp does; WASI has no threads.
SOURCES="cxa_aux_runtime cxa_default_handlers cxa_demangle cxa_exception_storage cxa_guard cxa_handlers
	cxa_vector cxa_virtual stdlib_exception stdlib_stdexcept stdlib_typeinfo abort_message fallback_malloc
	private_typeinfo stdlib_new_delete cxa_exception"
COMMON="--target=wasm32-wasi -O2 -std=c++20 -D_LIBCXXABI_BUILDING_LIBRARY -D_LIBCPP_BUILDING_LIBRARY -D_LIBCXXABI_HAS_NO_THREADS -DNDEBUG -I$ABI/include -I$ABI/src -Isrc/libunwind/include -Isrc/libcxx/src -Wall -Wno-unused-parameter -Wno-unused-function"
mkdir -p obj
export COMMON CXXEH_FLAGS ABI
echo $SOURCES | tr ' ' '\n' | xargs -P "$JOBS" -I{} sh -c 'clang++-19 $COMMON $CXXEH_FLAGS -c $ABI/src/{}.cpp -o obj/{}.o'
# The runtime itself has no landing pads: plain code, no invoke_.
clang++-19 $COMMON -fno-exceptions $WASM_FEATURES -Werror -c runtime/eh_runtime.cpp -o obj/eh_runtime.o
clang-19 --target=wasm32-wasi -O2 -std=c11 $WASM_FEATURES -Wall -Wextra -Werror -c runtime/sjlj_runtime.c -o obj/sjlj_runtime.o
llvm-ar-19 rcs out/lib/libc++abi.a obj/*.o
llvm-ar-19 rcs out/lib/libairlock_sjlj.a obj/sjlj_runtime.o
cp runtime/setjmp.h out/include/setjmp.h
# libc++: the sources of the objects in Debian's wasm32 libc++.a (its
# configuration: no threads, no filesystem but path, its __config_site
# and headers, which are this release's), compiled with exceptions; its
# libc++abi members are the library above.
CXX_SOURCES="algorithm any bind call_once charconv chrono error_category exception expected
	filesystem/filesystem_clock filesystem/filesystem_error filesystem/path functional hash
	legacy_pointer_safety memory memory_resource new_handler new_helpers optional print
	random_shuffle ryu/d2fixed ryu/d2s ryu/f2s stdexcept string system_error typeinfo valarray
	variant vector verbose_abort random fstream ios ios.instantiations iostream locale ostream
	regex strstream"
CXX="src/libcxx/src"
CXXCOMMON="--target=wasm32-wasi -O2 -std=c++23 -D_LIBCPP_BUILDING_LIBRARY -DLIBCXX_BUILDING_LIBCXXABI -DNDEBUG -I$CXX -I$ABI/include -Wno-user-defined-literals"
mkdir -p cxxobj
export CXXCOMMON CXX
echo $CXX_SOURCES | tr ' ' '\n' | xargs -P "$JOBS" -I{} sh -c 'clang++-19 $CXXCOMMON $CXXEH_FLAGS -c $CXX/{}.cpp -o cxxobj/$(basename {}).o'
llvm-ar-19 rcs out/lib/libc++.a cxxobj/*.o
# The test programs, against both.
cd test
for c in *.cpp; do
	clang++-19 --target=wasm32-wasi -O2 -std=c++20 $CXXEH_FLAGS -isystem ../out/include -Wall -Wextra -Werror -Wno-unused-parameter \
		-nostdlib++ -o ../out/test/${c%.cpp}.wasm "$c" -L../out/lib -lc++ -lc++abi $CXXEH_LDFLAGS -Wl,--strip-debug
done
for c in *.c; do
	clang-19 --target=wasm32-wasi -O2 -std=gnu11 $SJLJ_FLAGS -isystem ../out/include -Wall -Wextra -Werror -Wno-unused-parameter \
		-o ../out/test/${c%.c}.wasm "$c" -L../out/lib -lairlock_sjlj $CXXEH_LDFLAGS -Wl,--strip-debug
done
EOS
chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 WORK="$WORK" \
	WASM_FEATURES="$WASM_FEATURES" CXXEH_FLAGS="$CXXEH_FLAGS" SJLJ_FLAGS="$SJLJ_FLAGS" CXXEH_LDFLAGS="$CXXEH_LDFLAGS" JOBS="${AIRLOCK_BUILD_JOBS:-2}" sh "$WORK/build.sh" >&2
log "done compiling"
cat >"$ROOT$WORK/out/build.json" <<-EOF
	{
	  "key": "$KEY",
	  "source": {"package": "$LLVM_SRC_PKG", "version": "$LLVM_SRC_VER", "file": "$LLVM_ORIG", "sha256": "$LLVM_ORIG_SHA256"},
	  "cxxflags": "$CXXEH_FLAGS",
	  "sjlj_cflags": "$SJLJ_FLAGS",
	  "ldflags": "$CXXEH_LDFLAGS"
	}
EOF
mkdir -p "$CACHE/cxx-eh"
PART="$OUT.part.$$"
rm -rf "$PART" && cp -a "$ROOT$WORK/out" "$PART"
touch "$PART/.complete"
# A key directory without .complete is not ours to keep.
[ -f "$OUT/.complete" ] || rm -rf "$OUT"
if ! mv -T "$PART" "$OUT" 2>/dev/null; then
	rm -rf "$PART"
	[ -f "$OUT/.complete" ] || { echo "build-cxx-eh: could not move the build into $OUT" >&2; exit 1; }
fi
# Older keys are dropped, but for the 8 newest (other checkouts' sources).
ls -dt "$CACHE"/cxx-eh/*/ | grep -E '/[0-9a-f]{16}/$' | tail -n +9 | while read -r d; do rm -rf "$d"; done || true
log "built $OUT"
[ $PRINT_DIR -eq 0 ] || echo "$OUT"
