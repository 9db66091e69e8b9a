package airlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// interpreterProbe prints a fingerprint of the interpreter state a run
// could poison for the next one if anything survived a snapshot restore:
// sys hooks and limits, the collector, import machinery, builtins and
// static types, the warm-up modules, codecs, warnings, decimal, atexit,
// descriptors. Every run must print the same as a run on a clean sandbox.
const interpreterProbe = `
import sys, gc, builtins, os, io, json, re, random, codecs, warnings, decimal, datetime, collections, functools, base64
out = []
def p(*a): out.append(" ".join(map(str, a)))
p("sys", sys.getrecursionlimit(), sys.gettrace(), sys.getprofile(), sys.getswitchinterval(),
  sys.excepthook is sys.__excepthook__, sys.displayhook is sys.__displayhook__,
  type(sys.stdout).__name__, sys.stdout is sys.__stdout__, len(sys.meta_path), len(sys.path_hooks), sys.path,
  sys.get_int_max_str_digits(), sys.dont_write_bytecode, sorted(sys.modules)[:60])
p("gc", gc.isenabled(), gc.get_threshold(), len(gc.callbacks), gc.get_freeze_count() > 0, gc.get_debug())
p("builtins", sorted(builtins.__dict__), len(dir(str)), print.__module__, open is io.open)
p("types", (1).__repr__(), "x".upper(), [3, 1, 2].__len__(), sorted({2: 0, 1: 0}), str.upper.__qualname__,
  int.__add__(2, 3), hash("airlock") == hash("airlock"), repr(1.1), 10**20, "ab" * 3)
p("json", json.dumps({"a": [1, 2.5, None]}), json.loads('{"x": [true]}'), json.dumps.__module__, json.JSONEncoder.item_separator)
p("re", re.sub(r"\d+", "#", "a1b22"), re.compile.__module__, len(re._cache) if hasattr(re, "_cache") else -1)
p("random", random.random.__self__.__class__.__name__, 0 <= random.random() < 1, random.randint.__module__)
p("codecs", codecs.lookup("utf-8").name, "é".encode("utf-8"), b"\xc3\xa9".decode())
p("warnings", len(warnings.filters), warnings.showwarning is warnings._showwarning_orig if hasattr(warnings, "_showwarning_orig") else "-")
p("decimal", decimal.getcontext().prec, decimal.getcontext().rounding, decimal.Decimal(1) / decimal.Decimal(3))
p("datetime", datetime.timedelta(days=1).total_seconds(), datetime.date(2000, 1, 1).isoformat())
p("misc", collections.OrderedDict.__name__, functools.reduce(int.__add__, [1, 2]), base64.b64encode(b"hi"),
  sorted(os.environ), os.getcwd(), os.listdir("."), os.listdir("/tmp"))
fd = os.open("/tmp/probe", os.O_CREAT | os.O_RDWR); os.close(fd)
p("fd", fd)
import atexit
p("atexit", atexit._ncallbacks())
print("\n".join(out))
`

