"""Call the host's tools: Go functions the program embedding this sandbox
chose to expose, and nothing else.

    import airlock
    airlock.call("lookup", "go", limit=3)
    airlock.tools.lookup("go", limit=3)     # the same, with a docstring
    help(airlock.tools)                     # what this run may call

Arguments and results travel as JSON: dict, list, str, int, float, bool and
None as themselves, tuples as lists; bytes (bytearray, memoryview) go as
base64 strings (a Go []byte receives them as bytes) and come back as bytes
when the Go side sends hostfuncs.Bytes.

Errors: HostError (the Go function failed, with its message), and its
subclasses UnknownToolError, ArgumentError, MalformedRequestError,
PayloadTooLargeError, TooManyCallsError and DeadlineError.

    airlock.display(obj)                    # a rich output, as in a notebook

display sends obj to the host in every form it has, richest first
(_repr_png_, _repr_svg_, _repr_html_ as a pandas DataFrame has, ...,
then its repr; a matplotlib figure as PNG, or SVG after
matplotlib.rcParams["savefig.format"] = "svg"): where the host collects rich
output (HTTP, MCP) it comes back with the result, elsewhere its repr is
printed. There, plt.show() and a figure left as the last expression come
back as figures too.

    airlock.install("requests", "attrs>=23")  # from the host's package index

install asks the host, which resolves the requirements against the index
its operator configured, fetches pure-Python wheels, checks their sha256
and mounts them read-only: importable at once. pip install in a
subprocess call, and a %pip install line in a session, come here too.
Failures are InstallError, whose message says why.
"""

import os
import sys
import types

DEVICE = "/dev/airlock"

__all__ = [
    "call", "tools", "display", "HostError", "UnknownToolError", "ArgumentError",
    "MalformedRequestError", "PayloadTooLargeError", "TooManyCallsError",
    "DeadlineError", "install", "InstallError",
]


class HostError(Exception):
    """A host call failed; .kind names why and .message says it."""

    def __init__(self, message, kind="error"):
        super().__init__(message)
        self.message = message
        self.kind = kind


class UnknownToolError(HostError, AttributeError):
    """No tool of that name is available to this run."""


class ArgumentError(HostError, TypeError):
    """The arguments do not fit the tool's parameters."""


class MalformedRequestError(HostError):
    """The host could not read the request (or the device was misused)."""


class PayloadTooLargeError(HostError):
    """The request or the result is larger than the run's cap."""


class TooManyCallsError(HostError):
    """The run has made all the host calls it may make."""


class DeadlineError(HostError, TimeoutError):
    """The run's deadline passed before or during the call."""


_KINDS = {
    "unknown_tool": UnknownToolError,
    "invalid_arguments": ArgumentError,
    "invalid_request": MalformedRequestError,
    "payload_too_large": PayloadTooLargeError,
    "too_many_calls": TooManyCallsError,
    "deadline": DeadlineError,
}

def _device(path=DEVICE):
    # Opened per call, not kept: a session pauses only with no file open
    # beyond stdio, so a kept descriptor would roll back every session
    # call that used a tool.
    try:
        return os.open(path, os.O_RDWR)
    except FileNotFoundError:
        if path != DEVICE:
            raise InstallError(_NO_INDEX, "no_index") from None
        raise UnknownToolError(
            "no host tools are available in this run", "unknown_tool") from None


def _default(obj):
    if isinstance(obj, (bytes, bytearray, memoryview)):
        import binascii
        return binascii.b2a_base64(bytes(obj), newline=False).decode("ascii")
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    raise ArgumentError(f"an argument of type {type(obj).__name__} cannot be sent to the host as JSON",
                        "invalid_arguments")


def _hook(obj):
    if len(obj) == 1 and "$bytes" in obj and isinstance(obj["$bytes"], str):
        import binascii
        return binascii.a2b_base64(obj["$bytes"])
    return obj


