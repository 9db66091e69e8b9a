package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls until out contains want, for up to 30 s.
func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	for range 300 {
		if strings.Contains(out.String(), want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %q in output:\n%s", want, out.String())
}

// startWatch runs the command in the background; stop cancels it (as
// Ctrl-C does) and returns its exit status.
func startWatch(t *testing.T, args ...string) (stdout, stderr *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- dispatch(ctx, args, strings.NewReader(""), stdout, stderr) }()
	stop = func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Fatal("the watch did not end after cancellation")
			return -1
		}
	}
	t.Cleanup(func() { cancel() })
	return stdout, stderr, stop
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRunWatch(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "main.py")
	data := filepath.Join(dir, "data.txt")
	write(t, prog, "print('v1', open('data.txt').read())\n")
	write(t, data, "a")
	stdout, stderr, stop := startWatch(t, "run", "--watch", dir, "--file", data, prog)
	waitFor(t, stdout, "v1 a\n")
	waitFor(t, stderr, "watching")
	write(t, prog, "print('v2', open('data.txt').read())\n")
	waitFor(t, stdout, "v2 a\n")
	write(t, data, "b") // a data file in the watched directory counts too
	waitFor(t, stdout, "v2 b\n")
	write(t, filepath.Join(dir, ".swap"), "x") // hidden files do not
	time.Sleep(500 * time.Millisecond)
	if n := strings.Count(stdout.String(), "v2 b\n"); n != 1 {
		t.Fatalf("%d runs after a hidden file changed:\n%s", n, stdout.String())
	}
	if code := stop(); code != 0 {
		t.Fatalf("Ctrl-C: exit %d; stderr %s", code, stderr.String())
	}
}

func TestTestWatch(t *testing.T) {
	dir := writeSuite(t, map[string]string{"test_a.py": "import unittest\nclass T(unittest.TestCase):\n    def test_a(self): self.assertTrue(False)\n"})
	stdout, _, stop := startWatch(t, "test", "--watch", dir)
	waitFor(t, stdout, "0 passed, 1 failed")
	write(t, filepath.Join(dir, "test_a.py"), "import unittest\nclass T(unittest.TestCase):\n    def test_a(self): self.assertTrue(True)\n")
	waitFor(t, stdout, "1 passed, 0 failed")
	if code := stop(); code != 0 {
		t.Fatalf("Ctrl-C: exit %d", code)
	}
}
