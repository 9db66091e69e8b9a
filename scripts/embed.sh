#!/usr/bin/env bash
# Put the own build, as a bundle (`airlock setup --export`: python.wasm, its
# stdlib zip, build.json and the asyncified module for snapshots), next to
# the python package, so that `go build -tags airlock_embed ./cmd/airlock`
# builds one self-contained binary: it runs, with snapshots and sessions,
# on a host with no cache, no npm, no wasm-opt and no root. The copy is
# git-ignored: it is third-party and never committed.
#
#   scripts/embed.sh           export the build in the cache (make python first)
#   scripts/embed.sh BUNDLE    embed a bundle another host exported
set -euo pipefail
cd "$(dirname "$0")/.."

out=internal/python/embedded_bundle.tar
if [ $# -gt 0 ]; then
	# Plain tar: the binary reads its entries in place, without inflating them.
	case "$1" in
	*.gz | *.tgz) gzip -dc "$1" >"$out.part" ;;
	*) cp "$1" "$out.part" ;;
	esac
	mv "$out.part" "$out"
	echo "embed: $out <- $1 (checked when the binary loads it)"
else
	go run ./cmd/airlock setup --python own --export "$out" >/dev/null
	echo "embed: $out <- the own build in the cache"
fi
echo "now: go build -tags airlock_embed ./cmd/airlock"
