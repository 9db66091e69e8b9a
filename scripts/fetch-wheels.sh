#!/usr/bin/env bash
# Fetch a pinned set of pure-Python wheels that runs mount read-only, with
# the host's pip, which is set up for this host's network; every file is
# checked against its sha256 here (--require-hashes), and none is ever
# committed. Into DEST (default ${AIRLOCK_CACHE_DIR:-~/.cache/airlock}/SETwheels),
# replaced whole and only on success. Idempotent: seconds when already there.
#
#   scripts/fetch-wheels.sh net [DEST]    requests (urllib3, idna, charset_normalizer,
#                                         certifi) and httpx (httpcore, h11, anyio,
#                                         sniffio, typing_extensions): network runs
#   scripts/fetch-wheels.sh test [DEST]   pytest (pluggy, iniconfig, packaging,
#                                         pygments): airlock test
set -euo pipefail

set_name="${1:?usage: fetch-wheels.sh net|test [DEST]}"
cache="${AIRLOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}"
dest="${2:-$cache/${set_name}wheels}"

# name==version sha256 of the py3-none-any wheel
case "$set_name" in
net)
	pins=(
		"requests==2.34.2 2a0d60c172f83ac6ab31e4554906c0f3b3588d37b5cb939b1c061f4907e278e0"
		"urllib3==2.8.0 0cf3cae568d36aa9576b28dfb35f11328f1cb974ca7647d9475ebb86c75ac6e3"
		"idna==3.20 ab7ae7122974553370f0bdb919e1a960b2cd1bc1ef0276416d896db81c14582c"
		"charset_normalizer==3.5.3 96e268b0cbda016ac519513294fcd17032264085b600abaac58b93049477e132"
		"certifi==2026.10.19.post1 1324c476b4811eff41a8bc2122cd0bbd4d9c7234c725446d99ab1612b3a7fdd2"
		"httpx==0.28.1 d909fcccc110f8c7faf814ca82a9a4d816bc5a6dbfea25d6591d6985b8ba59ad"
		"httpcore==1.0.9 2d400746a40668fc9dec9810239072b40b4484b640a8c38fd654a024c7a1bf55"
		"h11==0.16.0 63cf8bbe7522de3bf65932fda1d9c2772064ffb3dae62d55932da54b31cb6c86"
		"anyio==4.16.0 c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026"
		"sniffio==1.3.1 2f6da418d1f1e0fddd844478f41680e794e6051915791a034ff65e5f100525a2"
		"typing_extensions==4.16.0 481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8"
	)
	;;
test)
	pins=(
		"pytest==9.2.0 07acdcf88ec174f907dc01af70bf52d49b014bbab03faeeade31c96b18c2e588"
		"pluggy==1.7.0 7dd7b0d8832ba3cb632c306926ded123429211b83641b35dc5c41ad2d34f9bec"
		"iniconfig==2.3.1 9121e2c1fdb355232495be3194c8dfe87ccc2d5dee45947b78e68f499790d7a7"
		"packaging==26.3 d7193f7c8e4e93f444fde0262bf90af30e16fa0ad0ad44cb553c87339b23cd1c"
		"pygments==2.21.0 2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9"
	)
	;;
*)
	echo "fetch-wheels: no set $set_name (net, test)" >&2
	exit 2
	;;
esac

# Already fetched and intact: nothing to do.
if [ -f "$dest/SHA256SUMS" ] && [ "$(ls "$dest"/*.whl 2>/dev/null | wc -l)" -eq "${#pins[@]}" ] &&
	(cd "$dest" && sha256sum --quiet -c SHA256SUMS >/dev/null 2>&1); then
	want=$(printf '%s\n' "${pins[@]}" | awk '{print $2}' | sort)
	have=$(awk '{print $1}' "$dest/SHA256SUMS" | sort)
	[ "$want" = "$have" ] && exit 0
fi

python3 -m pip --version >/dev/null 2>&1 || { echo "fetch-wheels: the host's python3 -m pip is required" >&2; exit 1; }
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$(dirname "$dest")/.${set_name}wheels.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for p in "${pins[@]}"; do
	printf '%s --hash=sha256:%s\n' "${p% *}" "${p#* }"
done >"$tmp/requirements.txt"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.13 \
	--implementation py --abi none --platform any -d "$tmp/wheels" \
	--require-hashes -r "$tmp/requirements.txt" >"$tmp/pip.log" 2>&1 ||
	{ tail -20 "$tmp/pip.log" >&2; exit 1; }
(cd "$tmp/wheels" && sha256sum *.whl >SHA256SUMS)
# Only pure wheels: python.wasm loads no native code.
for f in "$tmp"/wheels/*.whl; do
	case "$f" in *-py3-none-any.whl | *-py2.py3-none-any.whl) ;; *) echo "fetch-wheels: not a pure wheel: $f" >&2; exit 1 ;; esac
done
[ "$(ls "$tmp"/wheels/*.whl | wc -l)" -eq "${#pins[@]}" ] || { echo "fetch-wheels: expected ${#pins[@]} wheels" >&2; exit 1; }
old="$dest.old.$$"
[ ! -e "$dest" ] || mv "$dest" "$old"
mv "$tmp/wheels" "$dest"
rm -rf "$old"
echo "fetch-wheels: ${#pins[@]} wheels in $dest" >&2
