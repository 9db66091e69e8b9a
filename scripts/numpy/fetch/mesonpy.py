"""A stand-in for numpy's build backend while pip only downloads its sdist.

build-python.sh fetches numpy's source with `pip download --no-binary
--require-hashes` (pip checks the sha256). pip then asks the package's
build backend for its metadata, and meson-python answers by building all
of numpy natively. Run with --no-build-isolation and this folder on
PYTHONPATH, pip gets the metadata from the sdist's own PKG-INFO instead.
It builds nothing: build_wheel refuses.
"""

import email.parser
import os


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    with open("PKG-INFO", encoding="utf-8") as f:
        text = f.read()
    meta = email.parser.Parser().parsestr(text, headersonly=True)
    name = meta["Name"].replace("-", "_")
    info = f"{name}-{meta['Version']}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info))
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(text)
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("scripts/numpy/fetch/mesonpy.py only serves pip download; it builds nothing")
