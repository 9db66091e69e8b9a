#!/bin/bash
# numpy's compiler for wasm32-wasi (scripts/build-python.sh): clang-19,
# except that a -shared link (every Python extension module meson builds)
# becomes a static archive of the objects it was given, with the static
# libraries and -l flags it was given recorded beside it in OUT.libs:
# build-python.sh links the archives into python.wasm itself. -fPIC is
# dropped (nothing is loaded dynamically), and so is a link group (below).
# Sources named in $CXXEH_LOWER_SOURCES get $CXXEH_LOWER_FLAGS
# (build-numpy.sh says why).
set -euo pipefail
case "$(basename "$0")" in
*++*) cc=clang++-19 ;;
*) cc=clang-19 ;;
esac
args=()
shared=0
lower=0
for a in "$@"; do
	case "$a" in
	-shared) shared=1 ;;
	-fPIC | -fpic) ;;
	# meson wraps a dependency's static libraries (OpenBLAS') in a
	# group, which wasm-ld 19 does not know; like lld for ELF it finds
	# archive members in any order, so the group changes nothing.
	-Wl,--start-group | -Wl,--end-group) ;;
	*) args+=("$a") ;;
	esac
	# A source named in $CXXEH_LOWER_SOURCES is compiled with
	# $CXXEH_LOWER_FLAGS (the exception runtime's lowering) on top.
	for s in ${CXXEH_LOWER_SOURCES:-}; do
		case "$a" in */"$s") lower=1 ;; esac
	done
done
[ $lower -eq 0 ] || args+=(${CXXEH_LOWER_FLAGS:-})
[ $shared -eq 1 ] || exec $cc --target=wasm32-wasi "${args[@]}"
out="" objs=() libs=()
set -- "${args[@]}"
while [ $# -gt 0 ]; do
	case "$1" in
	-o) out="$2"; shift ;;
	*.o) objs+=("$1") ;;
	*.a) libs+=("$(realpath "$1")") ;;
	-l*) libs+=("$1") ;;
	esac
	shift
done
[ -n "$out" ] || { echo "cc-wrapper: -shared without -o" >&2; exit 1; }
rm -f "$out"
# q, not r: objects of the same name from different folders are all kept.
llvm-ar-19 qcs "$out" "${objs[@]}"
printf '%s\n' "${libs[@]}" >"$out.libs"
