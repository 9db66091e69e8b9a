#!/usr/bin/env bash
# The snapshot half of set-up (run after scripts/setup.sh): install
# Binaryen's wasm-opt if missing, asyncify python.wasm (cached; ~2 min and
# ~1 GB of memory the first time), compile it and capture the snapshot
# image. Idempotent. AIRLOCK_WASM_OPT names another wasm-opt.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${AIRLOCK_WASM_OPT:-}" ] && ! command -v wasm-opt >/dev/null 2>&1; then
	if command -v apt-get >/dev/null 2>&1; then
		sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		echo "asyncify: installing binaryen (wasm-opt) with apt-get" >&2
		$sudo apt-get update -qq
		$sudo apt-get install -y -qq binaryen >/dev/null
	else
		echo "asyncify: Binaryen's wasm-opt is required (apt-get install binaryen, or npm's binaryen package; then set AIRLOCK_WASM_OPT)" >&2
		exit 1
	fi
fi

go run ./internal/tools/asyncify
