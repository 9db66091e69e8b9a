# The chart stack for wasm32-wasi, statically linked into python.wasm after
# pandas: FreeType (with libpng and brotli), qhull, libjpeg-turbo, Pillow's
# codecs (libtiff, OpenJPEG, libwebp, LittleCMS, libaom) and text layout
# (HarfBuzz, FriBiDi; Debian's sources), libavif (a crate's copy),
# FreeType 2.6.5 for
# matplotlib (a crate's copy), then kiwisolver, contourpy,
# matplotlib (Agg) and Pillow (their sdists). Run inside build-python.sh's
# chroot, as the stage after pandas:
#   /chsrc              the orig tarballs and the crate build-python.sh fetched
#   /work/ch/sdist/NAME the sdists, unpacked (and patched) by build-python.sh
#   /work/ch/tools      pybind11 and cppy (their pinned wheels, unpacked)
#   /work/np, /work/pd  numpy's and pandas' stages (headers, archives)
#   /charts, /numpy, /pandas  scripts/charts, scripts/numpy, scripts/pandas
#   STAGE_BUILDS        the meson builds linked so far (numpy's, pandas')
# Writes /work/ch/python.wasm and /work/ch/pkg (the packages' Python files
# and data, for the stdlib zip).
set -euo pipefail
W=/work
N=$W/np
C=$W/ch
D=$C/deps
S=$C/sdist
rm -rf $C/build-* $C/bin $C/native-bin $C/npstub $C/install $C/pkg $C/link $C/pkgconfig $C/python.wasm $D $C/obj
mkdir -p $C/bin $C/native-bin $C/link $C/npstub/numpy $C/pkgconfig $D/lib $D/include $C/obj
log() { echo "build-charts: [$SECONDS s] $*"; }

NPSITE=$(find $N/install -type d -name numpy -path '*-packages/numpy' | head -1)
NPSITE=${NPSITE%/numpy}
ln -s /numpy/cc-wrapper.sh $C/bin/cc
ln -s /numpy/cc-wrapper.sh $C/bin/c++
cat >$C/npstub/numpy/__init__.py <<PY
def get_include():
    return "$NPSITE/numpy/_core/include"
PY
# matplotlib's project() asks `python3 -m setuptools_scm` for its version;
# from an sdist that is PKG-INFO's, which the stand-in prints.
mkdir -p $C/npstub/setuptools_scm
cat >$C/npstub/setuptools_scm/__main__.py <<'PY'
import email.parser
with open("PKG-INFO", encoding="utf-8") as f:
    print(email.parser.Parser().parse(f, headersonly=True)["Version"])
PY
touch $C/npstub/setuptools_scm/__init__.py
# contourpy records meson-python's version in its build-config module;
# there is none here (meson runs directly), which this metadata says.
mkdir -p $C/npstub/meson_python-0.dist-info
printf 'Metadata-Version: 2.1\nName: meson-python\nVersion: 0+none\n' >$C/npstub/meson_python-0.dist-info/METADATA
cat >$C/bin/python <<SH
#!/bin/sh
_PYTHON_SYSCONFIGDATA_NAME=_sysconfigdata__wasi_wasm32-wasi PYTHONPATH=$C/npstub:$W/pybuild/build/lib.wasi-wasm32-3.13\${PYTHONPATH:+:\$PYTHONPATH} exec python3.13 "\$@"
SH
cat >$C/native-bin/python3 <<SH
#!/bin/sh
PYTHONPATH=$C/npstub exec python3.13 "\$@"
SH
chmod +x $C/bin/python $C/native-bin/python3
export PATH=$C/native-bin:$PATH

