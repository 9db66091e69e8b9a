#!/usr/bin/env bash
# Build Airlock's own CPython 3.13 for wasm32-wasi (preview 1), optimised,
# from Debian's packages, into $AIRLOCK_CACHE_DIR/python313/:
#   python.wasm      the interpreter (name section kept, DWARF dropped)
#   python313.zip    the standard library as precompiled .pyc, stored
#   build.json       pinned inputs, flags, and the sha256 of every source
#                    apt fetched and of both outputs
# The toolchain is Debian trixie's (clang 19, wasi-libc), in a debootstrap
# chroot under $AIRLOCK_CACHE_DIR/build/, so the host's own release does not
# matter. zlib, bzip2, xz and sqlite3 are cross-built from their Debian
# sources first; OpenBLAS (scripts/build-openblas.sh) after CPython, then
# numpy (scripts/numpy/) with it as BLAS and LAPACK, pandas
# (scripts/pandas/) after numpy, PyYAML, MarkupSafe, regex and lxml
# (scripts/parsers/) after pandas, the chart stack (scripts/charts/:
# matplotlib, Pillow) after them, orjson (scripts/orjson/, Rust) after that,
# and all are linked into python.wasm; last, the threads stage
# (scripts/threads/) compiles CPython's Python/thread.c again with
# Airlock's pthreads and links python.wasm with it (seconds).
# Needs root (debootstrap, chroot) and ~4 GB of disk.
#
# Takes ~11 minutes on 2 cores for CPython (~13 the first time, making the
# chroot), ~5 more for OpenBLAS (once: a cache of its own), ~3 for numpy,
# ~5 for pandas (8-9 min of CPU: 14-29 min of
# wall time while other builds loaded the machine) and 2-6 for wasm-opt of
# the 27 MB module (~10 min of wall time more for the parsers stage, 2-3
# of CPU, on a loaded machine; 2.5-4 min more for the chart stage, ~8
# of CPU with the outputs' step, and a 36 MB module; ~1 min for the orjson
# stage, ~15 s more the first time for Debian's Rust); a second call whose
# inputs (this script, the pins, the flags, the patches, the PGO training
# program, scripts/openblas/, scripts/numpy/, scripts/pandas/, scripts/parsers/, scripts/charts/,
# scripts/orjson/, scripts/threads/) are unchanged returns in
# seconds; a change to OpenBLAS' or numpy's step alone redoes numpy and
# every stage after it (pandas, parsers, charts, orjson) and the outputs, a change to
# pandas' only pandas and the stages after it, and so on.
# AIRLOCK_BUILD_JOBS sets make's -j (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

# --- pins: Debian trixie source packages (apt checks them against the
# signed archive index; their sha256s land in build.json) and flags.
SUITE=trixie
PY_PKG=python3.13
PY_VER=3.13.5-2+deb13u5
ZLIB_VER=1:1.3.dfsg+really1.3.1-1
BZIP2_VER=1.0.8-6
XZ_VER=5.8.1-1+deb13u1
SQLITE_VER=3.46.1-7+deb13u2
# The IANA time zone database for zoneinfo (WASI has no /usr/share/zoneinfo):
# PyPI's tzdata wheel, pure data, packed into the stdlib zip.
TZDATA_VER=2026.6
TZDATA_SHA256=0a10eec6e13ef16b627fabed9a5f2ba61a62b1c67f327305f4e7e412a70b4aec
# numpy, statically linked in (scripts/numpy/build-numpy.sh): its sdist
# from PyPI, built with the meson it vendors and Cython's wheel (run
# natively in the chroot), both fetched by pip --require-hashes.
NUMPY_VER=2.5.5
NUMPY_SHA256=5cddc243c75114ba845f01b1f87aca1572dbf7b6c2d88636ed3e1d2bccd7f1bf
CYTHON_VER=3.3.1
CYTHON_WHEEL=cython-3.3.1-cp313-cp313-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl
CYTHON_SHA256=85be5442e8f465c7c5e80837ac2a85a2ce04034e616445113092e85b65d0ab94
# pandas, statically linked in beside numpy (scripts/pandas/build-pandas.sh):
# its sdist from PyPI, built with numpy's meson and Cython against the
# numpy built above; python-dateutil, its one pure-Python dependency here
# (tzdata is above), a wheel packed into the stdlib zip.
PANDAS_VER=3.1.1
PANDAS_SHA256=05fed3e3b7c99b226f160e29d7d6cb7ef39638c758cbfe42b3f24ba34f04b859
DATEUTIL_VER=4.0.0
DATEUTIL_SHA256=a5e246f79eb80475e691bf93862cead98decd8a498cf53ba0516fcdc0f50dc1c
# PyYAML (its C loader on libyaml), MarkupSafe's speedups, regex and lxml
# (on libxml2, libxslt and libexslt), statically linked in after pandas
# (scripts/parsers/build-parsers.sh): the sdists from PyPI, the C
# libraries from Debian's sources.
PYYAML_VER=6.0.4
PYYAML_SHA256=e24bf71af8a432d7808fabff134d38dfe16d3cbb41f2873bb4b1e42422de0a1a
MARKUPSAFE_VER=3.0.4
MARKUPSAFE_SHA256=2e9ad7dd851bf45fab9f75cbff4cb493fee9979e8d8c7c9c3ee119022518edd6
REGEX_VER=2026.12.2
REGEX_SHA256=1d7cb427e5d86beb77bfa298a648f6079a31b261baec467b15b134b33c31fed1
LXML_VER=6.2.0
LXML_SHA256=07f185a5757e24bef8ebfe1eeeae4ea903f0a168b647f2b9bd1c88193ca0c412
LIBYAML_VER=0.2.5-2
LIBXML2_VER=2.12.7+dfsg+really2.9.14-2.1+deb13u3
LIBXSLT_VER=1.1.35-1.2+deb13u3
# Charts (scripts/charts/build-charts.sh), statically linked after pandas:
# FreeType, qhull and libjpeg-turbo from Debian (their orig tarballs pinned
# here too: the archive serves them, not every .dsc beside them), then
# kiwisolver, contourpy, matplotlib and Pillow from their sdists, with
# pybind11's and cppy's headers (wheels, build tools only). matplotlib
# 3.10 is the newest without 3.11's libraqm/HarfBuzz/SheenBidi text stack.
# The stage adds ~4 MB to python.wasm, ~24 MB to the stdlib zip
# (mpl-data's fonts) and its build time (docs/packages.md).
# Their pure-Python dependencies are wheels packed into the stdlib zip
# (packaging is a default-layer wheel as well, the same file).
FONTTOOLS_VER=4.68.0
FONTTOOLS_SHA256=d76f8fdcb6936f5e1045a0c9dd721a4bf11112e60d1e243bfa1d39f06a8b3104
CYCLER_VER=0.12.1
CYCLER_SHA256=85cef7cff222d8644161529808465972e51340599459b8ac3ccbac5a854e0d30
PYPARSING_VER=3.3.3
PYPARSING_SHA256=ece8c00a69cf01b45d0b1dedabb469c90d8caf996d4fda40f147627a122849a4
PACKAGING_VER=26.4
PACKAGING_SHA256=81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2
# FreeType twice: Debian's for Pillow (13.0 needs 2.9 or newer); for
# matplotlib 2.6.5, the release closest to the 2.6.1 matplotlib pins for
# its tests and bundles in its wheels (its baseline images' text is drawn
# with it; RATIONALE.md says why), the copy the servo-freetype-sys crate
# vendors (its freetype2/ folder), fetched with the chroot's cargo, its symbols renamed
# so that the two link side by side.
FREETYPE_VER=2.13.3+dfsg-1+deb13u2
FREETYPE_ORIG_SHA256=686ec73cbf6783b245dd068a09ce807b729ac0f8a46dd70f7867923c32fdf4de
MPL_FREETYPE_VER=2.6.5
MPL_FREETYPE_CRATE=servo-freetype-sys
MPL_FREETYPE_CRATE_VER=4.0.5
MPL_FREETYPE_CRATE_SHA256=2c4ccb6d0d32d277d3ef7dea86203d8210945eb7a45fba89dd445b3595dd0dfc
QHULL_VER=2020.2-6
QHULL_ORIG_SHA256=b5c2d7eb833278881b952c8a52d20179eab87766b00b865000469a45c1838b7e
LIBJPEG_VER=1:2.1.5-4
LIBJPEG_ORIG_SHA256=254f3642b04e309fee775123133c6464181addc150499561020312ec61c1bf7c
# Pillow's codecs beyond JPEG and PNG, Debian's sources too.
TIFF_VER=4.7.0-3+deb13u3
TIFF_ORIG_SHA256=2b8b5c4e79cb2a4651796602e45d6179b7f18bc283feab417b8e881ef7e81862
OPENJPEG_VER=2.5.3-2.1~deb13u2
OPENJPEG_ORIG_SHA256=3100f0316e922630112cf6d72c0c20776896e64ad7eab72c2f713c460287eb92
LIBWEBP_VER=1.5.0-0.1
LIBWEBP_ORIG_SHA256=7d6fab70cf844bf6769077bd5d7a74893f8ffd4dfb42861745750c63c2a5c92c
LCMS2_VER=2.16-2+deb13u2
LCMS2_ORIG_SHA256=d873d34ad8b9b4cea010631f1a6228d2087475e4dc5e763eb81acc23d9d45a51
# Complex text layout for Pillow (bidirectional text, shaping: Arabic,
# Hebrew, Indic scripts, ligatures) through the raqm its sdist vendors:
# HarfBuzz and FriBiDi, Debian's sources too.
HARFBUZZ_VER=10.2.0-1+deb13u1
HARFBUZZ_ORIG_SHA256=620e3468faec2ea8685d32c46a58469b850ef63040b3565cde05959825b48227
FRIBIDI_VER=1.0.16-1
FRIBIDI_ORIG_SHA256=1b1cde5b235d40479e91be2f0e88a309e3214c8ab470ec8a2744d82a5a9ea05c
# Colour glyphs (PNG in CBDT and sbix fonts) and WOFF2 fonts for Pillow's
# FreeType: libpng and brotli's decoder.
LIBPNG_VER=1.6.48-1+deb13u6
LIBPNG_ORIG_SHA256=b17e99026055727e8cba99160c3a9a7f9af788e9f786daeadded5a42243f1dd0
BROTLI_VER=1.1.0-2+deb13u1
BROTLI_ORIG_SHA256=10973f4b4199eafa1d5735ef661ddb2ec2f97319ee9fd1824d4aabe08cff5265
# AVIF for Pillow: libaom (AV1, encoding and decoding) from Debian's
# sources, libavif from the libavif-sys crate's copy (Debian's archive
# here serves no libavif source), fetched with the chroot's cargo as the
# FreeType crate below is; its Rust is not built.
AOM_VER=3.12.1-1+deb13u1
AOM_ORIG_SHA256=40c929a41b2a59c24319a699c358351422829b3ae646de31b18cbabed0191962
LIBAVIF_CRATE=libavif-sys
LIBAVIF_CRATE_VER=0.17.0+libavif.1.0.4
LIBAVIF_CRATE_SHA256=490ca74b61e773140bebb086c81facb23273a99364a9ab0c92ab1532b90ade35
MPL_VER=3.10.9
MPL_SHA256=fd66508e8c6877d98e586654b608a0456db8d7e8a546eb1e2600efd957302358
KIWI_VER=1.5.1
KIWI_SHA256=f1303ef2eec81262a4b708c3e858afe58d7c75ad91c1c05266eda7673369859a
CONTOURPY_VER=1.3.3
CONTOURPY_SHA256=083e12155b210502d0bca491432bb04d56dc3432f95a979b429f2848c3dbe880
PILLOW_VER=13.0.0
PILLOW_SHA256=cdcd1ba258178f7356d74170c9a81ba4eab6a5d55748bc402a5a2a6fe6be3510
PYBIND11_VER=3.1.0
PYBIND11_SHA256=b8488090f8acffbcb6b5d6a85571a6827a0a2981ffb75e5a0b27b87c4a6b7dd0
CPPY_VER=1.3.1
CPPY_SHA256=7ca132b6ef6187384738804bd3a453d4eab7e3274df6dcd35e5d92aae3404717
# orjson (scripts/orjson/build-orjson.sh), statically linked after the
# charts: its sdist from PyPI, which vendors its Rust crates (pinned by
# its Cargo.lock), compiled by Debian's Rust for wasm32-wasip1. 3.11.5 is
# the newest whose Rust (1.85) trixie's rustc is; 3.11.6 asks for 1.89.
ORJSON_VER=3.11.5
ORJSON_SHA256=82393ab47b4fe44ffd0a7659fa9cfaacc717eb617c93cde83795f14af5c2e9d5
# Debian's Rust, installed in the chroot for that stage: trixie's rustc
# and cargo, and its standard library for the wasm targets (~90 MB).
RUST_TOOLS="rustc cargo libstd-rust-dev-wasm32"
# matplotlib's font list (scripts/charts/fontlist.py) is made natively, by
# the same matplotlib's x86-64 wheel and what it imports; nothing of these
# is in python.wasm.
FONTLIST_WHEELS="matplotlib-3.10.9-cp313-cp313-manylinux2014_x86_64.manylinux_2_17_x86_64.whl:8f3bcac1ca5ed000a6f4337d47ba67dfddf37ed6a46c15fd7f014997f7bf865f
numpy-2.5.5-cp313-cp313-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl:824025655df929268bfe6b47ed91a00d14209a6f760847cf150be446829e1ce4
pillow-13.0.0-cp313-cp313-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl:5f56499c1a74d2b862beb0c33b8016f99d095858455df9d21583bbbc1c15b582
kiwisolver-1.5.1-cp313-cp313-manylinux2014_x86_64.manylinux_2_17_x86_64.whl:74ad5c3dad54a4641b4c28cd15ded70899d04459c6c7aeacafea716be97cce6d
cycler-0.12.1-py3-none-any.whl:85cef7cff222d8644161529808465972e51340599459b8ac3ccbac5a854e0d30
pyparsing-3.3.3-py3-none-any.whl:ece8c00a69cf01b45d0b1dedabb469c90d8caf996d4fda40f147627a122849a4
packaging-26.4-py3-none-any.whl:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2"
TOOLS="clang-19 lld-19 llvm-19 wasi-libc libclang-rt-19-dev-wasm32 python3.13 make pkg-config xz-utils dpkg-dev tcl gcc libc6-dev binaryen patch
	libclang-rt-19-dev zlib1g-dev libsqlite3-dev libbz2-dev liblzma-dev ninja-build libc++-19-dev-wasm32 libc++abi-19-dev-wasm32 cmake"
