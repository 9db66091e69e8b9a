//go:build airlock_wasmtime

package bench

// With -tags airlock_wasmtime the suite can run on wasmtime too, as the
// airlock command can (cmd/airlock/engine_wasmtime.go).
import _ "github.com/airlock-sandbox/airlock/engine/wasmtime"