WASI_DEFS="-D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_GETPID"
# FreeType, qhull, libjpeg's error handler in Pillow report errors with
# setjmp/longjmp: compiled with the exception runtime's setjmp lowering
# and its setjmp.h (wasi-libc's refuses to compile without the proposal).
# A function that calls setjmp pays a host round trip per call it makes;
# others pay nothing.
SJLJ="$CXXEH_SJLJ_FLAGS -isystem /cxx-eh/include"
DEPFLAGS="-O2 $WASM_FEATURES $WASI_DEFS $SJLJ"
# pybind11 (matplotlib, contourpy) and kiwisolver throw C++ exceptions that
# their handlers turn into Python exceptions: all of their C++ is
# compiled with the runtime's lowering (and setjmp's, as qhull's and
# FreeType's longjmps pass no C++ frame but the flags must agree).
CARGS="$WASM_FEATURES $WASI_DEFS $SJLJ"
CXXARGS="$WASM_FEATURES $WASI_DEFS $CXXEH_FLAGS -isystem /cxx-eh/include -include /charts/single_thread.h"
qlist() { local out="" a; for a in "$@"; do out="$out'$a', "; done; echo "[${out%, }]"; }
MESON="python3.13 $N/src/vendored-meson/meson/meson.py"
# CPython's pkg-config files, with the staged headers' paths (cross.ini
# says why there is no sys_root).
for pc in python-3.13.pc python3.pc; do
	sed "s#^prefix=.*#prefix=$N/pyroot/usr/local#" $N/pyroot/usr/local/lib/pkgconfig/$pc >$C/pkgconfig/$pc
done

cat >$C/wasi.cmake <<CM
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR wasm32)
set(CMAKE_C_COMPILER clang-19)
set(CMAKE_C_COMPILER_TARGET wasm32-wasi)
set(CMAKE_CXX_COMPILER clang++-19)
set(CMAKE_CXX_COMPILER_TARGET wasm32-wasi)
set(CMAKE_AR llvm-ar-19)
set(CMAKE_RANLIB llvm-ranlib-19)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
CM
CMAKE_WASI="-DCMAKE_TOOLCHAIN_FILE=$C/wasi.cmake -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$D -DBUILD_SHARED_LIBS=OFF"

# Pillow's FreeType draws colour glyphs (PNG inside CBDT and sbix fonts:
# emoji) with libpng, reads WOFF fonts with zlib (CPython's) and WOFF2
# with brotli's decoder; libpng and brotli built first, all three found by
# FreeType's meson through their pkg-config files.
log "libpng"
# By hand, as lcms2 below: libpng's CMake generates pnglibconf.h with the
# host's preprocessor and the target's flags; its prebuilt default is it.
mkdir -p $C/libpng $C/obj/libpng && tar -xzf /chsrc/libpng1.6_*.orig.tar.gz -C $C/libpng --strip-components=1
cp $C/libpng/scripts/pnglibconf.h.prebuilt $C/libpng/pnglibconf.h
for f in png pngerror pngget pngmem pngpread pngread pngrio pngrtran pngrutil pngset pngtrans pngwio pngwrite pngwtran pngwutil; do
	clang-19 --target=wasm32-wasi $DEPFLAGS -DPNG_ARM_NEON_OPT=0 -I$W/deps/include -c $C/libpng/$f.c -o $C/obj/libpng/$f.o
