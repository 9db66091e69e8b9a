//go:build airlock_wasmtime && cgo && unix

package wasmtime

import _ "github.com/airlock-sandbox/airlock/internal/engine/wasmtime" // registers the engine
