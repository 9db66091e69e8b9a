#!/usr/bin/env bash
# Fuzz every decoder a client (or the cache directory) reaches, each for
# a fixed time: scripts/fuzz.sh [FUZZTIME] (default 10s, Go's -fuzztime
# syntax: 10s, 5m, 100000x). CI runs it with the default; run it longer
# by hand. Each target's corpus kept in the repo is
# <package>/testdata/fuzz/<target>/; go test runs it (and the seeds in the
# code) as ordinary tests every time. A crash is written there too: it is
# then a regression test, to be fixed and committed with the fix.
#
# One worker per target (-parallel 1) so that it shares a machine; 2 s to
# minimize a new input, as minimizing a large one (a session blob, a
# bundle) would otherwise take the whole budget. The Python targets need
# the cache that scripts/setup.sh prepares.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}

targets=(
	# HTTP API: the run request (files, limits, network rules) and the
	# session bodies; MCP tool arguments through the SDK's client.
	./server:FuzzDecode
	./server:FuzzSessionBodies
	./server:FuzzNetworkRules
	./server:FuzzMCPToolArgs
	# Saved sessions: the whole blob, its image's delta record, its files.
	./internal/conformance:FuzzLoadSession
	./engine:FuzzReadDeltaRecord
	./wasi/memfs:FuzzLoad
	# The cache's snapshot image; bundles for setup --import.
	./engine:FuzzReadImageFile
	./python:FuzzReadBundle
	./python:FuzzBundleEntries
	# Packages: wheels and zips given as packages; index pages, wheels
	# and requirements from a package index.
	.:FuzzPackageZip
	./internal/pkgindex:FuzzIndexPages
	./internal/pkgindex:FuzzWheel
	./internal/pkgindex:FuzzRequirements
)

for t in "${targets[@]}"; do
	pkg=${t%%:*} name=${t#*:}
	echo "== fuzz $pkg $name ($fuzztime)"
	go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime 2s -parallel 1 "$pkg"
done
