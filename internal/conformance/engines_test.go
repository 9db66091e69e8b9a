package airlock_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// The suite is the conformance suite of the engines: the parent process
// runs it on $AIRLOCK_ENGINE's engine (wazero by default), and
// TestSuiteOnOtherEngines runs every test again, in a child process per
// other engine compiled in (wasmtime with -tags airlock_wasmtime), where
// TestSuiteWithoutSnapshots repeats it without snapshots as well.

func TestSuiteOnOtherEngines(t *testing.T) {
	if os.Getenv(airlock.EnvEngine) != "" {
		t.Skip("this process already runs the suite on the engine $AIRLOCK_ENGINE names")
	}
	if os.Getenv(envTestSnapshots) != "" {
		// The child per engine runs the suite in both modes itself.
		t.Skip("this process runs the suite in one snapshot mode; the other engines' runs cover both")
	}
	others := slices.DeleteFunc(airlock.AvailableEngines(), func(e string) bool { return e == sb.Engine() })
	if len(others) == 0 {
		t.Skip("no other engine compiled in (wasmtime needs -tags airlock_wasmtime)")
	}
	if testing.Short() {
		t.Skip("-short: the suite runs on the default engine only")
	}
	for _, eng := range others {
		t.Run(eng, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^Test", "-test.skip=^TestSuiteOnOtherEngines$", "-test.count=1")
			cmd.Env = append(os.Environ(), airlock.EnvEngine+"="+eng)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("suite on %s: %v\n%s", eng, err, out)
			}
		})
	}
}

func TestUnknownEngineIsRefused(t *testing.T) {
	_, err := airlock.New(context.Background(), airlock.WithEngine("v8"))
	if !errors.Is(err, airlock.ErrEngineUnavailable) {
		t.Fatalf("engine v8: err = %v, want ErrEngineUnavailable", err)
	}
	if !slices.Contains(airlock.AvailableEngines(), airlock.EngineWasmtime) {
		_, err := airlock.New(context.Background(), airlock.WithEngine(airlock.EngineWasmtime))
		if !errors.Is(err, airlock.ErrEngineUnavailable) {
			t.Fatalf("wasmtime in a build without it: err = %v, want ErrEngineUnavailable", err)
		}
	}
}

// fuelProgram does a fixed amount of work, the same on every run.
const fuelProgram = "print(sum(i * i for i in range(20000)))"

func TestFuel(t *testing.T) {
	if sb.Engine() != airlock.EngineWasmtime {
		// wazero does not meter: a budget it could not enforce is refused,
		// and nothing is reported as consumed.
		res, err := run(t, airlock.Request{Code: "pass", Limits: airlock.Limits{Fuel: 1 << 30}})
		if !errors.Is(err, airlock.ErrInvalidRequest) {
			t.Fatalf("fuel limit on %s: err = %v, want invalid_request", sb.Engine(), err)
		}
		if res = mustRunResult(t, airlock.Request{Code: "pass"}); res.Fuel != 0 || sb.FuelMetering() {
			t.Fatalf("fuel on %s = %d, FuelMetering %v, want 0 and false (not metered)", sb.Engine(), res.Fuel, sb.FuelMetering())
		}
		return
	}
	if _, err := run(t, airlock.Request{Code: "pass", Limits: airlock.Limits{Fuel: -1}}); !errors.Is(err, airlock.ErrInvalidRequest) {
		t.Fatalf("negative fuel: err = %v", err)
	}
	// The same work consumes the same fuel: promised for deterministic
	// runs, and for runs resumed from a snapshot (they share the image's
	// hash seed); a fresh interpreter otherwise randomises str hashing,
	// which changes its start-up work a little.
	modes := []bool{true}
	if sb.Snapshots() {
		modes = append(modes, false)
	}
	for _, det := range modes {
		req := airlock.Request{Code: fuelProgram, Deterministic: det}
		var fuel []int64
		for range 3 {
			fuel = append(fuel, mustRunResult(t, req).Fuel)
		}
		if fuel[0] <= 0 || fuel[1] != fuel[0] || fuel[2] != fuel[0] {
			t.Fatalf("deterministic=%v: fuel over repeated runs = %v, want one positive figure", det, fuel)
		}
		// The verdict follows: the figure suffices, half of it does not, and
		// a budget at the edge gets the same verdict every time. (Fuel is
		// checked at function entries and loop heads, so a run may finish
		// on a budget a few units short of its use.)
		for _, budget := range []int64{fuel[0], fuel[0] - 1, fuel[0] / 2} {
			req.Limits.Fuel = budget
			var verdicts []error
			for range 2 {
				res, err := run(t, req)
				if err != nil && res.Fuel != budget {
					t.Fatalf("deterministic=%v: exhausted run reports fuel %d, want the budget %d", det, res.Fuel, budget)
				}
				verdicts = append(verdicts, err)
			}
			if (verdicts[0] == nil) != (verdicts[1] == nil) {
				t.Fatalf("deterministic=%v, budget %d: verdicts differ: %v, %v", det, budget, verdicts[0], verdicts[1])
			}
			switch {
			case budget == fuel[0] && verdicts[0] != nil:
				t.Fatalf("deterministic=%v: the measured use %d is not enough: %v", det, budget, verdicts[0])
			case budget == fuel[0]/2 && !errors.Is(verdicts[0], airlock.ErrFuelExhausted):
				t.Fatalf("deterministic=%v: half the use: err = %v, want fuel_exhausted", det, verdicts[0])
			}
		}
	}
	// An endless loop ends on fuel; the timeout is far away.
	res, err := run(t, airlock.Request{Code: "while True: pass", Limits: airlock.Limits{Fuel: 50_000_000, Timeout: time.Minute}})
	if !errors.Is(err, airlock.ErrFuelExhausted) {
		t.Fatalf("endless loop: err = %v, want fuel_exhausted", err)
	}
	if res.Duration > 30*time.Second {
		t.Fatalf("endless loop: 50M fuel took %v", res.Duration)
	}
}

