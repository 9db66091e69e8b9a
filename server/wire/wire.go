// Package wire is the JSON of Airlock's HTTP API, both ways: the requests
// a client sends ([RunRequest], [SessionRequest], [SessionRunRequest]) and
// the answers a server writes ([Result], [SessionResult], [SessionList],
// [ErrorBody]). `airlock run --json` prints the same [Result].
//
// The package holds types and their JSON only, so a client imports it
// without the sandbox, the HTTP handler, the session store or the MCP
// server. Field names are a stable contract; golden files under testdata
// pin them.
//
// Durations are milliseconds everywhere, as floats (duration_ms, at_ms)
// or, for a limit a client sets, whole milliseconds (timeout_ms).
package wire

import "time"

// Result is a run's outcome: POST /v1/run's answer and what
// `airlock run --json` prints.
type Result struct {
	ExitCode   int        `json:"exit_code"`
	Stdout     string     `json:"stdout"`
	Stderr     string     `json:"stderr"`
	Error      *ErrorInfo `json:"error"`
	DurationMS float64    `json:"duration_ms"`
	// Files are the files the run left under /home/user; never null in
	// a result, which tells a result from an error body.
	Files []File `json:"files"`
	// FilesOmitted counts files the run made that Files lacks (paths
	// past 4096 bytes).
	FilesOmitted int `json:"files_omitted,omitempty"`
	// Fuel is the fuel the run consumed, on the wasmtime engine only.
	Fuel int64 `json:"fuel,omitempty"`
	// Python is the build that ran the code.
	Python Python `json:"python"`
	// Value is the repr of the code's last expression's value, and
	// Displays its rich outputs, when the request collected them
	// (rich_output).
	Value             string    `json:"value,omitempty"`
	Displays          []Display `json:"displays,omitempty"`
	DisplaysTruncated bool      `json:"displays_truncated,omitempty"`
	// Audit is what the run tried, Suspicious why it looks steered (none
	// for an honest run).
	Audit        []AuditEvent `json:"audit,omitempty"`
	AuditDropped int          `json:"audit_dropped,omitempty"`
	Suspicious   []Suspicion  `json:"suspicious,omitempty"`
	// Network records each request the run made or had refused.
	Network []NetworkDecision `json:"network,omitempty"`
	// Installs records each package install the run asked for.
	Installs []PackageInstall `json:"installs,omitempty"`
}

// File is a file a run left under /home/user. Data (base64 in JSON) is
// sent by the HTTP API and left out by `airlock run --json`.
type File struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Data []byte `json:"data,omitempty"`
}

// ErrorInfo is why the sandbox ended or refused a run (Kind is one of the
// sandbox's error kinds: timeout, memory_limit, ...), or why the server
// refused a request.
type ErrorInfo struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// ErrorBody is the body of a refused request.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// Python names a build: Build is "own", "npm" or "custom".
type Python struct {
	Build   string `json:"build"`
	Version string `json:"version,omitempty"`
	SHA256  string `json:"sha256"`
}

// Display is one rich output, as Jupyter writes one: data by MIME type,
// text forms (text/*, image/svg+xml, application/json) as text and binary
// ones (image/png, ...) as base64.
type Display struct {
	// Value marks the value of the code's last expression.
	Value bool              `json:"value,omitempty"`
	Data  map[string]string `json:"data"`
}

// AuditEvent is one thing a run tried that the sandbox watches for.
type AuditEvent struct {
	AtMS   float64 `json:"at_ms"`
	Kind   string  `json:"kind"`
	Detail string  `json:"detail"`
	Count  int     `json:"count"`
	Guest  bool    `json:"guest,omitempty"`
}

// Suspicion is one reason a run looks steered.
type Suspicion struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// NetworkDecision records one request a run made or a connection it had
// refused.
type NetworkDecision struct {
	Allowed bool `json:"allowed"`
	// Method and URL are the request's (URL without its query, which may
	// carry secrets); a refused connection has no method.
	Method string `json:"method,omitempty"`
	URL    string `json:"url"`
	// Rule is the allow-list rule that allowed it.
	Rule string `json:"rule,omitempty"`
	// Reason is a refusal's message, or the error that ended an allowed
	// request.
	Reason string `json:"reason,omitempty"`
	// Address is the address dialled, ip:port.
	Address string `json:"address,omitempty"`
	Status  int    `json:"status,omitempty"`
	// RequestBytes and ResponseBytes are body bytes.
	RequestBytes  int64   `json:"request_bytes"`
	ResponseBytes int64   `json:"response_bytes"`
	DurationMS    float64 `json:"duration_ms"`
}

// PackageInstall records one install request of a run.
type PackageInstall struct {
	Requirements []string `json:"requirements"`
	Allowed      bool     `json:"allowed"`
	// Reason is why it was refused.
	Reason string `json:"reason,omitempty"`
	// Packages are the wheels it mounted.
	Packages   []InstalledPackage `json:"packages,omitempty"`
	DurationMS float64            `json:"duration_ms"`
}

// InstalledPackage is one wheel an install mounted.
type InstalledPackage struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Filename string `json:"filename"`
	SHA256   string `json:"sha256"`
	// Cached tells it came from the host's cache, not the index.
	Cached bool `json:"cached"`
}

// Milliseconds is d in the API's unit for durations.
func Milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Duration is the time.Duration of ms milliseconds.
func Duration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
