# PyYAML (with libyaml), MarkupSafe's speedups, regex and lxml (with
# libxml2, libxslt and libexslt) for wasm32-wasi, statically linked into
# python.wasm after the stages before it. Run inside build-python.sh's
# chroot as its own cached stage:
#   /src/*.dsc           libyaml's, libxml2's and libxslt's Debian sources
#                        (apt-get source; dpkg-source applies Debian's
#                        patches, its security fixes among them)
#   /work/parsers/dl     the four sdists (pip download --require-hashes)
#   /work/np/...         numpy's stage: the staged CPython headers, Cython
#   /work/pybuild        CPython's build (its link)
#   STAGE_BUILDS         the build folders of the stages before this one
# Writes /work/parsers/python.wasm and /work/parsers/pkg (the packages'
# Python files, for the stdlib zip).
#
# None of these has a meson build, and their setup.py files would only
# compile a few C files: they are compiled here directly, each extension
# module an archive named as meson's would be, with the libraries it needs
# beside it in NAME.so.libs, and a meson-info/intro-installed.json saying
# where each installs, so that scripts/pandas/link.py links this folder
# as it links numpy's and pandas'.
set -euo pipefail
W=/work
X=$W/parsers
rm -rf $X/src $X/deps $X/build $X/pkg $X/link $X/python.wasm
mkdir -p $X/src $X/deps/lib $X/deps/include $X/build/meson-info $X/pkg

CC="clang-19 --target=wasm32-wasi"
export AR=llvm-ar-19 RANLIB=llvm-ranlib-19
WASI_DEFS="-D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_GETPID"
LIBFLAGS="-O2 $WASM_FEATURES $WASI_DEFS"
PYINC=-I$W/np/pyroot/usr/local/include/python3.13
SUFFIX=.cpython-313-wasm32-wasi.so
installed="{"

