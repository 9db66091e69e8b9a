# What the sandbox refuses, said so that a program (and the model that
# wrote it) can act on it. python.wasm has no network and no processes,
# and its threads have a cap per run (none on wasmtime); unpatched,
# CPython reports that as AttributeErrors about getaddrinfo or os.system,
# "unknown url type: https" or "can't start new thread". Here each
# refusal names the restriction and what to do instead.
#
# Runs once in the prelude's set-up, so a run resumed from the snapshot
# pays nothing: os and _thread are patched at once (always imported), the
# other modules after their first import, through a finder at the front of
# sys.meta_path that answers None for every name but a few (importing them
# eagerly would cost every fresh-interpreter run their import). Names that
# do not exist on WASI (os.fork, os.system) stay absent, so feature tests
# (hasattr(os, "fork")) still choose their fallbacks; only the
# AttributeError a use raises says more. Exception types stay those code
# already catches: OSError subclasses for network and processes (urllib
# wraps them in URLError, as for any failed connection; a program refused
# is a FileNotFoundError too, as one not installed is), RuntimeError for
# threads, as CPython raises. Everything here affects the guest only.


def _airlock_refuse():
    NET = (
        "airlock: network access is disabled in this sandbox (no sockets, no DNS, no HTTP); "
        "work with data the host passes in as files, or call a host tool that fetches it "
        "if the run has one (import airlock; help(airlock.tools) lists them)"
    )
    PROC = (
        "airlock: this sandbox cannot start processes (subprocess, os.system, os.popen, "
        "fork, exec, multiprocessing); do the work in Python in this program "
        "(pip cannot run either: the host mounts packages, and installs them with "
        "airlock.install('name') where its operator configured a package index)"
    )
    THREAD = (
        "airlock: cannot start another thread: a run may have as many threads besides "
        "its main one as its thread limit (64 unless the host set another), and none on "
        "the wasmtime engine or the npm build of python.wasm; join threads that are done, "
        "use fewer workers (ThreadPoolExecutor(max_workers=...)), or do the work sequentially")
    THREAD_POOL = (
        "airlock: multiprocessing.pool.ThreadPool needs multiprocessing's locks and pipes, "
        "which this sandbox does not have; use concurrent.futures.ThreadPoolExecutor "
        "(map and submit work the same), whose threads run here")
    PKG = (
        "airlock: nothing can be installed in this sandbox (no pip, no network): "
        "the standard library, the packages built into python.wasm and the pure-Python "
        "packages the host mounts are importable; the host mounts more with airlock.WithPackages "
        "or Request.Packages (Go), or --package (CLI), or lets runs install pure-Python wheels "
        "from a package index (WithPackageIndex, --index-url)"
    )
    PKG_INDEX = (
        "airlock: this sandbox installs pure-Python packages from its host's package index: "
        "import airlock; airlock.install('name') (or pip install name in a subprocess call, "
        "or %pip install name in a session), then import it"
    )
    INSTALLERS = {"pip", "pip3", "ensurepip", "easy_install", "uv", "pipx", "conda", "mamba", "poetry"}

    def installs(*values):
        # Whether a command line runs a package installer: any word whose
        # base name is one (pip3.13 too), or "-m pip".
        try:
            for v in values:
                if isinstance(v, (str, bytes)):
                    words = v.split()
                elif isinstance(v, (list, tuple)):
                    words = v
                else:
                    continue
                for w in words:
                    if isinstance(w, bytes):
                        w = w.decode("utf-8", "replace")
                    if not isinstance(w, str):
                        w = str(w)
                    base = w.rsplit("/", 1)[-1]
                    if base in INSTALLERS or base.startswith("pip3."):
                        return True
        except Exception:
            pass
        return False

    def report(kind, what, args=()):
        # For the run's audit trail (the root package's audit.go): one
        # line on the host's device; a run without it loses nothing.
        import os
        try:
            detail = what
            if args:
                detail += repr(tuple(args))[:200]
            line = (kind + "\t" + detail.replace("\n", " ").replace("\t", " ")[:240] + "\n").encode("utf-8", "replace")
            fd = os.open("/dev/airlock-audit", os.O_WRONLY)
        except Exception:
            return
        try:
            os.write(fd, line)
        except OSError:
            pass
        finally:
            os.close(fd)

    def refuse(message, kind, what):
        def refused(*args, **kwargs):
            report(kind, what, args)
            raise PermissionError(message)
        return refused

    def pip_argv(args):
        # The pip command line, when args run pip and the host installs
        # from an index (its device is there); without one, pip is
        # refused as any process is, with how packages get here.
        if not args or not installs(args[0]) or not os.path.exists("/dev/airlock-pip"):
            return None
        try:
            return __import__("airlock")._pip_argv(args[0])
        except Exception:
            return None

    class ProgramRefused(PermissionError, FileNotFoundError):
        # Starting a program: refused as every process is, and also what
        # starting a program that is not installed raises, so that code
        # probing for a tool (latex, ffmpeg, fc-list) takes its fallback
        # instead of failing. Named as the other refusals, so a traceback
        # and type(e).__name__ read the same.
        pass

    ProgramRefused.__name__ = ProgramRefused.__qualname__ = "PermissionError"
    ProgramRefused.__module__ = "builtins"

    def refuse_process(*args, **kwargs):
        install = installs(*args)
        report("install" if install else "process", "start a process", args)
        raise ProgramRefused(PKG if install else PROC)

    def refuse_thread(start):
        # Threads run (green, one at a time: the host's scheduler); a
        # start the host refuses fails in CPython as "can't start new
        # thread", which says neither why nor what to do.
        def start_thread(*args, **kwargs):
            try:
                return start(*args, **kwargs)
            except RuntimeError as e:
                if str(e) != "can't start new thread":
                    raise
                report("thread", "start a thread")
                raise RuntimeError(THREAD) from None
        start_thread.__name__ = getattr(start, "__name__", "start_thread")
        start_thread.__doc__ = getattr(start, "__doc__", None)
        return start_thread

    # --- processes: os (imported already; os.py defines exec* and popen
    # even where posix has no execv, and they fail with NameError)
    import os
    for name in ("popen", "execl", "execle", "execlp", "execlpe", "execv", "execve",
                 "execvp", "execvpe", "fork", "forkpty", "system", "posix_spawn",
                 "posix_spawnp", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv",
                 "spawnve", "spawnvp", "spawnvpe"):
        if name in os.__dict__:
            setattr(os, name, refuse_process)

    if "popen" in os.__dict__:
        def popen(cmd, mode="r", buffering=-1):
            # os.popen("pip install x"): the host installs; the output
            # reads as pip's, close() gives its status as os.popen does.
            pip = pip_argv((cmd,))
            if pip is None or "w" in mode:
                return refuse_process(cmd)
            import io
            code, out, err = __import__("airlock")._pip(pip)
            sys.stderr.write(err)

            class Output(io.StringIO):
                def close(self):
                    super().close()
                    return (code << 8) if code else None

            return Output(out)

        os.popen = popen
    absent = {"system", "fork", "forkpty", "vfork", "execv", "execve", "fexecve", "posix_spawn",
              "posix_spawnp", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle",
              "spawnlp", "spawnlpe", "startfile", "wait", "waitpid", "wait3", "wait4", "waitid",
              "kill", "killpg"}

    def os_getattr(name):
        # Only reached for a name os lacks (PEP 562).
        if name in absent:
            raise AttributeError("module 'os' has no attribute %r: %s" % (name, PROC),
                                 name=name, obj=os)
        raise AttributeError("module 'os' has no attribute %r" % name, name=name, obj=os)

    if "__getattr__" not in os.__dict__:
        os.__getattr__ = os_getattr

    # --- threads: _thread is imported by the import system itself;
    # threading binds its start function at import, so a later import
    # binds this one.
    import _thread
    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_thread, name):
            setattr(_thread, name, refuse_thread(getattr(_thread, name)))

    def patch_threading(m):
        for name, real in (("_start_new_thread", "start_new_thread"), ("_start_joinable_thread", "start_joinable_thread")):
            if name in m.__dict__:
                setattr(m, name, getattr(_thread, real))

    # --- modules patched after their first import
    def patch_socket(m):
        for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr",
                     "getnameinfo"):
            # Absent on WASI: create_connection and http.client then fail
            # with an AttributeError rather than an OSError.
            setattr(m, name, refuse(NET, "network", "socket." + name))
        init = m.socket.__init__

        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            try:
                init(self, family, type, proto, fileno)
            except OSError:
                if fileno is None:  # a new socket (ENOTSUP), not one for an fd
                    report("network", "socket.socket", (family, type))
                    raise PermissionError(NET) from None
                raise

        __init__.__doc__ = init.__doc__
        m.socket.__init__ = __init__
        if not hasattr(m._socket, "socketpair"):
            # socket.py's fallback would connect two sockets: say what is
            # missing (the npm build's asyncio loop asks for a pair), not
            # that the program tried the network.
            def socketpair(*args, **kwargs):
                raise PermissionError("airlock: this sandbox has no sockets, so no socket.socketpair either")

            socketpair.__doc__ = m.socketpair.__doc__
            m.socketpair = socketpair

    def patch_subprocess(m):
        # Popen is what run, call, check_output and getoutput use. No
        # process ever starts, so every Popen that exists is a pip install
        # the host answered: it is born finished, its output as pip's.
        def __init__(self, args, bufsize=-1, executable=None, stdin=None, stdout=None,
                     stderr=None, *rest, **kwargs):
            pip = pip_argv((args,))
            if pip is None:
                refuse_process(args)
            import io
            code, out, err = __import__("airlock")._pip(pip)
            text = bool(kwargs.get("text") or kwargs.get("universal_newlines")
                        or kwargs.get("encoding") or kwargs.get("errors"))
            if stderr == m.STDOUT:
                out, err = out + err, ""
            self.args, self.returncode, self.pid = args, code, -1
            self._child_created = False
            self.stdin = None
            self._airlock = []
            for want, data, stream in ((stdout, out, sys.stdout), (stderr, err, sys.stderr)):
                if want == m.PIPE:
                    self._airlock.append(data if text else data.encode("utf-8"))
                else:
                    self._airlock.append(None)
                    if want is None:
                        stream.write(data)
            self.stdout = (io.StringIO if text else io.BytesIO)(self._airlock[0]) if stdout == m.PIPE else None
            self.stderr = (io.StringIO if text else io.BytesIO)(self._airlock[1]) if stderr == m.PIPE else None

        def communicate(self, input=None, timeout=None):
            return tuple(self._airlock)

        def wait(self, timeout=None):
            return self.returncode

        def nothing(self, *args, **kwargs):
            return None

        m.Popen.__init__ = __init__
        m.Popen.communicate = communicate
        m.Popen.wait = wait
        m.Popen.poll = wait
        for name in ("send_signal", "terminate", "kill"):
            setattr(m.Popen, name, nothing)

    def patch_http_client(m):
        def http_client_getattr(name):
            if name == "HTTPSConnection":
                raise AttributeError("module 'http.client' has no attribute 'HTTPSConnection': " + NET,
                                     name=name, obj=m)
            raise AttributeError("module 'http.client' has no attribute %r" % name, name=name, obj=m)

        m.__getattr__ = http_client_getattr

    def patch_urllib_request(m):
        # No ssl, so no HTTPSHandler: https would be "unknown url type".
        if hasattr(m, "HTTPSHandler"):
            return

        class NoNetworkHandler(m.BaseHandler):
            def https_open(self, req):
                report("network", "urlopen " + req.full_url)
                raise m.URLError(PermissionError(NET))

        build = m.build_opener

        def build_opener(*handlers):
            return build(*handlers, NoNetworkHandler)

        build_opener.__doc__ = build.__doc__
        m.build_opener = build_opener

    def patch_urllib3_connectionpool(m):
        # Without a network allow-list there is no ssl, so urllib3 has no
        # HTTPS connection class and requests would end in "the SSL
        # module is not available": say why instead, as the failed
        # connection requests reports (its ConnectionError).
        pool = getattr(m, "HTTPSConnectionPool", None)
        dummy = getattr(m, "DummyConnection", None)
        if pool is None or dummy is None:
            return
        new_conn = pool._new_conn

        def _new_conn(self):
            if not self.ConnectionCls or self.ConnectionCls is dummy:
                report("network", "https %s" % self.host)
                from urllib3.exceptions import NewConnectionError
                raise NewConnectionError(self, NET)
            return new_conn(self)

        pool._new_conn = _new_conn

    def patch_asyncio_base_events(m):
        # The loop resolves names in a thread: refuse before it tries one.
        # strerror too: clients that report a failed lookup by it (aiohttp's
        # ClientConnectorDNSError) show the reason rather than None.
        def refusal():
            e = PermissionError(NET)
            e.strerror = NET
            return e

        async def getaddrinfo(self, *args, **kwargs):
            report("network", "asyncio getaddrinfo", args)
            raise refusal()

        async def getnameinfo(self, *args, **kwargs):
            report("network", "asyncio getnameinfo", args)
            raise refusal()

        m.BaseEventLoop.getaddrinfo = getaddrinfo
        m.BaseEventLoop.getnameinfo = getnameinfo

    def patch_multiprocessing_context(m):
        # What needs a process, a pipe or a named semaphore (none exist).
        for name in ("Manager", "Pipe", "Lock", "RLock", "Condition", "Semaphore",
                     "BoundedSemaphore", "Event", "Barrier", "Queue", "JoinableQueue",
                     "SimpleQueue", "Pool", "Value", "Array", "RawValue", "RawArray"):
            if hasattr(m.BaseContext, name):
                setattr(m.BaseContext, name, refuse(PROC, "process", "multiprocessing." + name))

    def patch_multiprocessing_process(m):
        m.BaseProcess.start = refuse(PROC, "process", "multiprocessing.Process.start")

    def patch_multiprocessing_pool(m):
        pool_init = m.Pool.__init__

        def __init__(self, *args, **kwargs):
            self._pool = []  # what __del__ looks at
            self._state = m.INIT
            if isinstance(self, m.ThreadPool):
                report("thread", "multiprocessing.pool.ThreadPool")
                raise RuntimeError(THREAD_POOL)
            report("process", "multiprocessing.Pool")
            raise PermissionError(PROC)

        m.Pool.__init__ = __init__

    def patch_process_pool(m):
        def __init__(self, *args, **kwargs):
            report("process", "ProcessPoolExecutor")
            raise PermissionError(PROC)

        m.ProcessPoolExecutor.__init__ = __init__

    def patch_ensurepip(m):
        for name in ("bootstrap", "_bootstrap", "_main"):
            if hasattr(m, name):
                setattr(m, name, refuse(PKG, "install", "ensurepip"))

    patches = {
        "socket": patch_socket,
        "subprocess": patch_subprocess,
        "http.client": patch_http_client,
        "urllib.request": patch_urllib_request,
        "urllib3.connectionpool": patch_urllib3_connectionpool,
        "asyncio.base_events": patch_asyncio_base_events,
        "multiprocessing.context": patch_multiprocessing_context,
        "multiprocessing.process": patch_multiprocessing_process,
        "multiprocessing.pool": patch_multiprocessing_pool,
        "concurrent.futures.process": patch_process_pool,
        "ensurepip": patch_ensurepip,
    }

    import sys

    def apply(patch, module):
        try:
            patch(module)
        except Exception:
            pass  # another Python's layout: its own error stays

    class Loader:
        """The real loader, then the patch; gone from the module after."""

        def __init__(self, real, patch):
            self.real = real
            self.patch = patch

        def __getattr__(self, name):
            return getattr(self.real, name)

        def create_module(self, spec):
            return self.real.create_module(spec)

        def exec_module(self, module):
            self.real.exec_module(module)
            spec = module.__spec__
            if spec is not None and spec.loader is self:
                spec.loader = self.real
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self.real
            apply(self.patch, module)

    class Finder:
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            patch = patches.get(name)
            if patch is None:
                return None
            for finder in sys.meta_path:
                if finder is cls:
                    continue
                find = getattr(finder, "find_spec", None)
                spec = find(name, path, target) if find is not None else None
                if spec is not None:
                    break
            else:
                return None
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = Loader(spec.loader, patch)
            return spec

    if "threading" in sys.modules:  # later imports bind the patched _thread
        apply(patch_threading, sys.modules["threading"])
    for name, patch in patches.items():
        if name in sys.modules:
            apply(patch, sys.modules[name])
    sys.meta_path.insert(0, Finder)

    def hint(exc):
        """The note an uncaught ModuleNotFoundError gets: what is importable."""
        if not isinstance(exc, ModuleNotFoundError) or not exc.name:
            return
        if type(exc).__module__.startswith("importlib.metadata"):
            return  # PackageNotFoundError: a distribution's metadata, not a module
        top = exc.name.partition(".")[0]
        if top in ("ssl", "_ssl"):
            note = NET
        elif top in sys.stdlib_module_names and top not in ("ensurepip", "venv"):
            note = ("airlock: the standard library module %r is not available in this sandbox "
                    "(CPython for WebAssembly: no native extensions beyond the built-in ones, "
                    "no threads, processes or network)" % top)
        else:
            what = available(top)
            if what not in getattr(exc, "__notes__", ()):
                exc.add_note(what)
            note = PKG_INDEX if os.path.exists("/dev/airlock-pip") else PKG
        if note not in getattr(exc, "__notes__", ()):
            exc.add_note(note)

    def available(top):
        # What this run can import instead, from the host's note
        # (packagesInfoPath in the root package's defaultpackages.go).
        try:
            import json
            with open("/opt/airlock/packages.json", "rb") as f:
                info = json.load(f)
        except Exception:
            return "airlock: No module named %r" % top
        if top in info.get("pending", {}):
            head = "airlock: %s (%r)" % (info["pending"][top], top)
        elif top in info.get("modules", {}):
            head = "airlock: %r is part of %s here, but a module in it is missing" % (top, info["modules"][top])
        else:
            head = "airlock: %r is not among this sandbox's packages" % top
        built = info.get("built_in") or []
        mounted = info.get("mounted") or []
        head += "; built in: %s" % (", ".join(built) or "none")
        if mounted:
            head += "; mounted (pure Python): %s" % ", ".join(mounted)
        elif info.get("disabled"):
            head += "; the default pure-Python packages (sympy, networkx, jinja2, ...) are not mounted for this sandbox"
        return head

    return hint
