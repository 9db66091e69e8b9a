//go:build airlock_wasmtime

package chartsuites

// Registers the engine: with $AIRLOCK_ENGINE=wasmtime,
// TestChartSuitesInSandbox runs on it.
import _ "github.com/airlock-sandbox/airlock/engine/wasmtime"
