package wire

import "time"

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
	// RichOutput collects the last expression's value and the displays;
	// on unless false.
	RichOutput *bool `json:"rich_output,omitempty"`
	// Network narrows the server's network allow-list for this run (each
	// rule as the server's --allow-net takes it, within one of the
	// server's); absent takes the server's rules, [] an empty allow-list.
	Network []string `json:"network,omitzero"`
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
	// Threads caps the threads a run may have besides its main one.
	Threads int `json:"threads,omitempty"`
}

// SessionRequest is the body of POST /v1/sessions: what every call of the
// session starts from. Limits are each call's defaults (fs_bytes and
// fs_files bound the session's files as a whole), clamped to the server's
// maxima.
type SessionRequest struct {
	Files  InputFiles        `json:"files,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	Limits RunLimits         `json:"limits,omitzero"`
	Tools  []string          `json:"tools,omitempty"`
}

// SessionRunRequest is the body of POST /v1/sessions/{id}/run: a RunRequest
// without what a session refuses (deterministic, seed: its clock and hash
// seed were fixed when it started). Files are added to the session's.
type SessionRunRequest struct {
	Code     string            `json:"code"`
	Filename string            `json:"filename,omitempty"`
	Files    InputFiles        `json:"files,omitempty"`
	Stdin    []byte            `json:"stdin,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Limits   RunLimits         `json:"limits,omitzero"`
	Tools    []string          `json:"tools,omitempty"`
	// RichOutput is as for RunRequest: on unless false.
	RichOutput *bool `json:"rich_output,omitempty"`
	// Network narrows the server's allow-list for this call, as for
	// RunRequest; omitted, the call has the server's own policy.
	Network []string `json:"network,omitzero"`
}

// SessionInfo answers POST /v1/sessions and POST /v1/sessions/{id}/fork.
type SessionInfo struct {
	ID string `json:"id"`
}

// SessionResult is a session call's result: a Result and whether the call
// was rolled back (it hit a limit, crashed or left the interpreter, and
// the session keeps its state from before it).
type SessionResult struct {
	Result
	RolledBack bool `json:"rolled_back"`
}

// SessionStatus is one session in GET /v1/sessions.
type SessionStatus struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	// LastCall is when the last call ended; absent before the first.
	LastCall *time.Time `json:"last_call,omitempty"`
	Calls    int        `json:"calls"`
	Running  bool       `json:"running"`
}

// Status answers GET /v1/status: the runs a server answered since it
// started, those running and waiting now, its live sessions, and its build.
type Status struct {
	Runs     int64  `json:"runs"`
	InFlight int64  `json:"in_flight"`
	Queued   int64  `json:"queued"`
	Sessions int    `json:"sessions"`
	Python   Python `json:"python"`
}

// SessionList answers GET /v1/sessions, oldest first.
type SessionList struct {
	Sessions []SessionStatus `json:"sessions"`
}
