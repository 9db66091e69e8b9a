// Package wasmtime is the wasmtime engine (engine.EngineWasmtime), through
// cgo. Its files build only with -tags airlock_wasmtime; linking the
// package in (package airlock/wasmtime does) registers the engine. It is
// a package of its own so that a program without it does not depend on
// wasmtime-go: go mod tidy looks at every build tag of every package a
// program imports, and the engine package is imported by all.
package wasmtime
