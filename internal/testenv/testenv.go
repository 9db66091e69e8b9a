// Package testenv lets the test suites run on the engine and build that
// the environment names ($AIRLOCK_ENGINE, $AIRLOCK_PYTHON,
// $AIRLOCK_CACHE_DIR), as the airlock command does, while the library
// itself reads no environment: CI runs one suite on several engines and
// builds without a flag for each test.
package testenv

import (
	"os"
	"path/filepath"
)

// The variables the airlock command reads its defaults from.
const (
	Engine   = "AIRLOCK_ENGINE"
	Python   = "AIRLOCK_PYTHON"
	CacheDir = "AIRLOCK_CACHE_DIR"
)

// Config is what the environment picks; "" leaves the library's default.
type Config struct{ Engine, Python, CacheDir string }

// Defaults, when set (only test files set it), gives airlock.New the
// engine, build and cache directory its options leave unset.
var Defaults func() Config

// FromEnv reads the variables; a relative cache directory is made absolute.
func FromEnv() Config {
	c := Config{Engine: os.Getenv(Engine), Python: os.Getenv(Python), CacheDir: os.Getenv(CacheDir)}
	if c.CacheDir != "" {
		if abs, err := filepath.Abs(c.CacheDir); err == nil {
			c.CacheDir = abs
		}
	}
	return c
}
