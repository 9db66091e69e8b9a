"""Pack CPython's standard library as one zip of precompiled .pyc.

usage: python3.13 stdlib_zip.py LIB_DIR BUILD_DIR OUT_ZIP [EXTRA_DIR...]

Run by scripts/build-python.sh with the same CPython minor version as the
guest (the .pyc magic number must match). Entries are stored, not deflated
(zipimport then reads them without inflating, which starts faster), with
fixed dates and in sorted order, so the same inputs give the same bytes.
Only .pyc are kept: the zip is the guest's read-only stdlib, never edited.
Each EXTRA_DIR holds packages added to the standard library (tzdata, the
IANA time zone database zoneinfo reads; numpy's Python side, its C side
being linked into python.wasm): their data files are kept too, their
tests are not.
"""

import importlib.util
import os
import sys
import zipfile

# Packages that cannot work in the sandbox (no GUI, no subprocesses, no
# pip) or are only CPython's own tests.
SKIP_DIRS = {
    "test", "tests", "idle_test", "idlelib", "tkinter", "turtledemo",
    "ensurepip", "venv", "__pycache__", "site-packages", "lib2to3",
}
SKIP_FILES = {"turtle.py", "antigravity.py", "this.py"}
DATE = (1980, 1, 1, 0, 0, 0)


def pyc(source: bytes, path: str) -> bytes:
    code = compile(source, path, "exec", dont_inherit=True, optimize=0)
    # Unchecked-hash pyc: zipimport never looks for a source to compare with.
    data = bytearray(importlib.util.MAGIC_NUMBER)
    data += (0b01).to_bytes(4, "little")  # hash-based, unchecked
    data += importlib.util.source_hash(source)
    import marshal
    data += marshal.dumps(code)
    return bytes(data)


def namespace_dirs(modules) -> list:
    """The folders that hold modules but no __init__.py: namespace packages
    (matplotlib's mpl_toolkits). zipimport finds one only by its directory
    entry, which the zip has for no folder otherwise."""
    dirs = set()
    for rel in modules:
        parts = rel.split("/")[:-1]
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return sorted(d for d in dirs if d + "/__init__.py" not in modules)


def main(lib: str, build: str, out: str, *extras: str) -> None:
    entries = {}
    data = {}
    for dirpath, dirnames, filenames in os.walk(lib):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in filenames:
            if not name.endswith(".py") or name in SKIP_FILES:
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, lib).replace(os.sep, "/")
            entries[rel] = full
    # The build's sysconfig data (its name carries the platform tag).
    for dirpath, _, filenames in os.walk(build):
        for name in filenames:
            if name.startswith("_sysconfigdata_") and name.endswith(".py"):
                entries[name] = os.path.join(dirpath, name)
    if not any(k.startswith("_sysconfigdata_") for k in entries):
        sys.exit("stdlib_zip: no _sysconfigdata_*.py under " + build)
    for extra in extras:
        for dirpath, dirnames, filenames in os.walk(extra):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".dist-info"))
            for name in filenames:
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, extra).replace(os.sep, "/")
                if rel in entries or rel in data:
                    sys.exit("stdlib_zip: " + rel + " is in the standard library already")
                if name.endswith(".py"):
                    entries[rel] = full
                else:
                    data[rel] = full
    if extras and not data:
        sys.exit("stdlib_zip: no data files under " + " ".join(extras))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for rel in namespace_dirs(entries):
            info = zipfile.ZipInfo(rel + "/", DATE)
            info.external_attr = (0o40755 << 16) | 0x10
            zf.writestr(info, b"")
        for rel in sorted(entries):
            with open(entries[rel], "rb") as f:
                source = f.read()
            info = zipfile.ZipInfo(rel[:-3] + ".pyc", DATE)
            info.external_attr = 0o644 << 16
            zf.writestr(info, pyc(source, "/usr/local/lib/python3.13/" + rel))
        for rel in sorted(data):
            with open(data[rel], "rb") as f:
                content = f.read()
            info = zipfile.ZipInfo(rel, DATE)
            info.external_attr = 0o644 << 16
            zf.writestr(info, content)
    print(f"stdlib_zip: {len(entries)} modules, {len(data)} data files, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main(*sys.argv[1:])
