"""Link python.wasm with the chart stage's extension modules as built-ins.

usage: python3.13 link.py CPYTHON_BUILD_DIR OUT_DIR HANDMADE.json MESON_BUILD_DIR...

scripts/pandas/link.py's way (its functions do the work), for the meson
builds before this stage and this stage's own (contourpy, matplotlib),
plus the modules build-charts.sh compiled without meson (kiwisolver's and
Pillow's setuptools builds are a list of sources): HANDMADE.json lists
those as [dotted name, archive, [libraries]]. Modules that cannot work
here are left out: matplotlib's Tk backend needs Tcl/Tk at run time.
"""

import json
import sys

sys.path.insert(0, "/pandas")
import link as pandas_link  # noqa: E402

LEFT_OUT = {"matplotlib.backends._tkagg"}


def main(pybuild: str, out: str, handmade: str, *builds: str) -> None:
    modules = []
    for build in builds:
        modules += [m for m in pandas_link.find_modules(build) if m[0] not in LEFT_OUT]
    with open(handmade) as f:
        modules += [tuple(m) for m in json.load(f)]
    pandas_link.write(pybuild, out, modules)


if __name__ == "__main__":
    main(*sys.argv[1:])
