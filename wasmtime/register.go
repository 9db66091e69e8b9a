//go:build airlock_wasmtime && cgo && unix

package wasmtime

import _ "github.com/airlock-sandbox/airlock/engine/wasmtime" // registers the engine