// poisons try to corrupt the interpreter for the runs after them. Each
// run's own outcome (kind, or "" for a run that may end any way short of
// failing the host) matters less than what the probe sees afterwards.
var poisons = []struct {
	name   string
	code   string
	limits airlock.Limits
	kind   airlock.Kind // expected; "any" accepts every outcome but a Go-side failure
}{
	{name: "sys-hooks", code: `import sys
sys.setrecursionlimit(60); sys.setswitchinterval(1.0); sys.set_int_max_str_digits(700)
sys.settrace(lambda *a: None); sys.setprofile(lambda *a: None)
sys.excepthook = sys.displayhook = None
sys.meta_path.clear(); sys.path_hooks.clear(); sys.path[:] = ["/nowhere"]; sys.path_importer_cache.clear()
sys.dont_write_bytecode = False`},
	{name: "sys-modules", code: `import sys
for k in list(sys.modules):
    if k not in ("sys", "builtins"): sys.modules[k] = None`, kind: "any"},
	{name: "stdio", code: `import sys, io
sys.stdout = sys.__stdout__ = io.StringIO(); sys.stderr = None; print("swallowed")`, kind: "any"},
	{name: "gc", code: `import gc
gc.disable(); gc.set_threshold(1, 1, 1); gc.set_debug(gc.DEBUG_SAVEALL); gc.callbacks.append(lambda *a: 1/0)
gc.unfreeze()
l = [[] for _ in range(1000)]
for x in l: x.append(x)`},
	{name: "static-type-dicts", code: `import gc
# The real dicts behind the read-only mappingproxies of built-in types.
for t in (int, str, list, dict, float):
    d = gc.get_referents(t.__dict__)[0]
    for k in list(d):
        if not k.startswith("__") or k in ("__repr__", "__len__", "__add__"):
            d[k] = None
print("poisoned")`, kind: "any"},
	{name: "builtins", code: `import builtins
d = vars(builtins); extra = d["setattr"]
for k in list(d):
    if k not in ("print", "__import__"): del d[k]
extra(builtins, "extra", 1)`},
	{name: "warm-up-modules", code: `import json, re, random, codecs, warnings, decimal, datetime, collections, functools, base64, json.encoder
json.dumps = json.loads = lambda *a, **k: "EVIL"; json.JSONEncoder.item_separator = "!!"
re.sub = re.compile = None; re._cache = {"junk": 1} if hasattr(re, "_cache") else None
random.random = lambda: 7; random.seed(0)
codecs.register(lambda name: codecs.lookup("rot13") if name == "utf-8" else None)
warnings.simplefilter("error"); warnings.filters.insert(0, ("ignore", None, Warning, None, 0))
decimal.getcontext().prec = 2; decimal.getcontext().rounding = decimal.ROUND_FLOOR
import gc; gc.get_referents(datetime.timedelta.__dict__)[0]["total_seconds"] = None
collections.OrderedDict = dict
functools.reduce = base64.b64encode = None`},
	{name: "atexit-and-exit", code: `import atexit, os
atexit.register(print, "LEAKED FROM ATEXIT")
os.environ["X_LEAK"] = "1"; os.chdir("/tmp")
os._exit(3)`, kind: "any"},
	{name: "fds-left-open", code: `import os
fds = [os.open("/tmp/f%d" % i, os.O_CREAT | os.O_RDWR) for i in range(200)]
os.close(1)`, kind: "any"},
	{name: "timeout-after-poison", code: `import sys, gc, json
sys.setrecursionlimit(50); gc.disable(); json.dumps = None
while True: pass`, limits: airlock.Limits{Timeout: 100 * time.Millisecond}, kind: airlock.KindTimeout},
	{name: "oom-after-poison", code: `import sys, gc, json
sys.setrecursionlimit(50); gc.disable(); json.dumps = None
x = []
while True: x.append(bytearray(1 << 20))`, limits: airlock.Limits{Memory: 64 << 20}, kind: airlock.KindMemoryLimit},
	// CPython trusts bytecode: a code object with a LOAD_CONST past its
	// constants reads (and a STORE_FAST past its locals writes) arbitrary
	// guest memory. Whatever it corrupts is the run's own instance.
	{name: "wild-bytecode", code: `import dis
def f(): return 1
ops = bytes([dis.opmap["RESUME"], 0, dis.opmap["LOAD_CONST"], 250, dis.opmap["STORE_FAST"], 200,
             dis.opmap["LOAD_CONST"], 240, dis.opmap["STORE_FAST"], 120, dis.opmap["LOAD_CONST"], 0, dis.opmap["RETURN_VALUE"], 0])
g = type(f)(f.__code__.replace(co_code=ops, co_nlocals=1, co_varnames=("a",)), {})
for _ in range(50):
    try: g()
    except BaseException: pass
print("survived")`, kind: "any"},
	{name: "heap-scribble", code: `# Fill and free most of the heap, leaving the allocator's free lists
# full of pages the next run would reuse if they survived.
import gc
blobs = [bytearray(b"\xa5" * (1 << 20)) for _ in range(20)]
strs = ["%d-poison" % i for i in range(50000)]
del blobs, strs; gc.collect()`},
}

// TestSnapshotPoisonedInterpreter runs each poison on a Sandbox of its own
// (so the probe reuses what the poison ran on), then the probe, which must
// print what it prints on a clean sandbox. Runs in both modes; the
// snapshot mode, where one image serves every run, is the one at risk.
func TestSnapshotPoisonedInterpreter(t *testing.T) {
	ctx := context.Background()
	s, err := airlock.New(ctx, suiteOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	probe := func() string {
		t.Helper()
		res, err := s.Run(ctx, airlock.Request{Code: interpreterProbe, Limits: airlock.Limits{Timeout: time.Minute}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("probe: err=%v exit=%d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
		}
		return string(res.Stdout)
	}
	clean := probe()
	for _, ps := range poisons {
		limits := ps.limits
		if limits.Timeout == 0 {
			limits.Timeout = time.Minute
		}
		res, err := s.Run(ctx, airlock.Request{Code: ps.code, Limits: limits})
		if res == nil {
			t.Fatalf("%s: nil Result (err %v)", ps.name, err)
		}
		var ae *airlock.Error
		switch ps.kind {
		case "any":
			if err != nil && (!errors.As(err, &ae) || ae.Kind == airlock.KindInvalidRequest) {
				t.Fatalf("%s: err=%v", ps.name, err)
			}
		case "":
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%s: err=%v exit=%d\n%s%s", ps.name, err, res.ExitCode, res.Stdout, res.Stderr)
			}
		default:
			if !errors.As(err, &ae) || ae.Kind != ps.kind {
				t.Fatalf("%s: want %s, got err=%v exit=%d\n%s", ps.name, ps.kind, err, res.ExitCode, res.Stderr)
			}
		}
		t.Logf("%s: err=%v exit=%d", ps.name, err, res.ExitCode)
		if got := probe(); got != clean {
			t.Errorf("after %s the interpreter differs:\n got %s\nwant %s", ps.name, got, clean)
		}
	}
}
