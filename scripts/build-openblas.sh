#!/usr/bin/env bash
# Build OpenBLAS (BLAS and LAPACK) for wasm32-wasi, in the chroot
# scripts/build-python.sh makes, into
#   $AIRLOCK_CACHE_DIR/openblas/<key>/
#     lib/libopenblas.a          BLAS with OpenBLAS' generic C kernels
#                                (its RISCV64_GENERIC target: no assembly),
#                                CBLAS, and LAPACK from OpenBLAS' own C
#                                translation of it (C_LAPACK: no Fortran
#                                compiler); no threads
#     include/                   cblas.h, f77blas.h, openblas_config.h
#     lib/pkgconfig/openblas.pc  prefix /openblas, where build-python.sh
#                                puts this directory in the chroot
#     build.json                 the source's pin and sha256, the flags
# <key> is the first 16 hex digits of the sha256 of "<sha256>  <path>"
# lines for this script and scripts/openblas/* (patches and the fetch
# stand-in), each in byte order of its name. Up to date, it only prints
# where it is. With --print-dir, the directory is the only thing on stdout
# (build-python.sh reads it).
#
# The source is the sdist of cmeel-openblas 0.3.31 on PyPI, which carries
# OpenBLAS 0.3.31's release tree unchanged under OpenBLAS/; it is fetched
# with the host's pip, --require-hashes against the sha256 pinned here.
# Takes ~5 min on 2 cores (LAPACK's ~2,000 C files are most of it).
# Needs root (chroot) and the chroot; build-python.sh calls it before numpy.
set -euo pipefail
cd "$(dirname "$0")/.."

OPENBLAS_VER=0.3.31
OPENBLAS_SDIST=cmeel_openblas-$OPENBLAS_VER.tar.gz
OPENBLAS_SHA256=a3fe5e5875393a37f569da9bf1403adae45579570e8582b837bd985746d9ac20
# The wasm features are build-python.sh's.
WASM_FEATURES="-mbulk-memory -mnontrapping-fptoint -msign-ext -mmutable-globals"
# WASI has no System V shared memory (OpenBLAS' huge-page allocator) and
# emulates anonymous mmap with malloc, which OpenBLAS' buffer allocator
# uses: a program linking this links -lwasi-emulated-mman (openblas.pc says so).
# -Wno-return-mismatch: see the int returns below.
OPENBLAS_CFLAGS="-O2 $WASM_FEATURES -DNO_SYSV_IPC -D_WASI_EMULATED_MMAN -Wno-return-mismatch"
# The make variables: generic C kernels, f2c-style LAPACK in C, no
# Fortran, no LAPACKE (numpy and scipy call the Fortran-style symbols), no
# threads (WASI has none), a static library only.
OPENBLAS_MAKE_VARS="TARGET=RISCV64_GENERIC BINARY=32 NOFORTRAN=1 C_LAPACK=1 NO_LAPACKE=1 USE_THREAD=0 USE_OPENMP=0 NUM_THREADS=1
	NO_SHARED=1 DYNAMIC_ARCH=0 BUILD_BFLOAT16=0 NO_AFFINITY=1 CROSS=1"

PRINT_DIR=0
[ "${1:-}" = --print-dir ] && PRINT_DIR=1
CACHE="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
ROOT="$CACHE/build/trixie-root"
INPUT_DIR=scripts/openblas

KEY=$({
	sha256sum scripts/build-openblas.sh
	find "$INPUT_DIR" -type f ! -path '*/__pycache__/*' | LC_ALL=C sort | while read -r f; do sha256sum "$f"; done
} | sha256sum | cut -c1-16)
OUT="$CACHE/openblas/$KEY"
if [ -f "$OUT/.complete" ]; then
	if [ $PRINT_DIR -eq 1 ]; then echo "$OUT"; else echo "build-openblas: up to date: $OUT"; fi
	exit 0
fi

