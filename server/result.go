package server

import (
	"encoding/base64"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// textMIME tells the forms that travel as text.
func textMIME(m string) bool {
	return strings.HasPrefix(m, "text/") || m == "image/svg+xml" || m == "application/json"
}

func displaysJSON(ds []airlock.Display) []wire.Display {
	out := make([]wire.Display, 0, len(ds))
	for _, d := range ds {
		j := wire.Display{Value: d.Value, Data: make(map[string]string, len(d.Items))}
		for _, it := range d.Items {
			if textMIME(it.MIME) && utf8.Valid(it.Data) {
				j.Data[it.MIME] = string(it.Data)
			} else {
				j.Data[it.MIME] = base64.StdEncoding.EncodeToString(it.Data)
			}
		}
		out = append(out, j)
	}
	return out
}

// PythonOf is the build sb runs.
func PythonOf(sb *airlock.Sandbox) wire.Python {
	info := sb.Info()
	return wire.Python{Build: info.Build, Version: info.Version, SHA256: info.SHA256}
}

// NewResult converts res, run on py; withData includes the files' contents.
func NewResult(res *airlock.Result, py wire.Python, withData bool) wire.Result {
	out := wire.Result{
		Python:     py,
		ExitCode:   res.ExitCode,
		Stdout:     string(res.Stdout),
		Stderr:     string(res.Stderr),
		DurationMS: wire.Milliseconds(res.Duration),
		Files:      []wire.File{},
		Fuel:       res.Fuel,
	}
	if res.Error != nil {
		out.Error = &wire.ErrorInfo{Kind: string(res.Error.Kind), Message: res.Error.Message}
	}
	out.Value, out.DisplaysTruncated, out.AuditDropped = res.Value, res.DisplaysTruncated, res.AuditDropped
	out.FilesOmitted = res.FilesOmitted
	for _, e := range res.Audit {
		out.Audit = append(out.Audit, wire.AuditEvent{AtMS: wire.Milliseconds(e.At), Kind: e.Kind, Detail: e.Detail, Count: e.Count, Guest: e.Guest})
	}
	for _, s := range res.Suspicious {
		out.Suspicious = append(out.Suspicious, wire.Suspicion{Reason: s.Reason, Detail: s.Detail})
	}
	if len(res.Displays) > 0 {
		out.Displays = displaysJSON(res.Displays)
	}
	for _, d := range res.Network {
		out.Network = append(out.Network, wire.NetworkDecision{
			Allowed: d.Allowed, Method: d.Method, URL: d.URL, Rule: d.Rule, Reason: d.Reason, Address: d.Address,
			Status: d.Status, RequestBytes: d.RequestBytes, ResponseBytes: d.ResponseBytes, DurationMS: wire.Milliseconds(d.Duration),
		})
	}
	for _, in := range res.Installs {
		w := wire.PackageInstall{Requirements: in.Requirements, Allowed: in.Allowed, Reason: in.Reason, DurationMS: wire.Milliseconds(in.Duration)}
		for _, p := range in.Packages {
			w.Packages = append(w.Packages, wire.InstalledPackage{Name: p.Name, Version: p.Version, Filename: p.Filename, SHA256: p.SHA256, Cached: p.Cached})
		}
		out.Installs = append(out.Installs, w)
	}
	for _, f := range res.Files {
		jf := wire.File{Path: f.Path, Size: f.Size}
		if withData {
			jf.Data = f.Data
		}
		out.Files = append(out.Files, jf)
	}
	return out
}

// Outcome names how a run ended, as /metrics and the access log count
// it: "ok" for exit status 0, "exit_nonzero" for a guest that exited
// otherwise (an uncaught exception exits 1), else the sandbox's error
// kind (timeout, memory_limit, ...).
func Outcome(res *airlock.Result) string {
	switch {
	case res.Error != nil:
		return string(res.Error.Kind)
	case res.ExitCode != 0:
		return "exit_nonzero"
	}
	return "ok"
}

// richOutput is a request's rich_output: on unless sent as false.
func richOutput(b *bool) bool { return b == nil || *b }

// FromLimits is the wire form of l.
func FromLimits(l airlock.Limits) wire.RunLimits {
	return wire.RunLimits{
		TimeoutMS: l.Timeout.Milliseconds(), Memory: l.Memory, Output: l.Output,
		FSBytes: l.FSBytes, FSFiles: l.FSFiles, HostCalls: l.HostCalls, HostPayload: l.HostPayload,
		Fuel: l.Fuel, Threads: l.Threads,
	}
}

// clampLimits turns r into airlock.Limits no larger than maxima, naming the
// fields it lowered that r set. A field left out (zero) takes its value
// in defaults, the Sandbox's, capped the same: a server's maximum holds
// for what a client does not send too (a 0 fuel is no cap, so it becomes
// the maximum). Negative values pass through for the Sandbox to refuse.
func clampLimits(r wire.RunLimits, defaults, maxima airlock.Limits) (airlock.Limits, []string) {
	var clamped []string
	files, calls, threads := int64(r.FSFiles), int64(r.HostCalls), int64(r.Threads)
	fields := []struct {
		name     string
		v        *int64
		def, max int64
	}{
		{"timeout_ms", &r.TimeoutMS, defaults.Timeout.Milliseconds(), maxima.Timeout.Milliseconds()},
		{"memory", &r.Memory, defaults.Memory, maxima.Memory},
		{"output", &r.Output, defaults.Output, maxima.Output},
		{"fs_bytes", &r.FSBytes, defaults.FSBytes, maxima.FSBytes},
		{"fs_files", &files, int64(defaults.FSFiles), int64(maxima.FSFiles)},
		{"host_calls", &calls, int64(defaults.HostCalls), int64(maxima.HostCalls)},
		{"host_payload", &r.HostPayload, defaults.HostPayload, maxima.HostPayload},
		{"fuel", &r.Fuel, defaults.Fuel, maxima.Fuel},
		{"threads", &threads, int64(defaults.Threads), int64(maxima.Threads)},
	}
	for _, f := range fields {
		sent := *f.v != 0
		if !sent {
			*f.v = f.def
		}
		if f.max > 0 && (*f.v > f.max || *f.v == 0) {
			*f.v = f.max
			if sent {
				clamped = append(clamped, f.name)
			}
		}
	}
	r.FSFiles, r.HostCalls, r.Threads = int(files), int(calls), int(threads)
	// With no server maximum for it, a timeout in milliseconds can still be
	// too large for a time.Duration; past that it wraps negative.
	if maxMS := int64(math.MaxInt64 / time.Millisecond); r.TimeoutMS > maxMS {
		r.TimeoutMS = maxMS
		clamped = append(clamped, "timeout_ms")
	}
	l := airlock.Limits{
		Timeout: time.Duration(r.TimeoutMS) * time.Millisecond,
		Memory:  r.Memory, Output: r.Output, FSBytes: r.FSBytes, FSFiles: r.FSFiles,
		HostCalls: r.HostCalls, HostPayload: r.HostPayload, Fuel: r.Fuel, Threads: r.Threads,
	}
	return l, clamped
}
