# Airlock's run prelude: python -i -c runs this before any user code.
# It sets up once, then CPython's own interactive loop (-i) reads one
# statement from stdin, which the host sends alone ahead of each run's
# frame (callStatement in run.go); a run from a snapshot image of the own
# build skips the loop: the host calls `call` itself (python.EntryFuncs).
# That statement reads the frame (three
# 8-digit hex lengths, then the file name, the environment as
# NUL-separated KEY=VALUE, and the code; the program's own stdin follows),
# runs the code as __main__ in /home/user, and exits without CPython's
# finalisation (a session call returns to the loop instead).
#
# Why the loop is CPython's: a snapshot pauses the interpreter in a read
# of stdin (engine/snapshot.go), and asyncify must instrument every
# function on the stack there. The interactive loop reads in C, outside
# the bytecode interpreter, so the evaluation loop stays uninstrumented
# and runs at full speed. Names stay in a module of their own so the
# user's globals start empty.
import os
import sys
import types


def _airlock_setup():
    import atexit
    import builtins
    import linecache
    import traceback

    # Before the warm-up imports: they go through its import hook too.
    hint = _airlock_refuse()

    def read_exact(n):
        parts = []
        while n > 0:
            chunk = os.read(0, n)
            if not chunk:
                raise SystemExit("airlock: truncated code frame")
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    # env: os.environ as the prelude last left it, so that a run from the
    # image compares its environment with a dict rather than reading
    # os.environ (which decodes every entry) afresh.
    # host_seeds: random's shared generator gets fresh state from the host
    # at each run from the image (_airlock_random_from_host).
    state = {"main": None, "calls": 0, "env": None, "host_seeds": False}

    def call(returning=False):
        try:
            run_one(returning)
        except BaseException:
            # The prelude itself failed (a package that does not import,
            # out of memory while reporting an error): end as an uncaught
            # exception ends Python, rather than return to the loop as if
            # the run had finished.
            try:
                traceback.print_exc()
            except BaseException:
                pass
            os._exit(1)

    def enter():
        # The entry point of runs from the image: a run whose status is 0
        # returns from here to the host rather than exit. An exit is a trap
        # on both engines, with its stack trace (wazero) or backtrace
        # (wasmtime) made, ~20 µs of a small run's.
        call(returning=True)

    def run_one(returning):
        header = read_exact(24)
        name_len = int(header[:8], 16)
        env_len = int(header[8:16], 16)
        code_len = int(header[16:], 16)
        # One read for the rest: each is a host call.
        rest = read_exact(name_len + env_len + code_len)
        name = rest[:name_len].decode("utf-8", "surrogateescape")
        env_block = rest[name_len : name_len + env_len]
        source = rest[name_len + env_len :]

        # The run's environment travels in the frame as well as through
        # WASI: an interpreter restored from a snapshot read its environ
        # long ago. A first call whose environment is the image's (or, in
        # a fresh interpreter, the one it started with) has nothing to
        # apply; otherwise only the differences are: each costs a putenv.
        # The host's mode variables (_MODE_KEYS) come after the rest and
        # stay out of os.environ: a run with rich output or the network
        # otherwise paid for the whole comparison and a putenv, ~90k
        # instructions.
        image_block = state["env_block"]
        modes = None
        if state["calls"] == 0 and env_block.startswith(image_block):
            modes = _airlock_modes(env_block[len(image_block) :], bool(image_block))
        if modes is not None:
            run_env = state["env"]
            if modes:
                run_env = dict(run_env)
                run_env.update(modes)
        else:
            run_env = {}
            for item in env_block.decode("utf-8", "surrogateescape").split("\0"):
                key, sep, value = item.partition("=")
                if sep:
                    run_env[key] = value
            # A session's code may have changed os.environ since the last call.
            applied = state["env"]
            if state["calls"] > 0:
                applied = dict(os.environ)
            program_env = {k: v for k, v in run_env.items() if k not in _MODE_KEYS}
            for key in [k for k in applied if k not in program_env]:
                os.environ.pop(key, None)
            for key, value in program_env.items():
                if applied.get(key) != value:
                    os.environ[key] = value
            state["env"] = program_env
        session = run_env.get("AIRLOCK_SESSION") == "1"
        _airlock_packages(run_env)
        if run_env.get("AIRLOCK_NET") == "1":
            # HTTP(S) through the host, under the run's allow-list.
            __import__("_airlock_net").enable()

        # A session's later calls compile under names of their own, so a
        # traceback through a function an earlier call defined shows that
        # call's source, not the line of the same number in this one.
        # (Interactive input keeps its name, as at Python's own prompt.)
        state["calls"] += 1
        interactive = run_env.get("AIRLOCK_INTERACTIVE") == "1"
        code_name = name
        if state["calls"] > 1 and not interactive:
            code_name = "%s [%d]" % (name, state["calls"])
        text = source.decode("utf-8", "replace")
        linecache.cache[code_name] = (len(text), None, text.splitlines(True), code_name)
        main = state["main"]
        if main is None or run_env.get("AIRLOCK_RESEED") == "1":
            # A restored interpreter would otherwise replay the image's
            # sequence, and a fork or a loaded copy its session's; a
            # session's later calls keep theirs. In a first call from the
            # image the host may have given the generator its fresh state.
            if "random" in sys.modules and not (main is None and state["host_seeds"]):
                sys.modules["random"].seed()
            # numpy's global RandomState (np.random.rand, .randint, ...)
            # likewise, once numpy.random is imported (into the image, or
            # by an earlier call); Generators from default_rng() draw
            # fresh OS entropy by themselves.
            mtrand = sys.modules.get("numpy.random.mtrand")
            if mtrand is not None:
                _airlock_reseed_numpy(mtrand)
        if session:
            _airlock_new_call()
        if main is None:
            main = state["main"] = types.ModuleType("__main__")
            main.__dict__["__builtins__"] = builtins
            sys.modules["__main__"] = main
            os.chdir("/home/user")
            # Code that checks for an interactive session (hasattr(sys,
            # "ps1")) should not find one; without prompts the loop
            # prints none.
            sys.__dict__.pop("ps1", None)
            sys.__dict__.pop("ps2", None)
        main.__file__ = name
        sys.argv = [name]

        source = _airlock_magic(source)
        # Interactive input is one statement typed at a prompt: "single"
        # mode prints an expression statement's value, as Python's REPL does.
        mode = "single" if interactive else "exec"
        # Rich output (Request.RichOutput): a last expression statement is
        # evaluated apart, and its value goes to the host as a notebook
        # shows it.
        rich = run_env.get("AIRLOCK_RICH") == "1" and not interactive
        status = 0
        try:
            split = _airlock_compile_rich(source, code_name) if rich else None
            if split is None:
                codes, last = (compile(source, code_name, mode, dont_inherit=True),), None
            else:
                codes, last = split
            for code in codes:
                exec(code, main.__dict__)
            if last is not None:
                __import__("airlock")._show_value(eval(last, main.__dict__))
        except SystemExit as e:
            status = _exit_status(e.code)
        except BaseException as e:
            try:
                hint(e)  # a missing module: what is importable here
            except BaseException:
                pass
            # Skip this prelude's own frame: the traceback starts in user code.
            traceback.print_exception(type(e), e, e.__traceback__.tb_next)
            status = 1
        if session:
            _flush()
            # The host pauses the interpreter at the loop's next read of
            # stdin once it has the call's status (see the root package's
            # session.go).
            fd = os.open("/dev/airlock-session", os.O_WRONLY)
            try:
                os.write(fd, b"%d" % status)
            finally:
                os.close(fd)
            return
        try:
            atexit._run_exitfuncs()
        except BaseException:
            pass
        if not _flush():
            status = status or 120
        if returning and status == 0:
            return
        os._exit(status)

    # The flag is the capture's alone: gone from the image's environment,
    # runs have one variable fewer to remove (a putenv, ~14k instructions).
    snapshot = os.environ.pop("AIRLOCK_SNAPSHOT", None) == "1"
    # Likewise the modules a second image has imported (the full image:
    # numpy, pandas, unittest, ...), so that its runs' environment is the
    # lean image's.
    image_imports = os.environ.pop("AIRLOCK_IMAGE_IMPORTS", "")
    # A fresh interpreter (no image) starts with the first run's mode
    # variables in its environment: they are the prelude's, not the
    # program's, as in runs from an image.
    for key in _MODE_KEYS:
        os.environ.pop(key, None)
    state["env"] = dict(os.environ)
    # As the host frames it (python.Stdin), to tell an unchanged one at a glance.
    state["env_block"] = "\0".join("%s=%s" % kv for kv in os.environ.items()).encode("utf-8", "surrogateescape")
    prelude = types.ModuleType("_airlock_prelude")
    prelude.call = call
    prelude.enter = enter  # kept alive: the host calls it by address
    sys.modules["_airlock_prelude"] = prelude
    if snapshot:
        try:
            _airlock_warm(image_imports)
        except BaseException:
            # Before the loop, as a failing -c command would without -i:
            # the host reports the traceback (a pre-import that fails).
            traceback.print_exc()
            os._exit(1)
        state["host_seeds"] = _airlock_random_from_host()
        # Runs from the image call `enter` directly, where the build lets
        # the host (python.EntryFuncs): its address, which CPython never
        # moves, goes to the host capturing the image. Set-up's trace of
        # the pause path has no such device.
        try:
            fd = os.open("/dev/airlock-entry", os.O_WRONLY)
        except OSError:
            fd = None
        if fd is not None:
            try:
                os.write(fd, b"%d" % id(enter))
            finally:
                os.close(fd)
    # site's hook would set up readline for the loop: nothing to set up.
    sys.__dict__.pop("__interactivehook__", None)
    # Empty prompts: the loop sets its own only where there are none.
    sys.ps1 = sys.ps2 = ""


