"""A stand-in for setuptools' build backend while pip only downloads sdists.

build-python.sh fetches PyYAML's, MarkupSafe's, regex's and lxml's sources
with `pip download --no-binary --require-hashes --no-build-isolation`
and this folder and scripts/numpy/fetch on PYTHONPATH: pip then asks this
module for the metadata, which numpy's stand-in reads from the sdist's
PKG-INFO, instead of installing unpinned build requirements and running
the package's setup.py on the host. It builds nothing.
"""

from mesonpy import build_wheel, get_requires_for_build_wheel, prepare_metadata_for_build_wheel

# PyYAML's own backend re-exports what this lists.
__all__ = ["build_wheel", "get_requires_for_build_wheel", "prepare_metadata_for_build_wheel"]

# pip's name for the backend of an sdist whose pyproject.toml names none (lxml's).
import sys as _sys

__legacy__ = _sys.modules[__name__]
