"""Repack a pure-Python package's modules from its sdist into a zip that
zipimport reads (scripts/fetch-wheels.sh): the import packages' files
but C sources and tests, and NAME-VERSION.dist-info/METADATA from the
sdist's PKG-INFO, so importlib.metadata finds it. Entries get a fixed
date, so the same sdist makes the same zip.

usage: sdist_zip.py SDIST_DIR NAME VERSION IMPORTS OUT
"""
import glob
import os
import sys
import tarfile
import zipfile

sdist_dir, name, version, imports, out = sys.argv[1:]
norm = name.lower().replace("-", "_")


def names_it(path):
    project, _, rest = os.path.basename(path).lower().rpartition("-")
    return project.replace("-", "_").replace(".", "_") == norm and rest.startswith(version + ".tar")


paths = [p for p in glob.glob(os.path.join(sdist_dir, "*")) if names_it(p)]
if len(paths) != 1:
    sys.exit("sdist_zip: no single sdist of %s %s in %s" % (name, version, sdist_dir))
skip_ext = (".c", ".h", ".pyx", ".pxd", ".cpp")
entries = {}
with tarfile.open(paths[0]) as tar:
    members = [m for m in tar.getmembers() if m.isfile()]
    root = members[0].name.split("/")[0]
    for top in imports.split(","):
        for base in (root + "/src/" + top, root + "/" + top):
            found = [m for m in members if m.name.startswith(base + "/") or m.name == base + ".py"]
            if found:
                break
        else:
            sys.exit("sdist_zip: %s has no module %s" % (paths[0], top))
        for m in found:
            rel = m.name[len(base) - len(top):]
            parts = rel.split("/")
            if rel.endswith(skip_ext) or "test" in parts[1:-1] or "tests" in parts[1:-1]:
                continue
            entries[rel] = tar.extractfile(m).read()
    meta = tar.extractfile(root + "/PKG-INFO").read()
entries["%s-%s.dist-info/METADATA" % (norm, version)] = meta
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for rel in sorted(entries):
        info = zipfile.ZipInfo(rel, (2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, entries[rel])
