package airlock

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/internal/egress"
	"github.com/airlock-sandbox/airlock/internal/runout"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/errno"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// preparedRun is one validated request made ready to run: its output,
// WASI configuration and engine spec. Sandbox.Run and Session.Run each
// prepare one, add what is theirs (a session its status device and pause
// point), open it, execute it their own way and read its Result back.
type preparedRun struct {
	start  time.Time
	req    *Request
	limits Limits
	fs     *memfs.FS
	before func(string) ([]byte, bool) // the files as they were, for Result.Files
	stdout *capWriter
	stderr *capWriter
	wcfg   wasi.Config
	spec   engine.RunSpec
	state  *wasi.State // made by open

	audit    *runAudit      // what the run tried (audit.go)
	displays *displaySink   // rich output, when the request asks for it (display.go)
	netDev   *egress.Device // the run's network, under a policy (network.go)
	pipDev   *installDevice // installs from the package index (packageindex.go)
}

// prepare makes a run of req in fs. pkgs are the packages the prelude
// puts on sys.path (mounted in fs).
func (sb *Sandbox) prepare(ctx context.Context, start time.Time, req *Request, limits Limits, fs *memfs.FS, before func(string) ([]byte, bool), pkgs *packageSet) (*preparedRun, *Error) {
	r := &preparedRun{start: start, req: req, limits: limits, fs: fs, before: before,
		stdout: &capWriter{Limit: limits.Output}, stderr: &capWriter{Limit: limits.Output},
		audit: newRunAudit(start, sb.cfg.canaries, sb.canaryFiles)}
	if req.OnOutput != nil {
		r.stdout.OnWrite = func(p []byte) { req.OnOutput("stdout", p) }
		r.stderr.OnWrite = func(p []byte) { req.OnOutput("stderr", p) }
	}
	env := sb.artifact.BaseEnv()
	r.wcfg = wasi.Config{Args: python.Args(), Stdout: r.stdout, Stderr: r.stderr, FS: fs}
	if req.Deterministic {
		r.wcfg.Clock = wasi.NewFakeClock()
		r.wcfg.Random = rand.NewChaCha8(runout.SeedBytes(req.Seed))
		env = append(env, "PYTHONHASHSEED="+strconv.FormatUint(req.Seed%4294967296, 10))
	}
	// Canaries (WithCanaries): their variables under the request's, their
	// files placed where missing (a session keeps them between calls).
	for _, c := range sb.cfg.canaries {
		if c.Env != "" {
			env = python.MergeEnv(env, map[string]string{c.Env: string(c.Value)})
		}
	}
	for p, data := range sb.canaryFiles {
		if _, e := fs.Lookup(fs.Root(), p); e != nil {
			if dir := path.Dir(p); dir != "/" {
				_, _ = fs.MkdirAll(dir)
			}
			_ = fs.WriteFile(p, data) // a quota too small for it only loses the canary
		}
	}
	if len(sb.canaryFiles) > 0 {
		r.before = func(p string) ([]byte, bool) {
			if data, ok := sb.canaryFiles[p]; ok {
				return data, true
			}
			return before(p)
		}
	}
	r.wcfg.Watch = r.audit
	r.wcfg.Env = python.MergeEnv(python.MergeEnv(env, req.Env), sb.packageEnv(pkgs))
	if req.Interactive {
		r.wcfg.Env = append(r.wcfg.Env, "AIRLOCK_INTERACTIVE=1") // read by prelude.py
	}
	var err *Error
	if r.wcfg.Devices, err = sb.hostDevices(req, limits, r.audit.tool); err != nil {
		return r, err
	}
	if r.wcfg.Devices == nil {
		r.wcfg.Devices = map[string]wasi.Device{}
	}
	r.wcfg.Devices[wasi.NullPath] = wasi.Null
	r.wcfg.HiddenDevices = map[string]wasi.Device{auditDevice: r.audit}
	if req.RichOutput {
		r.displays = newDisplaySink(limits.Output)
		r.wcfg.Env = append(r.wcfg.Env, "AIRLOCK_RICH=1") // read by prelude.py
		r.wcfg.Devices[displayDevice] = r.displays
	}
	if r.netDev, err = sb.networkDevice(ctx, req, &r.wcfg.Devices, &r.wcfg.Env); err != nil {
		return r, err
	}
	if r.pipDev = sb.newInstallDevice(fs, pkgs, r.audit.install); r.pipDev != nil {
		r.wcfg.Devices[pipDevice] = r.pipDev
	}
	r.spec = engine.RunSpec{MemoryLimit: uint64(limits.Memory), Fuel: uint64(limits.Fuel), Unpooled: sb.cfg.unpooled, MaxThreads: limits.Threads}
	return r, nil
}

