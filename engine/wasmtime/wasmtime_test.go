//go:build airlock_wasmtime && cgo && unix

package wasmtime_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/enginetest"
)

// An image is engine-neutral: captured on either engine, it resumes on both.
func TestImageRestoresOnBothEngines(t *testing.T) {
	ctx := context.Background()
	mods := map[string]*engine.Compiled{
		engine.EngineWazero:   resumableOn(t, engine.EngineWazero),
		engine.EngineWasmtime: resumableOn(t, engine.EngineWasmtime),
	}
	for capturedOn, cm := range mods {
		img := captureLoop(t, cm)
		for resumedOn, rm := range mods {
			var out bytes.Buffer
			o, err := rm.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte("print(6 * 7)"), &out), MemoryLimit: 256 << 20})
			if err != nil || o.ExitCode != 0 || out.String() != "42\n" {
				t.Fatalf("captured on %s, resumed on %s: %v %+v %q", capturedOn, resumedOn, err, o, out.String())
			}
			if (o.Fuel > 0) != (resumedOn == engine.EngineWasmtime) {
				t.Fatalf("resumed on %s: fuel %d; only wasmtime meters", resumedOn, o.Fuel)
			}
		}
	}
}

// The epoch is engine-wide: one run's cancellation must stop that run only.
func TestWasmtimeCancelStopsOnlyItsRun(t *testing.T) {
	m := resumableOn(t, engine.EngineWasmtime)
	ctx := context.Background()
	img := captureLoop(t, m)
	var out bytes.Buffer
	type result struct {
		o   engine.Outcome
		err error
		out string
	}
	survivor := make(chan result)
	go func() {
		var out bytes.Buffer
		o, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte("print(sum(range(3 * 10**6)))"), &out), MemoryLimit: 256 << 20})
		survivor <- result{o, err, out.String()}
	}()
	for range 5 {
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := m.Resume(cctx, img, engine.RunSpec{WASI: resumed([]byte("while True: pass"), &out), MemoryLimit: 256 << 20})
		cancel()
		if !errors.Is(err, engine.ErrInterrupted) {
			t.Fatalf("cancelled run: err = %v, want ErrInterrupted", err)
		}
	}
	r := <-survivor
	if r.err != nil || r.o.ExitCode != 0 || r.out != "4499998500000\n" {
		t.Fatalf("the run beside the cancelled ones: %v %+v %q", r.err, r.o, r.out)
	}
}

func TestWasmtimeFuelLimit(t *testing.T) {
	m := resumableOn(t, engine.EngineWasmtime)
	ctx := context.Background()
	img := captureLoop(t, m)
	var out bytes.Buffer
	o, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte("while True: pass"), &out), MemoryLimit: 256 << 20, Fuel: 10_000_000})
	if !errors.Is(err, engine.ErrFuelExhausted) || o.Fuel != 10_000_000 {
		t.Fatalf("endless loop with 10M fuel: %v %+v", err, o)
	}
}

// An unmetered module resumes the metered one's image, reports no fuel,
// and refuses a fuel cap with ErrUnmetered.
func TestWasmtimeUnmetered(t *testing.T) {
	ctx := context.Background()
	img := captureLoop(t, resumableOn(t, engine.EngineWasmtime))
	m := resumableWith(t, engine.Options{Engine: engine.EngineWasmtime, Unmetered: true})
	var out bytes.Buffer
	o, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte("print(6 * 7)"), &out), MemoryLimit: 256 << 20})
	if err != nil || o.ExitCode != 0 || out.String() != "42\n" || o.Fuel != 0 {
		t.Fatalf("unmetered run: %v %+v %q, want 42 and no fuel", err, o, out.String())
	}
	o, err = m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte("pass"), &out), MemoryLimit: 256 << 20, Fuel: 1_000_000})
	if !errors.Is(err, engine.ErrUnmetered) {
		t.Fatalf("fuel cap on an unmetered module: %v %+v, want ErrUnmetered", err, o)
	}
}

