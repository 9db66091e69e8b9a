"""A run's network when the host allows one: HTTP and HTTPS through the
host, under the run's allow-list (the guest module _airlock_net).

The guest gets no socket. The HTTP client libraries connect through
HostSocket, a stand-in that carries their HTTP/1.1 bytes to the host
(/dev/airlock-net), which parses each request, checks it against the
run's rules, resolves and dials on the host, does TLS in Go and sends
the response back. TLS is the host's: ssl imports (a stand-in _ssl), and
wrapping a HostSocket only tells the host the connection is https;
certificates are always verified on the host, whatever the context says.

Patched after their import (the prelude enables this for runs with a
network): http.client (so urllib.request), urllib3 (so requests) and
httpcore (so httpx, sync and async). Raw sockets stay refused.
Refusals raise OSError subclasses inside each library's own error
(URLError, requests.ConnectionError, httpx.ConnectError), whose message
names the rule: "network: api.evil.com is not in this run's allow-list".
"""

import _thread
import os
import sys

DEVICE = "/dev/airlock-net"
MAX_CHUNK = 256 << 10

RAW = ("airlock: raw sockets and DNS are not available in this sandbox, even with a network "
       "allow-list: HTTP(S) goes through the host; use urllib.request, http.client, requests or httpx")

NO_NET = ("airlock: this run has no network allow-list, so no HTTP either; the host grants "
          "one per run (Request.Network in Go, --allow-net on the CLI)")


def _device():
    try:
        return os.open(DEVICE, os.O_RDWR)
    except FileNotFoundError:
        raise PermissionError(NO_NET) from None


def _read_exact(fd, n):
    parts = []
    while n > 0:
        chunk = os.read(fd, n)
        if not chunk:
            raise OSError("airlock: the host sent no network response")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


_json = None
# One operation at a time: the device answers in the order it is asked, so
# a thread switch between one thread's request and its reply (at the GIL's
# release in os.write) must not let another thread's request in between.
_op_lock = _thread.allocate_lock()


def _op(request, data=b""):
    global _json
    if _json is None:
        import json
        _json = (json.JSONEncoder(separators=(",", ":")).encode, json.JSONDecoder().decode)
    payload = (request if type(request) is bytes else _json[0](request).encode("utf-8")) + b"\n" + data
    frame = b"%08x" % len(payload) + payload
    with _op_lock:
        return _exchange(frame)


def _exchange(frame):
    fd = _device()
    try:
        done = os.write(fd, frame)
        if done < len(frame):
            view = memoryview(frame)
            while done < len(frame):
                done += os.write(fd, view[done:])
        buf = os.read(fd, MAX_CHUNK + 4096)
        if len(buf) < 8:
            buf += _read_exact(fd, 8 - len(buf))
        size = int(buf[:8], 16)
        if len(buf) < 8 + size:
            buf += _read_exact(fd, 8 + size - len(buf))
    finally:
        os.close(fd)
    return _reply(buf)


def _reply(buf):
    line, _, rest = buf[8:].partition(b"\n")
    if line == b'{"ok":{}}':
        return {}, rest  # most replies (recv, tls, close): skip the decoder
    reply = _json[1](line.decode("utf-8"))
    if "error" in reply:
        raise _error(reply["error"])
    return reply["ok"], rest


def _error(err):
    kind = err.get("kind")
    msg = err.get("message") or "network error"
    if kind == "denied":
        return PermissionError(msg)
    if kind == "timeout":
        return TimeoutError(msg)
    if kind == "refused":
        return ConnectionRefusedError(msg)
    if kind in ("reset", "closed"):
        return ConnectionResetError(msg)
    if kind == "dns":
        import socket
        return socket.gaierror(getattr(socket, "EAI_NONAME", -2), msg)
    return OSError(msg)


_socketio = None


