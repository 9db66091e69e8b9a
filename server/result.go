package server

import (
	"encoding/base64"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlock-sandbox/airlock"
)

// File is a file a run left under /home/user. Data (base64 in JSON) is
// sent by the HTTP API and left out by `airlock run --json`.
type File struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Data []byte `json:"data,omitempty"`
}

// ErrorInfo is why the sandbox ended or refused a run (Kind is an
// airlock.Kind), or why the server refused a request.
type ErrorInfo struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Result is the JSON shape of a run, shared by `airlock run --json` and
// POST /v1/run; field names are stable.
type Result struct {
	ExitCode   int        `json:"exit_code"`
	Stdout     string     `json:"stdout"`
	Stderr     string     `json:"stderr"`
	Error      *ErrorInfo `json:"error"`
	DurationMS float64    `json:"duration_ms"`
	Files      []File     `json:"files"`
	// FilesOmitted counts files the run made that Files lacks
	// (airlock.Result.FilesOmitted: paths past 4096 bytes).
	FilesOmitted int `json:"files_omitted,omitempty"`
	// Fuel is the fuel the run consumed, on the wasmtime engine only.
	Fuel int64 `json:"fuel,omitempty"`
	// Python is the build that ran the code.
	Python Python `json:"python"`
	// Value is the repr of the code's last expression's value, and
	// Displays its rich outputs (airlock.display), when the request
	// collected them (rich_output).
	Value             string        `json:"value,omitempty"`
	Displays          []DisplayJSON `json:"displays,omitempty"`
	DisplaysTruncated bool          `json:"displays_truncated,omitempty"`
	// Audit is what the run tried (airlock.Result.Audit), Suspicious why
	// it looks steered (none for an honest run).
	Audit        []AuditEvent `json:"audit,omitempty"`
	AuditDropped int          `json:"audit_dropped,omitempty"`
	Suspicious   []Suspicion  `json:"suspicious,omitempty"`
	// Network records each request the run made or had refused.
	Network []airlock.NetworkDecision `json:"network,omitempty"`
	// Installs records each package install the run asked for.
	Installs []airlock.PackageInstall `json:"installs,omitempty"`
}

// AuditEvent is airlock.AuditEvent in JSON.
type AuditEvent struct {
	AtMS   float64 `json:"at_ms"`
	Kind   string  `json:"kind"`
	Detail string  `json:"detail"`
	Count  int     `json:"count"`
	Guest  bool    `json:"guest,omitempty"`
}

// Suspicion is airlock.Suspicion in JSON.
type Suspicion struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// DisplayJSON is one rich output, as Jupyter writes one: data by MIME
// type, text forms (text/*, image/svg+xml, application/json) as text and
// binary ones (image/png, ...) as base64.
type DisplayJSON struct {
	// Value marks the value of the code's last expression.
	Value bool              `json:"value,omitempty"`
	Data  map[string]string `json:"data"`
}

// textMIME tells the forms that travel as text.
func textMIME(m string) bool {
	return strings.HasPrefix(m, "text/") || m == "image/svg+xml" || m == "application/json"
}

