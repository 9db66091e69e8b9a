package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/enginetest"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// keptFiles lists the rewritten modules kept under dir.
func keptFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "prepared", "*.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A second process (here: a second Load after the first is closed) takes
// the rewritten module that was kept; one whose bytes no longer match its
// record is made again, runs the same, and is kept again intact.
func TestKeptRewriteIsUsedAndRepaired(t *testing.T) {
	wasm := exitModule(42)
	dir := t.TempDir()
	opts := engine.Options{CacheDir: dir}
	if got := runExit(t, wasm, opts); got != 42 {
		t.Fatalf("exit %d", got)
	}
	kept := keptFiles(t, dir)
	if len(kept) != 1 || !strings.HasPrefix(filepath.Base(kept[0]), sha(wasm)+".budget-") {
		t.Fatalf("kept %v, want one budget rewrite of %s", kept, sha(wasm)[:12])
	}
	good, _ := os.ReadFile(kept[0])
	var rec struct {
		OutputSHA256 string `json:"output_sha256"`
	}
	data, _ := os.ReadFile(strings.TrimSuffix(kept[0], ".wasm") + ".json")
	if err := json.Unmarshal(data, &rec); err != nil || rec.OutputSHA256 != sha(good) {
		t.Fatalf("record %s (%v), module sha256 %s", data, err, sha(good))
	}
	// What runs is the kept module: one planted with a matching record runs.
	other := t.TempDir()
	runExit(t, exitModule(43), engine.Options{CacheDir: other})
	planted, _ := os.ReadFile(keptFiles(t, other)[0])
	os.WriteFile(kept[0], planted, 0o644)
	var fields map[string]any
	json.Unmarshal(data, &fields)
	fields["output_sha256"] = sha(planted)
	plantedRecord, _ := json.Marshal(fields)
	os.WriteFile(strings.TrimSuffix(kept[0], ".wasm")+".json", plantedRecord, 0o644)
	if got := runExit(t, wasm, opts); got != 43 {
		t.Fatalf("with a planted kept module: exit %d, want the planted 43", got)
	}
	os.WriteFile(strings.TrimSuffix(kept[0], ".wasm")+".json", data, 0o644)

	damaged := append([]byte(nil), good...)
	damaged[len(damaged)-1] ^= 0xff
	if err := os.WriteFile(kept[0], damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := runExit(t, wasm, opts); got != 42 {
		t.Fatalf("with a damaged kept module: exit %d, want 42", got)
	}
	// Made again: kept again once the next process finds no record.
	if got := runExit(t, wasm, opts); got != 42 {
		t.Fatalf("exit %d", got)
	}
	if again, _ := os.ReadFile(kept[0]); sha(again) != sha(good) {
		t.Fatalf("the damaged module was not replaced by the rewrite's output")
	}
}

// A record that does not parse, or names another rewrite or input, is
// ignored: the module is rewritten again.
func TestKeptRewriteRecordRefusals(t *testing.T) {
	wasm := exitModule(5)
	dir := t.TempDir()
	opts := engine.Options{CacheDir: dir}
	runExit(t, wasm, opts)
	kept := keptFiles(t, dir)
	if len(kept) != 1 {
		t.Fatalf("kept %v", kept)
	}
	record := strings.TrimSuffix(kept[0], ".wasm") + ".json"
	for _, bad := range []string{"{", `{"rewrite":"budget-0"}`, `{"rewrite":"budget-1","input_sha256":"00","output_sha256":"00"}`} {
		if err := os.WriteFile(record, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := runExit(t, wasm, opts); got != 5 {
			t.Fatalf("record %q: exit %d, want 5", bad, got)
		}
		if data, _ := os.ReadFile(record); string(data) == bad {
			t.Fatalf("record %q was kept, not rewritten", bad)
		}
	}
}

// Every rewrite kept for the own build in the suite's cache (which CI
// keeps between runs) must be what the rewrite makes now: a change to a
// rewrite's output without a new version in its name fails here.
func TestKeptRewritesMatchTheRewrites(t *testing.T) {
	resumable(t) // loads through the suite's cache, keeping the rewrites
	cache, _, _, read := enginetest.OwnBuild(t)
	wasm, err := read()
	if err != nil {
		t.Fatal(err)
	}
	now, err := engine.RewriteCheck(wasm, python.EntryFuncs)
	if err != nil {
		t.Fatal(err)
	}
	for _, rw := range now {
		path := filepath.Join(cache, "compiled", "prepared", rw.Input+"."+rw.Name+".json")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s of the own build not kept: %v", rw.Name, err)
			continue
		}
		var rec struct {
			OutputSHA256 string `json:"output_sha256"`
			Meta         struct {
				Interrupt        bool   `json:"interrupt"`
				LazyTable        bool   `json:"lazy_table"`
				InterruptRefused string `json:"interrupt_refused"`
				LazyTableRefused string `json:"lazy_table_refused"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Errorf("%s: %v", path, err)
		} else if rec.OutputSHA256 != rw.Output {
			t.Errorf("%s: kept output %.12s, the rewrite makes %.12s now: give the rewrite a new version", path, rec.OutputSHA256, rw.Output)
		}
		// On wazero the own build's loops must be stoppable and its table
		// filled on first use: without the latter a start costs ~2.5 ms.
		if strings.HasPrefix(rw.Name, "budget-") && (!rec.Meta.Interrupt || !rec.Meta.LazyTable) {
			t.Errorf("%s: the own build's wazero rewrite has %+v, want both", path, rec.Meta)
		}
	}
}

// With the rewrites and the compiled code in the cache, a module loads
// without its bytes being read (enginetest.LoadFromTheCache; the wasmtime
// back end's tests run it on wasmtime).
func TestLoadFromTheCacheReadsNoBytes(t *testing.T) {
	enginetest.LoadFromTheCache(t, engine.EngineWazero)
}

// A module the wazero rewrites refuse (SIMD: neither decodes it) still
// loads and runs, its table filled at instantiation as wazero does: _start
// calls slot 0 indirectly, a function returning a v128 lane, and exits
// with it.
func TestUnrewritableModuleRuns(t *testing.T) {
	ctx := context.Background()
	sections := []wasmbin.Section{
		{ID: wasmbin.TypeID, Body: []byte{3, 0x60, 1, 0x7f, 0, 0x60, 0, 0, 0x60, 0, 1, 0x7f}},
		{ID: wasmbin.ImportID, Body: append(append([]byte{1, 22}, "wasi_snapshot_preview1"...), append(append([]byte{9}, "proc_exit"...), 0, 0)...)},
		{ID: wasmbin.FunctionID, Body: []byte{2, 1, 2}},
		{ID: wasmbin.TableID, Body: []byte{1, 0x70, 0, 1}},
		{ID: 5, Body: []byte{1, 0, 1}},
		{ID: wasmbin.ExportID, Body: wasmbin.EncodeExports([]wasmbin.Export{{Name: "memory", Kind: wasmbin.KindMemory}, {Name: "_start", Kind: wasmbin.KindFunc, Index: 1}})},
		{ID: wasmbin.ElementID, Body: []byte{1, 0, 0x41, 0, 0x0b, 1, 2}},
	}
	start := []byte{0, 0x41, 0, 0x11, 2, 0, 0x10, 0, 0x0b}        // call_indirect (type 2) slot 0; call proc_exit
	lane := append([]byte{0, 0xfd, 0x0c, 7}, make([]byte, 15)...) // v128.const i32x4 7 0 0 0
	lane = append(lane, 0xfd, 0x1b, 0, 0x0b)                      // i32x4.extract_lane 0
	code := append(append([]byte{2, byte(len(start))}, start...), byte(len(lane)))
	sections = append(sections, wasmbin.Section{ID: wasmbin.CodeID, Body: append(code, lane...)})
	m, err := engine.Load(ctx, wasmbin.Encode(sections), engine.Options{})
	if err != nil {
		t.Fatalf("a module with SIMD does not load: %v", err)
	}
	defer m.Close(ctx)
	if engine.LoopChecked(m) {
		t.Error("the loop budget rewrite took a module with SIMD")
	}
	o, err := m.Run(ctx, engine.RunSpec{WASI: wasi.NewState(wasi.Config{FS: memfs.New(memfs.Options{})}), MemoryLimit: 1 << 20})
	if err != nil || o.ExitCode != 7 {
		t.Fatalf("run: %+v, %v; want exit code 7", o, err)
	}
}
