#!/usr/bin/env bash
# Put the own build, as a bundle (`airlock setup --export`: python.wasm, its
# stdlib zip, build.json and the asyncified module for snapshots), next to
# the python package, with this machine's compiled code for the asyncified
# module (`--export-compiled`), so that `go build -tags airlock_embed
# ./cmd/airlock` builds one self-contained binary: it runs, with snapshots
# and sessions, on a host with no cache, no npm, no wasm-opt and no root,
# and on a host like this one (OS, architecture, CPU features) its first
# run loads that code instead of compiling it. Both files are git-ignored:
# they are third-party and never committed.
#
#   scripts/embed.sh           export the build in the cache (make python first)
#   scripts/embed.sh BUNDLE    embed a bundle another host exported
set -euo pipefail
cd "$(dirname "$0")/.."

out=python/embedded_bundle.tar
compiled=python/embedded_compiled.gz
# A built binary, not `go run`: wazero stamps compiled code with its
# version as the binary's build information tells it, which `go run` and
# test binaries leave out ("dev"); code stamped otherwise is not loaded.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
go build -o "$scratch/airlock" ./cmd/airlock
if [ $# -gt 0 ]; then
	# Plain tar: the binary reads its entries in place, without inflating them.
	case "$1" in
	*.gz | *.tgz) gzip -dc "$1" >"$out.part" ;;
	*) cp "$1" "$out.part" ;;
	esac
	mv "$out.part" "$out"
	echo "embed: $out <- $1 (checked when the binary loads it)"
	# Compiled here, in a cache of its own: the bundle is asyncified, so
	# this needs no wasm-opt.
	AIRLOCK_CACHE_DIR="$scratch/cache" "$scratch/airlock" setup --python own --import "$out" --export-compiled "$compiled" >/dev/null
else
	"$scratch/airlock" setup --python own --export "$out" --export-compiled "$compiled" >/dev/null
fi
echo "embed: $compiled <- compiled code for $(go env GOOS)/$(go env GOARCH) on this machine"
echo "now: go build -tags airlock_embed ./cmd/airlock"
