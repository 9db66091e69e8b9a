// Package wasmtime adds the wasmtime engine (engine.EngineWasmtime, through
// cgo) to a program built with -tags airlock_wasmtime (cgo, Linux or
// macOS); import it for its effect:
//
//	import _ "github.com/airlock-sandbox/airlock/engine/wasmtime"
//
// Its files build only with the tag; without it the import adds nothing,
// and asking for the wasmtime engine reports engine.ErrEngineUnavailable.
// It is a package of its own so that a program without it never downloads
// wasmtime-go: go mod tidy considers every build tag of every package a
// program imports, and the engine package is imported by all.
package wasmtime