def _read_exact(fd, n):
    parts = []
    while n > 0:
        chunk = os.read(fd, n)
        if not chunk:
            raise MalformedRequestError("the host sent no response", "invalid_request")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


_encode = _decode = _decode_bytes = None


def _codecs():
    # Built once: json.dumps/loads with options would build a new encoder
    # or decoder on every call.
    global _encode, _decode, _decode_bytes
    import json
    _encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                               default=_default, allow_nan=False).encode
    _decode = json.JSONDecoder().decode
    _decode_bytes = json.JSONDecoder(object_hook=_hook).decode
    return _encode


def _roundtrip(request, device=DEVICE, error=None):
    encode = _encode or _codecs()
    try:
        payload = encode(request)
    except ValueError as e:
        raise ArgumentError(f"arguments cannot be sent as JSON: {e}", "invalid_arguments") from None
    data = payload.encode("utf-8", "surrogatepass")
    if len(data) > 0xFFFFFFFF:
        raise PayloadTooLargeError(f"the request is {len(data)} bytes", "payload_too_large")
    frame = b"%08x" % len(data) + data
    fd = _device(device)
    try:
        done = os.write(fd, frame)
        if done < len(frame):
            view = memoryview(frame)
            while done < len(frame):
                done += os.write(fd, view[done:])
        # Most responses arrive in one read, header and all.
        buf = os.read(fd, 16384)
        if len(buf) < 8:
            buf += _read_exact(fd, 8 - len(buf))
        size = int(buf[:8], 16)
        if len(buf) < 8 + size:
            buf += _read_exact(fd, 8 + size - len(buf))
    finally:
        os.close(fd)
    text = buf[8:].decode("utf-8", "surrogatepass")
    reply = _decode_bytes(text) if '"$bytes"' in text else _decode(text)
    if "error" in reply:
        err = reply["error"]
        kind = err.get("kind", "error")
        raise (error or _KINDS.get(kind, HostError))(err.get("message", "host call failed"), kind)
    return reply["ok"]


def call(name, /, *args, **kwargs):
    """Call the host tool `name` with positional and keyword arguments;
    return its JSON result."""
    return _roundtrip({"name": name, "args": args, "kwargs": kwargs})


_PYTYPES = {"str": str, "int": int, "float": float, "bool": bool,
            "list": list, "dict": dict, "bytes": bytes}