# Debian's runtime library is installed under the wasm32-wasi name, so the
# target is spelled that way (wasm32-wasip1 fails to link); no --sysroot,
# Debian's clang finds /usr/include/wasm32-wasi by itself.
WASM_CC="clang-19 --target=wasm32-wasi"
# Wasm features every engine Airlock runs on supports (wazero, wasmtime):
# bulk memory turns memcpy/memset into single instructions.
WASM_FEATURES="-mbulk-memory -mnontrapping-fptoint -msign-ext -mmutable-globals"
OPT_FLAGS="-DNDEBUG -O3 $WASM_FEATURES"
# Profile-guided optimisation: a native build of the same sources, with
# clang-19's instrumentation, runs scripts/pgo_train.py (deterministic, so
# the profile and python.wasm are the same on every build), and the wasm
# build compiles with that profile. Functions whose code differs between
# the two targets (e.g. libmpdec's 32/64-bit paths) go unprofiled.
PGO_USE="-fprofile-instr-use=/work/python.profdata -Wno-profile-instr-unprofiled -Wno-profile-instr-out-of-date -Wno-backend-plugin"
# Reproducible __DATE__/__TIME__ in sys.version (2025-06-11, 3.13.5's release).
SOURCE_DATE_EPOCH=1749600000
# Link-time flags. Full LTO (configure --with-lto=full) measured no faster
# than without on wazero (2026-11-30, README). (Inlining also decides which
# functions are on the snapshot's pause path: set-up reads them off the
# build, python.PausePath.)
LDFLAGS_OPT=""
# -g keeps the name section (asyncify-onlylist and stack traces need it);
# DWARF is stripped first, as Binaryen holds back optimisations it cannot
# carry DWARF through.
WASM_OPT_FLAGS="-O3 -g --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals"

[ "$(id -u)" -eq 0 ] || { echo "build-python: needs root (debootstrap and chroot); try sudo" >&2; exit 1; }

CACHE="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"
BUILD="$CACHE/build"
ROOT="$BUILD/trixie-root"
OUT="$CACHE/python313"
JOBS="${AIRLOCK_BUILD_JOBS:-2}"
# The build folder holds the chroot and the logs; a fresh cache has none.
mkdir -p "$BUILD"