def _make_socketio():
    import io

    class SocketIO(io.RawIOBase):
        def __init__(self, sock, mode):
            super().__init__()
            self._sock = sock
            self._mode = mode
            sock._io_refs += 1

        def readable(self):
            return "r" in self._mode

        def writable(self):
            return "w" in self._mode

        def readinto(self, b):
            return self._sock.recv_into(b)

        def write(self, b):
            return self._sock.send(b)

        def fileno(self):
            return self._sock.fileno()

        def close(self):
            if self.closed:
                return
            super().close()
            self._sock._decref()

    return SocketIO


def _num(t):
    # The hot ops' JSON by hand: the encoder costs more than the host.
    return b"null" if t is None else repr(float(t)).encode("ascii")


class HostSocket:
    """A connection the host makes: what the guest sends must be HTTP/1.x."""

    def __init__(self, cid, host, port, timeout):
        import socket
        self._id = cid
        self._host = host
        self._port = port
        self._timeout = timeout
        self._closed = False
        self._io_refs = 0
        self._tls = False
        self.family, self.type, self.proto = socket.AF_INET, socket.SOCK_STREAM, 6
        self.server_hostname = None
        self.context = None

    def __repr__(self):
        state = "closed" if self._id is None else "open"
        return "<airlock HostSocket %s:%s (%s%s)>" % (self._host, self._port, state, ", tls" if self._tls else "")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self._real_close()
        except BaseException:
            pass

    # --- socket API
    def settimeout(self, timeout):
        self._timeout = timeout

    def gettimeout(self):
        return self._timeout

    def setblocking(self, flag):
        self._timeout = None if flag else 0.0

    def setsockopt(self, *args):
        pass

    def getsockopt(self, *args):
        return 0

    def fileno(self):
        return -1

    def getpeername(self):
        return (self._host, self._port)

    def getsockname(self):
        return ("0.0.0.0", 0)

    def _cid(self):
        if self._id is None:
            import errno
            raise OSError(errno.EBADF, "airlock: the connection is closed")
        return self._id

    def _wait(self):
        # None blocks (the host still ends it at the run's deadline); a
        # non-blocking socket waits a moment rather than spin.
        t = self._timeout
        return None if t is None else max(t, 0.001)

    def send(self, data, flags=0):
        view = memoryview(data).cast("B")[:MAX_CHUNK]
        _op(b'{"op":"send","id":%d,"timeout":%s}' % (self._cid(), _num(self._wait())), bytes(view))
        return len(view)

    def sendall(self, data, flags=0):
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            done += self.send(view[done:done + MAX_CHUNK])

    def recv(self, n, flags=0):
        if n <= 0:
            return b""
        _, data = _op(b'{"op":"recv","id":%d,"max":%d,"timeout":%s}' % (self._cid(), min(n, MAX_CHUNK), _num(self._wait())))
        return data

    def recv_into(self, buffer, nbytes=0, flags=0):
        view = memoryview(buffer).cast("B")
        n = nbytes or len(view)
        data = self.recv(n)
        view[:len(data)] = data
        return len(data)

    def makefile(self, mode="r", buffering=None, *, encoding=None, errors=None, newline=None):
        import io
        global _socketio
        if _socketio is None:
            _socketio = _make_socketio()
        rawmode = ("r" if "r" in mode else "") + ("w" if "w" in mode else "")
        raw = _socketio(self, rawmode)
        if buffering is None:
            buffering = -1
        if buffering < 0:
            buffering = io.DEFAULT_BUFFER_SIZE
        if buffering == 0:
            if "b" not in mode:
                raise ValueError("unbuffered streams must be binary")
            return raw
        if "r" in rawmode and "w" in rawmode:
            buf = io.BufferedRWPair(raw, raw, buffering)
        elif "r" in rawmode:
            buf = io.BufferedReader(raw, buffering)
        else:
            buf = io.BufferedWriter(raw, buffering)
        if "b" in mode:
            return buf
        text = io.TextIOWrapper(buf, encoding, errors, newline)
        text.mode = mode
        return text

    def shutdown(self, how):
        pass

    def close(self):
        self._closed = True
        if self._io_refs <= 0:
            self._real_close()

    def _decref(self):
        self._io_refs -= 1
        if self._closed and self._io_refs <= 0:
            self._real_close()

    def _real_close(self):
        cid, self._id = self._id, None
        if cid is not None:
            try:
                _op(b'{"op":"close","id":%d}' % cid)
            except OSError:
                pass

    # --- what an SSLSocket adds
    def _start_tls(self, context, server_hostname):
        _op(b'{"op":"tls","id":%d}' % self._cid())
        self._tls = True
        self.context = context
        self.server_hostname = server_hostname
        return self

    def do_handshake(self, block=False):
        pass

    def version(self):
        return "TLSv1.3" if self._tls else None

    def cipher(self):
        return ("TLS_AES_128_GCM_SHA256", "TLSv1.3", 128) if self._tls else None

    def selected_alpn_protocol(self):
        return "http/1.1" if self._tls else None

    def selected_npn_protocol(self):
        return None

    def getpeercert(self, binary_form=False):
        # Verified by the host; what Python would see of it is a summary.
        if not self._tls:
            raise ValueError("not a TLS connection")
        if binary_form:
            return b""
        return {"subject": ((("commonName", self._host),),), "subjectAltName": (("DNS", self._host),)}

    def pending(self):
        return 0

    def unwrap(self):
        return self


