#!/usr/bin/env bash
# Run matplotlib's and Pillow's own test suites inside the sandbox and on
# native CPython 3.13 with the same versions' x86-64 wheels, side by side,
# on the own build that scripts/build-python.sh made in $AIRLOCK_CACHE_DIR.
#   scripts/charts-tests.sh prepare          the test tree only (scripts/setup.sh runs it)
#   scripts/charts-tests.sh native SUITE     SUITE: matplotlib or pillow
#   scripts/charts-tests.sh sandbox SUITE [--engine wasmtime]
#   scripts/charts-tests.sh table            docs/conformance.md's table, from the runs' results
#   scripts/charts-tests.sh native-all matplotlib     every test file of the suite, not only
#   scripts/charts-tests.sh sandbox-all matplotlib [--engine wasmtime]   expected.json's: one
#                                            run per file (a crash costs that file alone),
#                                            ~15 min natively, ~1 h in the sandbox on 2 cores
#   scripts/charts-tests.sh table-all matplotlib       their share, and what it lost by cause
# The test files and deselections are internal/conformance/chartsuites/
# expected.json's; each run prints internal/conformance/chartsuites/runner.py's
# result line (counts, and every test that did not pass) to
# $CACHE/charts-tests/<suite>-<side>.json. The Go test
# (internal/conformance/chartsuites) holds the sandbox to expected.json.
#
# The tests come from the sdists the build fetched (sha256-pinned in
# build-python.sh; matplotlib's carries its baseline images; fetched the
# same way where the cache's build came without them), unpacked to
# $CACHE/charts-tests/tree-<their sha256s>/ as matplotlib/tests and Tests.
# The native side is a venv (python3.13, or $AIRLOCK_NATIVE_PYTHON) of the
# wheels pinned below, the same versions as the build's.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
T="$CACHE/charts-tests"
SRC="$CACHE/build/charts-sources"
MPL_VER=$(sed -n 's/^MPL_VER=//p' scripts/build-python.sh)
MPL_SHA256=$(sed -n 's/^MPL_SHA256=//p' scripts/build-python.sh)
PILLOW_VER=$(sed -n 's/^PILLOW_VER=//p' scripts/build-python.sh)
PILLOW_SHA256=$(sed -n 's/^PILLOW_SHA256=//p' scripts/build-python.sh)
MPL_SDIST="$SRC/matplotlib-$MPL_VER.tar.gz"
PILLOW_SDIST="$SRC/pillow-$PILLOW_VER.tar.gz"
TREE="$T/tree-${MPL_SHA256:0:16}-${PILLOW_SHA256:0:16}"

prepare_tree() {
	[ ! -f "$TREE/.complete" ] || return 0
	if [ ! -f "$MPL_SDIST" ] || [ ! -f "$PILLOW_SDIST" ]; then
		# A cache whose build came from elsewhere (copied, or made before
		# the build kept its sources) lacks them: fetch them as
		# build-python.sh does, its stand-ins for their build backends
		# keeping pip from running any.
		mkdir -p "$T/sdists"
		printf '%s==%s --hash=sha256:%s\n' matplotlib "$MPL_VER" "$MPL_SHA256" pillow "$PILLOW_VER" "$PILLOW_SHA256" >"$T/sdists/requirements.txt"
		PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD/scripts/charts/fetch:$PWD/scripts/numpy/fetch" python3 -m pip download --quiet --no-deps \
			--no-build-isolation --no-binary :all: --python-version 3.13 -d "$T/sdists" --require-hashes -r "$T/sdists/requirements.txt"
		MPL_SDIST="$T/sdists/matplotlib-$MPL_VER.tar.gz" PILLOW_SDIST="$T/sdists/pillow-$PILLOW_VER.tar.gz"
	fi
	for f in "$MPL_SDIST:$MPL_SHA256" "$PILLOW_SDIST:$PILLOW_SHA256"; do
		[ -f "${f%:*}" ] || { echo "charts-tests: no ${f%:*}" >&2; exit 1; }
		echo "${f##*:}  ${f%:*}" | sha256sum -c --quiet - || { echo "charts-tests: ${f%:*} is not the pinned sdist" >&2; exit 1; }
	done
	rm -rf "$TREE.part" && mkdir -p "$TREE.part/matplotlib"
	tar -xzf "$MPL_SDIST" -C "$TREE.part" --strip-components=2 "matplotlib-$MPL_VER/lib/matplotlib/tests"
	tar -xzf "$PILLOW_SDIST" -C "$TREE.part" --strip-components=1 "pillow-$PILLOW_VER/Tests"
	# No __init__.py beside tests/: matplotlib.tests is found through
	# matplotlib.__path__, not as a package of its own.
	touch "$TREE.part/.complete"
	rm -rf "$TREE" && mv "$TREE.part" "$TREE"
}

