package engine_test

import "github.com/airlock-sandbox/airlock/engine/internal/enginetest"

// The helpers the wasmtime back end's tests share (engine/internal/enginetest).
var (
	resumable     = enginetest.Resumable
	resumableOn   = enginetest.ResumableOn
	resumableWith = enginetest.ResumableWith
	captureLoop   = enginetest.CaptureLoop
	state         = enginetest.State
	stateArgs     = enginetest.StateArgs
	looping       = enginetest.Looping
	resumed       = enginetest.Resumed
	resumedThen   = enginetest.ResumedThen
	afterCode     = enginetest.AfterCode
	exitModule    = enginetest.ExitModule
	runExit       = enginetest.RunExit
)