def create_connection(address, timeout=None, source_address=None, *args, **kwargs):
    """socket.create_connection for HTTP: a HostSocket to (host, port)."""
    import socket
    host, port = address[0], address[1]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if timeout is socket._GLOBAL_DEFAULT_TIMEOUT:
        timeout = socket.getdefaulttimeout()
    ok, _ = _op({"op": "connect", "host": str(host), "port": int(port)})
    return HostSocket(ok["id"], str(host), int(port), timeout)


# --- ssl: a stand-in _ssl, so the standard ssl module imports as is

def _fake_ssl():
    import types
    m = types.ModuleType("_ssl")
    m.__doc__ = "airlock: a stand-in for _ssl; TLS is made by the host, in Go"
    consts = dict(
        CERT_NONE=0, CERT_OPTIONAL=1, CERT_REQUIRED=2, ENCODING_DER=2, ENCODING_PEM=1,
        HAS_ALPN=True, HAS_ECDH=True, HAS_NPN=False, HAS_PSK=False, HAS_SNI=True, HAS_SSLv2=False,
        HAS_SSLv3=False, HAS_TLS_UNIQUE=False, HAS_TLSv1=False, HAS_TLSv1_1=False, HAS_TLSv1_2=True,
        HAS_TLSv1_3=True, HOSTFLAG_ALWAYS_CHECK_SUBJECT=1, HOSTFLAG_MULTI_LABEL_WILDCARDS=8,
        HOSTFLAG_NEVER_CHECK_SUBJECT=32, HOSTFLAG_NO_PARTIAL_WILDCARDS=4, HOSTFLAG_NO_WILDCARDS=2,
        HOSTFLAG_SINGLE_LABEL_SUBDOMAINS=16,
        # urllib3 asks for OpenSSL 1.1.1 or newer by name; the host's Go
        # TLS is what it gets.
        OPENSSL_VERSION="OpenSSL 3.0.0 (stand-in: airlock's host does TLS in Go)",
        OPENSSL_VERSION_INFO=(3, 0, 0, 0, 0), OPENSSL_VERSION_NUMBER=0x30000000,
        _OPENSSL_API_VERSION=(3, 0, 0, 0, 0),
        OP_ALL=2147483728, OP_CIPHER_SERVER_PREFERENCE=4194304, OP_ENABLE_KTLS=8,
        OP_ENABLE_MIDDLEBOX_COMPAT=1048576, OP_IGNORE_UNEXPECTED_EOF=128, OP_LEGACY_SERVER_CONNECT=4,
        OP_NO_COMPRESSION=131072, OP_NO_RENEGOTIATION=1073741824, OP_NO_SSLv2=0, OP_NO_SSLv3=33554432,
        OP_NO_TICKET=16384, OP_NO_TLSv1=67108864, OP_NO_TLSv1_1=268435456, OP_NO_TLSv1_2=134217728,
        OP_NO_TLSv1_3=536870912, OP_SINGLE_DH_USE=0, OP_SINGLE_ECDH_USE=0,
        PROTOCOL_SSLv23=2, PROTOCOL_TLS=2, PROTOCOL_TLS_CLIENT=16, PROTOCOL_TLS_SERVER=17,
        PROTO_MAXIMUM_SUPPORTED=-1, PROTO_MINIMUM_SUPPORTED=-2, PROTO_SSLv3=768, PROTO_TLSv1=769,
        PROTO_TLSv1_1=770, PROTO_TLSv1_2=771, PROTO_TLSv1_3=772,
        SSL_ERROR_EOF=8, SSL_ERROR_INVALID_ERROR_CODE=10, SSL_ERROR_SSL=1, SSL_ERROR_SYSCALL=5,
        SSL_ERROR_WANT_CONNECT=7, SSL_ERROR_WANT_READ=2, SSL_ERROR_WANT_WRITE=3,
        SSL_ERROR_WANT_X509_LOOKUP=4, SSL_ERROR_ZERO_RETURN=6,
        VERIFY_ALLOW_PROXY_CERTS=64, VERIFY_CRL_CHECK_CHAIN=12, VERIFY_CRL_CHECK_LEAF=4,
        VERIFY_DEFAULT=0, VERIFY_X509_PARTIAL_CHAIN=524288, VERIFY_X509_STRICT=32,
        VERIFY_X509_TRUSTED_FIRST=32768,
        _DEFAULT_CIPHERS="@SECLEVEL=2:ECDH+AESGCM:ECDH+CHACHA20:ECDH+AES:DHE+AES:!aNULL:!eNULL:!aDSS:!SHA1:!AESCCM",
    )
    for k, v in consts.items():
        setattr(m, k, v)
    for n, v in (("ACCESS_DENIED", 49), ("BAD_CERTIFICATE", 42), ("BAD_CERTIFICATE_HASH_VALUE", 114),
                 ("BAD_CERTIFICATE_STATUS_RESPONSE", 113), ("BAD_RECORD_MAC", 20),
                 ("CERTIFICATE_EXPIRED", 45), ("CERTIFICATE_REVOKED", 44), ("CERTIFICATE_UNKNOWN", 46),
                 ("CERTIFICATE_UNOBTAINABLE", 111), ("CLOSE_NOTIFY", 0), ("DECODE_ERROR", 50),
                 ("DECOMPRESSION_FAILURE", 30), ("DECRYPT_ERROR", 51), ("HANDSHAKE_FAILURE", 40),
                 ("ILLEGAL_PARAMETER", 47), ("INSUFFICIENT_SECURITY", 71), ("INTERNAL_ERROR", 80),
                 ("NO_RENEGOTIATION", 100), ("PROTOCOL_VERSION", 70), ("RECORD_OVERFLOW", 22),
                 ("UNEXPECTED_MESSAGE", 10), ("UNKNOWN_CA", 48), ("UNKNOWN_PSK_IDENTITY", 115),
                 ("UNRECOGNIZED_NAME", 112), ("UNSUPPORTED_CERTIFICATE", 43),
                 ("UNSUPPORTED_EXTENSION", 110), ("USER_CANCELLED", 90)):
        setattr(m, "ALERT_DESCRIPTION_" + n, v)

    class SSLError(OSError):
        pass

    class SSLZeroReturnError(SSLError):
        pass

    class SSLWantReadError(SSLError):
        pass

    class SSLWantWriteError(SSLError):
        pass

    class SSLSyscallError(SSLError):
        pass

    class SSLEOFError(SSLError):
        pass

    class SSLCertVerificationError(SSLError, ValueError):
        pass

    for cls in (SSLError, SSLZeroReturnError, SSLWantReadError, SSLWantWriteError,
                SSLSyscallError, SSLEOFError, SSLCertVerificationError):
        cls.__module__ = "ssl"
        setattr(m, cls.__name__, cls)

    NO_SOCKETS = ("airlock: TLS here is the host's, for HTTP(S) that the run's allow-list permits; "
                  "there are no sockets to wrap")

    def _prop(name, check=None):
        def get(self):
            return self.__dict__[name]

        def put(self, value):
            if check is not None:
                check(self, value)
            self.__dict__[name] = value
        return property(get, put)

    def _check_mode(self, value):
        if value == 0 and self.__dict__["_check_hostname"]:
            raise ValueError("Cannot set verify_mode to CERT_NONE when check_hostname is enabled.")

    class _SSLContext:
        def __new__(cls, protocol=2, *args, **kwargs):
            self = object.__new__(cls)
            client = protocol == 16
            d = self.__dict__
            d["_protocol"] = protocol
            d["_check_hostname"] = client
            d["_verify_mode"] = 2 if client else 0
            d["_options"] = 2147483728 | 33554432 | 131072
            d["_verify_flags"] = 32768
            d["_minimum_version"] = -2
            d["_maximum_version"] = -1
            d["_host_flags"] = 4
            d["_msg_callback"] = None
            d["_alpn"] = None
            d["post_handshake_auth"] = False
            d["keylog_filename"] = None
            d["sni_callback"] = None
            d["num_tickets"] = 2
            d["security_level"] = 2
            return self

        def __init__(self, *args, **kwargs):
            pass

        protocol = property(lambda self: self.__dict__["_protocol"])
        verify_mode = _prop("_verify_mode", _check_mode)
        options = _prop("_options")
        verify_flags = _prop("_verify_flags")
        minimum_version = _prop("_minimum_version")
        maximum_version = _prop("_maximum_version")
        _host_flags = _prop("_host_flags")
        _msg_callback = _prop("_msg_callback")

        @property
        def check_hostname(self):
            return self.__dict__["_check_hostname"]

        @check_hostname.setter
        def check_hostname(self, value):
            value = bool(value)
            if value and self.__dict__["_verify_mode"] == 0:
                self.__dict__["_verify_mode"] = 2
            self.__dict__["_check_hostname"] = value

        def _set_alpn_protocols(self, protos):
            self.__dict__["_alpn"] = protos

        def load_verify_locations(self, cafile=None, capath=None, cadata=None):
            # The host verifies against its own authorities.
            if cafile is None and capath is None and cadata is None:
                raise TypeError("cafile, capath and cadata cannot be all omitted")

        def set_default_verify_paths(self):
            pass

        def load_cert_chain(self, certfile, keyfile=None, password=None):
            raise SSLError("airlock: client certificates are not supported; TLS is made by the host")

        def set_ciphers(self, ciphers):
            pass

        def get_ciphers(self):
            return []

        def set_ecdh_curve(self, name):
            pass

        def load_dh_params(self, path):
            pass

        def cert_store_stats(self):
            return {"x509": 0, "crl": 0, "x509_ca": 0}

        def get_ca_certs(self, binary_form=False):
            return []

        def session_stats(self):
            return {}

        def set_psk_client_callback(self, *args, **kwargs):
            raise SSLError(NO_SOCKETS)

        def set_psk_server_callback(self, *args, **kwargs):
            raise SSLError(NO_SOCKETS)

        def _wrap_socket(self, *args, **kwargs):
            raise SSLError(NO_SOCKETS)

        def _wrap_bio(self, *args, **kwargs):
            raise SSLError(NO_SOCKETS)

    class MemoryBIO:
        def __init__(self):
            raise SSLError(NO_SOCKETS)

    class SSLSession:
        pass

    class _SSLSocket:
        pass

    m._SSLContext, m.MemoryBIO, m.SSLSession, m._SSLSocket = _SSLContext, MemoryBIO, SSLSession, _SSLSocket
    oids = {"1.3.6.1.5.5.7.3.1": (129, "serverAuth", "TLS Web Server Authentication"),
            "1.3.6.1.5.5.7.3.2": (130, "clientAuth", "TLS Web Client Authentication")}

    def txt2obj(txt, name=False):
        for oid, (nid, short, long) in oids.items():
            if txt in (oid, short, long):
                return (nid, short, long, oid)
        raise ValueError("unknown object %r" % txt)

    def nid2obj(nid):
        for oid, (n, short, long) in oids.items():
            if n == nid:
                return (n, short, long, oid)
        raise ValueError("unknown NID %r" % nid)

    def RAND_bytes(n):
        return os.urandom(n)

    m.txt2obj, m.nid2obj, m.RAND_bytes = txt2obj, nid2obj, RAND_bytes
    m.RAND_status = lambda: True
    m.RAND_add = lambda *a: None
    m.get_default_verify_paths = lambda: ("SSL_CERT_FILE", "/etc/ssl/cert.pem", "SSL_CERT_DIR", "/etc/ssl/certs")
    m.NO_SOCKETS = NO_SOCKETS
    return m


