# pandas for wasm32-wasi, statically linked into python.wasm beside numpy.
# Run inside build-python.sh's chroot after numpy's stage, as its own
# cached stage:
#   /work/pd/src       pandas' sdist, unpacked (and patched) by build-python.sh
#   /work/np/...       numpy's stage: its build (archives), its install
#                      (headers and .pxd files), the staged CPython headers
#   /work/np/tools     Cython (numpy's pinned wheel, unpacked)
#   /pandas, /numpy    scripts/pandas and scripts/numpy
# Writes /work/pd/python.wasm (CPython with numpy's and pandas' extension
# modules as built-ins) and /work/pd/pkg (pandas' Python files, for the
# stdlib zip).
set -euo pipefail
W=/work
N=$W/np
P=$W/pd
rm -rf $P/build $P/bin $P/npstub $P/install $P/pkg $P/link $P/python.wasm
mkdir -p $P/bin $P/link $P/npstub/numpy

NPSITE=$(find $N/install -type d -name numpy -path '*-packages/numpy' | head -1)
NPSITE=${NPSITE%/numpy}
ln -s /numpy/cc-wrapper.sh $P/bin/cc
ln -s /numpy/cc-wrapper.sh $P/bin/c++
# pandas' meson.build asks `import numpy; numpy.get_include()`: the
# stand-in answers with the include folder of the numpy built for wasm.
cat >$P/npstub/numpy/__init__.py <<PY
def get_include():
    return "$NPSITE/numpy/_core/include"
PY
# generate_version.py imports versioneer, which it calls only when the
# source has no _version_meson.py; the sdist has one.
cat >$P/npstub/versioneer.py <<PY
def get_version():
    raise RuntimeError("versioneer stand-in (scripts/pandas/build-pandas.sh): the sdist's _version_meson.py is missing")
get_versions = get_version
PY
# The target's python, as numpy's stage has it, plus the stand-ins and
# Cython (pandas' generate_pxi.py runs Cython's Tempita with it).
cat >$P/bin/python <<SH
#!/bin/sh
_PYTHON_SYSCONFIGDATA_NAME=_sysconfigdata__wasi_wasm32-wasi PYTHONPATH=$P/npstub:$W/pybuild/build/lib.wasi-wasm32-3.13:$N/tools\${PYTHONPATH:+:\$PYTHONPATH} exec python3.13 "\$@"
SH
# Cython, native, finding numpy's .pxd files (cimport numpy) in the wasm
# numpy's install folder; it reads them, it imports nothing from there.
mkdir -p $P/native-bin
cat >$P/native-bin/cython <<SH
#!/bin/sh
PYTHONPATH=$N/tools:$NPSITE exec python3.13 -m cython "\$@"
SH
chmod +x $P/bin/python $P/native-bin/cython
export PATH=$P/native-bin:$PATH

# As numpy's: WASI's emulated signal, clocks, mman and getpid; C++ with
# exceptions (Cython's `except +` wrappers and the C++ parser code need
# try/catch to compile) but without the exception runtime's lowering
# (its cost is numpy's reason): a throw ends the run, libc++abi naming it.
WASI_DEFS="-D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_GETPID"
CARGS="$WASM_FEATURES $WASI_DEFS"
CXXARGS="$CARGS -fexceptions"
qlist() { local out="" a; for a in "$@"; do out="$out'$a', "; done; echo "[${out%, }]"; }
cd $P/src
python3.13 $N/src/vendored-meson/meson/meson.py setup $P/build \
	--cross-file /pandas/cross.ini --buildtype=release -Db_ndebug=true \
	-Dc_args="$(qlist $CARGS)" -Dcpp_args="$(qlist $CXXARGS)" \
	>$P/meson-setup.log 2>&1 || { tail -40 $P/meson-setup.log; exit 1; }
ninja -C $P/build -j$JOBS >$P/ninja.log 2>&1 || { grep -B5 -A20 -m3 -E 'error:|FAILED' $P/ninja.log | head -80; exit 1; }
python3.13 $N/src/vendored-meson/meson/meson.py install -C $P/build --destdir $P/install >$P/install.log 2>&1 ||
	{ tail -20 $P/install.log; exit 1; }

# The Python side, as numpy's (the stdlib packer skips pandas/tests).
site=$(find $P/install -type d -name pandas -path '*-packages/pandas' | head -1)
mkdir -p $P/pkg && cp -a "$site" $P/pkg/pandas
find $P/pkg -name '*.so' -o -name '*.so.libs' -o -name '*.a' -o -name '*.h' -o -name '*.pyi' -o -name '*.pxd' -o -name '*.pc' -o -name '*.c' -o -name '*.pyx' | xargs rm -f
find $P/pkg -depth -type d -empty -delete

# python.wasm relinked with numpy's and pandas' modules as built-ins.
python3.13 /pandas/link.py $W/pybuild $P/link $N/build $P/build
make -s -C $W/pybuild -f Makefile -f $P/link/link.mk builtins-link 2>&1 | tee $P/link.log
/numpy/check-link.sh $P/link.log
