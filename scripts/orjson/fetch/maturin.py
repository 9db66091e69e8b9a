"""A stand-in for maturin, orjson's build backend, while pip only downloads its sdist.

build-python.sh fetches orjson's source with `pip download --no-binary
--require-hashes --no-build-isolation` and this folder and
scripts/numpy/fetch on PYTHONPATH: pip then asks this module for the
metadata, which numpy's stand-in reads from the sdist's PKG-INFO, instead
of installing maturin and a Rust toolchain on the host. It builds nothing.
"""

from mesonpy import build_wheel, get_requires_for_build_wheel, prepare_metadata_for_build_wheel

__all__ = ["build_wheel", "get_requires_for_build_wheel", "prepare_metadata_for_build_wheel"]
