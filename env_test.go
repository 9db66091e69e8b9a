package airlock

import "github.com/airlock-sandbox/airlock/internal/testenv"

// The examples and internal tests run on the build $AIRLOCK_PYTHON names,
// as the airlock command would (internal/testenv), and on the default
// engine whatever $AIRLOCK_ENGINE says: this test binary cannot link the
// wasmtime engine, or every program importing airlock would download it in
// go mod tidy. The conformance suite (internal/conformance) runs on both.
func init() {
	testenv.Defaults = func() testenv.Config {
		c := testenv.FromEnv()
		c.Engine = ""
		return c
	}
}
