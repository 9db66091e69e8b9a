#!/usr/bin/env bash
# Measure CPython's thread tests natively, for
# internal/conformance/cpython/threads_native.json: which tests pass on
# CPython of the own build's version on Linux, the reference the sandbox's
# threads are held to (TestCPythonThreadsInSandbox). The native CPython is
# the build chroot's python3.13 (Debian's, the version the own build is
# made from), so it needs root and scripts/build-python.sh's chroot; the
# tests are scripts/cpython-tests.sh's. The process pool's test classes are
# left out: they are not the threads' (processes are refused here).
# Usage: sudo scripts/cpython-thread-tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
ROOT="$CACHE/build/trixie-root"
TESTS=$(scripts/cpython-tests.sh | sed -n 's/^cpython-tests: \(up to date: \)\{0,1\}\([^ ]*\).*/\2/p')
[ -d "$TESTS" ] || { echo "cpython-thread-tests: no tests folder from scripts/cpython-tests.sh" >&2; exit 1; }
MODULES=$(sed -n 's/^\t"\(test\.[a-z_.]*\)",$/\1/p' internal/conformance/cpython/threads_test.go)
W="$ROOT/tmp/airlock-thread-tests"
rm -rf "$W" && mkdir -p "$W" && cp -a "$TESTS" "$W/test"
out=internal/conformance/cpython/threads_native.json.part
{
	printf '{\n  "cpython": "%s",\n  "measured": "%s natively (the build chroot'"'"'s python3.13, Debian'"'"'s) by scripts/cpython-thread-tests.sh",\n  "passes": {\n' \
		"$(chroot "$ROOT" python3.13 -c 'import platform; print(platform.python_version())')" "$(date -u +%F)"
	first=1
	for m in $MODULES; do
		printf 'CONFIG = {"module": "%s", "tests": [], "cwd": "/tmp/airlock-thread-tests"}\n' "$m" | cat - internal/conformance/cpython/runner.py >"$W/run.py"
		chroot "$ROOT" env -i PATH=/usr/bin:/bin HOME=/root PYTHONPATH=/tmp/airlock-thread-tests PYTHONHASHSEED=0 \
			timeout 900 python3.13 /tmp/airlock-thread-tests/run.py >"$W/out.txt" 2>"$W/err.txt" || true
		line=$(grep -a '^@@cpython-result@@ ' "$W/out.txt" | tail -1 | cut -d' ' -f2-)
		[ -n "$line" ] || { echo "cpython-thread-tests: $m printed no result" >&2; tail -20 "$W/err.txt" >&2; exit 1; }
		[ $first -eq 1 ] || printf ',\n'
		first=0
		printf '    "%s": ' "$m"
		printf '%s' "$line" | python3 -c '
import json, sys
r = json.load(sys.stdin)
passes = sorted(t for t, o in r["outcomes"].items() if o == "pass" and "ProcessPool" not in t)
print(json.dumps(passes, indent=6).replace("\n]", "\n    ]"), end="")'
		echo "cpython-thread-tests: $m: $(printf '%s' "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["run"], "run,", r["failures"], "failures,", r["errors"], "errors,", r["skipped"], "skipped")')" >&2
	done
	printf '\n  }\n}\n'
} >"$out"
mv "$out" internal/conformance/cpython/threads_native.json
rm -rf "$W"
echo "cpython-thread-tests: internal/conformance/cpython/threads_native.json" >&2