def _patch_ssl(ssl):
    def wrap_socket(self, sock, server_side=False, do_handshake_on_connect=True,
                    suppress_ragged_eofs=True, server_hostname=None, session=None):
        if isinstance(sock, HostSocket) and not server_side:
            return sock._start_tls(self, server_hostname)
        raise ssl.SSLError(sys.modules["_ssl"].NO_SOCKETS)

    def wrap_bio(self, *args, **kwargs):
        raise ssl.SSLError(sys.modules["_ssl"].NO_SOCKETS)

    wrap_socket.__doc__ = ssl.SSLContext.wrap_socket.__doc__
    ssl.SSLContext.wrap_socket = wrap_socket
    ssl.SSLContext.wrap_bio = wrap_bio


# --- the libraries

def _patch_http_client(m):
    init = m.HTTPConnection.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._create_connection = create_connection

    __init__.__doc__ = init.__doc__
    m.HTTPConnection.__init__ = __init__


def _patch_urllib3_wait(m):
    real = m.wait_for_read

    def wait_for_read(sock, timeout=None):
        if isinstance(sock, HostSocket):
            return sock._id is None  # readable at rest means dropped
        return real(sock, timeout)

    m.wait_for_read = wait_for_read


def _patch_urllib3_connection(m):
    def urllib3_create_connection(address, timeout=None, source_address=None, socket_options=None):
        return create_connection(address, timeout, source_address)

    m.create_connection = urllib3_create_connection


