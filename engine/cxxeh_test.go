package engine_test

import (
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/enginetest"
)

// A module whose table only invoke_ reaches, as the exception lowering's
// code does, gets the lazy table on wazero (its exported table is no
// obstacle) and works from every fresh instance: invoke_ fills the slot
// before it calls it, and a bad slot is the guest's crash.
func TestCXXInvokeFillsTheLazyTable(t *testing.T) {
	m := enginetest.InvokeRuns(t, engine.EngineWazero, engine.Options{})
	if !engine.TableLazy(m) {
		t.Fatal("the wazero rewrite left the table of a module exporting it for invoke_ as it was")
	}
}

// In python.wasm resumed from an image, and from the image a run paused
// in (a session's next call), numpy.fft's throws reach numpy's catch.
func TestCXXInvokeAfterResume(t *testing.T) {
	m := resumable(t)
	if !engine.TableLazy(m) {
		t.Fatalf("the own build's table is not lazy on wazero: every instance start fills it (%s)", engine.RewriteRefusals(m))
	}
	enginetest.InvokeAfterResume(t, m)
}
