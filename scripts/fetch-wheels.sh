#!/usr/bin/env bash
# Fetch a pinned set of pure-Python packages that runs mount read-only,
# with the host's pip, which is set up for this host's network; every file
# is checked against its sha256 here (--require-hashes), and none is ever
# committed. The pins are internal/pkglist/packages.txt's (the one list of
# what Airlock carries): its lines whose sets column names SET. Into DEST
# (default ${AIRLOCK_CACHE_DIR:-~/.cache/airlock}/SETwheels), replaced
# whole and only on success. Idempotent: seconds when already there.
#
#   scripts/fetch-wheels.sh default [DEST]  the packages every run mounts
#                                           (sympy, networkx, openpyxl, jinja2,
#                                           requests, pytest, ...; `airlock
#                                           setup` precompiles them)
#   scripts/fetch-wheels.sh net [DEST]      requests (urllib3, idna, charset_normalizer,
#                                           certifi) and httpx (httpcore, h11, anyio,
#                                           sniffio, typing_extensions): network runs
#   scripts/fetch-wheels.sh test [DEST]     pytest (pluggy, iniconfig, packaging,
#                                           pygments): airlock test
#
# A package whose only pure form is its sdist (tornado: its
# compiled speedups are optional) is fetched as the sdist, checked
# the same way, and its Python files repacked into NAME-VERSION-sdist.zip
# with the sdist's PKG-INFO as the metadata; nothing of it is built. So is
# a build's package listed in the default set (markupsafe): the fallback
# mounted where python.wasm does not carry it.
set -euo pipefail
cd "$(dirname "$0")/.."

set_name="${1:?usage: fetch-wheels.sh default|net|test [DEST]}"
cache="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
dest="${2:-$cache/${set_name}wheels}"
list=internal/pkglist/packages.txt

case "$set_name" in
default | net | test) ;;
*)
	echo "fetch-wheels: no set $set_name (default, net, test)" >&2
	exit 2
	;;
esac

# name version from imports sha256, for the lines of this set.
mapfile -t pins < <(awk -v set="$set_name" '!/^#/ && NF == 8 {
	n = split($5, sets, ","); for (i = 1; i <= n; i++) if (sets[i] == set) { print $1, $2, $4, $7, $8; break }
}' "$list")
[ "${#pins[@]}" -gt 0 ] || { echo "fetch-wheels: $list has no package in set $set_name" >&2; exit 1; }
want=$(printf '%s\n' "${pins[@]}" | sort)

# Already fetched and intact: nothing to do.
if [ -f "$dest/PINS" ] && [ -f "$dest/SHA256SUMS" ] && [ "$(cat "$dest/PINS")" = "$want" ] &&
	(cd "$dest" && sha256sum --quiet -c SHA256SUMS >/dev/null 2>&1); then
	exit 0
fi

python3 -m pip --version >/dev/null 2>&1 || { echo "fetch-wheels: the host's python3 -m pip is required" >&2; exit 1; }
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$(dirname "$dest")/.${set_name}wheels.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/wheels.txt"
: >"$tmp/sdists.txt"
for p in "${pins[@]}"; do
	read -r name version from _ sha <<<"$p"
	case "$from" in
	wheel) printf '%s==%s --hash=sha256:%s\n' "$name" "$version" "$sha" >>"$tmp/wheels.txt" ;;
	# A build's package in a set is its pure fallback, from the sdist.
	sdist | build) printf '%s==%s --hash=sha256:%s\n' "$name" "$version" "$sha" >>"$tmp/sdists.txt" ;;
	*) echo "fetch-wheels: $name: set $set_name holds a package from $from, which is not fetched" >&2; exit 1 ;;
	esac
done
mkdir "$tmp/wheels"
if [ -s "$tmp/wheels.txt" ]; then
	python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.13 \
		--implementation py --abi none --platform any -d "$tmp/wheels" \
		--require-hashes -r "$tmp/wheels.txt" >"$tmp/pip.log" 2>&1 ||
		{ tail -20 "$tmp/pip.log" >&2; exit 1; }
	# Only pure wheels: python.wasm loads no native code.
	for f in "$tmp"/wheels/*.whl; do
		case "$f" in *-py3-none-any.whl | *-py2.py3-none-any.whl) ;; *) echo "fetch-wheels: not a pure wheel: $f" >&2; exit 1 ;; esac
	done
fi
if [ -s "$tmp/sdists.txt" ]; then
	mkdir "$tmp/sdists"
	python3 -m pip download --quiet --no-deps --no-binary=:all: -d "$tmp/sdists" \
		--require-hashes -r "$tmp/sdists.txt" >"$tmp/pip-sdist.log" 2>&1 ||
		{ tail -20 "$tmp/pip-sdist.log" >&2; exit 1; }
	for p in "${pins[@]}"; do
		read -r name version from imports sha <<<"$p"
		case "$from" in sdist | build) ;; *) continue ;; esac
		python3 scripts/sdist_zip.py "$tmp/sdists" "$name" "$version" "$imports" "$tmp/wheels/$name-$version-sdist.zip"
	done
fi
[ "$(ls "$tmp"/wheels | wc -l)" -eq "${#pins[@]}" ] || { echo "fetch-wheels: expected ${#pins[@]} packages, got $(ls "$tmp"/wheels | wc -l)" >&2; exit 1; }
(cd "$tmp/wheels" && sha256sum -- * >SHA256SUMS)
printf '%s\n' "$want" >"$tmp/wheels/PINS"
old="$dest.old.$$"
[ ! -e "$dest" ] || mv "$dest" "$old"
mv "$tmp/wheels" "$dest"
rm -rf "$old"
echo "fetch-wheels: ${#pins[@]} packages in $dest" >&2