// TestFuelMeteringOff: a wasmtime sandbox made WithFuelMetering(false) runs
// the same code, reports no fuel, refuses a fuel limit and still stops at
// its deadline; the metered sandbox of the same module, loaded in the same
// process, keeps metering.
func TestFuelMeteringOff(t *testing.T) {
	if sb.Engine() != airlock.EngineWasmtime {
		t.Skip("only wasmtime meters fuel: this runs in the suite's wasmtime child (-tags airlock_wasmtime)")
	}
	ctx := context.Background()
	off := newSandbox(t, airlock.WithFuelMetering(false))
	res, err := off.Run(ctx, airlock.Request{Code: fuelProgram})
	if err != nil || string(res.Stdout) != "2666466670000\n" {
		t.Fatalf("unmetered run: err=%v stdout=%q stderr=%q", err, res.Stdout, res.Stderr)
	}
	if res.Fuel != 0 || off.FuelMetering() || !sb.FuelMetering() {
		t.Fatalf("unmetered run reports fuel %d (FuelMetering %v, the suite's sandbox %v), want 0, false, true", res.Fuel, off.FuelMetering(), sb.FuelMetering())
	}
	if _, err := off.Run(ctx, airlock.Request{Code: "pass", Limits: airlock.Limits{Fuel: 1 << 30}}); !errors.Is(err, airlock.ErrInvalidRequest) {
		t.Fatalf("fuel limit without metering: err = %v, want invalid_request", err)
	}
	start := time.Now()
	if _, err := off.Run(ctx, airlock.Request{Code: "while True: pass", Limits: airlock.Limits{Timeout: 2 * time.Second}}); !errors.Is(err, airlock.ErrTimeout) {
		t.Fatalf("endless loop without metering: err = %v, want timeout", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("endless loop with a 2 s deadline took %v", took)
	}
	if fuel := mustRunResult(t, airlock.Request{Code: fuelProgram}).Fuel; fuel <= 0 {
		t.Fatalf("the metered sandbox reports fuel %d after an unmetered one loaded the module", fuel)
	}
}

// mustRunResult runs req, which must exit 0, and returns its Result.
func mustRunResult(t *testing.T, req airlock.Request) *airlock.Result {
	t.Helper()
	res, err := run(t, req)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run failed: err=%v exit=%d\nstderr:\n%s", err, res.ExitCode, res.Stderr)
	}
	return res
}
