package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
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

// Engines lists the engines compiled into this binary, the default first.
func Engines() []string {
	if backend.Wasmtime != nil {
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
		return "", fmt.Errorf("%w: wasmtime is not compiled in; build with -tags airlock_wasmtime (cgo, Linux or macOS) and import github.com/airlock-sandbox/airlock/engine/wasmtime", ErrEngineUnavailable)
	}
	return "", fmt.Errorf("%w: unknown engine %q (have %v)", ErrEngineUnavailable, name, Engines())
}
