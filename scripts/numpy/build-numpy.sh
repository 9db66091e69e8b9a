# numpy for wasm32-wasi, statically linked into python.wasm. Run inside
# build-python.sh's chroot after the CPython build, as its own cached
# stage (a change here does not redo CPython or its PGO run):
#   /work/np/src       numpy's sdist, unpacked and patched by build-python.sh
#   /work/np/tools     Cython (the pinned wheel, unpacked)
#   /numpy             this folder (scripts/numpy)
# Writes /work/np/python.wasm (CPython with numpy's 13 extension modules
# as built-ins) and /work/np/pkg (numpy's Python files, for the stdlib zip).
set -euo pipefail
W=/work
N=$W/np
rm -rf $N/build $N/pyroot $N/bin $N/native-bin $N/install $N/pkg $N/link $N/python.wasm
mkdir -p $N/bin $N/link

# The WASI CPython's headers and pkg-config file, where the cross file's
# sys_root has them (meson reads the target's, not the native ones).
make -s -C $W/pybuild DESTDIR=$N/pyroot inclinstall >/dev/null
mkdir -p $N/pyroot/usr/local/lib/pkgconfig
cp $W/pybuild/Misc/python.pc $N/pyroot/usr/local/lib/pkgconfig/python-3.13.pc
cp $W/pybuild/Misc/python.pc $N/pyroot/usr/local/lib/pkgconfig/python3.pc
# OpenBLAS (scripts/build-openblas.sh, staged at /openblas by
# build-python.sh): its pkg-config file beside Python's; meson prefixes
# its -I with the sys_root, where the link makes /openblas appear again.
cp /openblas/lib/pkgconfig/openblas.pc $N/pyroot/usr/local/lib/pkgconfig/openblas.pc
ln -s /openblas $N/pyroot/openblas

ln -s /numpy/cc-wrapper.sh $N/bin/cc
ln -s /numpy/cc-wrapper.sh $N/bin/c++
# Native python3.13, but with the WASI build's sysconfig data: meson asks
# it for EXT_SUFFIX, the include path and the version.
cat >$N/bin/python <<EOF
#!/bin/sh
_PYTHON_SYSCONFIGDATA_NAME=_sysconfigdata__wasi_wasm32-wasi PYTHONPATH=$W/pybuild/build/lib.wasi-wasm32-3.13\${PYTHONPATH:+:\$PYTHONPATH} exec python3.13 "\$@"
EOF
# Cython runs on the build machine: meson looks for it on PATH.
mkdir -p $N/native-bin
cat >$N/native-bin/cython <<EOF
#!/bin/sh
PYTHONPATH=$N/tools exec python3.13 -m cython "\$@"
EOF
chmod +x $N/bin/python $N/native-bin/cython
export PATH=$N/native-bin:$PATH

# WASI's emulated signal (numpy's keyboard-interrupt handling is off with
# NPY_NO_SIGNAL, but <signal.h> is still included), process clocks, mman
# and getpid, as CPython's own build uses them.
WASI_DEFS="-DNPY_NO_SIGNAL -D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_GETPID"
CARGS="$WASM_FEATURES $WASI_DEFS"
# numpy's C++ is compiled with exceptions and linked with
# scripts/build-cxx-eh.sh's runtime (staged by build-python.sh). Only
# numpy.fft's wrapper, whose catch turns pocketfft's throws into
# RuntimeError and MemoryError, gets the runtime's lowering: lowered,
# every call that may throw in a scope with destructors is a host round
# trip, and np.unique's hash set (unique.cpp) ran 13x slower. A throw
# anywhere else still ends the run, with libc++abi naming the exception.
CXXARGS="$CARGS -fexceptions"
export CXXEH_LOWER_SOURCES="_pocketfft_umath.cpp"
export CXXEH_LOWER_FLAGS="${CXXEH_FLAGS/-fexceptions /}"
qlist() { local out="" a; for a in "$@"; do out="$out'$a', "; done; echo "[${out%, }]"; }
cd $N/src
python3.13 vendored-meson/meson/meson.py setup $N/build \
	--cross-file /numpy/cross.ini --buildtype=release -Db_ndebug=true \
	-Dc_args="$(qlist $CARGS)" -Dcpp_args="$(qlist $CXXARGS)" \
	-Dblas=openblas -Dlapack=openblas -Dallow-noblas=false -Ddisable-optimization=true -Ddisable-threading=true \
	-Ddisable-svml=true -Ddisable-highway=true -Ddisable-intel-sort=true \
	>$N/meson-setup.log 2>&1 || { tail -40 $N/meson-setup.log; exit 1; }
ninja -C $N/build -j$JOBS >$N/ninja.log 2>&1 || { grep -B5 -A20 -m3 -E 'error:|FAILED' $N/ninja.log | head -80; exit 1; }
python3.13 vendored-meson/meson/meson.py install -C $N/build --destdir $N/install >$N/install.log 2>&1 ||
	{ tail -20 $N/install.log; exit 1; }

# The Python side: numpy's .py files (the stdlib packer skips tests).
site=$(find $N/install -type d -name numpy -path '*-packages/numpy' | head -1)
mkdir -p $N/pkg && cp -a "$site" $N/pkg/numpy
find $N/pkg -name '*.so' -o -name '*.so.libs' -o -name '*.a' -o -name '*.h' -o -name '*.pyi' -o -name '*.pxd' -o -name '*.pc' -o -name '*.c' -o -name '*.pyx' | xargs rm -f
find $N/pkg -depth -type d -empty -delete

# The extension modules, as archives the wrapper made; their names and
# PyInit functions, then python.wasm relinked with them as built-ins.
python3.13 /numpy/link.py $N/build $W/pybuild $N/link
make -s -C $W/pybuild -f Makefile -f $N/link/link.mk numpy-link 2>&1 | tee $N/link.log
/numpy/check-link.sh $N/link.log
