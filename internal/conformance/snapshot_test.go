package airlock_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// The whole suite runs in both modes: TestMain's Sandbox uses snapshots
// when set-up made them available (or as $AIRLOCK_TEST_SNAPSHOTS says:
// "on" or "off"), and TestSuiteWithoutSnapshots runs every other test again
// in a child process with them off.
const envTestSnapshots = "AIRLOCK_TEST_SNAPSHOTS"

func suiteOptions() []airlock.Option {
	switch os.Getenv(envTestSnapshots) {
	case "on":
		return []airlock.Option{airlock.WithSnapshots(true)}
	case "off":
		return []airlock.Option{airlock.WithSnapshots(false)}
	}
	return nil
}

func TestSuiteWithoutSnapshots(t *testing.T) {
	if os.Getenv(envTestSnapshots) != "" || !sb.Snapshots() {
		t.Skip("this process already runs the suite without snapshots, or chose its mode")
	}
	if testing.Short() {
		t.Skip("-short: the suite runs in the snapshot mode only")
	}
	// The WASI C programs (TestWASIC) run no Python: without snapshots they
	// would run exactly as they just did.
	cmd := exec.Command(os.Args[0], "-test.run=^Test", "-test.skip=^TestSuiteWithoutSnapshots$|^TestSnapshot|^TestSession|^TestWASIC", "-test.count=1")
	cmd.Env = append(os.Environ(), envTestSnapshots+"=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("suite without snapshots: %v\n%s", err, out)
	}
}

// snapshotSandbox is the shared Sandbox when it resumes from snapshots.
func snapshotSandbox(t *testing.T) *airlock.Sandbox {
	t.Helper()
	if !sb.Snapshots() {
		t.Fatal("snapshots unavailable: scripts/setup.sh prepares them (Binaryen's wasm-opt)")
	}
	return sb
}

func TestSnapshotNothingLeaks(t *testing.T) {
	snapshotSandbox(t)
	// Each run changes what a shared interpreter would carry over; the
	// next one must see none of it.
	dirty := `
import sys, builtins, json, random, re, os
import collections
GLOBAL_MARK = 1
builtins.leak = 42
builtins.print_orig, builtins.len = builtins.print, lambda x: -1
sys.modules["json"].dumps = None
sys.modules["evil"] = sys
sys.path.insert(0, "/leak")
re.purge()
random.seed(1234)
collections.OrderedDict = None
open("left.txt", "w").write("x")
open("/tmp/left.txt", "w").write("x")
os.environ["LEAKED"] = "1"
os.chdir("/tmp")
print(random.random())
`
	check := `
import sys, builtins, json, os, collections
print("GLOBAL_MARK" in globals(), hasattr(builtins, "leak"), len([1]), json.dumps([1]),
      "evil" in sys.modules, "/leak" in sys.path, collections.OrderedDict is None,
      os.path.exists("left.txt"), os.path.exists("/tmp/left.txt"), "LEAKED" in os.environ, os.getcwd())
`
	for range 2 {
		mustRun(t, airlock.Request{Code: dirty})
		out := mustRun(t, airlock.Request{Code: check})
		if want := "False False 1 [1] False False False False False False /home/user\n"; out != want {
			t.Fatalf("state carried over:\n got %q\nwant %q", out, want)
		}
	}
}

func TestSnapshotRandomnessDiffers(t *testing.T) {
	snapshotSandbox(t)
	code := `
import random, os, uuid
print(random.random(), random.getrandbits(64), os.urandom(8).hex(), uuid.uuid4())
import secrets; print(secrets.token_hex(8))
`
	seen := map[string]bool{}
	for range 4 {
		out := mustRun(t, airlock.Request{Code: code})
		for _, field := range strings.Fields(out) {
			if seen[field] {
				t.Fatalf("value %s repeated across runs:\n%s", field, out)
			}
			seen[field] = true
		}
	}
	// Shared by design (documented): the image's hash seed.
	h1 := mustRun(t, airlock.Request{Code: `print(hash("abc"))`})
	h2 := mustRun(t, airlock.Request{Code: `print(hash("abc"))`})
	if h1 != h2 {
		t.Fatalf("hash seed differs between runs of one image: %s %s", h1, h2)
	}
	// Deterministic runs start a fresh interpreter with the request's seed.
	d := mustRun(t, airlock.Request{Code: `print(hash("abc"))`, Deterministic: true, Seed: 3})
	if d == h1 {
		t.Fatalf("a deterministic run used the image's hash seed")
	}
}

