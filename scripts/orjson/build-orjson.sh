# orjson for wasm32-wasi, statically linked into python.wasm after the
# stages before it. Run inside build-python.sh's chroot as its own cached
# stage:
#   /work/orjson/dl      orjson's sdist (pip download --require-hashes);
#                        it carries its Rust dependencies (include/cargo,
#                        each crate's files checked by cargo against its
#                        .cargo-checksum.json, the crates against
#                        Cargo.lock), so nothing else is fetched
#   /work/pybuild        CPython's build (its pyconfig.h, its link)
#   STAGE_BUILDS         the build folders of the stages before this one
#   STAGE_HANDMADE       the chart stage's list of modules it compiled
#                        without meson (scripts/charts/link.py)
# Writes /work/orjson/python.wasm and /work/orjson/pkg (orjson's Python
# file, for the stdlib zip).
#
# Debian's Rust (rustc, cargo, and libstd-rust-dev-wasm32: the standard
# library for wasm32-wasip1, built against the same wasi-libc) compiles
# the crate as a static library, not the shared object maturin makes: an
# archive named as meson's would be, with a meson-info/intro-installed.json
# saying where it installs, which the link step takes as it takes the
# parsers'. The release profile is the sdist's own (fat LTO, one codegen
# unit, panic=abort: a Rust panic prints its message and traps, which
# ends the run as a crash; orjson reports bad input as exceptions and
# does not panic on it; scripts/orjson/patches makes a failed allocation
# of its output buffer such an abort too).
set -euo pipefail
W=/work
X=$W/orjson
rm -rf $X/src $X/build $X/pkg $X/link $X/target $X/cargo-home $X/python.wasm
mkdir -p $X/src $X/build/meson-info $X/pkg
log() { echo "build-orjson: $*" >&2; }
SUFFIX=.cpython-313-wasm32-wasi.so

tar -xzf $X/dl/orjson-*.tar.gz -C $X/src --strip-components=1
# Airlock's changes to orjson (each patch says why).
for p in /orjson/patches/*.patch; do patch -s -p1 -d $X/src <"$p"; done

# PyO3 would read the target's interpreter from its sysconfigdata; the
# few facts it needs are written out instead, checked against the
# build's pyconfig.h: CPython 3.13, 32-bit, no debug, trace-refs or
# free-threaded build, the full (not the limited) API. Its link lines are
# left out: the archive must not carry a libpython of its own.
PYCONFIG=$W/pybuild/pyconfig.h
grep -q '^#define SIZEOF_VOID_P 4$' $PYCONFIG || { log "$PYCONFIG: not a 32-bit build"; exit 1; }
if grep -Eq '^#define (Py_DEBUG|Py_TRACE_REFS|Py_GIL_DISABLED|Py_REF_DEBUG)\b' $PYCONFIG; then
	log "$PYCONFIG: a debug, trace-refs or free-threaded build, which pyo3.cfg does not say"
	exit 1
fi
cat >$X/pyo3.cfg <<EOF
implementation=CPython
version=3.13
shared=false
abi3=false
lib_name=python3.13
pointer_width=32
build_flags=
suppress_build_script_link_lines=true
EOF

# orjson's build.rs turns nightly-only code paths on when the compiler
# allows unstable features: Debian's rustc is a stable one, and
# RUSTC_BOOTSTRAP stays unset. Its C part (yyjson) is compiled by the cc
# crate with the C stages' clang and features; the Rust code with the
# same wasm features.
RUST_FEATURES=$(echo " $WASM_FEATURES" | sed 's/ -m/,+/g; s/^,//')
log "cargo rustc --release --frozen --target wasm32-wasip1 --crate-type staticlib ($(rustc --version))"
(cd $X/src && env -u RUSTC_BOOTSTRAP CARGO_HOME=$X/cargo-home CARGO_TARGET_DIR=$X/target PYO3_CONFIG_FILE=$X/pyo3.cfg \
	CC_wasm32_wasip1=clang-19 AR_wasm32_wasip1=llvm-ar-19 CFLAGS_wasm32_wasip1="-O3 $WASM_FEATURES" \
	CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS="-C target-feature=$RUST_FEATURES" \
	cargo rustc --release --frozen --target wasm32-wasip1 --lib --crate-type staticlib >$X/cargo.log 2>&1) ||
	{ tail -40 $X/cargo.log >&2; exit 1; }
# rustc only warns about a target feature it does not know, and ignores it.
if grep -m1 'is not a recognized feature' $X/cargo.log >&2; then log "a wasm feature of WASM_FEATURES is not rustc's"; exit 1; fi

# The module's archive where link.py looks for it, no other library
# (Rust's standard library and yyjson are in it).
mod=$X/build/orjson/orjson$SUFFIX
mkdir -p $X/build/orjson
cp $X/target/wasm32-wasip1/release/liborjson.a $mod
: >$mod.libs
echo "{\"$mod\": \"/usr/local/lib/python3.13/site-packages/orjson/orjson$SUFFIX\"}" >$X/build/meson-info/intro-installed.json
mkdir -p $X/pkg/orjson && cp $X/src/pysrc/orjson/__init__.py $X/pkg/orjson/

log "linking python.wasm"
python3.13 /charts/link.py $W/pybuild $X/link $STAGE_HANDMADE $STAGE_BUILDS $X/build
make -s -C $W/pybuild -f Makefile -f $X/link/link.mk builtins-link