func displaysJSON(ds []airlock.Display) []DisplayJSON {
	out := make([]DisplayJSON, 0, len(ds))
	for _, d := range ds {
		j := DisplayJSON{Value: d.Value, Data: make(map[string]string, len(d.Items))}
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

// Python names a build in results: Build is "own", "npm" or "custom".
type Python struct {
	Build   string `json:"build"`
	Version string `json:"version,omitempty"`
	SHA256  string `json:"sha256"`
}

// PythonOf is the build sb runs.
func PythonOf(sb *airlock.Sandbox) Python {
	info := sb.Info()
	return Python{Build: info.Build, Version: info.Version, SHA256: info.SHA256}
}

// NewResult converts res, run on py; withData includes the files' contents.
func NewResult(res *airlock.Result, py Python, withData bool) Result {
	out := Result{
		Python:     py,
		ExitCode:   res.ExitCode,
		Stdout:     string(res.Stdout),
		Stderr:     string(res.Stderr),
		DurationMS: float64(res.Duration) / float64(time.Millisecond),
		Files:      []File{},
		Fuel:       res.Fuel,
		Network:    res.Network,
		Installs:   res.Installs,
	}
	if res.Error != nil {
		out.Error = &ErrorInfo{Kind: string(res.Error.Kind), Message: res.Error.Message}
	}
	out.Value, out.DisplaysTruncated, out.AuditDropped = res.Value, res.DisplaysTruncated, res.AuditDropped
	out.FilesOmitted = res.FilesOmitted
	for _, e := range res.Audit {
		out.Audit = append(out.Audit, AuditEvent{AtMS: float64(e.At) / float64(time.Millisecond), Kind: e.Kind, Detail: e.Detail, Count: e.Count, Guest: e.Guest})
	}
	for _, s := range res.Suspicious {
		out.Suspicious = append(out.Suspicious, Suspicion{Reason: s.Reason, Detail: s.Detail})
	}
	if len(res.Displays) > 0 {
		out.Displays = displaysJSON(res.Displays)
	}
	for _, f := range res.Files {
		jf := File{Path: f.Path, Size: f.Size}
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

// RunLimits are a request's limits; zero fields take the server's defaults
// and larger ones are clamped to its maxima.
type RunLimits struct {
	TimeoutMS   int64 `json:"timeout_ms,omitempty"`
	Memory      int64 `json:"memory,omitempty"`
	Output      int64 `json:"output,omitempty"`
	FSBytes     int64 `json:"fs_bytes,omitempty"`
	FSFiles     int   `json:"fs_files,omitempty"`
	HostCalls   int   `json:"host_calls,omitempty"`
	HostPayload int64 `json:"host_payload,omitempty"`
	// Fuel is a CPU budget; it needs a server on the wasmtime engine.
	Fuel int64 `json:"fuel,omitempty"`
}

// RunRequest is the body of POST /v1/run. Files and Stdin are base64 in
// JSON; file paths are absolute or relative to /home/user.
type RunRequest struct {
	Code          string            `json:"code"`
	Filename      string            `json:"filename,omitempty"`
	Files         InputFiles        `json:"files,omitempty"`
	Stdin         []byte            `json:"stdin,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Limits        RunLimits         `json:"limits,omitzero"`
	Deterministic bool              `json:"deterministic,omitempty"`
	Seed          uint64            `json:"seed,omitempty"`
	Tools         []string          `json:"tools,omitempty"`
	// RichOutput collects the last expression's value and the displays
	// (airlock.Request.RichOutput); on unless false.
	RichOutput *bool `json:"rich_output,omitempty"`
	// Network narrows the server's --allow-net rules for this run (each
	// rule as --allow-net takes it, within one of the server's); absent
	// takes the server's rules, [] an empty allow-list.
	Network []string `json:"network,omitempty"`
}

// richOutput is a request's rich_output: on unless sent as false.
func richOutput(b *bool) bool { return b == nil || *b }

// FromLimits is the RunLimits form of l.
func FromLimits(l airlock.Limits) RunLimits {
	return RunLimits{
		TimeoutMS: l.Timeout.Milliseconds(), Memory: l.Memory, Output: l.Output,
		FSBytes: l.FSBytes, FSFiles: l.FSFiles, HostCalls: l.HostCalls, HostPayload: l.HostPayload,
		Fuel: l.Fuel,
	}
}

// clamp turns r into airlock.Limits no larger than maxima, naming the
// fields it lowered that r set. A field left out (zero) takes its value
// in defaults, the Sandbox's, capped the same: a server's maximum holds
// for what a client does not send too (a 0 fuel is no cap, so it becomes
// the maximum). Negative values pass through for the Sandbox to refuse.
func (r RunLimits) clamp(defaults, maxima airlock.Limits) (airlock.Limits, []string) {
	var clamped []string
	files, calls := int64(r.FSFiles), int64(r.HostCalls)
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
	r.FSFiles, r.HostCalls = int(files), int(calls)
	// With no server maximum for it, a timeout in milliseconds can still be
	// too large for a time.Duration; past that it wraps negative.
	if maxMS := int64(math.MaxInt64 / time.Millisecond); r.TimeoutMS > maxMS {
		r.TimeoutMS = maxMS
		clamped = append(clamped, "timeout_ms")
	}
	l := airlock.Limits{
		Timeout: time.Duration(r.TimeoutMS) * time.Millisecond,
		Memory:  r.Memory, Output: r.Output, FSBytes: r.FSBytes, FSFiles: r.FSFiles,
		HostCalls: r.HostCalls, HostPayload: r.HostPayload, Fuel: r.Fuel,
	}
	return l, clamped
}