def _airlock_new_call():
    """What one session call must not leave to the next: input it read
    ahead and did not use (sys.stdin's buffer, kept in the paused image),
    and the host tools' list (each call says which tools it allows)."""
    import io
    old = sys.__stdin__
    try:
        fresh = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)),
                                 encoding=old.encoding, errors=old.errors,
                                 line_buffering=old.line_buffering)
    except (AttributeError, ValueError, OSError):
        fresh = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)))
    sys.stdin = sys.__stdin__ = fresh
    try:
        sys.modules["airlock"]._forget()
    except BaseException:  # not imported, or replaced by the program
        pass


# Words that start a statement and never an expression's continuation
# line: a last top-level line starting with one ends in no expression.
# What the host tells this prelude through the frame's environment, which
# is not the program's: they never reach os.environ.
_MODE_KEYS = frozenset(("AIRLOCK_INTERACTIVE", "AIRLOCK_NET", "AIRLOCK_RESEED", "AIRLOCK_RICH", "AIRLOCK_SESSION"))


def _airlock_modes(rest, after):
    # rest, what follows the image's environment in a frame's (after it:
    # behind a NUL), as {mode: value} when it holds mode variables only;
    # else None.
    if not rest:
        return {}
    if after:
        if rest[:1] != b"\0":
            return None
        rest = rest[1:]
    modes = {}
    for item in rest.split(b"\0"):
        key, sep, value = item.decode("utf-8", "surrogateescape").partition("=")
        if not sep or key not in _MODE_KEYS:
            return None
        modes[key] = value
    return modes