done
llvm-ar-19 qcs $D/lib/libpng16.a $C/obj/libpng/*.o
mkdir -p $D/include/libpng16 && cp $C/libpng/png.h $C/libpng/pngconf.h $C/libpng/pnglibconf.h $D/include/libpng16/
log "brotli"
mkdir -p $C/brotli && tar -xzf /chsrc/brotli_*.orig.tar.gz -C $C/brotli --strip-components=1
(cd $C/brotli && cmake -S . -B $C/build-brotli $CMAKE_WASI -DCMAKE_C_FLAGS="$DEPFLAGS" -DBROTLI_DISABLE_TESTS=ON \
	>$C/brotli-setup.log 2>&1) || { tail -30 $C/brotli-setup.log; exit 1; }
make -s -C $C/build-brotli -j$JOBS brotlidec brotlicommon >$C/brotli.log 2>&1 ||
	{ grep -B5 -A20 -m3 -E 'error:|Error' $C/brotli.log | head -60; exit 1; }
cp $C/build-brotli/libbrotlidec.a $C/build-brotli/libbrotlicommon.a $D/lib/ && cp -a $C/brotli/c/include/brotli $D/include/
cat >$C/pkgconfig/zlib.pc <<PC
Name: zlib
Description: CPython's zlib
Version: 1.3.1
Cflags: -I$W/deps/include
Libs: $W/deps/lib/libz.a
PC
cat >$C/pkgconfig/libbrotlidec.pc <<PC
Name: libbrotlidec
Description: brotli's decoder
Version: 1.1.0
Cflags: -I$D/include
Libs: $D/lib/libbrotlidec.a $D/lib/libbrotlicommon.a
PC
cat >$C/pkgconfig/libpng.pc <<PC
Name: libpng
Description: libpng 1.6.48
Version: 1.6.48
Requires.private: zlib
Cflags: -I$D/include/libpng16
Libs: $D/lib/libpng16.a
PC

log "FreeType (Pillow's)"
mkdir -p $C/freetype && tar -xf /chsrc/freetype_*.orig.tar.xz -C $C/freetype --strip-components=1
(cd $C/freetype && $MESON setup $C/build-freetype --cross-file /charts/cross.ini --buildtype=release --prefix=$D \
	-Ddefault_library=static -Dbrotli=enabled -Dbzip2=disabled -Dharfbuzz=disabled -Dpng=enabled \
	-Dzlib=system -Dmmap=disabled -Dtests=disabled -Dc_args="$(qlist $DEPFLAGS)" >$C/freetype-setup.log 2>&1) ||
	{ tail -30 $C/freetype-setup.log; exit 1; }
ninja -C $C/build-freetype -j$JOBS >$C/freetype.log 2>&1 && ninja -C $C/build-freetype install >>$C/freetype.log 2>&1 ||
	{ grep -B5 -A20 -m3 -E 'error:|FAILED' $C/freetype.log | head -60; exit 1; }
log "FreeType 2.6.5 (matplotlib's)"
# From the crate (build-python.sh says why), compiled as matplotlib compiles
# its bundled 2.6.1 (subprojects/packagefiles/freetype-2.6.1-meson: these
# sources, the stock ftconfig.h and module list, the options header with
# subpixel rendering off and no system zlib, bzip2, libpng or HarfBuzz:
# gzip'd fonts use FreeType's own inflate). Every symbol it defines is
# renamed (mplft_ before it, by a header forced into each of its files and
# each of matplotlib's that uses it, through freetype2.pc) so that it links
# beside Debian's, which Pillow calls.
F=$C/ft265
rm -rf $F && mkdir -p $F/src $F/obj $F/lib && tar -xzf /chsrc/servo-freetype-sys-*.crate -C $F/src --strip-components=2 --wildcards '*/freetype2/*'
grep -q '^#define FREETYPE_MINOR  6$' $F/src/include/freetype/freetype.h || { echo "build-charts: the crate's FreeType is not 2.6" >&2; exit 1; }
patch -s -p1 -d $F/src </charts/freetype-2.6.5-autofit-call-types.patch
sed -i 's|^#define FT_CONFIG_OPTION_SUBPIXEL_RENDERING|/* #define FT_CONFIG_OPTION_SUBPIXEL_RENDERING */|' $F/src/include/freetype/config/ftoption.h
ft265() { # extra compiler flags...
	local f
	for f in autofit/autofit.c base/ftbase.c base/ftbbox.c base/ftbdf.c base/ftbitmap.c base/ftcid.c base/ftfntfmt.c \
		base/ftfstype.c base/ftgasp.c base/ftglyph.c base/ftgxval.c base/ftinit.c base/ftlcdfil.c base/ftmm.c base/ftotval.c \
		base/ftpatent.c base/ftpfr.c base/ftstroke.c base/ftsynth.c base/ftsystem.c base/fttype1.c base/ftwinfnt.c base/ftdebug.c \
		bdf/bdf.c cache/ftcache.c cff/cff.c cid/type1cid.c gzip/ftgzip.c lzw/ftlzw.c pcf/pcf.c pfr/pfr.c psaux/psaux.c \
		pshinter/pshinter.c psnames/psnames.c raster/raster.c sfnt/sfnt.c smooth/smooth.c truetype/truetype.c type1/type1.c \
		type42/type42.c winfonts/winfnt.c; do
		clang-19 --target=wasm32-wasi $DEPFLAGS -DFT2_BUILD_LIBRARY -I$F/src/include "$@" -c $F/src/src/$f \
			-o $F/obj/$(basename "${f%.c}").o
	done
}
# Compiled once to learn the symbols, then again with them renamed.
ft265
llvm-nm-19 --defined-only --extern-only --format=just-symbols $F/obj/*.o | grep -v -e ":$" -e "^$" | sort -u | sed 's/.*/#define & mplft_&/' >$F/mplft_names.h
rm -f $F/obj/*.o
ft265 -include $F/mplft_names.h
if llvm-nm-19 --defined-only --extern-only --format=just-symbols $F/obj/*.o | grep -v -e ":$" -e "^$" -e "^mplft_"; then
	echo "build-charts: FreeType 2.6.5 defines the symbols above unrenamed" >&2; exit 1
fi
llvm-ar-19 qcs $F/lib/libmplfreetype.a $F/obj/*.o
mkdir -p $F/include/freetype2 && cp -a $F/src/include/ft2build.h $F/src/include/freetype $F/include/freetype2/
# Libs as the archive's path: the compiler wrapper records archives and
# -l flags for the final link, not -L folders. 18.5.12 is 2.6.5's libtool
# version, which matplotlib's meson.build compares.
cat >$C/pkgconfig/freetype2.pc <<PC
Name: FreeType 2
Description: FreeType 2.6.5, its symbols renamed (mplft_)
Version: 18.5.12
Cflags: -I$F/include/freetype2 -include $F/mplft_names.h
Libs: $F/lib/libmplfreetype.a
PC

log "qhull (libqhull_r)"
mkdir -p $C/qhull && tar -xzf /chsrc/qhull_*.orig.tar.gz -C $C/qhull --strip-components=1
mkdir -p $C/obj/qhull $D/include/libqhull_r
for f in $C/qhull/src/libqhull_r/*.c; do
	clang-19 --target=wasm32-wasi $DEPFLAGS -c "$f" -o $C/obj/qhull/$(basename "${f%.c}").o
done
llvm-ar-19 qcs $D/lib/libqhull_r.a $C/obj/qhull/*.o
cp $C/qhull/src/libqhull_r/*.h $D/include/libqhull_r/
cat >$C/pkgconfig/qhull_r.pc <<PC
prefix=$D
Name: qhull_r
Description: qhull 2020.2, reentrant
Version: 8.0.2
Cflags: -I\${prefix}/include
Libs: \${prefix}/lib/libqhull_r.a
PC

log "libjpeg-turbo"
mkdir -p $C/jpeg && tar -xzf /chsrc/libjpeg-turbo_*.orig.tar.gz -C $C/jpeg --strip-components=1
(cd $C/jpeg && cmake -S . -B $C/build-jpeg -DCMAKE_TOOLCHAIN_FILE=$C/wasi.cmake -DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_C_FLAGS="$DEPFLAGS" -DCMAKE_INSTALL_PREFIX=$D -DENABLE_SHARED=0 -DENABLE_STATIC=1 -DWITH_SIMD=0 \
	-DWITH_TURBOJPEG=0 -DWITH_JAVA=0 -DWITH_CRT_DLL=0 >$C/jpeg-setup.log 2>&1) || { tail -30 $C/jpeg-setup.log; exit 1; }
make -s -C $C/build-jpeg -j$JOBS jpeg-static >$C/jpeg.log 2>&1 || { grep -B5 -A20 -m3 -E 'error:|Error' $C/jpeg.log | head -60; exit 1; }
cp $C/build-jpeg/libjpeg.a $D/lib/
cp $C/jpeg/jpeglib.h $C/jpeg/jmorecfg.h $C/jpeg/jerror.h $C/build-jpeg/jconfig.h $D/include/

# Pillow's other codecs, from Debian's sources: libtiff (in PIL._imaging,
# with libjpeg and zlib for TIFF's JPEG and Deflate compressions), OpenJPEG
# (JPEG 2000, in PIL._imaging), libwebp (PIL._webp, with its mux and demux
# for animation) and LittleCMS (PIL._imagingcms). No threads (WASI has
# one), no SIMD, no mmap (tiff's TIFFOpen reads instead; Pillow passes its
# own I/O), no codecs beyond these (libtiff's LZMA, ZSTD, WebP, JBIG, LERC).
log "libtiff"
mkdir -p $C/tiff && tar -xjf /chsrc/tiff_*.orig.tar.bz2 -C $C/tiff --strip-components=1
(cd $C/tiff && cmake -S . -B $C/build-tiff $CMAKE_WASI -DCMAKE_C_FLAGS="$DEPFLAGS" -Dtiff-tools=OFF -Dtiff-tests=OFF \
	-Dtiff-contrib=OFF -Dtiff-docs=OFF -Dcxx=OFF -Dld-version-script=OFF -Dzlib=ON -DZLIB_INCLUDE_DIR=$W/deps/include \
	-DZLIB_LIBRARY=$W/deps/lib/libz.a -Djpeg=ON -DJPEG_INCLUDE_DIR=$D/include -DJPEG_LIBRARY=$D/lib/libjpeg.a -Dold-jpeg=ON \
	-Djpeg12=OFF -Dlibdeflate=OFF -Djbig=OFF -Dlerc=OFF -Dlzma=OFF -Dzstd=OFF -Dwebp=OFF -DHAVE_MMAP=OFF \
	>$C/tiff-setup.log 2>&1) || { tail -30 $C/tiff-setup.log; exit 1; }
make -s -C $C/build-tiff/libtiff -j$JOBS tiff >$C/tiff.log 2>&1 || { grep -B5 -A20 -m3 -E 'error:|Error' $C/tiff.log | head -60; exit 1; }
cp $C/build-tiff/libtiff/libtiff.a $D/lib/
cp $C/tiff/libtiff/tiff.h $C/tiff/libtiff/tiffio.h $C/build-tiff/libtiff/tiffvers.h $C/build-tiff/libtiff/tiffconf.h $D/include/

log "OpenJPEG"
mkdir -p $C/openjpeg && tar -xJf /chsrc/openjpeg2_*.orig.tar.xz -C $C/openjpeg --strip-components=1
(cd $C/openjpeg && cmake -S . -B $C/build-openjpeg $CMAKE_WASI -DCMAKE_C_FLAGS="$DEPFLAGS" -DBUILD_CODEC=OFF \
	-DBUILD_TESTING=OFF -DBUILD_DOC=OFF -DBUILD_JPIP=OFF -DBUILD_JAVA=OFF -DBUILD_THIRDPARTY=OFF -DOPJ_USE_THREAD=OFF \
	>$C/openjpeg-setup.log 2>&1) || { tail -30 $C/openjpeg-setup.log; exit 1; }
make -s -C $C/build-openjpeg -j$JOBS openjp2 >$C/openjpeg.log 2>&1 && make -s -C $C/build-openjpeg install >>$C/openjpeg.log 2>&1 ||
	{ grep -B5 -A20 -m3 -E 'error:|Error' $C/openjpeg.log | head -60; exit 1; }

log "libwebp"
mkdir -p $C/webp && tar -xzf /chsrc/libwebp_*.orig.tar.gz -C $C/webp --strip-components=1
(cd $C/webp && cmake -S . -B $C/build-webp $CMAKE_WASI -DCMAKE_C_FLAGS="$DEPFLAGS" -DWEBP_BUILD_ANIM_UTILS=OFF \
	-DWEBP_BUILD_CWEBP=OFF -DWEBP_BUILD_DWEBP=OFF -DWEBP_BUILD_GIF2WEBP=OFF -DWEBP_BUILD_IMG2WEBP=OFF -DWEBP_BUILD_VWEBP=OFF \
	-DWEBP_BUILD_WEBPINFO=OFF -DWEBP_BUILD_WEBPMUX=OFF -DWEBP_BUILD_EXTRAS=OFF -DWEBP_BUILD_LIBWEBPMUX=ON \
	-DWEBP_ENABLE_SIMD=OFF -DWEBP_USE_THREAD=OFF >$C/webp-setup.log 2>&1) || { tail -30 $C/webp-setup.log; exit 1; }
make -s -C $C/build-webp -j$JOBS >$C/webp.log 2>&1 && make -s -C $C/build-webp install >>$C/webp.log 2>&1 ||
	{ grep -B5 -A20 -m3 -E 'error:|Error' $C/webp.log | head -60; exit 1; }

log "LittleCMS"
mkdir -p $C/lcms2 $C/obj/lcms2 && tar -xzf /chsrc/lcms2_*.orig.tar.gz -C $C/lcms2 --strip-components=1
for f in $C/lcms2/src/*.c; do
	clang-19 --target=wasm32-wasi $DEPFLAGS -DCMS_NO_PTHREADS -I$C/lcms2/include -c "$f" -o $C/obj/lcms2/$(basename "${f%.c}").o
done
llvm-ar-19 qcs $D/lib/liblcms2.a $C/obj/lcms2/*.o
cp $C/lcms2/include/lcms2.h $C/lcms2/include/lcms2_plugin.h $D/include/

# AVIF (PIL._avif): libaom's generic C (no SIMD, no threads) encodes and
# decodes AV1; libavif 1.0.4 (the crate's copy) wraps it. libavif's
# multi-threaded YUV conversion calls pthread_create, which CPython's
# WASI stubs answer with EAGAIN; Pillow asks for one thread here, as
# os.cpu_count() is unknown.
log "libaom"
mkdir -p $C/aom && tar -xzf /chsrc/aom_*.orig.tar.gz -C $C/aom --strip-components=1
(cd $C/aom && cmake -S . -B $C/build-aom $CMAKE_WASI -DCMAKE_C_FLAGS="$DEPFLAGS" -DCMAKE_CXX_FLAGS="$DEPFLAGS" \
	-DAOM_TARGET_CPU=generic -DCONFIG_MULTITHREAD=0 -DCONFIG_RUNTIME_CPU_DETECT=0 -DENABLE_DOCS=0 -DENABLE_EXAMPLES=0 \
	-DENABLE_TESTS=0 -DENABLE_TOOLS=0 -DENABLE_TESTDATA=0 -DCONFIG_WEBM_IO=0 -DCONFIG_LIBYUV=0 \
	>$C/aom-setup.log 2>&1) || { tail -30 $C/aom-setup.log; exit 1; }
make -s -C $C/build-aom -j$JOBS aom >$C/aom.log 2>&1 || { grep -B5 -A20 -m3 -E 'error:|Error' $C/aom.log | head -60; exit 1; }
mkdir -p $D/include/aom && cp $C/aom/aom/*.h $D/include/aom/ && cp $C/build-aom/libaom.a $D/lib/
log "libavif"
mkdir -p $C/avif && tar -xzf /chsrc/libavif-sys-*.crate -C $C/avif --strip-components=2 --wildcards '*/libavif/*'
(cd $C/avif && cmake -S . -B $C/build-avif $CMAKE_WASI -DCMAKE_C_FLAGS="$DEPFLAGS -D_WASI_EMULATED_PTHREAD" -DAVIF_CODEC_AOM=ON \
	-DAOM_INCLUDE_DIR=$D/include -DAOM_LIBRARY=$D/lib/libaom.a -DAVIF_BUILD_APPS=OFF -DAVIF_BUILD_TESTS=OFF \
	>$C/avif-setup.log 2>&1) || { tail -30 $C/avif-setup.log; exit 1; }
make -s -C $C/build-avif -j$JOBS avif >$C/avif.log 2>&1 || { grep -B5 -A20 -m3 -E 'error:|Error' $C/avif.log | head -60; exit 1; }
cp $C/build-avif/libavif.a $D/lib/ && cp -a $C/avif/include/avif $D/include/

# Pillow's complex text layout: the raqm its sdist vendors (compiled with
# Pillow below) shapes with HarfBuzz on Pillow's FreeType and orders
# bidirectional text with FriBiDi, both linked in (Pillow's wheels load
# FriBiDi at run time; nothing is loaded here). HarfBuzz is one unit of
# C++ (harfbuzz.cc includes the rest) with no exceptions and, as WASI
# has one thread, no locking (HB_NO_MT); the FreeType functions it would
# probe for are 2.13's.
log "FriBiDi"
mkdir -p $C/fribidi && tar -xJf /chsrc/fribidi_*.orig.tar.xz -C $C/fribidi --strip-components=1
(cd $C/fribidi && $MESON setup $C/build-fribidi --cross-file /charts/cross.ini --buildtype=release --prefix=$D \
	-Ddefault_library=static -Ddocs=false -Dbin=false -Dtests=false -Ddeprecated=false -Dc_args="$(qlist $DEPFLAGS)" \
	>$C/fribidi-setup.log 2>&1) || { tail -30 $C/fribidi-setup.log; exit 1; }
ninja -C $C/build-fribidi -j$JOBS >$C/fribidi.log 2>&1 && ninja -C $C/build-fribidi install >>$C/fribidi.log 2>&1 ||
	{ grep -B5 -A20 -m3 -E 'error:|FAILED' $C/fribidi.log | head -60; exit 1; }
log "HarfBuzz"
mkdir -p $C/harfbuzz $C/obj/harfbuzz $D/include/harfbuzz && tar -xJf /chsrc/harfbuzz_*.orig.tar.xz -C $C/harfbuzz --strip-components=1
clang++-19 --target=wasm32-wasi -O2 -std=c++11 $WASM_FEATURES -fno-exceptions -fno-rtti -DNDEBUG -DHB_NO_MT -DHAVE_FREETYPE \
	-DHAVE_FT_GET_VAR_BLEND_COORDINATES -DHAVE_FT_SET_VAR_BLEND_COORDINATES -DHAVE_FT_DONE_MM_VAR -DHAVE_FT_GET_TRANSFORM \
	-isystem /cxx-eh/include -I$D/include/freetype2 -c $C/harfbuzz/src/harfbuzz.cc -o $C/obj/harfbuzz/harfbuzz.o
llvm-ar-19 qcs $D/lib/libharfbuzz.a $C/obj/harfbuzz/harfbuzz.o
cp $C/harfbuzz/src/hb.h $C/harfbuzz/src/hb-*.h $D/include/harfbuzz/

# Meson builds (contourpy, matplotlib): pybind11's pkg-config file.
sed "s#^prefix=.*#prefix=$C/tools/pybind11#" "$(find $C/tools -name pybind11.pc | head -1)" >$C/pkgconfig/pybind11.pc

log "contourpy"
(cd $S/contourpy && $MESON setup $C/build-contourpy --cross-file /charts/cross.ini --buildtype=release -Db_ndebug=true \
	-Dwerror=false -Dcpp_args="$(qlist $CXXARGS)" >$C/contourpy-setup.log 2>&1) ||
	{ tail -30 $C/contourpy-setup.log; exit 1; }
ninja -C $C/build-contourpy -j$JOBS >$C/contourpy.log 2>&1 || { grep -B5 -A20 -m3 -E 'error:|FAILED' $C/contourpy.log | head -80; exit 1; }
$MESON install -C $C/build-contourpy --destdir $C/install >>$C/contourpy.log 2>&1 || { tail -20 $C/contourpy.log; exit 1; }

log "matplotlib"
# Link-time optimisation is off: the lowering runs in the compiler's
# backend, which LTO would move to the final link, without its flags.
# Narrowing: the Agg buffer's shape puts unsigned sizes into ssize_t,
# 32 bits here (sizes are far below 2**31).
(cd $S/matplotlib && $MESON setup $C/build-matplotlib --cross-file /charts/cross.ini --buildtype=release -Db_ndebug=true \
	-Db_lto=false -Dsystem-freetype=true -Dsystem-qhull=true -Dmacosx=false -DrcParams-backend=Agg \
	-Dc_args="$(qlist $CARGS)" -Dcpp_args="$(qlist $CXXARGS -Wno-c++11-narrowing)" >$C/matplotlib-setup.log 2>&1) ||
	{ tail -30 $C/matplotlib-setup.log; exit 1; }
ninja -C $C/build-matplotlib -j$JOBS >$C/matplotlib.log 2>&1 || { grep -B5 -A20 -m3 -E 'error:|FAILED' $C/matplotlib.log | head -80; exit 1; }
$MESON install -C $C/build-matplotlib --destdir $C/install >>$C/matplotlib.log 2>&1 || { tail -20 $C/matplotlib.log; exit 1; }

# kiwisolver and Pillow: setuptools builds, whose extensions are lists of
# sources; compiled here directly, each module an archive as the wrapper
# makes them.
PYINC="-I$N/pyroot/usr/local/include/python3.13"
HANDMADE=$C/link/handmade.json
handmade=()
archive() { # dotted-name objdir libs...
	local name=$1 dir=$2 a=$C/obj/$1.a
	shift 2
	llvm-ar-19 qcs $a $dir/*.o
	local libs="" l
	for l in "$@"; do libs="$libs\"$l\", "; done
	handmade+=("[\"$name\", \"$a\", [${libs%, }]]")
}

log "kiwisolver"
mkdir -p $C/obj/kiwi
for f in $S/kiwisolver/py/src/*.cpp; do
	clang++-19 --target=wasm32-wasi -O2 -std=c++17 $CXXARGS $PYINC -I$S/kiwisolver -I$C/tools/cppy/include \
		-c "$f" -o $C/obj/kiwi/$(basename "${f%.cpp}").o
done
archive kiwisolver._cext $C/obj/kiwi

log "Pillow"
P=$S/pillow/src
PILVER=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' $P/PIL/_version.py)
PILFLAGS="-O2 $CARGS $PYINC -I$D/include -I$D/include/openjpeg-2.5 -I$W/deps/include -I$P/libImaging -DHAVE_LIBJPEG -DHAVE_LIBZ \
	-DHAVE_LIBTIFF -DHAVE_OPENJPEG -DPILLOW_VERSION=\"$PILVER\""
mkdir -p $C/obj/imaging $C/obj/imagingft $C/obj/imagingmath $C/obj/imagingmorph $C/obj/imagingcms $C/obj/webp $C/obj/avif
for f in $P/_imaging.c $P/decode.c $P/encode.c $P/map.c $P/display.c $P/outline.c $P/path.c $P/libImaging/*.c; do
	clang-19 --target=wasm32-wasi $PILFLAGS -c "$f" -o $C/obj/imaging/$(basename "${f%.c}").o
done
# Raqm as Pillow's setup.py builds it with a FriBiDi of the system's;
# hb.h for _imagingft.c too, which reports HarfBuzz's version from it.
RAQMFLAGS="-DHAVE_RAQM -DHAVE_FRIBIDI_SYSTEM -I$D/include/freetype2 -I$D/include/harfbuzz -I$D/include/fribidi"
clang-19 --target=wasm32-wasi $PILFLAGS $RAQMFLAGS -include hb.h -c $P/_imagingft.c -o $C/obj/imagingft/_imagingft.o
clang-19 --target=wasm32-wasi $PILFLAGS $RAQMFLAGS -c $P/thirdparty/raqm/raqm.c -o $C/obj/imagingft/raqm.o
clang-19 --target=wasm32-wasi $PILFLAGS -c $P/_imagingmath.c -o $C/obj/imagingmath/_imagingmath.o
clang-19 --target=wasm32-wasi $PILFLAGS -c $P/_imagingmorph.c -o $C/obj/imagingmorph/_imagingmorph.o
clang-19 --target=wasm32-wasi $PILFLAGS -c $P/_imagingcms.c -o $C/obj/imagingcms/_imagingcms.o
# _webp.c carries its own copy of ImagingSectionEnter/Leave (a module of
# its own elsewhere), which would clash with _imaging's here.
clang-19 --target=wasm32-wasi $PILFLAGS -DImagingSectionEnter=webp_ImagingSectionEnter -DImagingSectionLeave=webp_ImagingSectionLeave \
	-c $P/_webp.c -o $C/obj/webp/_webp.o
clang-19 --target=wasm32-wasi $PILFLAGS -c $P/_avif.c -o $C/obj/avif/_avif.o
archive PIL._imaging $C/obj/imaging $D/lib/libtiff.a $D/lib/libopenjp2.a $D/lib/libjpeg.a $W/deps/lib/libz.a
archive PIL._imagingft $C/obj/imagingft $D/lib/libharfbuzz.a $D/lib/libfribidi.a $D/lib/libfreetype.a $D/lib/libpng16.a \
	$D/lib/libbrotlidec.a $D/lib/libbrotlicommon.a $W/deps/lib/libz.a
archive PIL._imagingmath $C/obj/imagingmath
archive PIL._imagingmorph $C/obj/imagingmorph
archive PIL._imagingcms $C/obj/imagingcms $D/lib/liblcms2.a
archive PIL._webp $C/obj/webp $D/lib/libwebpmux.a $D/lib/libwebpdemux.a $D/lib/libwebp.a $D/lib/libsharpyuv.a
archive PIL._avif $C/obj/avif $D/lib/libavif.a $D/lib/libaom.a
(IFS=,; echo "[${handmade[*]}]") >$HANDMADE

# The Python side: matplotlib (with mpl_toolkits and pylab), contourpy
# from their meson installs; kiwisolver's and Pillow's from their sources.
log "Python files"
mkdir -p $C/pkg
site=$(find $C/install -type d -name matplotlib -path '*-packages/matplotlib' | head -1)
site=${site%/matplotlib}
cp -a $site/matplotlib $site/mpl_toolkits $site/pylab.py $site/contourpy $C/pkg/
cp -a $S/kiwisolver/py/kiwisolver $C/pkg/kiwisolver
cp -a $P/PIL $C/pkg/PIL
find $C/pkg -name '*.so' -o -name '*.so.libs' -o -name '*.a' -o -name '*.h' -o -name '*.pyi' -o -name '*.pxd' -o -name '*.pc' -o -name '*.c' -o -name '*.cpp' -o -name 'py.typed' | xargs rm -f
find $C/pkg -depth -type d -empty -delete

log "linking python.wasm"
python3.13 /charts/link.py $W/pybuild $C/link $HANDMADE $STAGE_BUILDS $C/build-contourpy $C/build-matplotlib
make -s -C $W/pybuild -f Makefile -f $C/link/link.mk builtins-link
log "done"
