// Package wasmtime adds the wasmtime engine (airlock.EngineWasmtime) to a
// program built with -tags airlock_wasmtime (cgo, Linux or macOS); import
// it for its effect:
//
//	import _ "github.com/airlock-sandbox/airlock/wasmtime"
//
// It is a package of its own so that programs without it never download
// wasmtime-go: go mod tidy considers every build tag of every imported
// package. Without the tag the import adds nothing, and New reports
// airlock.ErrEngineUnavailable for the wasmtime engine.
package wasmtime
