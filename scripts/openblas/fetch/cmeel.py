"""A stand-in for cmeel-openblas' build backend while pip only downloads its sdist.

scripts/build-openblas.sh fetches OpenBLAS' sources as the sdist of
cmeel-openblas (which carries them unchanged under OpenBLAS/) with `pip
download --no-binary --require-hashes`. pip then asks the sdist's build
backend, cmeel, for its metadata, which it would answer by building
OpenBLAS natively. This answers from the sdist's PKG-INFO instead, as
scripts/numpy/fetch/mesonpy.py does for numpy (whose functions these are).
"""

from mesonpy import build_wheel, get_requires_for_build_wheel, prepare_metadata_for_build_wheel

__all__ = ["build_wheel", "get_requires_for_build_wheel", "prepare_metadata_for_build_wheel"]