// closeNetwork ends the run's network, once, and records its decisions.
func (r *preparedRun) closeNetwork(res *Result) {
	if r.netDev == nil {
		return
	}
	r.netDev.Close()
	if ds := r.netDev.Decisions(); ds != nil {
		res.Network = make([]NetworkDecision, len(ds))
		for i, d := range ds {
			res.Network[i] = NetworkDecision(d)
		}
	}
	r.audit.network(res.Network)
	r.netDev = nil
}

// devDir holds the run's devices (wasi.NullPath and the host's).
const devDir = "/dev"

// open makes the run's WASI state from its configuration as it now is,
// for a run that the engine starts at its image's entry point (entered)
// or through the interpreter's loop.
func (r *preparedRun) open(entered bool) *Error {
	// The devices' files count against the file quota like any other: a
	// quota too small for them is the request's to fix, said so, rather
	// than tools silently missing and a quota error blamed on the program.
	// (Other failures, such as a session's guest having put a directory
	// there, leave that device out, as wasi.State does.)
	// In path order, so that the device named is the same every time.
	// /dev is the host's: read-only to the guest, which can neither put a
	// file of its own where programs look for devices (FileIO("/dev/tty",
	// "a") made one) nor remove one.
	_ = r.fs.SetDirReadOnly(devDir, false) // a session's, sealed by its last call
	for _, p := range slices.Sorted(maps.Keys(r.wcfg.Devices)) {
		if e := r.fs.WriteFile(p, nil); errors.Is(e, errno.ENOSPC) {
			return newError(KindInvalidRequest, e, "a file quota of %d leaves no room for %s, which this run needs: %v", r.limits.FSFiles, p, e)
		}
	}
	_ = r.fs.SetDirReadOnly(devDir, true)
	r.wcfg.Stdin = python.Stdin(r.req.Filename, r.wcfg.Env, []byte(r.req.Code), bytes.NewReader(r.req.Stdin), entered)
	r.state = wasi.NewState(r.wcfg)
	r.spec.WASI = r.state
	return nil
}

// execute runs the opened run with run, under the request's time limit.
func (r *preparedRun) execute(ctx context.Context, run func(context.Context) (engine.Outcome, error)) (engine.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, r.limits.Timeout)
	defer cancel()
	out, err := run(ctx)
	r.state.Close()
	return out, err
}

// result is what the run did, and classify's verdict on how it ended.
func (r *preparedRun) result(out engine.Outcome, runErr error) (*Result, *Error) {
	res := &Result{
		Stdout: r.stdout.Buf.Bytes(), Stderr: r.stderr.Buf.Bytes(),
		StdoutTruncated: r.stdout.Truncated, StderrTruncated: r.stderr.Truncated,
		ExitCode: int(out.ExitCode), PeakMemory: int64(out.PeakMemory), Fuel: int64(out.Fuel),
		Phases: Phases(out.Phases),
	}
	res.Files, res.FilesOmitted = changedFiles(r.fs, python.Home, r.before)
	r.closeNetwork(res)
	if r.pipDev != nil {
		res.Installs = r.pipDev.records
	}
	if r.displays != nil {
		r.displays.results(res)
	}
	return res, classify(runErr, out, r.fs, r.limits)
}

// done stamps res with e and the run's duration, as Run returns them.
func (r *preparedRun) done(res *Result, e *Error) (*Result, error) {
	r.closeNetwork(res) // a run refused before it ran
	res.Error, res.Duration = e, time.Since(r.start)
	r.audit.finish(res)
	if e != nil {
		return res, e
	}
	return res, nil
}
