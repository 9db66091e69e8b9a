#!/usr/bin/env bash
# Run numpy's own test suites (default: linalg fft) inside the sandbox, on
# the own build that scripts/build-python.sh made in $AIRLOCK_CACHE_DIR.
# pytest and its dependencies are pure-Python wheels from PyPI, pinned by
# sha256 and fetched with the host's pip; they and numpy's test files (from
# the sdist the build fetched) reach the guest as read-only package layers.
#   scripts/numpy-tests.sh [SUITE...]     e.g. linalg fft polynomial
# Prints pytest's summary per suite; exits non-zero when one failed.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
WHEELS="$CACHE/numpy-tests/wheels"
TESTS="$CACHE/numpy-tests/tree"
SDIST=$(ls "$CACHE"/build/numpy-sources/numpy-*.tar.gz 2>/dev/null | head -1)
[ -n "$SDIST" ] || { echo "numpy-tests: no numpy sdist under $CACHE/build/numpy-sources: run scripts/build-python.sh" >&2; exit 1; }
[ $# -gt 0 ] || set -- linalg fft

mkdir -p "$WHEELS"
cat >"$CACHE/numpy-tests/requirements.txt" <<'EOF'
pytest==9.2.0 --hash=sha256:07acdcf88ec174f907dc01af70bf52d49b014bbab03faeeade31c96b18c2e588
pluggy==1.7.0 --hash=sha256:7dd7b0d8832ba3cb632c306926ded123429211b83641b35dc5c41ad2d34f9bec
iniconfig==2.3.1 --hash=sha256:9121e2c1fdb355232495be3194c8dfe87ccc2d5dee45947b78e68f499790d7a7
packaging==26.3 --hash=sha256:d7193f7c8e4e93f444fde0262bf90af30e16fa0ad0ad44cb553c87339b23cd1c
pygments==2.21.0 --hash=sha256:2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9
EOF
python3 -m pip download --quiet --no-deps --only-binary :all: --python-version 3.13 -d "$WHEELS" \
	--require-hashes -r "$CACHE/numpy-tests/requirements.txt"

# numpy's test folders as one package, nptests.<suite>, beside (not inside)
# the numpy in the stdlib zip.
rm -rf "$TESTS" && mkdir -p "$TESTS/nptests" && touch "$TESTS/nptests/__init__.py"
top=$(basename "$SDIST" .tar.gz)
for s in "$@"; do
	tar -xzf "$SDIST" -C "$TESTS" "$top/numpy/$s/tests"
	mv "$TESTS/$top/numpy/$s/tests" "$TESTS/nptests/$s" && touch "$TESTS/nptests/$s/__init__.py"
done
rm -rf "${TESTS:?}/$top"

pkgs=()
for w in "$WHEELS"/*.whl; do pkgs+=(--package "$w"); done
go build -o "$CACHE/numpy-tests/airlock" ./cmd/airlock
status=0
for s in "$@"; do
	# No capture by file descriptor (WASI has no dup), no faulthandler
	# (same), no log file (no /dev/null); nothing written beside the tests.
	code="import os, sys, pytest, nptests
d = os.path.join(os.path.dirname(nptests.__file__), '$s')
sys.exit(pytest.main(['-q', '-s', '-p', 'no:cacheprovider', '-p', 'no:faulthandler', '-p', 'no:logging',
    '--rootdir', '/tmp', '-o', 'addopts=', '--import-mode=importlib', '--continue-on-collection-errors',
    '-rfE', '--tb=short', d]))"
	echo "== numpy.$s"
	"$CACHE/numpy-tests/airlock" run --timeout 900s --memory 2GiB "${pkgs[@]}" --package "$TESTS" -c "$code" \
		>"$CACHE/numpy-tests/$s.log" 2>&1 || status=1
	grep -E "passed|failed|error" "$CACHE/numpy-tests/$s.log" | tail -5
done
exit $status
