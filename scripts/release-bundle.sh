#!/usr/bin/env bash
# Make the release bundle of the own build for this version of Airlock,
# which hosts without root fetch with `airlock setup --fetch URL` (and
# programs with airlock.FetchBuild), and print the manifest sha256 that
# the tagged commit pins in python/fetch.go (ReleaseBundleSHA256).
#
# The release steps: run this on the build machine; publish the file
# where users fetch it (the release's downloads, or a mirror); set
# ReleaseBundleSHA256 to the printed sum in the commit that is tagged.
# The pin, not the URL, is what a fetch trusts: a mirror can only serve
# the pinned bytes or be refused.
#
#   scripts/release-bundle.sh [OUT]   (default dist/airlock-bundle-VERSION.tar.gz)
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(go run ./cmd/airlock --version | awk '{print $2}')
out="${1:-dist/airlock-bundle-$version.tar.gz}"
./scripts/setup.sh
mkdir -p "$(dirname "$out")"
report=$(go run ./cmd/airlock setup --export "$out")
echo "$report"
sum=$(grep -o 'manifest sha256 [0-9a-f]\{64\}' <<<"$report" | awk '{print $3}')
[ -n "$sum" ] || { echo "release-bundle: setup --export printed no manifest sha256" >&2; exit 1; }
echo "release-bundle: $out for airlock $version; pin it in python/fetch.go:"
echo "const ReleaseBundleSHA256 = \"$sum\""