// A session's pause yields a delta image over the image it resumed; that
// too resumes on both engines, whichever engine paused it.
func TestDeltaImagesAcrossEngines(t *testing.T) {
	ctx := context.Background()
	mods := map[string]*engine.Compiled{
		engine.EngineWazero:   resumableOn(t, engine.EngineWazero),
		engine.EngineWasmtime: resumableOn(t, engine.EngineWasmtime),
	}
	base := captureLoop(t, mods[engine.EngineWazero])
	for pausedOn, pm := range mods {
		var out bytes.Buffer
		o, err := pm.Resume(ctx, base, engine.RunSpec{WASI: resumedThen([]byte("v = [41] * 100000"), "", &out), MemoryLimit: 256 << 20, PauseWhen: afterCode()})
		if err != nil || o.Image == nil {
			t.Fatalf("pause on %s: %v %+v %q", pausedOn, err, o, out.String())
		}
		delta := o.Image
		if delta.DeltaPages() == 0 {
			t.Fatalf("pause on %s: not a delta image (%d delta pages)", pausedOn, delta.DeltaPages())
		}
		for resumedOn, rm := range mods {
			var out bytes.Buffer
			o, err := rm.Resume(ctx, delta, engine.RunSpec{WASI: resumed([]byte("print(v[-1] + 1)"), &out), MemoryLimit: 256 << 20})
			if err != nil || o.ExitCode != 0 || out.String() != "42\n" {
				t.Fatalf("paused on %s, resumed on %s: %v %+v %q", pausedOn, resumedOn, err, o, out.String())
			}
		}
		delta.Close()
	}
}

// TestWasmtimeLateCancelDoesNotStopTheNextRun: a run whose context ends as
// it finishes must not leave its stop signal for the run after it (the
// cancel callback once wrote into the finished run's freed C memory,
// which the next run's allocation could reuse).
func TestWasmtimeLateCancelDoesNotStopTheNextRun(t *testing.T) {
	m := resumableOn(t, engine.EngineWasmtime)
	ctx := context.Background()
	img := captureLoop(t, m)
	var out bytes.Buffer
	for i := range 150 {
		// Deadlines spread around the time a trivial run takes, so some
		// end just as the run does.
		cctx, cancel := context.WithTimeout(ctx, time.Duration(i%30)*200*time.Microsecond)
		m.Resume(cctx, img, engine.RunSpec{WASI: resumed([]byte("pass"), &out), MemoryLimit: 256 << 20})
		cancel()
		o, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte("x = 1"), &out), MemoryLimit: 256 << 20})
		if err != nil || o.ExitCode != 0 {
			t.Fatalf("run %d after a cancelled one: %v %+v", i, err, o)
		}
	}
}

// wasmtime deserialises cached code after checking its structure only:
// a flipped byte in the code would run as a changed instruction. The cache
// refuses a damaged file and compiles again.
func TestWasmtimeCacheRefusesDamagedCode(t *testing.T) {
	const want = 0x5A5A1234
	dir := t.TempDir()
	opts := engine.Options{CacheDir: dir, Engine: engine.EngineWasmtime}
	run := func() uint32 { return runExit(t, exitModule(want), opts) }
	if got := run(); got != want {
		t.Fatalf("exit %#x", got)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "wasmtime", "*.cwasm"))
	if len(files) != 1 {
		t.Fatalf("cache files %v", files)
	}
	data, _ := os.ReadFile(files[0])
	i := bytes.Index(data, []byte{0x34, 0x12, 0x5A, 0x5A}) // the immediate, little-endian
	if i < 0 {
		t.Fatal("the exit code's immediate is not in the cached code")
	}
	data[i]++
	if err := os.WriteFile(files[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run(); got != want {
		t.Fatalf("a damaged cache file ran: exit %#x, want %#x", got, want)
	}
}

func TestLoadFromTheCacheReadsNoBytes(t *testing.T) {
	enginetest.LoadFromTheCache(t, engine.EngineWasmtime)
}

// invoke_ on wasmtime, which reaches the table through the guest's export
// and fills tables lazily itself: the same module and checks as wazero's
// (engine/cxxeh_test.go).
func TestCXXInvokeOnWasmtime(t *testing.T) {
	enginetest.InvokeRuns(t, engine.EngineWasmtime, engine.Options{})
	enginetest.InvokeAfterResume(t, resumableOn(t, engine.EngineWasmtime))
}