prepare_native() {
	# The native side: the wheels the build's versions were released as
	# (matplotlib, numpy, Pillow, kiwisolver as build-python.sh's
	# FONTLIST_WHEELS; contourpy 1.3.3's; the pure-Python rest as the build
	# packs them), pytest as scripts/fetch-wheels.sh pins it.
	local req="$T/native-requirements.txt"
	cat >"$req.new" <<-'REQ'
	matplotlib==3.10.9 --hash=sha256:8f3bcac1ca5ed000a6f4337d47ba67dfddf37ed6a46c15fd7f014997f7bf865f
	numpy==2.5.5 --hash=sha256:824025655df929268bfe6b47ed91a00d14209a6f760847cf150be446829e1ce4
	pillow==13.0.0 --hash=sha256:5f56499c1a74d2b862beb0c33b8016f99d095858455df9d21583bbbc1c15b582
	kiwisolver==1.5.1 --hash=sha256:74ad5c3dad54a4641b4c28cd15ded70899d04459c6c7aeacafea716be97cce6d
	contourpy==1.3.3 --hash=sha256:4debd64f124ca62069f313a9cb86656ff087786016d76927ae2cf37846b006c9
	fonttools==4.68.0 --hash=sha256:d76f8fdcb6936f5e1045a0c9dd721a4bf11112e60d1e243bfa1d39f06a8b3104
	cycler==0.12.1 --hash=sha256:85cef7cff222d8644161529808465972e51340599459b8ac3ccbac5a854e0d30
	pyparsing==3.3.3 --hash=sha256:ece8c00a69cf01b45d0b1dedabb469c90d8caf996d4fda40f147627a122849a4
	packaging==26.4 --hash=sha256:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2
	python-dateutil==4.0.0 --hash=sha256:a5e246f79eb80475e691bf93862cead98decd8a498cf53ba0516fcdc0f50dc1c
	pytest==9.2.0 --hash=sha256:07acdcf88ec174f907dc01af70bf52d49b014bbab03faeeade31c96b18c2e588
	pluggy==1.7.0 --hash=sha256:7dd7b0d8832ba3cb632c306926ded123429211b83641b35dc5c41ad2d34f9bec
	iniconfig==2.3.1 --hash=sha256:9121e2c1fdb355232495be3194c8dfe87ccc2d5dee45947b78e68f499790d7a7
	pygments==2.21.0 --hash=sha256:2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9
	REQ
	if ! cmp -s "$req.new" "$req" || [ ! -x "$T/native/bin/python" ]; then
		local py="${AIRLOCK_NATIVE_PYTHON:-python3.13}"
		"$py" -c 'import sys; assert sys.version_info[:2] == (3, 13), sys.version' ||
			{ echo "charts-tests: the native side needs CPython 3.13 ($py): set AIRLOCK_NATIVE_PYTHON" >&2; exit 1; }
		rm -rf "$T/native" "$T/native-wheels" && mkdir -p "$T/native-wheels"
		"$py" -m pip download --quiet --no-deps --only-binary :all: -d "$T/native-wheels" --require-hashes -r "$req.new"
		"$py" -m venv "$T/native"
		"$T/native/bin/python" -m pip install --quiet --no-index --no-deps "$T/native-wheels"/*.whl
		mv "$req.new" "$req"
	fi
	rm -f "$req.new"
}

# config SUITE TREE SIDE [FILE]: runner.py's CONFIG line for SUITE, from
# expected.json: its files (or FILE alone), its deselections on both
# sides, and in the sandbox also the tests that crash the interpreter
# there (each would end the run).
config() {
	python3 - "$@" <<-'PY'
	import json, sys
	suite, tree, side = sys.argv[1:4]
	e = json.load(open("internal/conformance/chartsuites/expected.json"))
	s = next(s for s in e["suites"] if s["suite"] == suite)
	deselect = dict(s["deselect"])
	if side == "sandbox":
	    deselect.update({c["test"]: c["reason"] for c in s["crash"]})
	files = sys.argv[4:] or s["files"]
	print("CONFIG = " + json.dumps({"suite": suite, "tree": tree, "files": files, "deselect": deselect}))
	PY
}

# run_side SIDE ENGINE RUNNER LOG: one run of RUNNER natively or in the
# sandbox (the airlock binary sandbox_bin built), its output to LOG.
run_side() {
	if [ "$1" = native ]; then
		MPLBACKEND=agg "$T/native/bin/python" "$3" >"$4" 2>&1 || true
	else
		AIRLOCK_WARM=off "$T/airlock-$2" run --engine "$2" --timeout 3600s --memory 3GiB --output-limit 64MiB \
			--fs-bytes 1GiB --fs-files 100000 "${pkgs[@]}" --package "$TREE" "$3" >"$4" 2>&1 || true
	fi
}
sandbox_bin() { # engine
	local tags=()
	[ "$1" = wasmtime ] && tags=(-tags airlock_wasmtime)
	go build "${tags[@]}" -o "$T/airlock-$1" ./cmd/airlock
	pkgs=()
	for w in "$CACHE"/testwheels/*.whl; do pkgs+=(--package "$w"); done
}
# result LOG OUT: the runner's result line from LOG into OUT.
result() {
	grep -a '^@@charts-result@@ ' "$1" | tail -1 | cut -c19- >"$2"
	[ -s "$2" ]
}

[ $# -ge 1 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
mode=$1
shift
if [ "$mode" = table ]; then
	python3 - "$T" <<-'PY'
	import json, os, sys
	t = sys.argv[1]
	e = json.load(open("internal/conformance/chartsuites/expected.json"))
	def load(suite, side):
	    p = os.path.join(t, f"{suite}-{side}.json")
	    if not os.path.exists(p):
	        return None
	    r = json.load(open(p))
	    # A result from before a test was deselected: counted without it.
	    deselect = tuple(next(s for s in e["suites"] if s["suite"] == suite)["deselect"])
	    for nid in [n for n in r["passed"] if n.startswith(deselect)]:
	        r["passed"].remove(nid)
	        r["counts"]["passed"] -= 1
	    for group in (r["outcomes"], r["skipped"]):
	        for nid in [n for n in group if n.startswith(deselect)]:
	            o = group.pop(nid) if group is r["outcomes"] else (group.pop(nid), "skipped")[1]
	            r["counts"][o] -= 1
	    return r
	def fmt(r):
	    if r is None:
	        return "not run"
	    c = r["counts"]
	    s = " / ".join(str(c.get(k, 0)) for k in ("passed", "failed", "error", "skipped"))
	    return s + (f" ({c['xfailed']} xfailed)" if c.get("xfailed") else "")
	print("| suite | native: passed / failed / errors / skipped | wazero | wasmtime | native passes passing on wazero, wasmtime |")
	print("|---|---|---|---|---|")
	for suite in ("matplotlib", "pillow"):
	    n = load(suite, "native")
	    row = [suite, fmt(n)]
	    shares = []
	    for eng in ("wazero", "wasmtime"):
	        r = load(suite, eng)
	        row.append(fmt(r))
	        if n and r:
	            np_ = set(n["passed"])
	            shares.append("%.1f%%" % (100 * len(np_ & set(r["passed"])) / len(np_)))
	        else:
	            shares.append("-")
	    row.append(", ".join(shares))
	    print("| " + " | ".join(row) + " |")
	PY
	exit 0
fi
if [ "$mode" = table-all ]; then
	suite=${1:?suite: matplotlib}
	python3 - "$T" "$suite" <<-'PY'
	import collections, glob, json, os, sys
	t, suite = sys.argv[1:]
	def load(side):
	    out = {}
	    for p in sorted(glob.glob(os.path.join(t, f"{suite}-all-{side}", "*.json"))):
	        out[os.path.basename(p)[:-5]] = json.load(open(p)) if os.path.getsize(p) else None
	    return out
	native = load("native")
	print(f"{suite}, every test file ({len(native)}), one run per file:")
	print("| side | passed / failed / errors / skipped | native passes passing here | files without a result |")
	print("|---|---|---|---|")
	for side in ("native", "wazero", "wasmtime"):
	    runs = load(side)
	    if not runs:
	        continue
	    counts, kept, lost, missing = collections.Counter(), 0, collections.Counter(), []
	    total = 0
	    for f, n in native.items():
	        r = runs.get(f)
	        if r is None:
	            missing.append(f)
	        else:
	            counts.update(r["counts"])
	        if n is None:
	            continue
	        np_ = set(n["passed"])
	        total += len(np_)
	        here = set(r["passed"]) if r else set()
	        kept += len(np_ & here)
	        for nid in np_ - here:
	            if r is None:
	                lost["(no result for its file)"] += 1
	                continue
	            if nid in r["skipped"]:
	                lost["skipped: " + str(r["skipped"][nid]).strip().splitlines()[-1][:100]] += 1
	                continue
	            # A test with no outcome of its own: its file did not collect.
	            key = nid if nid in r["outcomes"] else nid.split("::")[0]
	            why = (r["details"].get(key) or "").strip().splitlines() or [""]
	            what = r["outcomes"].get(key, "?") + (" (collecting its file)" if key != nid else "")
	            lost[what + ": " + why[-1].strip()[:100]] += 1
	    c = " / ".join(str(counts.get(k, 0)) for k in ("passed", "failed", "error", "skipped"))
	    print(f"| {side} | {c} | {100 * kept / max(total, 1):.1f}% of {total} | {', '.join(missing) or 'none'} |")
	    if side != "native":
	        for why, n in lost.most_common():
	            print(f"    {n:4d}  {why}")
	PY
	exit 0
fi
prepare_tree
[ "$mode" = prepare ] && { echo "charts-tests: $TREE"; exit 0; }
suite=${1:?suite: matplotlib or pillow}
shift
engine=wazero
[ "${1:-}" = --engine ] && engine=$2
case "$mode" in
native | native-all)
	side=native tree=$TREE kind=native
	prepare_native
	;;
sandbox | sandbox-all)
	side=$engine tree="" kind=sandbox
	sandbox_bin "$engine"
	;;
*)
	echo "charts-tests: unknown mode $mode" >&2
	exit 2
	;;
esac
if [ "$mode" = native-all ] || [ "$mode" = sandbox-all ]; then
	[ "$suite" = matplotlib ] || { echo "charts-tests: $mode runs matplotlib's files" >&2; exit 2; }
	dir="$T/$suite-all-$side"
	mkdir -p "$dir"
	for f in $(cd "$TREE/matplotlib/tests" && ls test_*.py); do
		{ config "$suite" "$tree" "$kind" "$f"; cat internal/conformance/chartsuites/runner.py; } >"$dir/runner.py"
		run_side "$side" "$engine" "$dir/runner.py" "$dir/$f.log"
		# An empty result: the run ended without one (table-all says which).
		result "$dir/$f.log" "$dir/$f.json" || : >"$dir/$f.json"
		echo "$f: $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["counts"])' "$dir/$f.json" 2>/dev/null || echo 'no result')"
	done
	exec "$0" table-all "$suite"
fi
{ config "$suite" "$tree" "$kind"; cat internal/conformance/chartsuites/runner.py; } >"$T/runner-$suite.py"
run_side "$side" "$engine" "$T/runner-$suite.py" "$T/$suite-$side.log"
out="$T/$suite-$side.json"
result "$T/$suite-$side.log" "$out" || { tail -30 "$T/$suite-$side.log" >&2; echo "charts-tests: no result line in $T/$suite-$side.log" >&2; exit 1; }
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["suite"], r["counts"], "%.0f s" % r["seconds"])' "$out"