# The cache key covers everything the output depends on: this script
# (pins and flags included), the stdlib packer and the patches.
numpy_inputs() { find scripts/numpy scripts/numpy-patches -type f ! -path '*/__pycache__/*' | LC_ALL=C sort; }
pandas_inputs() { find scripts/pandas scripts/pandas-patches -type f ! -path '*/__pycache__/*' | LC_ALL=C sort; }
charts_inputs() { find scripts/charts -type f ! -path '*/__pycache__/*' | LC_ALL=C sort; }
# The C++ exception runtime's library sources (not its test programs).
cxxeh_inputs() { echo scripts/build-cxx-eh.sh; find scripts/cxx-eh -type f | LC_ALL=C sort; }
parsers_inputs() { find scripts/parsers -type f ! -path '*/__pycache__/*' | LC_ALL=C sort; }
orjson_inputs() { find scripts/orjson -type f ! -path '*/__pycache__/*' | LC_ALL=C sort; }
threads_inputs() { find scripts/threads -type f | LC_ALL=C sort; }
# OpenBLAS' (scripts/build-openblas.sh and its patches).
openblas_inputs() { echo scripts/build-openblas.sh; find scripts/openblas -type f ! -path '*/__pycache__/*' | LC_ALL=C sort; }
KEY=$({ cat scripts/build-python.sh scripts/stdlib_zip.py scripts/pgo_train.py \
	scripts/stdlib-patches/*.patch scripts/cpython-patches/*.patch scripts/pandas-py-patches/*.patch scripts/charts-py-patches/*.patch \
	$(numpy_inputs) $(pandas_inputs) $(cxxeh_inputs) $(parsers_inputs) $(charts_inputs) $(orjson_inputs) $(threads_inputs) $(openblas_inputs); } | sha256sum | cut -c1-64)
if [ -f "$OUT/build.json" ] && grep -q "\"key\": \"$KEY\"" "$OUT/build.json" &&
	(cd "$OUT" && sha256sum --quiet -c SHA256SUMS) 2>/dev/null; then
	echo "build-python: up to date: $OUT (key ${KEY:0:12})"
	exit 0
fi
start=$(date +%s)
log() { echo "build-python: [$(($(date +%s) - start))s] $*" >&2; }

# --- 1. the toolchain chroot (~50 s, then ~1 min for packages)
if [ ! -f "$ROOT/.airlock-ready" ]; then
	command -v debootstrap >/dev/null || { log "installing debootstrap"; apt-get update -qq; apt-get install -y -qq debootstrap >/dev/null; }
	rm -rf "$ROOT.part"
	log "debootstrap --variant=minbase $SUITE"
	debootstrap --variant=minbase "$SUITE" "$ROOT.part" >"$BUILD/debootstrap.log" 2>&1 ||
		{ tail -20 "$BUILD/debootstrap.log" >&2; exit 1; }
	cat >"$ROOT.part/etc/apt/sources.list.d/src.sources" <<-EOF
		Types: deb-src
		URIs: $(awk '/^deb /{print $2; exit}' "$ROOT.part/etc/apt/sources.list")
		Suites: $SUITE
		Components: main
	EOF
	cp /etc/resolv.conf "$ROOT.part/etc/resolv.conf"
	touch "$ROOT.part/.airlock-ready"
	mv "$ROOT.part" "$ROOT"
fi
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
if [ "$(cat "$ROOT/.airlock-tools" 2>/dev/null)" != "$TOOLS" ]; then
	log "apt-get install the toolchain"
	chroot "$ROOT" apt-get update -qq
	chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $TOOLS >"$BUILD/apt.log" 2>&1 ||
		{ tail -20 "$BUILD/apt.log" >&2; exit 1; }
	echo "$TOOLS" >"$ROOT/.airlock-tools"
fi

# --- 2. sources, through apt (verified against the archive's signed index)
SRC=/src
mkdir -p "$ROOT$SRC"
log "apt-get source --download-only"
chroot "$ROOT" sh -c "cd $SRC && apt-get update -qq && apt-get source -qq --download-only \
	$PY_PKG=$PY_VER zlib=$ZLIB_VER bzip2=$BZIP2_VER xz-utils=$XZ_VER sqlite3=$SQLITE_VER" >"$BUILD/source.log" 2>&1 ||
	{ tail -20 "$BUILD/source.log" >&2; exit 1; }

# --- 3. build inside the chroot
cat >"$ROOT/build.sh" <<'EOS'
set -euo pipefail
cd /src
W=/work
rm -rf $W && mkdir -p $W/deps/lib $W/deps/include
CC="$WASM_CC"
export AR=llvm-ar-19 RANLIB=llvm-ranlib-19
orig() { ls /src/${1}_*.orig.tar.* | grep -v -- '-www' | head -1; }
untar() { mkdir -p "$W/$1" && tar -xf "$(orig "$1")" -C "$W/$1" --strip-components=1; }
DEPFLAGS="-O2 $WASM_FEATURES"

echo "== zlib"
untar zlib
(cd $W/zlib && CC="$CC" CFLAGS="$DEPFLAGS" ./configure --static --prefix=$W/deps >/dev/null && make -s -j$JOBS libz.a && make -s install >/dev/null)

echo "== bzip2"
untar bzip2
(cd $W/bzip2 && make -s -j$JOBS libbz2.a CC="$CC" AR=$AR RANLIB=$RANLIB CFLAGS="$DEPFLAGS -D_FILE_OFFSET_BITS=64" &&
	cp libbz2.a $W/deps/lib/ && cp bzlib.h $W/deps/include/)

echo "== xz (liblzma)"
untar xz-utils
(cd $W/xz-utils && CC="$CC" CFLAGS="$DEPFLAGS" ./configure -q --host=wasm32-unknown-wasi --prefix=$W/deps \
	--disable-shared --enable-static --disable-threads --disable-xz --disable-xzdec --disable-lzmadec \
	--disable-lzmainfo --disable-lzma-links --disable-scripts --disable-doc --disable-nls >/dev/null &&
	make -s -j$JOBS -C src/liblzma >/dev/null && make -s -C src/liblzma install >/dev/null)

echo "== sqlite3 (the amalgamation is made natively, with tcl)"
untar sqlite3
(cd $W/sqlite3 && mkdir -p native && cd native && ../configure -q >/dev/null && make -s sqlite3.c >/dev/null &&
	$CC $DEPFLAGS -c sqlite3.c -o sqlite3.o \
		-DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_OMIT_WAL -DSQLITE_OMIT_SHARED_CACHE \
		-DSQLITE_DEFAULT_LOCKING_MODE=1 -DSQLITE_OMIT_DEPRECATED -DSQLITE_ENABLE_MATH_FUNCTIONS \
		-D_WASI_EMULATED_GETPID -D_WASI_EMULATED_MMAN &&
	$AR rcs $W/deps/lib/libsqlite3.a sqlite3.o && cp sqlite3.h $W/deps/include/)

echo "== CPython"
untar $PY_PKG
# Airlock's changes to the C sources (each patch says why).
for p in /cpython-patches/*.patch; do patch -s -p1 -d $W/$PY_PKG <"$p"; done

echo "== CPython, native and instrumented, for the PGO profile"
mkdir -p $W/pgobuild $W/pgo && cd $W/pgobuild
$W/$PY_PKG/configure -q CC=clang-19 OPT="-DNDEBUG -O3" --disable-test-modules --without-system-libmpdec \
	--without-system-expat --without-ensurepip --with-pymalloc >$W/pgo-configure.log 2>&1 || { tail -30 $W/pgo-configure.log; exit 1; }
make -s -j$JOBS CFLAGS_NODIST=-fprofile-instr-generate LDFLAGS_NODIST=-fprofile-instr-generate >$W/pgo-make.log 2>&1 ||
	{ tail -40 $W/pgo-make.log; exit 1; }
# No address randomisation, a fixed hash seed, no .pyc written: the same
# counts on every build.
# The environment is emptied too: its size moves the heap, and with it
# the order of sets and dicts of objects hashed by address (a build in
# which the script's own variables differed gave another profile).
setarch -R env -i PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 LLVM_PROFILE_FILE=$W/pgo/%m.profraw ./python /pgo_train.py
llvm-profdata-19 merge -o $W/python.profdata $W/pgo/*.profraw
mkdir -p $W/pybuild && cd $W/pybuild
# CPython's WASI site file turns readv/writev off for wasmtime's own WASI,
# which uses only the first buffer; Airlock's WASI serves every buffer.
grep -v -e '^ac_cv_func_readv=' -e '^ac_cv_func_writev=' $W/$PY_PKG/Tools/wasm/config.site-wasm32-wasi >$W/config.site
export CONFIG_SITE=$W/config.site
DEP="-I$W/deps/include"
export ZLIB_CFLAGS="$DEP" ZLIB_LIBS="-L$W/deps/lib -lz"
export BZIP2_CFLAGS="$DEP" BZIP2_LIBS="-L$W/deps/lib -lbz2"
export LIBLZMA_CFLAGS="$DEP" LIBLZMA_LIBS="-L$W/deps/lib -llzma"
export LIBSQLITE3_CFLAGS="$DEP" LIBSQLITE3_LIBS="-L$W/deps/lib -lsqlite3 -lwasi-emulated-getpid -lwasi-emulated-mman"
export PKG_CONFIG_LIBDIR=$W/deps/lib/pkgconfig
# configure turns pymalloc off for WASI by default; small objects then all
# go through wasi-libc's malloc. With it, as on Linux: loops and
# allocation-heavy code ~10-25% faster here (README, Compute).
$W/$PY_PKG/configure -q CC="$CC" OPT="$OPT_FLAGS" \
	--host=wasm32-wasip1 --build=x86_64-pc-linux-gnu --with-build-python=python3.13 \
	--disable-test-modules --without-system-libmpdec --without-system-expat --without-ensurepip \
	--with-pymalloc --prefix=/usr/local >$W/configure.log 2>&1 || { tail -30 $W/configure.log; exit 1; }
make -s -j$JOBS LDFLAGS_NODIST="$LDFLAGS_OPT" CFLAGS_NODIST="$PGO_USE" >$W/make.log 2>&1 || { tail -40 $W/make.log; exit 1; }
EOS
# The C build is the slow part: it is skipped when its own inputs (the
# steps above, flags, source versions) have not changed since it last ran.
BUILD_KEY=$(printf '%s\n' "$WASM_CC" "$WASM_FEATURES" "$OPT_FLAGS" "$LDFLAGS_OPT" "$PGO_USE" "$SOURCE_DATE_EPOCH" \
	"$PY_VER" "$ZLIB_VER" "$BZIP2_VER" "$XZ_VER" "$SQLITE_VER" | cat - "$ROOT/build.sh" scripts/cpython-patches/*.patch scripts/pgo_train.py | sha256sum | cut -c1-64)
rm -rf "$ROOT/cpython-patches" && cp -a scripts/cpython-patches "$ROOT/cpython-patches" && cp scripts/pgo_train.py "$ROOT/pgo_train.py"
if [ "$(cat "$ROOT/work/.build-key" 2>/dev/null)" = "$BUILD_KEY" ] && [ -f "$ROOT/work/pybuild/python.wasm" ]; then
	log "C build up to date (key ${BUILD_KEY:0:12})"
else
	log "building zlib, bzip2, liblzma, sqlite3, a native CPython for the PGO profile (~4 min), then CPython (configure ~3 min, make ~2 min on an idle machine)"
	chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
		WASM_CC="$WASM_CC" WASM_FEATURES="$WASM_FEATURES" OPT_FLAGS="$OPT_FLAGS" LDFLAGS_OPT="$LDFLAGS_OPT" PGO_USE="$PGO_USE" \
		PY_PKG="$PY_PKG" JOBS="$JOBS" bash /build.sh
	echo "$BUILD_KEY" >"$ROOT/work/.build-key"
fi

# --- 3a. the C++ exception runtime (scripts/build-cxx-eh.sh, its own
# cached stage, ~3 min once): numpy's and pandas' C++ is compiled with its
# flags and linked with its libc++ and libc++abi, so that a C++ exception
# reaches the module's handler and becomes a Python exception instead of
# ending the run; python.wasm then imports env.invoke_* and
# airlock_eh.unwind, which the host serves (RATIONALE, "C++ exceptions").
# Built (or found) first with its messages on stderr, then asked for its
# directory: on a fresh cache, a step of the build printed to stdout, which
# the directory's capture took for part of the path.
AIRLOCK_CACHE_DIR="$CACHE" scripts/build-cxx-eh.sh >&2
CXXEH_DIR=$(AIRLOCK_CACHE_DIR="$CACHE" scripts/build-cxx-eh.sh --print-dir)
cxxeh_flag() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$CXXEH_DIR/build.json" "$1"; }
CXXEH_FLAGS=$(cxxeh_flag cxxflags)
CXXEH_LDFLAGS=$(cxxeh_flag ldflags)
rm -rf "$ROOT/cxx-eh" && mkdir -p "$ROOT/cxx-eh" && cp -a "$CXXEH_DIR/lib" "$CXXEH_DIR/include" "$ROOT/cxx-eh/"

# --- 3a'. OpenBLAS (scripts/build-openblas.sh, its own cached stage,
# ~5 min once): numpy's BLAS and LAPACK (numpy.linalg, matmul), staged at
# /openblas for numpy's meson (its pkg-config file) and every later link.
# Built first and then asked for its directory, as the runtime above: on a
# fresh cache its source check prints to stdout.
AIRLOCK_CACHE_DIR="$CACHE" scripts/build-openblas.sh >&2
OPENBLAS_DIR=$(AIRLOCK_CACHE_DIR="$CACHE" scripts/build-openblas.sh --print-dir)
OPENBLAS_VER=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["source"]["openblas_version"])' "$OPENBLAS_DIR/build.json")
rm -rf "$ROOT/openblas" && cp -a "$OPENBLAS_DIR" "$ROOT/openblas"

# --- 3b. numpy, its own cached stage: a change to it relinks python.wasm
# without redoing CPython (the C build's rm -rf /work removes it, and its
# key covers the C build's).
NUMPY_KEY=$(printf '%s\n' "$BUILD_KEY" "$NUMPY_VER" "$NUMPY_SHA256" "$CYTHON_WHEEL" "$CYTHON_SHA256" "$WASM_FEATURES" |
	cat - $(numpy_inputs) $(cxxeh_inputs) $(openblas_inputs) | sha256sum | cut -c1-64)
if ! python3 -m pip --version >/dev/null 2>&1; then
	log "installing python3-pip"
	apt-get update -qq && apt-get install -y -qq python3-pip >/dev/null
fi
NPDL="$BUILD/numpy-sources"
if [ "$(cat "$ROOT/work/np/.build-key" 2>/dev/null)" = "$NUMPY_KEY" ] && [ -f "$ROOT/work/np/python.wasm" ]; then
	log "numpy build up to date (key ${NUMPY_KEY:0:12})"
else
	# With the host's pip (its network set-up, as for tzdata below). pip asks
	# an sdist's build backend for its metadata, and numpy's (meson-python)
	# answers by building numpy natively: scripts/numpy/fetch stands in for
	# it and reads the sdist's PKG-INFO. The sha256 pins are checked either way.
	log "numpy $NUMPY_VER sdist and Cython $CYTHON_VER (pip download --require-hashes)"
	rm -rf "$NPDL" && mkdir -p "$NPDL"
	printf 'numpy==%s --hash=sha256:%s\n' "$NUMPY_VER" "$NUMPY_SHA256" >"$BUILD/numpy-requirements.txt"
	printf 'cython==%s --hash=sha256:%s\n' "$CYTHON_VER" "$CYTHON_SHA256" >"$BUILD/cython-requirements.txt"
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD/scripts/numpy/fetch" python3 -m pip download --quiet --no-deps --no-build-isolation --no-binary :all: \
		--python-version 3.13 -d "$NPDL" --require-hashes -r "$BUILD/numpy-requirements.txt" >"$BUILD/pip-numpy.log" 2>&1 ||
		{ tail -20 "$BUILD/pip-numpy.log" >&2; exit 1; }
	python3 -m pip download --quiet --no-deps --only-binary :all: --python-version 3.13 --implementation cp --abi cp313 \
		--platform manylinux_2_28_x86_64 -d "$NPDL" --require-hashes -r "$BUILD/cython-requirements.txt" >>"$BUILD/pip-numpy.log" 2>&1 ||
		{ tail -20 "$BUILD/pip-numpy.log" >&2; exit 1; }
	rm -rf "$ROOT/work/np" && mkdir -p "$ROOT/work/np/src" "$ROOT/work/np/tools"
	tar -xzf "$NPDL/numpy-$NUMPY_VER.tar.gz" -C "$ROOT/work/np/src" --strip-components=1
	# Airlock's changes to numpy (each patch says why).
	rm -rf "$ROOT/numpy-patches" && cp -a scripts/numpy-patches "$ROOT/numpy-patches"
	chroot "$ROOT" sh -c 'for p in /numpy-patches/*.patch; do patch -s -p1 -d /work/np/src <"$p" || exit 1; done'
	python3 -m zipfile -e "$NPDL/$CYTHON_WHEEL" "$ROOT/work/np/tools"
	rm -rf "$ROOT/numpy" && cp -a scripts/numpy "$ROOT/numpy" && rm -rf "$ROOT/numpy/fetch"
	log "building numpy $NUMPY_VER for wasm32-wasi and relinking python.wasm with it (~3 min on an idle machine)"
	chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
		WASM_FEATURES="$WASM_FEATURES" CXXEH_FLAGS="$CXXEH_FLAGS" CXXEH_LDFLAGS="$CXXEH_LDFLAGS" CXXEH_LIBDIR=/cxx-eh/lib JOBS="$JOBS" bash /numpy/build-numpy.sh
	echo "$NUMPY_KEY" >"$ROOT/work/np/.build-key"
fi

# --- 3c. pandas, cached the same way: its key covers numpy's, whose build
# it compiles against and whose archives it links with.
PANDAS_KEY=$(printf '%s\n' "$NUMPY_KEY" "$PANDAS_VER" "$PANDAS_SHA256" | cat - $(pandas_inputs) | sha256sum | cut -c1-64)
PDDL="$BUILD/pandas-sources"
if [ "$(cat "$ROOT/work/pd/.build-key" 2>/dev/null)" = "$PANDAS_KEY" ] && [ -f "$ROOT/work/pd/python.wasm" ]; then
	log "pandas build up to date (key ${PANDAS_KEY:0:12})"
else
	# pandas' build backend is meson-python too: the same stand-in serves
	# pip download its metadata.
	log "pandas $PANDAS_VER sdist (pip download --require-hashes)"
	rm -rf "$PDDL" && mkdir -p "$PDDL"
	printf 'pandas==%s --hash=sha256:%s\n' "$PANDAS_VER" "$PANDAS_SHA256" >"$BUILD/pandas-requirements.txt"
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD/scripts/numpy/fetch" python3 -m pip download --quiet --no-deps --no-build-isolation --no-binary :all: \
		--python-version 3.13 -d "$PDDL" --require-hashes -r "$BUILD/pandas-requirements.txt" >"$BUILD/pip-pandas.log" 2>&1 ||
		{ tail -20 "$BUILD/pip-pandas.log" >&2; exit 1; }
	rm -rf "$ROOT/work/pd" && mkdir -p "$ROOT/work/pd/src"
	tar -xzf "$PDDL/pandas-$PANDAS_VER.tar.gz" -C "$ROOT/work/pd/src" --strip-components=1
	# Airlock's changes to pandas (each patch says why).
	rm -rf "$ROOT/pandas-patches" && cp -a scripts/pandas-patches "$ROOT/pandas-patches"
	chroot "$ROOT" sh -c 'for p in /pandas-patches/*.patch; do patch -s -p1 -d /work/pd/src <"$p" || exit 1; done'
	rm -rf "$ROOT/numpy" "$ROOT/pandas" && cp -a scripts/numpy "$ROOT/numpy" && rm -rf "$ROOT/numpy/fetch" && cp -a scripts/pandas "$ROOT/pandas"
	log "building pandas $PANDAS_VER for wasm32-wasi and relinking python.wasm with numpy and pandas (~5 min on an idle machine, 8-9 min of CPU)"
	chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
		WASM_FEATURES="$WASM_FEATURES" CXXEH_FLAGS="$CXXEH_FLAGS" CXXEH_LDFLAGS="$CXXEH_LDFLAGS" CXXEH_LIBDIR=/cxx-eh/lib JOBS="$JOBS" bash /pandas/build-pandas.sh
	echo "$PANDAS_KEY" >"$ROOT/work/pd/.build-key"
fi

# --- 3d. stages after pandas. Each links python.wasm again with the
# archives of every stage before it plus its own, so the chain is what
# these carry (paths inside the chroot), and a stage appended below does:
#   key = sha256(STAGE_KEY, its pins, its inputs); skip when /work/NAME has it;
#   else build into /work/NAME, linking with $STAGE_BUILDS and its own build
#   (scripts/pandas/link.py takes any number of meson build folders);
#   then STAGE_KEY=its key, STAGE_WASM=/work/NAME/python.wasm,
#   STAGE_BUILDS+=" its build", STAGE_PKGS+=" /work/NAME/pkg".
# Its scripts live in scripts/NAME/ and join KEY's inputs at the top.
STAGE_KEY=$PANDAS_KEY
STAGE_WASM=/work/pd/python.wasm
STAGE_BUILDS="/work/np/build /work/pd/build"
STAGE_PKGS=""

# PyYAML, MarkupSafe, regex, lxml and their C libraries
# (scripts/parsers/build-parsers.sh, ~7 min of wall time, 1-2 of CPU).
PARSERS_KEY=$(printf '%s\n' "$STAGE_KEY" "$PYYAML_VER" "$PYYAML_SHA256" "$MARKUPSAFE_VER" "$MARKUPSAFE_SHA256" "$REGEX_VER" "$REGEX_SHA256" \
	"$LXML_VER" "$LXML_SHA256" "$LIBYAML_VER" "$LIBXML2_VER" "$LIBXSLT_VER" "$WASM_FEATURES" | cat - $(parsers_inputs) | sha256sum | cut -c1-64)
PSDL="$BUILD/parsers-sources"
if [ "$(cat "$ROOT/work/parsers/.build-key" 2>/dev/null)" = "$PARSERS_KEY" ] && [ -f "$ROOT/work/parsers/python.wasm" ]; then
	log "parsers build up to date (key ${PARSERS_KEY:0:12})"
else
	log "libyaml, libxml2, libxslt (apt-get source); PyYAML $PYYAML_VER, MarkupSafe $MARKUPSAFE_VER, regex $REGEX_VER, lxml $LXML_VER sdists (pip download --require-hashes)"
	chroot "$ROOT" sh -c "cd $SRC && apt-get source -qq --download-only libyaml=$LIBYAML_VER libxml2=$LIBXML2_VER libxslt=$LIBXSLT_VER" \
		>"$BUILD/source-parsers.log" 2>&1 || { tail -20 "$BUILD/source-parsers.log" >&2; exit 1; }
	# Their build backend is setuptools: scripts/parsers/fetch stands in
	# for it, as numpy's stand-in does for meson-python, so that pip runs
	# no setup.py and installs no unpinned build requirements here.
	rm -rf "$PSDL" && mkdir -p "$PSDL"
	printf '%s==%s --hash=sha256:%s\n' pyyaml "$PYYAML_VER" "$PYYAML_SHA256" markupsafe "$MARKUPSAFE_VER" "$MARKUPSAFE_SHA256" \
		regex "$REGEX_VER" "$REGEX_SHA256" lxml "$LXML_VER" "$LXML_SHA256" >"$BUILD/parsers-requirements.txt"
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD/scripts/numpy/fetch:$PWD/scripts/parsers/fetch" python3 -m pip download --quiet --no-deps --no-build-isolation \
		--no-binary :all: --python-version 3.13 -d "$PSDL" --require-hashes -r "$BUILD/parsers-requirements.txt" >"$BUILD/pip-parsers.log" 2>&1 ||
		{ tail -20 "$BUILD/pip-parsers.log" >&2; exit 1; }
	rm -rf "$ROOT/work/parsers" && mkdir -p "$ROOT/work/parsers/dl" && cp "$PSDL"/*.tar.gz "$ROOT/work/parsers/dl/"
	rm -rf "$ROOT/pandas" "$ROOT/parsers" && cp -a scripts/pandas "$ROOT/pandas" && cp -a scripts/parsers "$ROOT/parsers" && rm -rf "$ROOT/parsers/fetch"
	log "building libyaml, libxml2, libxslt, PyYAML, MarkupSafe, regex and lxml for wasm32-wasi and relinking python.wasm with them"
	chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
		WASM_FEATURES="$WASM_FEATURES" CXXEH_LDFLAGS="$CXXEH_LDFLAGS" CXXEH_LIBDIR=/cxx-eh/lib JOBS="$JOBS" \
		STAGE_BUILDS="$STAGE_BUILDS" bash /parsers/build-parsers.sh
	echo "$PARSERS_KEY" >"$ROOT/work/parsers/.build-key"
fi
STAGE_KEY=$PARSERS_KEY
STAGE_WASM=/work/parsers/python.wasm
STAGE_BUILDS+=" /work/parsers/build"
STAGE_PKGS+=" /work/parsers/pkg"

# Charts: FreeType, qhull, libjpeg-turbo, Pillow's codecs, kiwisolver,
# contourpy, matplotlib, Pillow (scripts/charts/build-charts.sh).
CHARTS_KEY=$(printf '%s\n' "$STAGE_KEY" "$FREETYPE_VER" "$FREETYPE_ORIG_SHA256" "$MPL_FREETYPE_CRATE_VER" "$MPL_FREETYPE_CRATE_SHA256" \
	"$QHULL_VER" "$QHULL_ORIG_SHA256" \
	"$LIBJPEG_VER" "$LIBJPEG_ORIG_SHA256" "$TIFF_VER" "$TIFF_ORIG_SHA256" "$OPENJPEG_VER" "$OPENJPEG_ORIG_SHA256" \
	"$LIBWEBP_VER" "$LIBWEBP_ORIG_SHA256" "$LCMS2_VER" "$LCMS2_ORIG_SHA256" \
	"$HARFBUZZ_VER" "$HARFBUZZ_ORIG_SHA256" "$FRIBIDI_VER" "$FRIBIDI_ORIG_SHA256" "$LIBPNG_VER" "$LIBPNG_ORIG_SHA256" \
	"$BROTLI_VER" "$BROTLI_ORIG_SHA256" "$AOM_VER" "$AOM_ORIG_SHA256" "$LIBAVIF_CRATE_VER" "$LIBAVIF_CRATE_SHA256" "$MPL_VER" "$MPL_SHA256" "$KIWI_VER" "$KIWI_SHA256" "$CONTOURPY_VER" \
	"$CONTOURPY_SHA256" "$PILLOW_VER" "$PILLOW_SHA256" "$PYBIND11_VER" "$PYBIND11_SHA256" "$CPPY_VER" "$CPPY_SHA256" |
	cat - $(charts_inputs) | sha256sum | cut -c1-64)
CHDL="$BUILD/charts-sources"
if [ "$(cat "$ROOT/work/ch/.build-key" 2>/dev/null)" = "$CHARTS_KEY" ] && [ -f "$ROOT/work/ch/python.wasm" ]; then
	log "charts build up to date (key ${CHARTS_KEY:0:12})"
else
	log "FreeType, qhull, libjpeg-turbo, libtiff, OpenJPEG, libwebp, LittleCMS, HarfBuzz, FriBiDi, libpng, brotli, libaom (apt-get source --download-only)"
	rm -rf "$ROOT/chsrc" && mkdir -p "$ROOT/chsrc"
	# apt checks each file it fetches against the signed index; it also
	# fails when the archive lacks a file beside the orig tarball (a .dsc),
	# so what decides is the orig tarballs' pinned sha256.
	chroot "$ROOT" sh -c "cd /chsrc && apt-get source -qq --download-only freetype=$FREETYPE_VER qhull=$QHULL_VER \
		libjpeg-turbo=$LIBJPEG_VER tiff=$TIFF_VER openjpeg2=$OPENJPEG_VER libwebp=$LIBWEBP_VER lcms2=$LCMS2_VER harfbuzz=$HARFBUZZ_VER fribidi=$FRIBIDI_VER \
		libpng1.6=$LIBPNG_VER brotli=$BROTLI_VER aom=$AOM_VER" \
		>"$BUILD/charts-source.log" 2>&1 || true
	(cd "$ROOT/chsrc" && sha256sum -c --quiet - <<-EOF
		$FREETYPE_ORIG_SHA256  freetype_${FREETYPE_VER%-*}.orig.tar.xz
		$QHULL_ORIG_SHA256  qhull_${QHULL_VER%-*}.orig.tar.gz
		$LIBJPEG_ORIG_SHA256  libjpeg-turbo_$(echo "${LIBJPEG_VER#*:}" | sed 's/-[^-]*$//').orig.tar.gz
		$TIFF_ORIG_SHA256  tiff_${TIFF_VER%%-*}.orig.tar.bz2
		$OPENJPEG_ORIG_SHA256  openjpeg2_${OPENJPEG_VER%%-*}.orig.tar.xz
		$LIBWEBP_ORIG_SHA256  libwebp_${LIBWEBP_VER%%-*}.orig.tar.gz
		$LCMS2_ORIG_SHA256  lcms2_${LCMS2_VER%%-*}.orig.tar.gz
		$HARFBUZZ_ORIG_SHA256  harfbuzz_${HARFBUZZ_VER%%-*}.orig.tar.xz
		$FRIBIDI_ORIG_SHA256  fribidi_${FRIBIDI_VER%%-*}.orig.tar.xz
		$LIBPNG_ORIG_SHA256  libpng1.6_${LIBPNG_VER%%-*}.orig.tar.gz
		$BROTLI_ORIG_SHA256  brotli_${BROTLI_VER%%-*}.orig.tar.gz
		$AOM_ORIG_SHA256  aom_${AOM_VER%%-*}.orig.tar.gz
	EOF
	) || { tail -20 "$BUILD/charts-source.log" >&2; exit 1; }
	log "matplotlib's FreeType $MPL_FREETYPE_VER ($MPL_FREETYPE_CRATE $MPL_FREETYPE_CRATE_VER), libavif ($LIBAVIF_CRATE $LIBAVIF_CRATE_VER): cargo fetch in the chroot"
	# With the crate registry's own client, as the sdists come with pip: the
	# chroot's cargo (Debian's, installed for this fetch; a host needs none),
	# a throwaway package on the crate, whose .crate (a tar.gz) cargo fetch
	# stores in its registry cache, checked here against the pinned sha256.
	# cargo trusts what the host's pip trusts: the host's CA bundle.
	chroot "$ROOT" sh -c 'command -v cargo >/dev/null || { apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cargo; }' >"$BUILD/cargo-install.log" 2>&1 ||
		{ tail -20 "$BUILD/cargo-install.log" >&2; exit 1; }
	FTC="$ROOT/work/freetype-crate"
	rm -rf "$FTC" && mkdir -p "$FTC/src" && touch "$FTC/src/lib.rs"
	cp "${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}" "$FTC/host-ca.crt"
	# libavif-sys without its default features: no Rust codec crates to fetch.
	printf '[package]\nname = "fetch-freetype"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = "=%s"\n%s = { version = "=%s", default-features = false }\n' \
		"$MPL_FREETYPE_CRATE" "$MPL_FREETYPE_CRATE_VER" "$LIBAVIF_CRATE" "$LIBAVIF_CRATE_VER" >"$FTC/Cargo.toml"
	chroot "$ROOT" sh -c "cd /work/freetype-crate && CARGO_HOME=/work/freetype-crate/home CARGO_HTTP_CAINFO=/work/freetype-crate/host-ca.crt cargo fetch --quiet" \
		>"$BUILD/cargo-freetype.log" 2>&1 || { tail -20 "$BUILD/cargo-freetype.log" >&2; exit 1; }
	crate=$(ls "$FTC"/home/registry/cache/*/"$MPL_FREETYPE_CRATE-$MPL_FREETYPE_CRATE_VER.crate" | head -1)
	echo "$MPL_FREETYPE_CRATE_SHA256  $crate" | sha256sum -c --quiet - || { echo "build-python: $crate is not the pinned crate" >&2; exit 1; }
	cp "$crate" "$ROOT/chsrc/"
	crate=$(ls "$FTC"/home/registry/cache/*/"$LIBAVIF_CRATE-$LIBAVIF_CRATE_VER.crate" | head -1)
	echo "$LIBAVIF_CRATE_SHA256  $crate" | sha256sum -c --quiet - || { echo "build-python: $crate is not the pinned crate" >&2; exit 1; }
	cp "$crate" "$ROOT/chsrc/"
	log "matplotlib, kiwisolver, contourpy, Pillow sdists; pybind11, cppy (pip download --require-hashes)"
	rm -rf "$CHDL" && mkdir -p "$CHDL"
	printf '%s==%s --hash=sha256:%s\n' matplotlib "$MPL_VER" "$MPL_SHA256" kiwisolver "$KIWI_VER" "$KIWI_SHA256" \
		contourpy "$CONTOURPY_VER" "$CONTOURPY_SHA256" pillow "$PILLOW_VER" "$PILLOW_SHA256" >"$BUILD/charts-requirements.txt"
	printf '%s==%s --hash=sha256:%s\n' pybind11 "$PYBIND11_VER" "$PYBIND11_SHA256" cppy "$CPPY_VER" "$CPPY_SHA256" >"$BUILD/charts-tools-requirements.txt"
	# kiwisolver's and Pillow's backend is setuptools: its stand-in
	# (scripts/charts/fetch) reads their PKG-INFO as numpy's does.
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD/scripts/charts/fetch:$PWD/scripts/numpy/fetch" python3 -m pip download --quiet --no-deps \
		--no-build-isolation --no-binary :all: --python-version 3.13 -d "$CHDL" --require-hashes -r "$BUILD/charts-requirements.txt" \
		>"$BUILD/pip-charts.log" 2>&1 || { tail -20 "$BUILD/pip-charts.log" >&2; exit 1; }
	python3 -m pip download --quiet --no-deps --only-binary :all: -d "$CHDL" --require-hashes -r "$BUILD/charts-tools-requirements.txt" \
		>>"$BUILD/pip-charts.log" 2>&1 || { tail -20 "$BUILD/pip-charts.log" >&2; exit 1; }
	rm -rf "$ROOT/work/ch" && mkdir -p "$ROOT/work/ch/sdist" "$ROOT/work/ch/tools"
	for p in matplotlib-$MPL_VER kiwisolver-$KIWI_VER contourpy-$CONTOURPY_VER pillow-$PILLOW_VER; do
		mkdir -p "$ROOT/work/ch/sdist/${p%-*}" && tar -xzf "$CHDL/$p.tar.gz" -C "$ROOT/work/ch/sdist/${p%-*}" --strip-components=1
	done
	# Airlock's changes to the sources (each patch says why), named by the
	# sdist they apply to.
	rm -rf "$ROOT/charts-patches" && cp -a scripts/charts/patches "$ROOT/charts-patches"
	chroot "$ROOT" sh -c 'for p in /charts-patches/*.patch; do n=$(basename "$p"); patch -s -p1 -d /work/ch/sdist/${n%%-*} <"$p" || exit 1; done'
	python3 -m zipfile -e "$CHDL/pybind11-$PYBIND11_VER-py3-none-any.whl" "$ROOT/work/ch/tools"
	python3 -m zipfile -e "$CHDL/cppy-$CPPY_VER-py3-none-any.whl" "$ROOT/work/ch/tools"
	rm -rf "$ROOT/numpy" "$ROOT/pandas" "$ROOT/charts" && cp -a scripts/numpy "$ROOT/numpy" && rm -rf "$ROOT/numpy/fetch" &&
		cp -a scripts/pandas "$ROOT/pandas" && cp -a scripts/charts "$ROOT/charts" && rm -rf "$ROOT/charts/fetch"
	log "building the chart stack for wasm32-wasi and relinking python.wasm with it"
	chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
		WASM_FEATURES="$WASM_FEATURES" CXXEH_FLAGS="$CXXEH_FLAGS" CXXEH_SJLJ_FLAGS="$(cxxeh_flag sjlj_cflags)" \
		CXXEH_LDFLAGS="$CXXEH_LDFLAGS" CXXEH_LIBDIR=/cxx-eh/lib JOBS="$JOBS" STAGE_BUILDS="$STAGE_BUILDS" bash /charts/build-charts.sh
	echo "$CHARTS_KEY" >"$ROOT/work/ch/.build-key"
fi
STAGE_KEY=$CHARTS_KEY
STAGE_WASM=/work/ch/python.wasm
STAGE_BUILDS="$STAGE_BUILDS /work/ch/build-contourpy /work/ch/build-matplotlib"
# pack.sh makes /work/chpkg from the stage's /work/ch/pkg: patched
# (scripts/charts-py-patches), mpl-data under share/ with its font list.
STAGE_PKGS="$STAGE_PKGS /work/chpkg"
# The modules the chart stage compiled without meson (kiwisolver, Pillow):
# a later stage links them with scripts/charts/link.py, which reads them.
STAGE_HANDMADE=/work/ch/link/handmade.json

# orjson (scripts/orjson/build-orjson.sh): Debian's Rust, installed here
# when missing (it is only this stage's), and the sdist's vendored crates.
ORJSON_KEY=$(printf '%s\n' "$STAGE_KEY" "$ORJSON_VER" "$ORJSON_SHA256" "$RUST_TOOLS" "$WASM_FEATURES" |
	cat - $(orjson_inputs) | sha256sum | cut -c1-64)
ORDL="$BUILD/orjson-sources"
if [ "$(cat "$ROOT/work/orjson/.build-key" 2>/dev/null)" = "$ORJSON_KEY" ] && [ -f "$ROOT/work/orjson/python.wasm" ]; then
	log "orjson build up to date (key ${ORJSON_KEY:0:12})"
else
	log "Debian's Rust for wasm32-wasip1 ($RUST_TOOLS); orjson $ORJSON_VER sdist (pip download --require-hashes)"
	chroot "$ROOT" sh -c "dpkg-query -W $RUST_TOOLS >/dev/null 2>&1 || { apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $RUST_TOOLS; }" >"$BUILD/rust-install.log" 2>&1 ||
		{ tail -20 "$BUILD/rust-install.log" >&2; exit 1; }
	# Its build backend is maturin: scripts/orjson/fetch stands in for it,
	# as numpy's stand-in does for meson-python.
	rm -rf "$ORDL" && mkdir -p "$ORDL"
	printf 'orjson==%s --hash=sha256:%s\n' "$ORJSON_VER" "$ORJSON_SHA256" >"$BUILD/orjson-requirements.txt"
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD/scripts/numpy/fetch:$PWD/scripts/orjson/fetch" python3 -m pip download --quiet --no-deps \
		--no-build-isolation --no-binary :all: --python-version 3.13 -d "$ORDL" --require-hashes -r "$BUILD/orjson-requirements.txt" \
		>"$BUILD/pip-orjson.log" 2>&1 || { tail -20 "$BUILD/pip-orjson.log" >&2; exit 1; }
	rm -rf "$ROOT/work/orjson" && mkdir -p "$ROOT/work/orjson/dl" && cp "$ORDL/orjson-$ORJSON_VER.tar.gz" "$ROOT/work/orjson/dl/"
	rm -rf "$ROOT/pandas" "$ROOT/charts" "$ROOT/orjson" && cp -a scripts/pandas "$ROOT/pandas" && cp -a scripts/charts "$ROOT/charts" &&
		rm -rf "$ROOT/charts/fetch" && cp -a scripts/orjson "$ROOT/orjson" && rm -rf "$ROOT/orjson/fetch"
	log "building orjson $ORJSON_VER for wasm32-wasip1 and relinking python.wasm with it"
	chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
		WASM_FEATURES="$WASM_FEATURES" CXXEH_LDFLAGS="$CXXEH_LDFLAGS" CXXEH_LIBDIR=/cxx-eh/lib JOBS="$JOBS" \
		STAGE_BUILDS="$STAGE_BUILDS" STAGE_HANDMADE="$STAGE_HANDMADE" bash /orjson/build-orjson.sh
	echo "$ORJSON_KEY" >"$ROOT/work/orjson/.build-key"
fi
STAGE_KEY=$ORJSON_KEY
STAGE_WASM=/work/orjson/python.wasm
STAGE_BUILDS="$STAGE_BUILDS /work/orjson/build"
STAGE_PKGS="$STAGE_PKGS /work/orjson/pkg"

# Threads (scripts/threads/build-threads.sh): Python/thread.c compiled
# again with Airlock's pthreads, and python.wasm linked with it. Last, so
# that a change to the threads builds this stage only (~1 min).
THREADS_KEY=$(printf '%s\n' "$STAGE_KEY" "$WASM_FEATURES" | cat - $(threads_inputs) | sha256sum | cut -c1-64)
if [ "$(cat "$ROOT/work/threads/.build-key" 2>/dev/null)" = "$THREADS_KEY" ] && [ -f "$ROOT/work/threads/python.wasm" ]; then
	log "threads build up to date (key ${THREADS_KEY:0:12})"
else
	log "compiling CPython's thread layer with Airlock's threads and relinking python.wasm"
	rm -rf "$ROOT/threads" && cp -a scripts/threads "$ROOT/threads"
	rm -rf "$ROOT/pandas" "$ROOT/charts" && cp -a scripts/pandas "$ROOT/pandas" && cp -a scripts/charts "$ROOT/charts" && rm -rf "$ROOT/charts/fetch"
	mkdir -p "$ROOT/work/threads"
	chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
		CXXEH_LDFLAGS="$CXXEH_LDFLAGS" CXXEH_LIBDIR=/cxx-eh/lib PY_PKG="$PY_PKG" \
		STAGE_BUILDS="$STAGE_BUILDS" STAGE_HANDMADE="$STAGE_HANDMADE" bash /threads/build-threads.sh
	echo "$THREADS_KEY" >"$ROOT/work/threads/.build-key"
fi
STAGE_KEY=$THREADS_KEY
STAGE_WASM=/work/threads/python.wasm

# --- 4. outputs: wasm-opt'd python.wasm, the stdlib zip, build.json
# With the host's pip: it is set up for this host's network (proxy, CA
# certificates), which the chroot is not.
log "tzdata $TZDATA_VER, python-dateutil $DATEUTIL_VER, matplotlib's pure dependencies (pip download --require-hashes)"
WHEELS="$BUILD/wheels"
rm -rf "$WHEELS" "$ROOT/extra" && mkdir -p "$WHEELS"
printf '%s==%s --hash=sha256:%s\n' tzdata "$TZDATA_VER" "$TZDATA_SHA256" python-dateutil "$DATEUTIL_VER" "$DATEUTIL_SHA256" >"$BUILD/tzdata-requirements.txt"
printf '%s==%s --hash=sha256:%s\n' fonttools "$FONTTOOLS_VER" "$FONTTOOLS_SHA256" cycler "$CYCLER_VER" "$CYCLER_SHA256" \
	pyparsing "$PYPARSING_VER" "$PYPARSING_SHA256" packaging "$PACKAGING_VER" "$PACKAGING_SHA256" >>"$BUILD/tzdata-requirements.txt"
# --platform any: fonttools' pure wheel, not its compiled ones.
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.13 --platform any -d "$WHEELS" \
	--require-hashes -r "$BUILD/tzdata-requirements.txt" >"$BUILD/pip.log" 2>&1 || { tail -20 "$BUILD/pip.log" >&2; exit 1; }
for w in "$WHEELS"/*.whl; do python3 -m zipfile -e "$w" "$ROOT/extra"; done
# fonttools' man page for its command-line tool, installed outside the package.
rm -rf "$ROOT"/extra/*.data
FLWHEELS="$BUILD/fontlist-wheels"
log "matplotlib's font list (pip download --require-hashes of its native wheels)"
rm -rf "$FLWHEELS" "$ROOT/fontlist" && mkdir -p "$FLWHEELS" "$ROOT/fontlist/site"
for w in $FONTLIST_WHEELS; do
	n=${w%%-*} rest=${w#*-}
	printf '%s==%s --hash=sha256:%s\n' "$n" "${rest%%-*}" "${w##*:}"
done >"$BUILD/fontlist-requirements.txt"
python3 -m pip download --quiet --no-deps --only-binary :all: --python-version 3.13 --implementation cp --abi cp313 \
	--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$FLWHEELS" --require-hashes \
	-r "$BUILD/fontlist-requirements.txt" >"$BUILD/pip-fontlist.log" 2>&1 || { tail -20 "$BUILD/pip-fontlist.log" >&2; exit 1; }
for w in "$FLWHEELS"/*.whl "$WHEELS/python_dateutil-$DATEUTIL_VER-py3-none-any.whl"; do python3 -m zipfile -e "$w" "$ROOT/fontlist/site"; done
cp scripts/charts/fontlist.py "$ROOT/fontlist/"
# A fixed hash seed: the list is in the order of the set matplotlib finds
# the fonts in, which is the seed's, so two builds wrote different lists
# (and stdlib zips) from the same inputs.
chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 PYTHONPATH=/fontlist/site PYTHONDONTWRITEBYTECODE=1 \
	PYTHONHASHSEED=0 python3.13 /fontlist/fontlist.py /fontlist/fontlist.json
log "wasm-opt $WASM_OPT_FLAGS and the stdlib zip"
cat >"$ROOT/pack.sh" <<'EOS'
set -euo pipefail
W=/work
rm -rf $W/out $W/lib && mkdir -p $W/out $W/lib
wasm-opt --strip-dwarf -g $STAGE_WASM -o $W/out/nodwarf.wasm
wasm-opt $WASM_OPT_FLAGS $W/out/nodwarf.wasm -o $W/out/python.wasm
rm $W/out/nodwarf.wasm
cp -a $W/$PY_PKG/Lib $W/lib/Lib
for p in /stdlib-patches/*.patch; do patch -s -p1 -d $W/lib <"$p"; done
# Changes to pandas' Python files (each patch says why) apply here, to a
# copy of the stage's output, as the stdlib's do: one never rebuilds C.
rm -rf $W/pdpkg && cp -a $W/pd/pkg $W/pdpkg
for p in /pandas-py-patches/*.patch; do patch -s -p1 -d $W/pdpkg <"$p"; done
# The chart stage's, the same way; matplotlib's data files go under
# share/ (the patch says why), with the font list made above.
rm -rf $W/chpkg && cp -a $W/ch/pkg $W/chpkg
for p in /charts-py-patches/*.patch; do patch -s -p1 -d $W/chpkg <"$p"; done
mkdir -p $W/chpkg/share/matplotlib && mv $W/chpkg/matplotlib/mpl-data $W/chpkg/share/matplotlib/mpl-data
cp /fontlist/fontlist.json $W/chpkg/share/matplotlib/mpl-data/fontlist-v390.json
python3.13 /stdlib_zip.py $W/lib/Lib $W/pybuild $W/out/python313.zip /extra $W/np/pkg $W/pdpkg $STAGE_PKGS
EOS
cp scripts/stdlib_zip.py "$ROOT/stdlib_zip.py"
rm -rf "$ROOT/stdlib-patches" "$ROOT/pandas-py-patches" "$ROOT/charts-py-patches" && cp -a scripts/stdlib-patches "$ROOT/stdlib-patches" &&
	cp -a scripts/pandas-py-patches "$ROOT/pandas-py-patches" && cp -a scripts/charts-py-patches "$ROOT/charts-py-patches"
chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
	WASM_OPT_FLAGS="$WASM_OPT_FLAGS" PY_PKG="$PY_PKG" STAGE_WASM="$STAGE_WASM" STAGE_PKGS="$STAGE_PKGS" bash /pack.sh

# The guest's own version string, asked from the new python.wasm itself
# would need an engine here; the source package's is the same.
rm -rf "$OUT.part" && mkdir -p "$OUT.part"
cp "$ROOT/work/out/python.wasm" "$ROOT/work/out/python313.zip" "$OUT.part/"
(cd "$OUT.part" && sha256sum python.wasm python313.zip >SHA256SUMS)
sources=$(cd "$ROOT$SRC" && for f in * "$WHEELS"/* "$NPDL"/* "$PDDL"/* "$PSDL"/* "$CHDL"/* "$ROOT"/chsrc/*.orig.tar.* "$ROOT"/chsrc/*.crate "$ORDL"/* "$BUILD"/openblas-sources/*; do if [ -f "$f" ]; then printf '    "%s": "%s",\n' "$(basename "$f")" "$(sha256sum "$f" | cut -c1-64)"; fi; done | sed '$ s/,$//')
charts_packages=$(printf ',\n    "%s": "%s"' freetype "$FREETYPE_VER" freetype-matplotlib "$MPL_FREETYPE_VER ($MPL_FREETYPE_CRATE $MPL_FREETYPE_CRATE_VER)" qhull "$QHULL_VER" libjpeg-turbo "$LIBJPEG_VER" \
	libtiff "$TIFF_VER" openjpeg "$OPENJPEG_VER" libwebp "$LIBWEBP_VER" lcms2 "$LCMS2_VER" harfbuzz "$HARFBUZZ_VER" fribidi "$FRIBIDI_VER" \
	libpng "$LIBPNG_VER" brotli "$BROTLI_VER" aom "$AOM_VER" libavif "${LIBAVIF_CRATE_VER#*+libavif.} ($LIBAVIF_CRATE ${LIBAVIF_CRATE_VER%%+*})" \
	matplotlib "$MPL_VER" kiwisolver "$KIWI_VER" contourpy "$CONTOURPY_VER" pillow "$PILLOW_VER" pybind11 "$PYBIND11_VER" cppy "$CPPY_VER" \
	fonttools "$FONTTOOLS_VER" cycler "$CYCLER_VER" pyparsing "$PYPARSING_VER" packaging "$PACKAGING_VER")
tools=$(chroot "$ROOT" dpkg-query -W -f '    "${Package}": "${Version}",\n' clang-19 lld-19 llvm-19 wasi-libc libclang-rt-19-dev-wasm32 libclang-rt-19-dev python3.13 binaryen $RUST_TOOLS | sed '$ s/,$//')
cat >"$OUT.part/build.json" <<EOF
{
  "key": "$KEY",
  "python_version": "${PY_VER%%-*}",
  "debian_suite": "$SUITE",
  "packages": {
    "$PY_PKG": "$PY_VER",
    "zlib": "$ZLIB_VER",
    "bzip2": "$BZIP2_VER",
    "xz-utils": "$XZ_VER",
    "sqlite3": "$SQLITE_VER",
    "tzdata": "$TZDATA_VER",
    "numpy": "$NUMPY_VER",
    "openblas": "$OPENBLAS_VER",
    "cython": "$CYTHON_VER",
    "pandas": "$PANDAS_VER",
    "python-dateutil": "$DATEUTIL_VER",
    "pyyaml": "$PYYAML_VER",
    "markupsafe": "$MARKUPSAFE_VER",
    "regex": "$REGEX_VER",
    "lxml": "$LXML_VER",
    "libyaml": "$LIBYAML_VER",
    "libxml2": "$LIBXML2_VER",
    "libxslt": "$LIBXSLT_VER",
    "orjson": "$ORJSON_VER"$charts_packages
  },
  "toolchain": {
$tools
  },
  "cc": "$WASM_CC",
  "opt": "$OPT_FLAGS",
  "pgo": "scripts/pgo_train.py, profile sha256 $(sha256sum "$ROOT/work/python.profdata" | cut -c1-64)",
  "wasm_opt": "$WASM_OPT_FLAGS",
  "cpython_patches": [$(cd scripts/cpython-patches && for p in *.patch; do printf '"%s", ' "$p"; done | sed 's/, $//')],
  "numpy_patches": [$(cd scripts/numpy-patches && for p in *.patch; do printf '"%s", ' "$p"; done | sed 's/, $//')],
  "pandas_patches": [$(cd scripts && for p in pandas-patches/*.patch pandas-py-patches/*.patch; do printf '"%s", ' "$p"; done | sed 's/, $//')],
  "sources_sha256": {
$sources
  },
  "fontlist_wheels_sha256": {
$(for w in $FONTLIST_WHEELS; do printf '    "%s": "%s",\n' "${w%%:*}" "${w##*:}"; done | sed '$ s/,$//')
  },
  "python_wasm_sha256": "$(sha256sum "$OUT.part/python.wasm" | cut -c1-64)",
  "stdlib_zip_sha256": "$(sha256sum "$OUT.part/python313.zip" | cut -c1-64)",
  "build_seconds": $(($(date +%s) - start))
}
EOF
# Installed as python.InstallOwn does: into a directory of its own, then
# the python313 link renamed over, so a process loading the build meanwhile
# reads the old one or the new one, never half of each. Other builds are
# removed, except the one just replaced (a process may be reading it).
FINAL="python313-${KEY:0:16}"
rm -rf "$CACHE/$FINAL" && mv "$OUT.part" "$CACHE/$FINAL"
previous=$(readlink "$OUT" 2>/dev/null || true)
if [ -d "$OUT" ] && [ ! -L "$OUT" ]; then rm -rf "$OUT.old" && mv "$OUT" "$OUT.old"; fi
ln -s "$FINAL" "$OUT.link-$$" && mv -T "$OUT.link-$$" "$OUT"
rm -rf "$OUT.old"
for d in "$CACHE"/python313-*; do
	b=$(basename "$d")
	[ "$b" = "$FINAL" ] || [ "$b" = "$previous" ] || case "$b" in *.part-*) ;; *) [ -L "$d" ] || rm -rf "$d" ;; esac
done
log "done: $OUT -> $FINAL ($(du -h "$OUT/python.wasm" | cut -f1) python.wasm, $(du -h "$OUT/python313.zip" | cut -f1) stdlib zip)"
