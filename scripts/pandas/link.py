"""Make the link step that puts extension modules into python.wasm.

usage: python3.13 link.py CPYTHON_BUILD_DIR OUT_DIR MESON_BUILD_DIR...

Run by scripts/pandas/build-pandas.sh with numpy's and pandas' builds:
scripts/numpy/link.py's way, for several builds at once (numpy's stage
keeps its own, so that adding pandas left numpy's cached stage valid).
Every extension
module meson built is a static archive there (cc-wrapper.sh made it, with
the libraries it was linked with listed in NAME.so.libs). This writes,
into OUT_DIR, for python.wasm beside OUT_DIR:
  inittab.c  CPython's module table (the build's Modules/config.c) with
             each module added under its dotted name; CPython 3.13's
             BuiltinImporter finds a built-in by its full name;
  link.mk    a make rule, read beside CPython's own Makefile, that compiles
             inittab.c as CPython compiles config.c and links
             python.wasm as CPython links it, with inittab.o in config.o's
             place and the archives added.
"""

import json
import os
import sys

SUFFIX = ".cpython-313-wasm32-wasi.so"
# C modules that only numpy's own test suites import (numpy/_core/tests and
# its conftest): not linked in.
TEST_ONLY = {
    "numpy._core._multiarray_tests", "numpy._core._umath_tests", "numpy._core._rational_tests",
    "numpy._core._struct_ufunc_tests", "numpy._core._operand_flag_tests", "numpy._core._simd",
}


def main(pybuild: str, out: str, *builds: str) -> None:
    modules = []  # (dotted name, archive, libs)
    for build in builds:
        modules += find_modules(build)
    if not modules:
        sys.exit("link.py: no extension modules under " + " ".join(builds))
    write(pybuild, out, modules)


def find_modules(build: str) -> list:
    # A module's name is where meson installs it, not where it builds it:
    # pandas builds pandas._libs._cyutility at the top of its build folder.
    with open(os.path.join(build, "meson-info", "intro-installed.json")) as f:
        installed = json.load(f)
    modules = []
    for dirpath, dirnames, filenames in os.walk(build):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(SUFFIX):
                continue
            path = os.path.join(dirpath, name)
            dest = installed.get(path)
            if dest is None or "-packages/" not in dest:
                sys.exit(f"link.py: meson installs {path} nowhere in site-packages ({dest})")
            dotted = dest.split("-packages/", 1)[1][: -len(SUFFIX)].replace("/", ".")
            if dotted in TEST_ONLY:
                continue
            with open(path + ".libs") as f:
                libs = [line.strip() for line in f if line.strip()]
            modules.append((dotted, path, libs))
    return modules


def write(pybuild: str, out: str, modules: list) -> None:
    # Each module's init function is PyInit_<last part of its name>: two
    # modules with the same last part could not be linked into one binary.
    inits = {}
    for dotted, _, _ in modules:
        short = dotted.rsplit(".", 1)[-1]
        if short in inits:
            sys.exit(f"link.py: two modules named {short}: {inits[short]}, {dotted}")
        inits[short] = dotted

    with open(os.path.join(pybuild, "Modules", "config.c")) as f:
        config = f.read()
    sentinel = "    /* Sentinel */\n    {0, 0}"
    if config.count(sentinel) != 1 or config.count("struct _inittab _PyImport_Inittab[] = {") != 1:
        sys.exit("link.py: Modules/config.c is not laid out as expected")
    # A single-phase module (numpy's C ones, pandas' ujson) takes its __name__ from the
    # package context, which CPython sets when it loads an extension from
    # a file, never for a built-in: without it every C function's
    # __module__ would read "_multiarray_umath". Cython's (multi-phase)
    # modules take the name from their spec either way.
    wrappers = ["extern const char *_PyImport_SwapPackageContext(const char *newcontext);"]
    entries = []
    for i, (dotted, _, _) in enumerate(modules):
        short = dotted.rsplit(".", 1)[-1]
        wrappers.append(
            f"extern PyObject *PyInit_{short}(void);\n"
            f"static PyObject *airlock_builtin_init_{i}(void) {{\n"
            f'    const char *old = _PyImport_SwapPackageContext("{dotted}");\n'
            f"    PyObject *m = PyInit_{short}();\n"
            f"    _PyImport_SwapPackageContext(old);\n"
            f"    return m;\n"
            f"}}\n"
        )
        entries.append(f'    {{"{dotted}", airlock_builtin_init_{i}}},\n')
    config = config.replace("struct _inittab _PyImport_Inittab[] = {", "\n".join(wrappers) + "\nstruct _inittab _PyImport_Inittab[] = {")
    config = config.replace(sentinel, "".join(entries) + sentinel)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "inittab.c"), "w") as f:
        f.write(config)

    archives = [path for _, path, _ in modules]
    libs = []
    for _, _, ls in modules:
        for lib in ls:
            if lib not in libs:
                libs.append(lib)
    o = os.path.abspath(out)
    wasm = os.path.join(os.path.dirname(o), "python.wasm")
    with open(os.path.join(out, "link.mk"), "w") as f:
        f.write(
            "builtins-link:\n"
            f"\t$(CC) -c $(PY_CORE_CFLAGS) -o {o}/inittab.o {o}/inittab.c\n"
            f"\t$(LINKCC) $(PY_CORE_LDFLAGS) $(LINKFORSHARED) -o {wasm} Programs/python.o {o}/inittab.o "
            "$(filter-out Modules/config.o,$(LINK_PYTHON_OBJS)) "
            + " ".join(archives + libs)
            # The exception runtime's libc++ and libc++abi
            # (scripts/build-cxx-eh.sh, staged by build-python.sh), and the
            # exports its invoke_ needs from the host's side.
            + " -L$(CXXEH_LIBDIR) -lc++ -lc++abi -lc-printscan-long-double $(LIBS) $(MODLIBS) $(SYSLIBS) $(CXXEH_LDFLAGS)\n"
        )
    print(f"link.py: {len(modules)} extension modules: " + ", ".join(m[0] for m in modules))


if __name__ == "__main__":
    main(*sys.argv[1:])
