#!/usr/bin/env bash
# Run pandas' own test suites inside the sandbox, on the own build that
# scripts/build-python.sh made in $AIRLOCK_CACHE_DIR, as numpy-tests.sh
# does for numpy. pytest, hypothesis (pandas' conftest imports it) and
# their dependencies are pure-Python wheels from PyPI pinned by sha256;
# they and pandas' test files (from the sdist the build fetched) reach the
# guest as read-only package layers.
#   scripts/pandas-tests.sh [SUITE...]   e.g. frame groupby io/parser tseries reshape
# SUITE is a folder (or file) under pandas/tests. Prints pytest's summary
# per suite; exits non-zero when one failed.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
T="$CACHE/pandas-tests"
WHEELS="$T/wheels"
TESTS="$T/tree"
SDIST=$(ls "$CACHE"/build/pandas-sources/pandas-*.tar.gz 2>/dev/null | head -1)
[ -n "$SDIST" ] || { echo "pandas-tests: no pandas sdist under $CACHE/build/pandas-sources: run scripts/build-python.sh" >&2; exit 1; }
[ $# -gt 0 ] || set -- tseries reshape

mkdir -p "$WHEELS"
# hypothesis 6.155.7 is its newest release with a pure-Python wheel (later
# ones carry a compiled core, which cannot load in the sandbox).
cat >"$T/requirements.txt" <<'REQ'
pytest==9.2.0 --hash=sha256:07acdcf88ec174f907dc01af70bf52d49b014bbab03faeeade31c96b18c2e588
pluggy==1.7.0 --hash=sha256:7dd7b0d8832ba3cb632c306926ded123429211b83641b35dc5c41ad2d34f9bec
iniconfig==2.3.1 --hash=sha256:9121e2c1fdb355232495be3194c8dfe87ccc2d5dee45947b78e68f499790d7a7
packaging==26.3 --hash=sha256:d7193f7c8e4e93f444fde0262bf90af30e16fa0ad0ad44cb553c87339b23cd1c
pygments==2.21.0 --hash=sha256:2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9
hypothesis==6.155.7 --hash=sha256:9f634bdb1f9e9b8ab6ba09431cf2deedb750c96978125a6fb3c5a0f6c6db4131
sortedcontainers==2.4.0 --hash=sha256:a163dcaede0f1c021485e957a39245190e74249897e2ae4b2aa38595db237ee0
REQ
python3 -m pip download --quiet --no-deps --only-binary :all: --python-version 3.13 -d "$WHEELS" \
	--require-hashes -r "$T/requirements.txt"

# pandas/tests from the sdist (the stdlib zip leaves tests out), laid out
# as TREE/pandas/tests; the guest adds TREE/pandas to pandas.__path__, so
# the tests' own `from pandas.tests... import` finds them.
top=$(basename "$SDIST" .tar.gz)
rm -rf "$TESTS" && mkdir -p "$TESTS"
tar -xzf "$SDIST" -C "$TESTS" "$top/pandas/tests"
mv "$TESTS/$top/pandas" "$TESTS/pandas" && rm -rf "${TESTS:?}/$top"

pkgs=()
for w in "$WHEELS"/*.whl; do pkgs+=(--package "$w"); done
go build -o "$T/airlock" ./cmd/airlock
status=0
for s in "$@"; do
	# As numpy-tests.sh: no capture by file descriptor (WASI has no dup),
	# no faulthandler, no log file. pandas' top-level conftest (fixtures
	# every suite uses) is loaded from the stdlib zip as a plugin; its
	# datapath fixture looks for data files beside that conftest, where
	# the zip has none, so tests that read one skip (natively too, run
	# this way). A suite's report passes the default 1 MiB output cap.
	code="import os, sys, pytest, pandas
tree = '/opt/airlock/packages/tree'
for p in sys.path:
    if os.path.isdir(os.path.join(p, 'pandas', 'tests')):
        tree = p
pandas.__path__.append(os.path.join(tree, 'pandas'))
sys.exit(pytest.main(['-q', '-s', '-p', 'no:cacheprovider', '-p', 'no:faulthandler', '-p', 'no:logging',
    '-p', 'pandas.conftest', '--no-strict-data-files', '--rootdir', '/tmp', '-o', 'addopts=', '--import-mode=importlib',
    '--continue-on-collection-errors', '-m', 'not slow and not network and not db and not single_cpu',
    '-rfEs', '--tb=short', os.path.join(tree, 'pandas', 'tests', '$s')]))"
	name=${s//\//.}
	echo "== pandas.tests.$name"
	"$T/airlock" run --timeout 1800s --memory 3GiB --output-limit 64MiB "${pkgs[@]}" --package "$TESTS" -c "$code" \
		>"$T/$name.log" 2>&1 || status=1
	grep -E "passed|failed|error" "$T/$name.log" | tail -3
done
exit $status