def _streams():
    import socket
    import httpcore
    from httpcore import _exceptions as ex
    from httpcore._backends.base import AsyncNetworkStream, NetworkStream

    def mapped(fn, errors):
        try:
            return fn()
        except BaseException as e:
            for cls, to in errors:
                if isinstance(e, cls):
                    raise to(str(e)) from e
            raise

    READ = ((socket.timeout, ex.ReadTimeout), (OSError, ex.ReadError))
    WRITE = ((socket.timeout, ex.WriteTimeout), (OSError, ex.WriteError))
    CONNECT = ((socket.timeout, ex.ConnectTimeout), (OSError, ex.ConnectError))

    class Stream(NetworkStream):
        def __init__(self, sock):
            self._sock = sock

        def read(self, max_bytes, timeout=None):
            self._sock.settimeout(timeout)
            return mapped(lambda: self._sock.recv(max_bytes), READ)

        def write(self, buffer, timeout=None):
            if not buffer:
                return
            self._sock.settimeout(timeout)
            mapped(lambda: self._sock.sendall(buffer), WRITE)

        def close(self):
            self._sock.close()

        def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            def wrap():
                return ssl_context.wrap_socket(self._sock, server_hostname=server_hostname)
            return Stream(mapped(wrap, CONNECT))

        def get_extra_info(self, info):
            if info == "ssl_object":
                return self._sock if self._sock._tls else None
            if info == "client_addr":
                return self._sock.getsockname()
            if info == "server_addr":
                return self._sock.getpeername()
            if info == "socket":
                return self._sock
            if info == "is_readable":
                return self._sock._id is None
            return None

    class AsyncStream(AsyncNetworkStream):
        # Each call blocks the loop while the host works: the host makes
        # one request at a time and bounds every wait.
        def __init__(self, stream):
            self._stream = stream

        async def read(self, max_bytes, timeout=None):
            return self._stream.read(max_bytes, timeout)

        async def write(self, buffer, timeout=None):
            self._stream.write(buffer, timeout)

        async def aclose(self):
            self._stream.close()

        async def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            return AsyncStream(self._stream.start_tls(ssl_context, server_hostname, timeout))

        def get_extra_info(self, info):
            return self._stream.get_extra_info(info)

    def connect(host, port, timeout, socket_options):
        return Stream(mapped(lambda: create_connection((host, port), timeout), CONNECT))

    return connect, AsyncStream, httpcore