_FUTURE_FLAGS = 0
for _feature in __import__("__future__").all_feature_names:
    _FUTURE_FLAGS |= getattr(__import__("__future__"), _feature).compiler_flag
del _feature

_NEVER_EXPRESSION = frozenset((
    b"assert", b"break", b"class", b"continue", b"def", b"del", b"elif", b"except", b"finally",
    b"global", b"import", b"nonlocal", b"pass", b"raise", b"return", b"try", b"while", b"with",
))


def _airlock_compile_rich(source, code_name):
    # The code (bytes) compiled as a notebook runs it: (code objects that
    # run in turn, a last expression statement's value in "eval" mode or
    # None), or None where the code does not compile, or the split is not
    # certain and the code ends in no expression: the caller then compiles
    # it as without rich output, and raises its SyntaxError where that
    # would. Parsing the whole code into ast objects to look at its last
    # statement cost as much as the rest of a 1 KB program's run
    # (wasmtime's fuel: 4.1M instructions against 2.2M), so the compiler
    # is asked instead, of a head and a tail: the last top-level statement
    # starts at the last line that begins in column 0 and not with a
    # closing bracket. The split holds where the head compiles alone (the
    # tail is then a statement of its own); where that is not so (a last
    # line inside a string or brackets) or cannot be checked this way (a
    # ";", an encoding declaration the tail would lose, a __future__
    # import that is legal only at the top), the whole parse decides.
    lines = source.splitlines(True)
    i = len(lines) - 1
    while i >= 0 and lines[i][:1] in b" \t\r\n\f#)]}":
        i -= 1
    if i >= 0 and b";" not in lines[i] and b"coding" not in b"".join(lines[:2]):
        tail = b"".join(lines[i:])
        first = tail.split(None, 1)[0].rstrip(b":")
        if first in _NEVER_EXPRESSION:
            return None
        head = b"".join(lines[:i])
        try:
            head_code = compile(head, code_name, "exec", dont_inherit=True) if head.strip() else None
        except (SyntaxError, ValueError):
            head_code = False
        if head_code is not False and not tail.startswith(b"from __future__"):
            codes = () if head_code is None else (head_code,)
            # The head's __future__ features hold in the tail, as they did
            # in the whole; blank lines keep the tail's line numbers.
            flags = 0 if head_code is None else head_code.co_flags & _FUTURE_FLAGS
            padded = b"\n" * i + tail
            for mode in ("eval", "exec"):
                try:
                    tail_code = compile(padded, code_name, mode, flags, dont_inherit=True)
                except (SyntaxError, ValueError):
                    continue
                return (codes, tail_code) if mode == "eval" else (codes + (tail_code,), None)
    import ast
    try:
        tree = ast.parse(source, code_name)
        if not (tree.body and isinstance(tree.body[-1], ast.Expr)):
            return None
        last = ast.Expression(tree.body.pop().value)
        return (compile(tree, code_name, "exec", dont_inherit=True),), compile(last, code_name, "eval", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None


def _airlock_reseed_numpy(mtrand):
    # A Mersenne Twister state of 624 random words, its position at the
    # end, is as fresh as seeding makes one (seed() only approximates it
    # from 128 bits) and costs a third of seed(): ~0.25 ms of a run from
    # the full image rather than ~0.75 ms.
    try:
        words = sys.modules["numpy"].frombuffer(os.urandom(2496), dtype="<u4")
        mtrand._rand.set_state(("MT19937", words, 624, 0, 0.0))
    except Exception:
        mtrand.seed()


def _flush():
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            ok = False
    return ok


def _airlock_warm(image_imports):
    # Only when the host snapshots the interpreter: work done here is paid
    # once per image instead of once per run. Import what programs commonly
    # use, run the compiler once (its first use costs ~25 ms), then make
    # every object so far immortal and move it out of the collector's
    # reach, so runs neither count references to the image's objects nor
    # traverse them (gc.freeze, meant for fork).
    import base64, collections, dataclasses, datetime, decimal, fractions  # noqa: F401
    import functools, hashlib, heapq, itertools, json, math, random, re  # noqa: F401
    import statistics, string, textwrap, typing  # noqa: F401
    # Rich output (HTTP's and MCP's default) parses each run's code with
    # ast and shows a value through airlock, compiled from source on its
    # first import: together ~16 ms a run when paid there.
    import ast, airlock  # noqa: F401
    compile(b"pass", "<warm>", "exec", dont_inherit=True)
    import _airlock_net  # noqa: F401  (compiled once; enabled per run)
    _airlock_packages(os.environ)
    # Each package zip's directory, read once into the image rather than
    # at every run's first import from it (~thousands of entries).
    import zipimport
    for entry in sys.path:
        if entry.startswith("/opt/airlock/") and entry not in sys.path_importer_cache:
            try:
                sys.path_importer_cache[entry] = zipimport.zipimporter(entry)
            except Exception:
                pass
    for name in image_imports.split(","):
        if name:
            __import__(name)
    if "pandas" in sys.modules:
        _airlock_warm_pandas()
    if "unittest" in sys.modules:
        _airlock_warm_unittest()
    if "matplotlib.pyplot" in sys.modules:
        _airlock_warm_charts()
    import gc
    gc.collect()
    _airlock_immortalise(gc)
    gc.freeze()


def _airlock_warm_pandas():
    # The first read_csv, groupby, aggregation and repr in an interpreter
    # fill caches and import submodules on the way: ~5 ms of a pandas
    # task's run when paid there, once here. The objects made go; what
    # they left behind is what any later call would have made too.
    import io
    import numpy as np
    import pandas as pd
    path = "/tmp/airlock-warm.csv"
    with open(path, "w") as f:
        f.write("day,region,units,amount\n2026-01-01,north,3,12.5\n2026-01-02,south,1,7.25\n2026-01-02,north,2,3.0\n")
    try:
        df = pd.read_csv(path, parse_dates=["day"])
    finally:
        os.remove(path)
    summary = df.groupby("region")["amount"].agg(["count", "sum", "mean", "min", "max"]).round(2)
    for text in (str(summary), repr(df), df._repr_html_(), summary._repr_html_()):
        assert text
    df.describe()
    df.sort_values("amount").reset_index(drop=True)
    df.merge(summary, left_on="region", right_index=True)
    df.pivot_table(index="region", values="units", aggfunc="sum")
    df["amount"].value_counts()
    df.to_csv(io.StringIO(), index=False)
    df.to_dict("records")
    a = np.arange(100.0).reshape(10, 10)
    str(a), repr(a), (a @ a.T).sum(), np.median(a), a.std(), np.linalg.norm(a)


def _airlock_warm_charts():
    # The first chart drawn in an interpreter opens the font, imports the
    # Agg backend and the PNG writer and fills matplotlib's caches (text
    # layout, ticks, colours): most of a chart's run when paid there. The
    # figure goes; pyplot's next figure is number 1 again.
    import io
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([0.0, 1.0, 2.0], [0.0, 1.0, 0.5], label="a")
    ax.set_title("warm")
    ax.set_xlabel("x")
    ax.legend()
    fig.savefig(io.BytesIO(), format="png")
    plt.close("all")
    # The fonts it opened hold their files open, which an image may not:
    # a run opens them again (~1 ms each), the rest of the caches stay.
    from matplotlib import font_manager
    font_manager._get_font.cache_clear()


def _airlock_warm_unittest():
    # Likewise unittest's first loader, runner and assertions: a test file
    # in a run otherwise pays for them again.
    import io
    import unittest

    class Warm(unittest.TestCase):
        def test_asserts(self):
            self.assertEqual([1, 2], [1, 2])
            self.assertIn("a", {"a": 1})
            self.assertTrue("1".isdigit())
            self.assertAlmostEqual(0.1 + 0.2, 0.3)
            with self.assertRaises(ZeroDivisionError):
                1 / 0

        def test_fails(self):
            self.assertEqual(1, 2)

    suite = unittest.defaultTestLoader.loadTestsFromTestCase(Warm)
    unittest.TextTestRunner(stream=io.StringIO(), verbosity=2).run(suite)


def _airlock_immortalise(gc):
    # Every Py_INCREF and Py_DECREF writes the object's count, and so its
    # page: most of the image pages a run of `pass` wrote held nothing it
    # changed but counts. An immortal object's count is never written
    # (CPython 3.12 on), nor is the object freed. The host marks each
    # object alive now as it is named (python.immortaliser), so none can
    # be freed between naming and marking; a capture without the device
    # (set-up's trace of the pause path) leaves counts as they are.
    try:
        fd = os.open("/dev/airlock-immortal", os.O_WRONLY)
    except OSError:
        return
    import array
    try:
        immortal = sys.getrefcount(None)
        refcount = sys.getrefcount
        # The tracked objects, then everything they refer to (strings,
        # numbers, code, untracked tuples and dicts), to the end: an
        # object already immortal has been seen (or is one of CPython's
        # own), so no set of them all grows the image.
        frontier = gc.get_objects()
        while frontier:
            fresh = [obj for obj in frontier if refcount(obj) != immortal]
            for i in range(0, len(fresh), 16384):
                words = array.array("I", [immortal])
                words.extend(map(id, fresh[i : i + 16384]))
                data = words.tobytes()
                if os.write(fd, data) != len(data):
                    raise OSError("airlock: short write to /dev/airlock-immortal")
            frontier = gc.get_referents(*fresh)
    finally:
        os.close(fd)


def _airlock_random_from_host():
    # Reseeding random's shared generator in every run from the image cost
    # a third of a run of `pass` (init_by_array over 624 words). Instead
    # the host writes fresh random words over the generator's state before
    # each such run, once it has found that state where this reports it
    # (python.randomReport): True when it has.
    import random
    inst = random._inst
    if type(inst) is not random.Random or inst.gauss_next is not None:
        return False
    version, words, _ = inst.getstate()
    if version != 3 or len(words) != 625:
        return False
    try:
        fd = os.open("/dev/airlock-random", os.O_WRONLY)
    except OSError:
        return False
    import array
    try:
        data = array.array("I", (id(inst),) + words).tobytes()
        return os.write(fd, data) == len(data)
    except OSError:
        return False
    finally:
        os.close(fd)


def _airlock_packages(env):
    # Packages the host mounted (airlock.WithPackages, Request.Packages) go
    # on sys.path after the standard library, as site-packages does, so
    # that none shadows a standard module (some are imported by the
    # warm-up already). Pre-imported modules are in the image when there
    # is one; otherwise the run imports them here.
    # The default packages (/opt/airlock/default, in the image already)
    # stay last: a package the host gave this run wins over one of them.
    for entry in env.get("AIRLOCK_PACKAGES", "").split(":"):
        if entry and entry not in sys.path:
            at = len(sys.path)
            while at > 0 and sys.path[at - 1].startswith("/opt/airlock/default/"):
                at -= 1
            sys.path.insert(at, entry)
    for name in env.get("AIRLOCK_WARM_IMPORTS", "").split(","):
        if name and name not in sys.modules:
            __import__(name)


def _airlock_magic(source):
    # "%pip install X" (or "!pip install X") on a line of its own, as a
    # notebook takes it, becomes the host's install; only in code that
    # does not compile as it is, so no valid program changes meaning.
    # One line stays one line: tracebacks keep their line numbers.
    if b"pip" not in source:
        return source
    import re
    pattern = re.compile(rb"^([ \t]*)[%!](?:pip3?|python3? -m pip)[ \t]+(.*?)[ \t]*(\r?)$")
    lines = source.split(b"\n")
    hits = [i for i, line in enumerate(lines) if pattern.match(line)]
    if not hits:
        return source
    try:
        compile(source, "<airlock magic check>", "exec", dont_inherit=True)
        return source
    except (SyntaxError, ValueError):
        pass
    for i in hits:
        m = pattern.match(lines[i])
        arg = repr(m.group(2).decode("utf-8", "replace")).encode("utf-8")
        lines[i] = m.group(1) + b"__import__('airlock')._pip_magic(" + arg + b")" + m.group(3)
    return b"\n".join(lines)


def _exit_status(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except BaseException:
        pass
    return 1


_airlock_setup()
del _airlock_setup, _airlock_refuse
