"""Write matplotlib's font list for the fonts it ships, as its font cache.

usage: python3.13 fontlist.py OUT.json

Run by build-python.sh natively in the chroot, with the same matplotlib
version's native wheel (and numpy's and Pillow's, which it imports) on
PYTHONPATH. matplotlib builds this list on first import by opening every
font it ships (a second or more in the sandbox, in every fresh run, where
no cache survives); the sandbox reads this one instead (the patch in
scripts/charts-py-patches). Font paths inside mpl-data are stored relative
to it, as matplotlib's own cache stores them, so the list holds wherever
mpl-data is. Fonts outside mpl-data (the build machine's) are left out.
"""

import os
import sys
import tempfile

os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp()

import matplotlib  # noqa: E402
from matplotlib import font_manager  # noqa: E402

_find = font_manager.findSystemFonts


def _shipped_only(fontpaths=None, fontext="ttf"):
    return _find(fontpaths, fontext) if fontpaths is not None else []


font_manager.findSystemFonts = _shipped_only
fm = font_manager.FontManager()
data = matplotlib.get_data_path()
for entry in fm.ttflist + fm.afmlist:
    if not os.path.abspath(entry.fname).startswith(os.path.abspath(data) + os.sep):
        sys.exit(f"fontlist: {entry.fname} is not under {data}")
font_manager.json_dump(fm, sys.argv[1])
print(f"fontlist: {len(fm.ttflist)} TrueType and {len(fm.afmlist)} AFM fonts")