def _patch_httpcore_sync(m):
    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        connect, _, _ = _streams()
        return connect(host, port, timeout, socket_options)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise PermissionError("airlock: no Unix sockets in this sandbox; HTTP(S) goes through the host")

    m.SyncBackend.connect_tcp = connect_tcp
    m.SyncBackend.connect_unix_socket = connect_unix_socket


def _patch_httpcore_auto(m):
    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        connect, AsyncStream, _ = _streams()
        return AsyncStream(connect(host, port, timeout, socket_options))

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise PermissionError("airlock: no Unix sockets in this sandbox; HTTP(S) goes through the host")

    m.AutoBackend.connect_tcp = connect_tcp
    m.AutoBackend.connect_unix_socket = connect_unix_socket


def _patch_socket(m):
    init = m.socket.__init__

    def __init__(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except PermissionError:
            raise PermissionError(RAW) from None

    __init__.__doc__ = init.__doc__
    m.socket.__init__ = __init__

    def refuse(*args, **kwargs):
        raise PermissionError(RAW)

    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo"):
        setattr(m, name, refuse)


_PATCHES = {
    "socket": _patch_socket,
    "ssl": _patch_ssl,
    "http.client": _patch_http_client,
    "urllib3.util.wait": _patch_urllib3_wait,
    "urllib3.util.connection": _patch_urllib3_connection,
    "httpcore._backends.sync": _patch_httpcore_sync,
    "httpcore._backends.auto": _patch_httpcore_auto,
}


class _Loader:
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
        self.patch(module)


class _Finder:
    _busy = set()

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        patch = _PATCHES.get(name)
        if patch is None or name in cls._busy:
            # Busy: another finder that delegates (the refusals') asks back.
            return None
        cls._busy.add(name)
        try:
            for finder in sys.meta_path:
                if finder is cls:
                    continue
                find = getattr(finder, "find_spec", None)
                spec = find(name, path, target) if find is not None else None
                if spec is not None:
                    break
            else:
                return None
        finally:
            cls._busy.discard(name)
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, patch)
        return spec


_enabled = False


def enable():
    """Route HTTP(S) through the host for this interpreter (idempotent)."""
    global _enabled
    if _enabled:
        return
    _enabled = True
    if "_ssl" not in sys.modules:
        sys.modules["_ssl"] = _fake_ssl()
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _Finder)
