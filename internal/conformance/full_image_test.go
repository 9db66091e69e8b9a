package airlock_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

// probeFull imports numpy, so that it runs from the full image where
// there is one, and tells whether pandas was imported before its code ran.
const probeFull = "import sys\npandas_before = 'pandas' in sys.modules\nimport numpy\nprint(pandas_before)"

var leanOnlyLazy lazySandbox

// leanOnly is the own build with snapshots and no data image.
func leanOnly(t *testing.T) *airlock.Sandbox {
	t.Helper()
	return leanOnlyLazy.get(t, airlock.WithSnapshots(true), airlock.WithPython(python.SelectOwn), airlock.WithFullImage(false))
}

// Code importing numpy or pandas resumes from the image that has them;
// other code, code under a memory limit too small for that image, and a
// Sandbox without it resume from the lean image, where the same program
// imports them itself and prints the same.
func TestFullImageChosenByImports(t *testing.T) {
	own := ownSandbox(t)
	if !own.Snapshots() {
		t.Skip("no snapshots here: no images to choose from")
	}
	if got := mustRunOn(t, own, probeFull); got != "True\n" {
		t.Fatalf("code importing numpy: pandas imported before it ran = %q, want True (the full image)", got)
	}
	if got := mustRunOn(t, own, "import sys\nprint('pandas' in sys.modules)"); got != "False\n" {
		t.Fatalf("code importing neither: pandas imported = %q, want False (the lean image)", got)
	}
	res, err := own.Run(context.Background(), airlock.Request{Code: probeFull, Limits: airlock.Limits{Memory: 48 << 20}})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "False\n" {
		t.Fatalf("under a 48 MiB memory limit: err=%v exit=%d stdout=%q stderr=%s, want False (the lean image)", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := mustRunOn(t, leanOnly(t), probeFull); got != "False\n" {
		t.Fatalf("WithFullImage(false): pandas imported = %q, want False", got)
	}
	pandasRun(t, leanOnly(t))
}

// Runs from the full image do not share numpy's or random's numbers: each
// is reseeded from its own entropy, as on the lean image.
func TestFullImageRunsDrawTheirOwnNumbers(t *testing.T) {
	own := ownSandbox(t)
	if !own.Snapshots() {
		t.Skip("no snapshots here")
	}
	code := "import numpy as np, random\nprint(np.random.randint(1 << 30), np.random.default_rng().integers(1 << 30), random.getrandbits(30))"
	a, b := mustRunOn(t, own, code), mustRunOn(t, own, code)
	if a == b {
		t.Fatalf("two runs from the full image drew the same numbers: %q", a)
	}
}

// A session whose first call imports pandas starts from the full image;
// saved and loaded (in a Sandbox of its own), it goes on from there, and
// a session saved before its first call loads and picks its image then.
func TestFullImageSessionSaveLoad(t *testing.T) {
	own := ownSandbox(t)
	if !own.Snapshots() {
		t.Skip("sessions need snapshots")
	}
	ctx := context.Background()
	s := ownSession(t)
	if got := mustCall(t, s, "import sys\nbefore = 'pandas' in sys.modules\nimport pandas as pd\ndf = pd.DataFrame({'v': [1, 2, 3]})\nprint(before)"); got != "True\n" {
		t.Fatalf("first call importing pandas: pandas imported before = %q, want True", got)
	}
	var saved bytes.Buffer
	if err := s.Save(&saved); err != nil {
		t.Fatal(err)
	}
	other := newSandbox(t, airlock.WithPython(python.SelectOwn), airlock.WithSnapshots(true))
	loaded, err := other.LoadSession(ctx, bytes.NewReader(saved.Bytes()), airlock.LoadOptions{})
	if err != nil {
		t.Fatalf("load a session made from the full image: %v", err)
	}
	defer loaded.Close(ctx)
	if got := mustCall(t, loaded, "df['v'] *= 2\nprint(int(df['v'].sum()))"); got != "12\n" {
		t.Fatalf("loaded session: %q", got)
	}
	if _, err := leanOnly(t).LoadSession(ctx, bytes.NewReader(saved.Bytes()), airlock.LoadOptions{}); err == nil {
		t.Fatal("a Sandbox without the full image loaded a session made from it")
	}

	empty, err := own.NewSession(ctx, airlock.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close(ctx)
	saved.Reset()
	if err := empty.Save(&saved); err != nil {
		t.Fatal(err)
	}
	again, err := other.LoadSession(ctx, bytes.NewReader(saved.Bytes()), airlock.LoadOptions{})
	if err != nil {
		t.Fatalf("load a session saved before its first call: %v", err)
	}
	defer again.Close(ctx)
	if got := mustCall(t, again, probeFull); got != "True\n" {
		t.Fatalf("first call of a loaded, unstarted session importing numpy: %q, want True", got)
	}
}
