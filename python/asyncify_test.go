package python_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-sandbox/airlock/python"
)

// tinyArtifact is a tiny valid module (it exits 0) standing in for
// python.wasm, so wasm-opt runs in milliseconds.
func tinyArtifact(tag byte) *python.Artifact {
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	sec := func(id byte, c []byte) []byte { return append([]byte{id, byte(len(c))}, c...) }
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	m = append(m, sec(1, []byte{2, 0x60, 1, 0x7f, 0, 0x60, 0, 0})...)
	imp := append([]byte{1}, name("wasi_snapshot_preview1")...)
	imp = append(append(imp, name("proc_exit")...), 0, 0)
	m = append(m, sec(2, imp)...)
	m = append(m, sec(3, []byte{1, 1})...)
	m = append(m, sec(5, []byte{1, 0, 1})...)
	exp := append([]byte{2}, name("memory")...)
	exp = append(append(exp, 2, 0), name("_start")...)
	exp = append(exp, 0, 1)
	m = append(m, sec(7, exp)...)
	m = append(m, sec(10, []byte{1, 6, 0, 0x41, 0, 0x10, 0, 0x0b})...)
	return &python.Artifact{Wasm: m, SHA256: strings.Repeat(string([]byte{"0123456789abcdef"[tag%16]}), 64), Build: "custom"}
}

// A damaged asyncified module (cut short by a crash or a disk error) is
// refused by LoadAsyncified, and Asyncify, which `airlock setup` runs,
// makes it again instead of reporting it present.
func TestAsyncifyRepairsADamagedModule(t *testing.T) {
	needWasmOpt(t)
	ctx := context.Background()
	dir := t.TempDir()
	art := tinyArtifact(1)
	var log bytes.Buffer
	dst, err := python.Asyncify(ctx, art, dir, os.Getenv(python.EnvWasmOpt), &log)
	if err != nil {
		t.Fatalf("asyncify: %v\n%s", err, log.String())
	}
	if _, _, err := python.LoadAsyncified(art, dir); err != nil {
		t.Fatalf("fresh load: %v", err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("asyncified module: %v, %v; want mode 0644, for users other than set-up's", fi.Mode(), err)
	}
	// Damage: the file is cut short.
	data, _ := os.ReadFile(dst)
	if err := os.WriteFile(dst, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := python.LoadAsyncified(art, dir); !errors.Is(err, python.ErrChecksum) {
		t.Fatalf("damaged load: %v", err)
	}
	// The lazy form finds the record, and refuses the bytes when read.
	rec, read, err := python.AsyncifiedSource(art, dir)
	if err != nil || rec.InputSHA256 != art.SHA256 {
		t.Fatalf("AsyncifiedSource of a damaged module: %+v, %v; want its record", rec, err)
	}
	if _, err := read(); !errors.Is(err, python.ErrChecksum) {
		t.Fatalf("reading a damaged module: %v, want ErrChecksum", err)
	}
	if _, err := python.Asyncify(ctx, art, dir, os.Getenv(python.EnvWasmOpt), &log); err != nil {
		t.Fatalf("re-asyncify: %v", err)
	}
	if _, _, err := python.LoadAsyncified(art, dir); err != nil {
		t.Errorf("after Asyncify again the damaged module is still there: %v", err)
	}
}

// Set-ups running at once (two processes, CI jobs sharing a cache) each
// write their own output and leave a module that matches its record.
func TestAsyncifyConcurrently(t *testing.T) {
	needWasmOpt(t)
	ctx := context.Background()
	fails := 0
	for round := 0; round < 10; round++ {
		dir := t.TempDir()
		art := tinyArtifact(byte(round))
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = python.Asyncify(ctx, art, dir, os.Getenv(python.EnvWasmOpt), &bytes.Buffer{})
			}()
		}
		wg.Wait()
		_, _, lerr := python.LoadAsyncified(art, dir)
		if errs[0] != nil || errs[1] != nil || lerr != nil {
			fails++
			t.Logf("round %d: %v | %v | load: %v", round, errs[0], errs[1], lerr)
		}
		if matches, _ := filepath.Glob(filepath.Join(dir, "asyncify", "*.part*")); len(matches) > 0 {
			t.Errorf("round %d: left %v", round, matches)
		}
	}
	if fails > 0 {
		t.Errorf("%d of 10 rounds of two Asyncify calls at once failed", fails)
	}
}

// needWasmOpt skips where Binaryen is missing; scripts/setup.sh, which CI
// runs first, installs it.
func needWasmOpt(t *testing.T) {
	t.Helper()
	tool := os.Getenv("AIRLOCK_WASM_OPT")
	if tool == "" {
		tool = "wasm-opt"
	}
	if _, err := exec.LookPath(tool); err != nil {
		t.Skip("no wasm-opt")
	}
}