def _make_tool(entry):
    name = entry["name"]

    def tool(*args, **kwargs):
        return _roundtrip({"name": name, "args": args, "kwargs": kwargs})

    tool.__name__ = tool.__qualname__ = name
    tool.__module__ = "airlock.tools"
    tool.__doc__ = entry.get("description") or ""
    try:
        import inspect
        params = []
        for p in entry.get("params") or []:
            ann = _PYTYPES.get(p.get("type"), inspect.Parameter.empty)
            default = inspect.Parameter.empty if p.get("required") else None
            params.append(inspect.Parameter(p["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            default=default, annotation=ann))
        tool.__signature__ = inspect.Signature(params)
    except (ValueError, TypeError):
        pass  # a parameter name Python cannot take: the docstring still tells
    return tool


class _Tools(types.ModuleType):
    """The host's tools, loaded on first use."""

    _entries = None

    def _load(self):
        if self._entries is None:
            entries = _roundtrip({"op": "list"}) if os.path.exists(DEVICE) else []
            d = object.__getattribute__(self, "__dict__")
            for e in entries:
                d[e["name"]] = _make_tool(e)
            type(self)._entries = entries
        return self._entries

    @property
    def __doc__(self):
        lines = ["Host tools available in this run:", ""]
        for e in self._load():
            lines.append("  " + e.get("signature", e["name"] + "(...)"))
            for line in (e.get("description") or "").splitlines():
                lines.append("      " + line)
        if len(lines) == 2:
            lines.append("  (none)")
        return "\n".join(lines)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._load()
        try:
            return object.__getattribute__(self, "__dict__")[name]
        except KeyError:
            if not self._entries:
                msg = "no host tools are available in this run"
            else:
                msg = f"no host tool {name!r} in this run (available: {', '.join(e['name'] for e in self._entries)})"
            raise UnknownToolError(msg, "unknown_tool") from None

    def __dir__(self):
        self._load()
        return sorted(set(object.__getattribute__(self, "__dict__")) | {"__doc__"})


tools = _Tools("airlock.tools")
sys.modules["airlock.tools"] = tools


def _forget():
    """Drop the tool list loaded by an earlier session call: each call
    has its own (prelude.py calls this)."""
    d = object.__getattribute__(tools, "__dict__")
    for e in _Tools._entries or ():
        d.pop(e["name"], None)
    _Tools._entries = None


DISPLAY_DEVICE = "/dev/airlock-display"

# IPython's rich-display protocol, richest first; text/plain (repr) last.
_REPRS = (
    ("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"), ("_repr_svg_", "image/svg+xml"),
    ("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
    ("_repr_latex_", "text/latex"), ("_repr_json_", "application/json"),
)


_FIGURE_MIMES = {"png": "image/png", "svg": "image/svg+xml"}


def _figure_form(obj):
    """A matplotlib Figure as (mime, bytes), drawn as a notebook's inline
    backend draws it (tight bounding box): PNG, or SVG where the code set
    matplotlib.rcParams["savefig.format"] = "svg"; None for any other
    object. matplotlib is not imported here: an object can only be a
    Figure once it was."""
    module = sys.modules.get("matplotlib.figure")
    if module is None or not isinstance(obj, module.Figure):
        return None
    import io
    import matplotlib
    fmt = "svg" if matplotlib.rcParams["savefig.format"] == "svg" else "png"
    buf = io.BytesIO()
    obj.savefig(buf, format=fmt, bbox_inches="tight")
    return _FIGURE_MIMES[fmt], buf.getvalue()


def _forms(obj):
    """obj's forms as [(mime, bytes)], richest first, one per type."""
    forms = {}
    figure = _figure_form(obj)
    if figure is not None:
        forms[figure[0]] = figure[1]
    elif isinstance(obj, (bytes, bytearray)) and bytes(obj[:8]) == b"\x89PNG\r\n\x1a\n":
        forms["image/png"] = bytes(obj)
    elif not isinstance(obj, type):
        for attr, mime in _REPRS:
            method = getattr(obj, attr, None)
            if not callable(method):
                continue
            data = method()
            if isinstance(data, tuple):  # (data, metadata), as IPython allows
                data = data[0]
            if data is None:
                continue
            if mime == "application/json":
                import json
                data = json.dumps(data)
            if isinstance(data, str):
                data = data.encode("utf-8", "surrogatepass")
            if isinstance(data, (bytes, bytearray)) and mime not in forms:
                forms[mime] = bytes(data)
    forms["text/plain"] = repr(obj).encode("utf-8", "backslashreplace")
    return list(forms.items())


def _send_display(obj, kind):
    forms = _forms(obj)
    try:
        fd = os.open(DISPLAY_DEVICE, os.O_WRONLY)
    except FileNotFoundError:
        return False  # this run does not collect rich output
    import json
    head = json.dumps({"kind": kind, "items": [[mime, len(data)] for mime, data in forms]}).encode() + b"\n"
    frame = head + b"".join(data for _, data in forms)
    frame = b"%08x" % len(frame) + frame
    try:
        view = memoryview(frame)
        while view:
            view = view[os.write(fd, view):]
    except OSError as e:
        raise RuntimeError(
            "airlock.display: this run's rich output passed its cap (the run's output limit) "
            "or the output was malformed; display fewer or smaller objects") from e
    finally:
        os.close(fd)
    return True


def display(*objs):
    """Show each object as a notebook would: where the host collects rich
    output (HTTP, MCP, Request.RichOutput) it comes back with the result
    in every form the object has (PNG, SVG, HTML, JSON, ..., its repr);
    elsewhere its repr is printed."""
    for obj in objs:
        if not _send_display(obj, "display"):
            print(repr(obj))


def _show_figures():
    """pyplot.show() in the sandbox (the build's matplotlib calls this
    first): where the host collects rich output, every open figure becomes
    a display, in the order the figures were made, and is closed, as a
    notebook's inline backend does. False where it does not: matplotlib's
    own show() then runs."""
    if not os.path.exists(DISPLAY_DEVICE):
        return False
    from matplotlib._pylab_helpers import Gcf
    managers = sorted(Gcf.get_all_fig_managers(), key=lambda m: m.num)
    try:
        for manager in managers:
            _send_display(manager.canvas.figure, "display")
    finally:
        Gcf.destroy_all()
    return True


def _show_value(value):
    # The prelude's: the value of the code's last expression.
    if value is not None:
        _send_display(value, "value")


PIP_DEVICE = "/dev/airlock-pip"

_NO_INDEX = (
    "airlock: installing packages is not enabled in this sandbox: the host has no package "
    "index configured (its operator enables one with airlock.WithPackageIndex in Go or "
    "--index-url on the airlock command); use the standard library and the packages "
    "already importable here")


class InstallError(HostError):
    """The host refused or failed an install; .kind names why (no_index,
    not_allowed, not_found, no_compatible_wheel, compiled_extension,
    hash_mismatch, conflict, too_large, timeout, index_error, invalid)."""


def _report(line):
    try:
        fd = os.open("/dev/airlock-audit", os.O_WRONLY)
    except OSError:
        return
    try:
        os.write(fd, line.encode("utf-8", "replace")[:400] + b"\n")
    except OSError:
        pass
    finally:
        os.close(fd)


def _install(requirements, pre=False):
    reqs = []
    for r in requirements:
        if isinstance(r, (list, tuple)):
            reqs.extend(r)
        else:
            reqs.append(r)
    for r in reqs:
        if not isinstance(r, str):
            raise TypeError("airlock.install takes requirement strings, not %s" % type(r).__name__)
    if not reqs:
        raise InstallError("airlock: install: name at least one package", "invalid")
    if not os.path.exists(PIP_DEVICE):
        _report("install\tinstall " + " ".join(reqs)[:200] + " (no package index)")
        raise InstallError(_NO_INDEX, "no_index")
    reply = _roundtrip({"requirements": reqs, "pre": bool(pre)}, PIP_DEVICE, InstallError)
    for p in reply.get("paths") or ():
        if p not in sys.path:
            sys.path.append(p)
    import importlib
    importlib.invalidate_caches()
    return reply


def install(*requirements, pre=False, quiet=False):
    """Install packages from the host's package index: each argument a
    requirement ("name", "name>=1.2", "name[extra]"). Dependencies come
    too, resolved for this sandbox (sys_platform "wasi"); what python.wasm
    has built in (numpy, pandas) counts as installed. Prints what pip
    would unless quiet; returns the installed "name==version" strings."""
    reply = _install(requirements, pre)
    if not quiet:
        print(_pip_report(reply), end="")
    return ["%s==%s" % (p["name"], p["version"]) for p in reply.get("installed") or ()]


def _pip_report(reply):
    lines = []
    for s in reply.get("satisfied") or ():
        lines.append("Requirement already satisfied: %s in %s (%s)\n" % (s["name"], s["by"], s["version"]))
    installed = reply.get("installed") or ()
    for p in installed:
        lines.append("Collecting %s==%s\n" % (p["name"], p["version"]))
        lines.append("  %s %s (sha256 %s, verified)\n" % ("Using cached" if p.get("cached") else "Downloading", p["filename"], p["sha256"][:16]))
    if installed:
        lines.append("Successfully installed %s\n" % " ".join("%s-%s" % (p["name"], p["version"]) for p in installed))
    return "".join(lines)


_PIP_FLAGS = {"-q", "--quiet", "-qq", "-U", "--upgrade", "--user", "--no-cache-dir",
              "--disable-pip-version-check", "--no-input", "--progress-bar=off", "--no-color",
              "--break-system-packages", "--only-binary=:all:", "--prefer-binary", "-v", "--verbose"}


def _pip(args, stdin_files=True):
    """Run a pip command line (the words after "pip") through the host:
    (exit status, stdout text, stderr text), as pip would answer."""
    args = [a.decode("utf-8", "replace") if isinstance(a, bytes) else str(a) for a in args]
    if not args or args[0] != "install":
        what = args[0] if args else "(nothing)"
        return 1, "", ("ERROR: airlock: only 'pip install' works in this sandbox (not 'pip %s'): "
                       "it installs from the host's package index; use importlib.metadata to "
                       "list what is installed\n" % what)
    reqs, pre, quiet, i = [], False, False, 1
    while i < len(args):
        a = args[i]
        if a in ("-q", "--quiet", "-qq"):
            quiet = True  # as pip -q: errors only
        elif a in _PIP_FLAGS or a.startswith("--progress-bar") or a.startswith("--only-binary"):
            pass
        elif a == "--pre":
            pre = True
        elif a in ("-r", "--requirement") or a.startswith("--requirement=") or (a.startswith("-r") and len(a) > 2):
            name = a.split("=", 1)[1] if "=" in a else (a[2:] if a.startswith("-r") and len(a) > 2 else None)
            if name is None:
                i += 1
                name = args[i] if i < len(args) else ""
            try:
                with open(name) as f:
                    for line in f:
                        line = line.split("#", 1)[0].strip()
                        if line and not line.startswith("-"):
                            reqs.append(line)
            except OSError as e:
                return 1, "", "ERROR: Could not open requirements file: %s\n" % e
        elif a in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--trusted-host") or \
                a.startswith(("--index-url=", "--extra-index-url=", "--find-links=", "--trusted-host=")):
            return 1, "", ("ERROR: airlock: %s is not available in this sandbox: packages come only "
                           "from the package index the host's operator configured\n" % a.split("=", 1)[0])
        elif a.startswith("-"):
            return 1, "", ("ERROR: airlock: pip option %s is not supported in this sandbox "
                           "(pip install takes requirements, -r FILE, --pre, -q, -U)\n" % a)
        else:
            reqs.append(a)
        i += 1
    if not reqs:
        return 1, "", "ERROR: You must give at least one requirement to install\n"
    try:
        reply = _install(reqs, pre)
    except HostError as e:
        return 1, "", "ERROR: %s\n" % e
    return 0, "" if quiet else _pip_report(reply), ""


def _pip_argv(cmd):
    """The words after pip in a command line that runs pip (pip, pip3,
    pip3.13, python -m pip, sys.executable -m pip), or None."""
    if isinstance(cmd, (str, bytes)):
        if isinstance(cmd, bytes):
            cmd = cmd.decode("utf-8", "replace")
        import shlex
        try:
            words = shlex.split(cmd)
        except ValueError:
            return None
    elif isinstance(cmd, (list, tuple)):
        words = [w.decode("utf-8", "replace") if isinstance(w, bytes) else str(w) for w in cmd]
    else:
        return None
    if not words:
        return None
    base = words[0].rsplit("/", 1)[-1]
    if base in ("pip", "pip3") or base.startswith("pip3."):
        return words[1:]
    if base.startswith("python") or words[0] == sys.executable:
        rest = words[1:]
        while rest and rest[0] in ("-q", "-u", "-E", "-s", "-I", "-B"):
            rest = rest[1:]
        if len(rest) >= 2 and rest[0] == "-m" and rest[1] in ("pip", "pip3"):
            return rest[2:]
    return None


def _pip_magic(line):
    # A %pip (or !pip) line in a session or a run (prelude.py rewrites it).
    import shlex
    code, out, err = _pip(shlex.split(line))
    print(out, end="")
    if code:
        raise InstallError(err.removeprefix("ERROR: ").rstrip("\n"), "refused")
