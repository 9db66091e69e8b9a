package bench

import "github.com/airlock-sandbox/airlock/internal/testenv"

// The suite runs on the engine and build $AIRLOCK_ENGINE and
// $AIRLOCK_PYTHON name, as the airlock command would (internal/testenv).
func init() { testenv.Defaults = testenv.FromEnv }
