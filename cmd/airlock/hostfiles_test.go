package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/python"
)

// The host's own files (SECURITY.md, "The host's own files"): a cache
// that is missing, damaged or read-only ends in a clear error or a run
// that is right, never a panic or a wrong answer.

// airlockProcess runs the CLI as a process of this test binary with
// exactly env (plus what makes it the CLI, and no warm server: each run
// is its own), and returns its exit status, stdout and stderr.
func airlockProcess(t *testing.T, env []string, wrap []string, args ...string) (int, string, string) {
	t.Helper()
	argv := append(append(slices.Clone(wrap), os.Args[0]), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{envExecMain + "=1", "PATH=" + os.Getenv("PATH"), "AIRLOCK_WARM=off"}, env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errOut.String(), "panic:") || strings.Contains(errOut.String(), "goroutine ") {
		t.Fatalf("%v panicked:\n%s", args, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// testCacheDir is the cache the suite runs on.
func testCacheDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv(python.EnvCacheDir); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	dir, err := python.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// With no $HOME and no $XDG_* variables there is no default cache
// directory: each command says to set AIRLOCK_CACHE_DIR; with it set,
// the same environment runs.
func TestNoHomeCacheDirectory(t *testing.T) {
	for _, args := range [][]string{{"run", "-c", "print(6 * 7)"}, {"setup"}, {"version"}, {"mcp"}} {
		code, _, stderr := airlockProcess(t, nil, nil, args...)
		if code != exitAirlock || !strings.Contains(stderr, "no cache directory (set AIRLOCK_CACHE_DIR)") {
			t.Errorf("%v without $HOME: exit %d, stderr %q; want %d naming AIRLOCK_CACHE_DIR", args, code, stderr, exitAirlock)
		}
	}
	code, stdout, stderr := airlockProcess(t, []string{python.EnvCacheDir + "=" + testCacheDir(t)}, nil, "run", "-c", "print(6 * 7)")
	if code != 0 || stdout != "42\n" {
		t.Fatalf("without $HOME, with AIRLOCK_CACHE_DIR: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
}

// A $HOME with no cache directory at all: the build is not there, and
// the error says how to make or import it; nothing is made in $HOME by
// a run.
func TestEmptyHome(t *testing.T) {
	home := t.TempDir()
	code, _, stderr := airlockProcess(t, []string{"HOME=" + home}, nil, "run", "-c", "print(6 * 7)")
	if code != exitAirlock || !strings.Contains(stderr, "build is not in the cache directory") || !strings.Contains(stderr, "scripts/setup.sh") {
		t.Fatalf("run with an empty $HOME: exit %d, stderr %q", code, stderr)
	}
	if left, _ := os.ReadDir(home); len(left) != 0 {
		t.Fatalf("a failed run left %v in $HOME", left)
	}
}

// A damaged own build (python.wasm or its stdlib cut short or changed, a
// record that does not decode) is refused by name, with the way out;
// the run does not start.
func TestDamagedOwnBuild(t *testing.T) {
	src, err := filepath.EvalSymlinks(python.OwnDir(testCacheDir(t)))
	if err != nil {
		t.Skipf("no own build in the cache: %v", err)
	}
	damage := map[string]func([]byte) []byte{
		"cut":     func(b []byte) []byte { return b[:len(b)/2] },
		"flipped": func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b },
		"empty":   func([]byte) []byte { return nil },
	}
	for _, file := range []string{python.OwnWasm, python.OwnStdlib, python.OwnRecord} {
		for how, change := range damage {
			if file == python.OwnRecord && how == "flipped" {
				// A flipped byte in an informative field is a record
				// still right about the files (their sums are checked):
				// the run is right, after compiling under the new key.
				continue
			}
			t.Run(file+"/"+how, func(t *testing.T) {
				cache := t.TempDir()
				dst := filepath.Join(cache, filepath.Base(src))
				if err := os.Mkdir(dst, 0o755); err != nil {
					t.Fatal(err)
				}
				for _, name := range []string{python.OwnWasm, python.OwnStdlib, python.OwnRecord} {
					data, err := os.ReadFile(filepath.Join(src, name))
					if err != nil {
						t.Fatal(err)
					}
					if name == file {
						data = change(data)
					}
					if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Symlink(filepath.Base(src), python.OwnDir(cache)); err != nil {
					t.Fatal(err)
				}
				code, stdout, stderr := airlockProcess(t, []string{python.EnvCacheDir + "=" + cache}, nil, "run", "-c", "print(6 * 7)")
				want := "checksum mismatch"
				if file == python.OwnRecord {
					want = python.OwnRecord
				}
				if code != exitAirlock || stdout != "" || !strings.Contains(stderr, want) || !strings.Contains(stderr, file) {
					t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d naming %s and %q", code, stdout, stderr, exitAirlock, file, want)
				}
				if file != python.OwnRecord && !strings.Contains(stderr, "scripts/setup.sh") {
					t.Errorf("the error does not say how to make the build again: %s", stderr)
				}
			})
		}
	}
}

// A read-only cache that setup prepared serves runs; setup itself says
// at once that it cannot write there. The cache is the suite's own,
// mounted read-only in a mount namespace of the child (root only).
func TestReadOnlyCache(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount the cache read-only in a namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare")
	}
	cache := testCacheDir(t)
	wrap := []string{"unshare", "-m", "sh", "-c", `mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && shift && exec "$@"`, cache, "--"}
	if out, err := exec.Command(wrap[0], append(wrap[1:], "true")...).CombinedOutput(); err != nil {
		t.Skipf("cannot mount read-only in a namespace here: %v %s", err, out)
	}
	env := []string{python.EnvCacheDir + "=" + cache}
	code, stdout, stderr := airlockProcess(t, env, wrap, "run", "-c", "print(6 * 7)")
	if code != 0 || stdout != "42\n" {
		t.Fatalf("run on a read-only cache: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	code, stdout, stderr = airlockProcess(t, env, wrap, "setup")
	if code == 0 || !strings.Contains(stderr, "is not writable") || strings.Contains(stdout, "ready") {
		t.Fatalf("setup on a read-only cache: exit %d, stdout %q, stderr %q; want a failure saying so", code, stdout, stderr)
	}
}

// Two `airlock setup` processes at once on one cache directory (each
// compiling the modules and capturing the images, as on a fresh machine
// where two jobs start together) both succeed, and leave a cache that
// runs and holds no half-written file. Seeded with the own build and its
// asyncified module, so that no build or wasm-opt is needed; ~2 min of
// CPU per process, so not in -short.
func TestSetupTwiceAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the modules twice at once (minutes)")
	}
	src := testCacheDir(t)
	own, err := filepath.EvalSymlinks(python.OwnDir(src))
	if err != nil {
		t.Skipf("no own build in the cache: %v", err)
	}
	cache := t.TempDir()
	if out, err := exec.Command("cp", "-a", own, python.OwnDir(src), filepath.Join(src, "asyncify"), cache).CombinedOutput(); err != nil {
		t.Fatalf("seeding the cache: %v %s", err, out)
	}
	// The source cache is shared: another process (CI's npm fallback lane)
	// may be writing an asyncified module there right now. Its in-flight
	// file is not ours to judge.
	for _, p := range halfWritten(t, cache) {
		if err := os.Remove(p); err != nil {
			t.Fatalf("seeding the cache: %v", err)
		}
	}
	env := []string{python.EnvCacheDir + "=" + cache}
	type outcome struct {
		code           int
		stdout, stderr string
	}
	done := make(chan outcome, 2)
	for range 2 {
		go func() {
			code, stdout, stderr := airlockProcess(t, env, nil, "setup")
			done <- outcome{code, stdout, stderr}
		}()
	}
	for range 2 {
		if o := <-done; o.code != 0 || !strings.Contains(o.stdout, "(snapshots: true): ok") {
			t.Errorf("one of two setups at once: exit %d\n%s\n%s", o.code, o.stdout, o.stderr)
		}
	}
	code, stdout, stderr := airlockProcess(t, env, nil, "run", "-c", "print(6 * 7)")
	if code != 0 || stdout != "42\n" || strings.Contains(stderr, "compiling") || strings.Contains(stderr, "capturing") {
		t.Fatalf("a run after both: exit %d, stdout %q, stderr %q; want 42 from what they prepared", code, stdout, stderr)
	}
	for _, p := range halfWritten(t, cache) {
		t.Errorf("left half-written: %s", p)
	}
}

// halfWritten lists the files under dir that an atomic write had not yet
// renamed into place.
func halfWritten(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), ".part") {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
	return found
}