func TestSnapshotRunWorld(t *testing.T) {
	snapshotSandbox(t)
	out := mustRun(t, airlock.Request{
		Code:     "import os, sys\nprint(sys.argv, os.getcwd(), os.environ['X'], os.environ.get('AIRLOCK_SNAPSHOT'), sys.stdin.read(), sorted(os.listdir('.')), __name__, __file__)",
		Filename: "job.py",
		Stdin:    []byte("from stdin"),
		Env:      map[string]string{"X": "y"},
		Files:    map[string][]byte{"in.txt": []byte("1")},
	})
	if want := "['job.py'] /home/user y None from stdin ['in.txt'] __main__ job.py\n"; out != want {
		t.Fatalf("got %q\nwant %q", out, want)
	}
	// A start-up variable the image was not made with needs a fresh interpreter.
	out = mustRun(t, airlock.Request{Code: "import sys; print(sys.flags.optimize)", Env: map[string]string{"PYTHONOPTIMIZE": "1"}})
	if out != "1\n" {
		t.Fatalf("PYTHONOPTIMIZE ignored: %q", out)
	}
}

// TestSnapshotRunsStartAtTheEntryPoint: on the own build (whose
// functions are named, python.EntryFuncs) a run from the image starts in
// the prelude's enter, called by the host, with nothing under it: not in
// a statement of the interpreter's loop, as on the npm build. A session's
// calls start there too.
func TestSnapshotRunsStartAtTheEntryPoint(t *testing.T) {
	snapshotSandbox(t)
	const stack = "import sys\nf, names = sys._getframe(), []\nwhile f:\n    names.append(f.f_code.co_name)\n    f = f.f_back\nprint(names)"
	want := "['<module>', 'run_one', 'call', 'enter']\n"
	if sb.Info().Build == "npm" {
		want = "['<module>', 'run_one', 'call', '<module>']\n" // the loop's statement
	}
	if out := mustRun(t, airlock.Request{Code: stack}); out != want {
		t.Fatalf("a run's stack: %q, want %q", out, want)
	}
	s, err := sb.NewSession(context.Background(), airlock.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for i := range 2 {
		res, err := s.Run(context.Background(), airlock.Request{Code: stack})
		if err != nil || string(res.Stdout) != want {
			t.Fatalf("session call %d: %v, stack %q, want %q", i, err, res.Stdout, want)
		}
	}
}

// The objects in the image are immortal, so that runs do not write to
// the image's pages just to count references to them; a run's own
// objects are counted and freed as usual, and code that drops or
// replaces image objects still works.
func TestSnapshotImageObjectsAreImmortal(t *testing.T) {
	snapshotSandbox(t)
	const code = `import sys, json, collections
immortal = sys.getrefcount(None)
mine = object()
print(sys.getrefcount(json) == immortal, sys.getrefcount(json.dumps) == immortal,
      sys.getrefcount(collections.OrderedDict) == immortal, sys.getrefcount(mine) < 10)
del sys.modules["json"], json
import json
sys.modules["collections"].OrderedDict = None
print(json.dumps({"a": [1, 2]}), len(list(range(100000))))`
	want := "True True True True\n{\"a\": [1, 2]} 100000\n"
	if out := mustRun(t, airlock.Request{Code: code}); out != want {
		t.Fatalf("a run from the image: %q, want %q", out, want)
	}
	// The next run gets the image again, not what the last one changed.
	if out := mustRun(t, airlock.Request{Code: "import collections; print(collections.OrderedDict)"}); out != "<class 'collections.OrderedDict'>\n" {
		t.Fatalf("after a run that changed an image object: %q", out)
	}
}

func TestSnapshotManyConcurrentRuns(t *testing.T) {
	snapshotSandbox(t)
	const runs, workers = 48, 6
	var wg sync.WaitGroup
	jobs := make(chan int)
	errs := make(chan error, runs)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				res, err := sb.Run(context.Background(), airlock.Request{
					Code:  fmt.Sprintf("import os\nx = %d\nopen('mine', 'w').write(str(x))\nprint(x * 2, open('mine').read(), sorted(os.listdir('.')), input())", i),
					Stdin: fmt.Appendf(nil, "in-%d\n", i),
				})
				want := fmt.Sprintf("%d %d ['mine'] in-%d\n", i*2, i, i)
				if err != nil || string(res.Stdout) != want {
					errs <- fmt.Errorf("run %d: err=%v stdout=%q want %q stderr=%s", i, err, res.Stdout, want, res.Stderr)
				}
			}
		}()
	}
	for i := range runs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