# module DOTTED_NAME LIBS... -- OBJECTS...: the module's archive and its
# .libs, where link.py looks for them.
module() {
	local dotted=$1 libs=() objs=()
	shift
	while [ "$1" != -- ]; do libs+=("$1"); shift; done
	shift
	objs=("$@")
	local path=$X/build/${dotted//./\/}$SUFFIX
	mkdir -p "$(dirname "$path")"
	$AR qcs "$path" "${objs[@]}"
	printf '%s\n' "${libs[@]}" >"$path.libs"
	installed="$installed\"$path\": \"/usr/local/lib/python3.13/site-packages/${dotted//./\/}$SUFFIX\", "
}
unpack_sdist() { mkdir -p "$X/src/$1" && tar -xzf $X/dl/$1-*.tar.gz -C "$X/src/$1" --strip-components=1; }
# apt checked the files against the archive's signed index; dpkg-source
# checks them against the .dsc (it has no keyring for the .dsc's own
# signature, and says so). Their config.sub predates WASI: CPython's
# knows it. Debian's patches touch only libxml2's doc and test-program
# Makefile.am files: the generated files are touched after them, in
# autotools' order, so make does not ask for automake.
unpack_deb() {
	dpkg-source -x /src/$1_*.dsc "$X/src/$1" 2>&1 >/dev/null | grep -v 'cannot verify inline signature' >&2 || true
	[ -f "$X/src/$1/configure" ] || return 0
	cp $W/python3.13/config.sub "$X/src/$1/config.sub"
	(cd "$X/src/$1" && touch aclocal.m4 && touch configure && find . -name Makefile.in -exec touch {} + && touch config.h.in)
}
# pyfiles SRC DEST: a package's Python and data files, without C sources,
# Cython declarations or type stubs (the stdlib packer skips tests).
pyfiles() {
	cp -a "$1" "$2"
	find "$2" \( -name '*.c' -o -name '*.h' -o -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' -o -name '*.pyi' -o -name '__pycache__' \) -prune -exec rm -rf {} +
}

echo "== libyaml"
unpack_deb libyaml
(cd $X/src/libyaml && mkdir -p obj && for f in src/*.c; do
	$CC $LIBFLAGS -DYAML_DECLARE_STATIC -DYAML_VERSION_MAJOR=0 -DYAML_VERSION_MINOR=2 -DYAML_VERSION_PATCH=5 \
		'-DYAML_VERSION_STRING="0.2.5"' -Iinclude -c "$f" -o obj/$(basename "$f" .c).o
done && $AR rcs $X/deps/lib/libyaml.a obj/*.o && cp include/yaml.h $X/deps/include/)

echo "== libxml2 (no threads, network, zlib, lzma, ICU or loadable modules; iconv is wasi-libc's)"
unpack_deb libxml2
(cd $X/src/libxml2 && CC="$CC" CFLAGS="$LIBFLAGS" ./configure -q --host=wasm32-unknown-wasi --prefix=$X/deps \
	--disable-shared --enable-static --without-threads --without-thread-alloc --without-http --without-ftp \
	--without-python --without-zlib --without-lzma --without-icu --without-modules --without-readline \
	--without-history >$X/libxml2-configure.log 2>&1 || { tail -30 $X/libxml2-configure.log; exit 1; }
	make -s -j$JOBS libxml2.la >$X/libxml2-make.log 2>&1 || { grep -m5 -B2 -A8 'error' $X/libxml2-make.log; exit 1; }
	make -s install-libLTLIBRARIES install-pkgconfigDATA install-binSCRIPTS >/dev/null && make -s -C include install >/dev/null)

echo "== libxslt, libexslt (no crypto, plug-ins, debugger or Python; lxml uses the profiler)"
unpack_deb libxslt
(cd $X/src/libxslt && CC="$CC" CFLAGS="$LIBFLAGS" ./configure -q --host=wasm32-unknown-wasi --prefix=$X/deps \
	--disable-shared --enable-static --with-libxml-prefix=$X/deps --without-python --without-crypto \
	--without-plugins --without-debugger >$X/libxslt-configure.log 2>&1 ||
	{ tail -30 $X/libxslt-configure.log; exit 1; }
	make -s -j$JOBS -C libxslt >$X/libxslt-make.log 2>&1 && make -s -j$JOBS -C libexslt >>$X/libxslt-make.log 2>&1 ||
	{ grep -m5 -B2 -A8 'error' $X/libxslt-make.log; exit 1; }
	make -s -C libxslt install >/dev/null && make -s -C libexslt install >/dev/null)

mkdir -p $X/obj
PYCFLAGS="-O2 $WASM_FEATURES $WASI_DEFS $PYINC"

echo "== PyYAML (yaml._yaml through Cython, on libyaml)"
unpack_sdist pyyaml
(cd $X/src/pyyaml && PYTHONPATH=$W/np/tools python3.13 -m cython -3 -I yaml yaml/_yaml.pyx -o $X/obj/_yaml.c >/dev/null &&
	$CC $PYCFLAGS -DYAML_DECLARE_STATIC -DCYTHON_CLINE_IN_TRACEBACK=0 -Iyaml -I$X/deps/include -c $X/obj/_yaml.c -o $X/obj/_yaml.o)
module yaml._yaml $X/deps/lib/libyaml.a -- $X/obj/_yaml.o
pyfiles $X/src/pyyaml/lib/yaml $X/pkg/yaml
pyfiles $X/src/pyyaml/lib/_yaml $X/pkg/_yaml

echo "== MarkupSafe (markupsafe._speedups)"
unpack_sdist markupsafe
$CC $PYCFLAGS -c $X/src/markupsafe/src/markupsafe/_speedups.c -o $X/obj/_speedups.o
module markupsafe._speedups -- $X/obj/_speedups.o
pyfiles $X/src/markupsafe/src/markupsafe $X/pkg/markupsafe

echo "== regex (regex._regex)"
unpack_sdist regex
for f in _regex _regex_unicode; do $CC $PYCFLAGS -c $X/src/regex/src/$f.c -o $X/obj/$f.o; done
module regex._regex -- $X/obj/_regex.o $X/obj/_regex_unicode.o
pyfiles $X/src/regex/regex $X/pkg/regex

echo "== lxml (lxml.etree and lxml.objectify from the sdist's C; its other Cython modules have Python twins, which serve)"
unpack_sdist lxml
L=$X/src/lxml/src/lxml
# As lxml's setup.py builds with its own static libxml2 and libxslt, plus
# WITHOUT_THREADING: python.wasm has no threads.
LXFLAGS="$PYCFLAGS -Wno-deprecated-declarations -DLIBXML_STATIC -DLIBXSLT_STATIC -DLIBEXSLT_STATIC -DWITHOUT_THREADING -DCYTHON_CLINE_IN_TRACEBACK=0
	-I$L -I$L/includes -I$X/deps/include/libxml2 -I$X/deps/include"
for m in etree objectify; do $CC $LXFLAGS -c $L/$m.c -o $X/obj/$m.o; done
XLIBS="$X/deps/lib/libexslt.a $X/deps/lib/libxslt.a $X/deps/lib/libxml2.a"
module lxml.etree $XLIBS -- $X/obj/etree.o
module lxml.objectify $XLIBS -- $X/obj/objectify.o
pyfiles $L $X/pkg/lxml

echo "${installed%, }}" >$X/build/meson-info/intro-installed.json

# python.wasm relinked with the stages before this one and these modules.
python3.13 /pandas/link.py $W/pybuild $X/link $STAGE_BUILDS $X/build
make -s -C $W/pybuild -f Makefile -f $X/link/link.mk builtins-link
