package main

import (
	"errors"
	"flag"
	"testing"

	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/python"
)

// The suite runs on the engine and build $AIRLOCK_ENGINE and
// $AIRLOCK_PYTHON name, as the airlock command would (internal/testenv).
func init() { testenv.Defaults = testenv.FromEnv }

// $AIRLOCK_PYTHON picks the build the command loads, when --python does
// not (the library reads no environment: the command maps it).
func TestEnvChoosesBuild(t *testing.T) {
	flags := func() commonFlags {
		var c commonFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c.register(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Setenv(python.EnvPython, python.SelectNPM)
	if _, err := python.Load(flags().python, t.TempDir()); !errors.Is(err, python.ErrNotFetched) {
		t.Fatalf("AIRLOCK_PYTHON=npm: %v, want ErrNotFetched", err)
	}
	t.Setenv(python.EnvPython, python.SelectOwn)
	if a, err := python.Load(flags().python, ""); err != nil || a.Build != "own" {
		t.Fatalf("AIRLOCK_PYTHON=own: %v, %v", a, err)
	}
	// A flag given wins over the environment.
	var c commonFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.register(fs)
	if err := fs.Parse([]string{"--python", python.SelectNPM}); err != nil || c.python != python.SelectNPM {
		t.Fatalf("--python npm with AIRLOCK_PYTHON=own: %q, %v", c.python, err)
	}
}
