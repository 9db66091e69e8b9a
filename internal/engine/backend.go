package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Engine names for Options.Engine.
const (
	// EngineWazero is the default runtime: pure Go, no cgo.
	EngineWazero = "wazero"
	// EngineWasmtime is wasmtime through cgo, compiled in only with the
	// build tag airlock_wasmtime. It meters fuel, so a CPU budget is the
	// same on every machine.
	EngineWasmtime = "wasmtime"
)

var (
	// ErrEngineUnavailable: the asked-for engine is unknown or not compiled
	// into this binary.
	ErrEngineUnavailable = errors.New("engine: engine not available")
	// ErrFuelExhausted: the guest used up RunSpec.Fuel.
	ErrFuelExhausted = errors.New("engine: fuel exhausted")
	// ErrUnmetered: a fuel cap for a module loaded with Options.Unmetered.
	ErrUnmetered = errors.New("engine: a fuel cap needs fuel metering, and this module was loaded unmetered")
)

// backend is an engine other than wazero. The wazero code stays inline in
// Module's methods; they hand over to a backend when Module.alt is set.
type backend interface {
	run(ctx context.Context, spec RunSpec) (Outcome, error)
	capture(ctx context.Context, spec RunSpec, snap *resumable) (*Image, error)
	resume(ctx context.Context, img *Image, spec RunSpec, snap *resumable) (Outcome, error)
	exportsFunction(name string) bool
	close() error
}

// loadWasmtime compiles wasm for wasmtime; set by wasmtime.go when the
// build has the airlock_wasmtime tag.
var loadWasmtime func(ctx context.Context, wasm []byte, opts Options) (backend, error)

// Engines lists the engines compiled into this binary, the default first.
func Engines() []string {
	if loadWasmtime != nil {
		return []string{EngineWazero, EngineWasmtime}
	}
	return []string{EngineWazero}
}

// engineName resolves Options.Engine to a compiled-in engine.
func engineName(name string) (string, error) {
	if name == "" {
		name = EngineWazero
	}
	if slices.Contains(Engines(), name) {
		return name, nil
	}
	if name == EngineWasmtime {
		return "", fmt.Errorf("%w: wasmtime is not compiled in; build with -tags airlock_wasmtime (cgo, Linux or macOS)", ErrEngineUnavailable)
	}
	return "", fmt.Errorf("%w: unknown engine %q (have %v)", ErrEngineUnavailable, name, Engines())
}

// loadAlt loads wasm on a non-default engine and records it as loaded;
// the caller holds loadedMu.
func loadAlt(ctx context.Context, key string, wasm []byte, opts Options) (*Module, error) {
	b, err := loadWasmtime(ctx, wasm, opts)
	if err != nil {
		return nil, err
	}
	m := &Module{key: key, alt: b, refs: 1}
	loaded[key] = m
	return m, nil
}

// exportsFunction tells whether the module exports a function by name.
func (m *Module) exportsFunction(name string) bool {
	if m.alt != nil {
		return m.alt.exportsFunction(name)
	}
	_, ok := m.compiled.ExportedFunctions()[name]
	return ok
}
