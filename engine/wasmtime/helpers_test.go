//go:build airlock_wasmtime && cgo && unix

package wasmtime_test

import (
	"github.com/airlock-sandbox/airlock/engine/internal/enginetest"

	_ "github.com/airlock-sandbox/airlock/engine/wasmtime" // the engine under test
)

// The engine's test helpers (engine/internal/enginetest).
var (
	resumableOn   = enginetest.ResumableOn
	resumableWith = enginetest.ResumableWith
	captureLoop   = enginetest.CaptureLoop
	resumed       = enginetest.Resumed
	resumedThen   = enginetest.ResumedThen
	afterCode     = enginetest.AfterCode
	exitModule    = enginetest.ExitModule
	runExit       = enginetest.RunExit
)
