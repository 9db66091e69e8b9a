"""A stand-in for setuptools' build backend while pip only downloads an sdist.

build-python.sh fetches kiwisolver's and Pillow's sources with `pip download
--no-binary --require-hashes` (pip checks the sha256); pip then asks the
build backend for the metadata, which the host's setuptools may be too old
to give (Pillow's pyproject.toml needs a newer one) and which needs the
packages' build requirements. Run with --no-build-isolation and this folder
on PYTHONPATH, pip reads the sdist's own PKG-INFO instead, as numpy's
stand-in for meson-python does (scripts/numpy/fetch/mesonpy.py). It builds
nothing. Its hooks are bound methods, as setuptools' are: Pillow's in-tree
backend subclasses the class behind them.
"""

import mesonpy


class _BuildMetaBackend:
    def get_requires_for_build_wheel(self, config_settings=None):
        return mesonpy.get_requires_for_build_wheel(config_settings)

    def prepare_metadata_for_build_wheel(self, metadata_directory, config_settings=None):
        return mesonpy.prepare_metadata_for_build_wheel(metadata_directory, config_settings)

    def build_wheel(self, wheel_directory, config_settings=None, metadata_directory=None):
        return mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)


_BACKEND = _BuildMetaBackend()
get_requires_for_build_wheel = _BACKEND.get_requires_for_build_wheel
prepare_metadata_for_build_wheel = _BACKEND.prepare_metadata_for_build_wheel
build_wheel = _BACKEND.build_wheel
