#!/bin/sh
# Fail a python.wasm link whose log (wasm-ld's warnings) names a function
# signature mismatch: wasm-ld links such a call to a stub that traps, so
# a C declaration that disagrees with the definition (void against int,
# a missing hidden argument) would end a run the first time it is called
# instead of the build. build-numpy.sh and build-pandas.sh call it.
log="$1"
if grep -q 'signature mismatch' "$log"; then
	echo "check-link: function signature mismatches in the python.wasm link (each call traps):" >&2
	grep -A2 'signature mismatch' "$log" | head -60 >&2
	exit 1
fi
