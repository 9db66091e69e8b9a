package engine_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
)

// envFullCache names, in the child process TestCompileCacheDiskFull
// starts, the cache directory on a file system with no space left.
const envFullCache = "AIRLOCK_TEST_FULL_CACHE"

// A cache directory whose disk is full (here a full 4 KiB tmpfs, in a
// mount namespace of a child process: root only) fails the compiled
// code's write, not the run: the module runs uncached, with a notice.
func TestCompileCacheDiskFull(t *testing.T) {
	if dir := os.Getenv(envFullCache); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, 4096), 0o644); err != nil {
			t.Fatalf("filling the disk: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "more"), make([]byte, 4096), 0o644); err == nil {
			t.Fatal("the disk is not full")
		}
		var notice bytes.Buffer
		if got := runExit(t, exitModule(222, 111), engine.Options{CacheDir: dir, Notice: &notice}); got != 222 {
			t.Fatalf("exit %d, want 222", got)
		}
		if !strings.Contains(notice.String(), "not cached") {
			t.Errorf("no notice of the failed write: %q", notice.String())
		}
		t.Log("ran on a full disk:", notice.String())
		return
	}
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a small file system in a namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare")
	}
	dir := t.TempDir()
	cmd := exec.Command("unshare", "-m", "sh", "-c", `mount -t tmpfs -o size=4k tmpfs "$0" && shift && exec "$@"`, dir, "--",
		os.Args[0], "-test.run=^TestCompileCacheDiskFull$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envFullCache+"="+dir)
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "mount:") {
		t.Skipf("cannot mount a file system here: %s", out)
	}
	if err != nil || !strings.Contains(string(out), "ran on a full disk") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