[ -x "$ROOT/usr/bin/clang-19" ] && [ -d "$ROOT/usr/lib/wasm32-wasi" ] ||
	{ echo "build-openblas: no toolchain chroot at $ROOT (clang-19, wasi-libc): run scripts/build-python.sh first (scripts/setup.sh does)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "build-openblas: needs root to enter the chroot at $ROOT; try sudo" >&2; exit 1; }
start=$(date +%s)
log() { echo "build-openblas: [$(($(date +%s) - start))s] $*" >&2; }

# --- the source, with the host's pip (its network set-up). pip asks the
# sdist's build backend (cmeel) for metadata, which would build OpenBLAS
# natively: scripts/openblas/fetch stands in for it (no build isolation).
DL="$CACHE/build/openblas-sources"
mkdir -p "$DL"
if ! echo "$OPENBLAS_SHA256  $DL/$OPENBLAS_SDIST" | sha256sum --quiet -c 2>/dev/null; then
	log "cmeel-openblas $OPENBLAS_VER sdist (pip download --require-hashes)"
	rm -rf "$DL" && mkdir -p "$DL"
	printf 'cmeel-openblas==%s --hash=sha256:%s\n' "$OPENBLAS_VER" "$OPENBLAS_SHA256" >"$CACHE/build/openblas-requirements.txt"
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD/$INPUT_DIR/fetch:$PWD/scripts/numpy/fetch" python3 -m pip download --quiet --no-deps --no-build-isolation \
		--no-binary :all: --python-version 3.13 -d "$DL" --require-hashes -r "$CACHE/build/openblas-requirements.txt" >"$CACHE/build/pip-openblas.log" 2>&1 ||
		{ tail -20 "$CACHE/build/pip-openblas.log" >&2; exit 1; }
fi
echo "$OPENBLAS_SHA256  $DL/$OPENBLAS_SDIST" | sha256sum --quiet -c 2>/dev/null ||
	{ echo "build-openblas: $OPENBLAS_SDIST is missing or its sha256 is not $OPENBLAS_SHA256" >&2; exit 1; }

# --- build in a scratch directory of this process's own inside the
# chroot, moved into place whole (as build-cxx-eh.sh does).
WORK=/openblas-build.$$
rm -rf "$ROOT$WORK" && mkdir -p "$ROOT$WORK/src" "$ROOT$WORK/bin" "$ROOT$WORK/out"
trap 'rm -rf "$ROOT$WORK"' EXIT
log "unpack OpenBLAS $OPENBLAS_VER"
tar -xzf "$DL/$OPENBLAS_SDIST" -C "$ROOT$WORK/src" --strip-components=2 "cmeel_openblas-$OPENBLAS_VER/OpenBLAS"
grep -qx "VERSION = $OPENBLAS_VER" "$ROOT$WORK/src/Makefile.rule" ||
	{ echo "build-openblas: the sdist's OpenBLAS/Makefile.rule does not say VERSION = $OPENBLAS_VER" >&2; exit 1; }
# Airlock's changes (each patch says why).
for p in "$INPUT_DIR"/patches/*.patch; do patch -s -p1 -d "$ROOT$WORK/src" <"$p"; done
# One return type for every Fortran-style routine: int, as f2c declares
# a SUBROUTINE and as numpy (and Pyodide's scipy) declare the ones they
# call. OpenBLAS mixes void (the C LAPACK's subroutines, its BLAS
# interface) and int (its own LAPACK routines, getrf, potrf, ...); native
# ABIs do not care, but wasm-ld turns every call through a declaration of
# another type into a trap ("function signature mismatch"), within
# OpenBLAS itself and from numpy. The value is never read (LAPACK reports
# through INFO); -Wno-return-mismatch lets `return;` stand. CBLAS
# (cblas_*, void in cblas.h and in numpy's declarations) is left alone.
# In the C LAPACK (and its test-matrix library, which `make netlib` puts
# in the archive too), a Fortran routine is declared `void` with or
# without the marker; functions are declared with their value's type.
find "$ROOT$WORK/src/lapack-netlib/SRC" "$ROOT$WORK/src/lapack-netlib/INSTALL" "$ROOT$WORK/src/lapack-netlib/TESTING/MATGEN" -name '*.c' -print0 |
	xargs -0 sed -i -e 's@/\* Subroutine \*/ void@/* Subroutine */ int@g' -e 's@extern void @extern int @g'
# A few routines still call xerbla_ without the name's hidden length
# (the ?geqp3rk family, ?gedmd and ?gedmdq, the deprecated ?geqrs/?gelqs):
# it is added, as every other caller passes it, to their declarations too,
# wherever f2c put them in a list and however it wrapped the lines (hence
# the whole file at once, -0777).
find "$ROOT$WORK/src/lapack-netlib/SRC" -name '*.c' -print0 | xargs -0 perl -0777 -pi -e \
	's/xerbla_\(\s*char\s*\*\s*,\s*integer\s*\*\s*\)/xerbla_(char *, integer *, ftnlen)/g; s/xerbla_\("([A-Z0-9_ ]+)", (&?\w+)\);/"xerbla_(\"$1\", $2, (ftnlen)" . length($1) . ");"/ge'
sed -i -E 's/^void(\s+)NAME\(/int\1NAME(/' "$ROOT$WORK/src"/interface/*.c
# laed3's own prototypes of the LAPACK routines it calls.
sed -i -E 's/^void (LAED4|LACPY|LASET)\(/int \1(/' "$ROOT$WORK/src"/lapack/laed3/*.c
sed -i -E 's/\bvoid(\s+)BLASFUNC\(/int\1BLASFUNC(/g' "$ROOT$WORK/src/common_interface.h"
# The compiler as OpenBLAS' c_check wants it: one word without a dash
# (it derives a cross prefix from a dashed name), dropping the RISC-V
# -march/-mabi the target adds and -fPIC (nothing is loaded dynamically).
cat >"$ROOT$WORK/bin/wasicc" <<'EOF'
#!/bin/bash
args=()
for a in "$@"; do case "$a" in -march=* | -mabi=* | -mtune=* | -fPIC | -fpic) ;; *) args+=("$a") ;; esac; done
exec clang-19 --target=wasm32-wasi "${args[@]}"
EOF
chmod +x "$ROOT$WORK/bin/wasicc"
cat >"$ROOT$WORK/build.sh" <<'EOS'
set -eu
cd "$WORK/src"
export PATH="$WORK/bin:$PATH"
# libs (BLAS, CBLAS, OpenBLAS' own LAPACK routines), then netlib (the C
# translation of the rest of LAPACK) into the same archive: one after the
# other, as both write the archive (in one -j run they raced).
for target in libs netlib; do
	make -j"$JOBS" $target CC=wasicc HOSTCC=gcc AR=llvm-ar-19 RANLIB=llvm-ranlib-19 $OPENBLAS_MAKE_VARS \
		COMMON_OPT="$OPENBLAS_CFLAGS" >"$WORK/make-$target.log" 2>&1 ||
		{ grep -B3 -A10 -m3 -E 'error:|Error [0-9]' "$WORK/make-$target.log" | head -60; exit 1; }
done
make install PREFIX="$WORK/out" $OPENBLAS_MAKE_VARS CC=wasicc HOSTCC=gcc >"$WORK/install.log" 2>&1 || { tail -30 "$WORK/install.log"; exit 1; }
# Every routine linked at once: a signature mismatch between any caller
# and callee inside the library fails the build here, not at run time.
clang-19 --target=wasm32-wasi -nostartfiles -Wl,--no-entry -Wl,--export-all \
	-Wl,--whole-archive "$WORK/out/lib/libopenblas.a" -Wl,--no-whole-archive -lwasi-emulated-mman \
	-o "$WORK/whole.wasm" >"$WORK/link.log" 2>&1 || { tail -30 "$WORK/link.log"; exit 1; }
if grep -q 'signature mismatch' "$WORK/link.log"; then
	echo "build-openblas: function signature mismatches inside libopenblas.a (each traps when called):" >&2
	grep -A2 'signature mismatch' "$WORK/link.log" | head -40 >&2
	exit 1
fi
EOS
log "make libs netlib (~10 min on 2 cores)"
chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 WORK="$WORK" \
	OPENBLAS_CFLAGS="$OPENBLAS_CFLAGS" OPENBLAS_MAKE_VARS="$(echo $OPENBLAS_MAKE_VARS)" JOBS="${AIRLOCK_BUILD_JOBS:-2}" bash "$WORK/build.sh" >&2
log "done compiling"
# The installed tree, reduced to what a build needs, at /openblas.
O="$ROOT$WORK/out"
rm -rf "$O/lib/cmake" "$O/bin"
# make install names the archive after the target and links
# libopenblas.a to it: the file itself, under the plain name, is kept
# (copied aside before the glob removes both).
[ -f "$O/lib/libopenblas.a" ] || { echo "build-openblas: make install left no libopenblas.a" >&2; exit 1; }
cp "$(readlink -f "$O/lib/libopenblas.a")" "$O/lib.a.tmp"
rm -f "$O"/lib/libopenblas*.a && mv "$O/lib.a.tmp" "$O/lib/libopenblas.a"
mkdir -p "$O/lib/pkgconfig"
cat >"$O/lib/pkgconfig/openblas.pc" <<EOF
prefix=/openblas
libdir=\${prefix}/lib
includedir=\${prefix}/include
openblas_config= USE_64BITINT= NO_CBLAS= NO_LAPACK= NO_LAPACKE=1 DYNAMIC_ARCH=0 DYNAMIC_OLDER= NO_AFFINITY=1 USE_OPENMP=0 RISCV64_GENERIC MAX_THREADS=1
version=$OPENBLAS_VER
extralib=-lwasi-emulated-mman

Name: openblas
Description: OpenBLAS $OPENBLAS_VER for wasm32-wasi (generic C kernels, C LAPACK, no threads)
Version: $OPENBLAS_VER
URL: https://github.com/OpenMathLib/OpenBLAS
Libs: \${libdir}/libopenblas.a -lwasi-emulated-mman
Cflags: -I\${includedir}
EOF
cat >"$O/build.json" <<-EOF
	{
	  "key": "$KEY",
	  "source": {"sdist": "$OPENBLAS_SDIST", "openblas_version": "$OPENBLAS_VER", "sha256": "$OPENBLAS_SHA256"},
	  "cflags": "$OPENBLAS_CFLAGS",
	  "make": "$(echo $OPENBLAS_MAKE_VARS)",
	  "build_seconds": $(($(date +%s) - start))
	}
EOF
mkdir -p "$CACHE/openblas"
PART="$OUT.part.$$"
rm -rf "$PART" && cp -a "$O" "$PART"
touch "$PART/.complete"
# A key directory without .complete is not ours to keep.
[ -f "$OUT/.complete" ] || rm -rf "$OUT"
if ! mv -T "$PART" "$OUT" 2>/dev/null; then
	rm -rf "$PART"
	[ -f "$OUT/.complete" ] || { echo "build-openblas: could not move the build into $OUT" >&2; exit 1; }
fi
# Older keys are dropped, but for the 8 newest (other checkouts' sources).
ls -dt "$CACHE"/openblas/*/ | grep -E '/[0-9a-f]{16}/$' | tail -n +9 | while read -r d; do rm -rf "$d"; done || true
log "built $OUT"
[ $PRINT_DIR -eq 0 ] || echo "$OUT"
