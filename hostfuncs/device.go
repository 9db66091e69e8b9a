package hostfuncs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock/internal/frame"
)

// Error kinds a response frame carries; the guest module maps each to an
// exception class (airlock.HostError and its subclasses).
const (
	KindError            = "error"             // the Go function returned an error
	KindPanic            = "panic"             // the Go function panicked
	KindUnknownTool      = "unknown_tool"      // no such tool in this run
	KindInvalidRequest   = "invalid_request"   // a malformed frame or request
	KindInvalidArguments = "invalid_arguments" // arguments that do not fit In
	KindPayloadTooLarge  = "payload_too_large" // a request or result over the cap
	KindTooManyCalls     = "too_many_calls"    // past RunConfig.MaxCalls
	KindDeadline         = "deadline"          // the run's context is done
)

// RunConfig sets up one run's Device.
type RunConfig struct {
	// Allow names the tools this run may see and call; nil allows all.
	Allow []string
	// Values are handed to tools through CallInfo.
	Values map[string]any
	// MaxCalls caps the run's calls (0: DefaultMaxCalls).
	MaxCalls int
	// MaxPayload caps a request's and a result's JSON, in bytes
	// (0: DefaultMaxPayload; at most MaxPayloadLimit).
	MaxPayload int
	// RunID identifies the run to tools; "" draws a random one.
	RunID string
	// OnCall, if set, sees every call the guest names a tool in, once it
	// is answered: for the run's audit trail.
	OnCall func(CallRecord)
}

// CallRecord is one host call as OnCall sees it.
type CallRecord struct {
	Func     string        // as the guest named it (clipped to 200 bytes)
	Kind     string        // "" when the tool answered, else the error kind the guest got
	Duration time.Duration // from the request to the answer
	// Request is the call's JSON (name, args, kwargs); it is valid only
	// during OnCall.
	Request []byte
}

// Device is one run's end of the protocol; it implements wasi.Device.
//
// The guest writes a request frame: 8 hex digits giving the payload's
// length, then a JSON payload, either {"name": ..., "args": [...],
// "kwargs": {...}} or {"op": "list"}. The write that completes the frame
// runs the call and returns with its response, or with a deadline error
// when the run's context ends first (the tool, on a goroutine of its own,
// is then left to finish). The following reads return the response
// frame, in the same format, whose payload is {"ok": result} or
// {"error": {"kind": ..., "message": ...}}. A read with no response
// pending returns end of file; a new request drops an unread response.
//
// A frame header that is not 8 hex digits gets an invalid_request response
// and the rest of that write is discarded; a payload over the cap gets
// payload_too_large at once and its bytes are discarded as they arrive.
// Nothing the guest writes makes the Device fail or trap.
type Device struct {
	reg        *Registry
	allowed    map[string]*Function
	list       []byte
	info       Info
	maxCalls   int
	maxPayload int

	conn  frame.Conn // the framing (internal/frame)
	resp  []byte     // the answer handle is building, unframed
	calls int

	onCall func(CallRecord)
}

// NewDevice prepares a run's device.
//
// # Errors
// ErrUnknownFunc when cfg.Allow names a tool the registry lacks; an error
// for negative or oversized limits.
func (r *Registry) NewDevice(cfg RunConfig) (*Device, error) {
	if r == nil {
		r = &Registry{tools: map[string]*Function{}}
		r.list = r.listJSON(nil)
	}
	switch {
	case cfg.MaxCalls < 0:
		return nil, errors.New("tools: MaxCalls must not be negative")
	case cfg.MaxPayload < 0 || cfg.MaxPayload > MaxPayloadLimit:
		return nil, fmt.Errorf("tools: MaxPayload must be in [0, %d]", MaxPayloadLimit)
	}
	d := &Device{reg: r, allowed: r.tools, list: r.list, maxCalls: cfg.MaxCalls, maxPayload: cfg.MaxPayload, onCall: cfg.OnCall}
	if d.maxCalls == 0 {
		d.maxCalls = DefaultMaxCalls
	}
	if d.maxPayload == 0 {
		d.maxPayload = DefaultMaxPayload
	}
	if cfg.Allow != nil {
		d.allowed = make(map[string]*Function, len(cfg.Allow))
		var names []string
		for _, n := range cfg.Allow {
			t, ok := r.tools[n]
			if !ok {
				return nil, fmt.Errorf("%w %q (registered: %s)", ErrUnknownFunc, n, strings.Join(r.names, ", "))
			}
			if d.allowed[n] == nil {
				names = append(names, n)
			}
			d.allowed[n] = t
		}
		d.list = r.listJSON(sortedCopy(names))
	}
	d.conn = frame.Conn{
		Max:      d.maxPayload,
		Handle:   d.serve,
		Fail:     func(msg string) []byte { return d.errorPayload(KindInvalidRequest, msg) },
		TooLarge: func(msg string) []byte { return d.errorPayload(KindPayloadTooLarge, msg) },
	}
	d.info = Info{RunID: cfg.RunID, Values: cfg.Values}
	if d.info.RunID == "" {
		var b [16]byte
		rand.Read(b[:])
		d.info.RunID = hex.EncodeToString(b[:])
	}
	return d, nil
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// RunID is the id tools see in CallInfo.
func (d *Device) RunID() string { return d.info.RunID }

// Calls is the number of calls the run has made.
func (d *Device) Calls() int { return d.calls }

// Write takes request bytes; see Device. It never fails.
func (d *Device) Write(ctx context.Context, p []byte) (int, error) { return d.conn.Write(ctx, p) }

// Read returns response bytes; 0 bytes (end of file) when none is pending.
func (d *Device) Read(ctx context.Context, p []byte) (int, error) { return d.conn.Read(ctx, p) }

type request struct {
	Op     string                     `json:"op"`
	Name   *string                    `json:"name"`
	Args   []json.RawMessage          `json:"args"`
	Kwargs map[string]json.RawMessage `json:"kwargs"`
}

// callError is an error with the kind the guest sees.
type callError struct{ kind, msg string }

func (e *callError) Error() string { return e.msg }

func (d *Device) handle(ctx context.Context, body []byte) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		d.fail(KindInvalidRequest, "malformed request: "+err.Error())
		return
	}
	switch {
	case req.Op == "list" && req.Name == nil:
		d.respond(d.list)
		return
	case req.Op != "" && req.Op != "call":
		d.fail(KindInvalidRequest, fmt.Sprintf("malformed request: unknown op %q", clip(req.Op)))
		return
	case req.Name == nil:
		d.fail(KindInvalidRequest, `malformed request: no "name"`)
		return
	}
	name := clip(*req.Name) // for messages; the guest chose its length
	if d.onCall != nil {
		start := time.Now()
		defer func() {
			d.onCall(CallRecord{Func: name, Kind: responseKind(d.resp), Duration: time.Since(start), Request: body})
		}()
	}
	if ctx.Err() != nil {
		d.fail(KindDeadline, fmt.Sprintf("%s(): the run's deadline has passed (%v)", name, context.Cause(ctx)))
		return
	}
	if d.calls >= d.maxCalls {
		d.fail(KindTooManyCalls, fmt.Sprintf("%s(): this run has made its %d allowed host calls", name, d.maxCalls))
		return
	}
	d.calls++
	t, ok := d.allowed[*req.Name]
	if !ok {
		d.fail(KindUnknownTool, fmt.Sprintf("no host tool %q in this run (available: %s)", name, d.available()))
		return
	}
	info := d.info
	info.Func, info.Tool, info.Call = t.name, t.name, d.calls
	d.respond(d.call(context.WithValue(ctx, infoKey{}, &info), t, req))
}

// call runs the tool on a goroutine of its own and returns the response
// payload, or a deadline error as soon as the run's context ends: a tool
// that ignores its context cannot keep the run, its Session or its
// Sandbox's Close waiting past the deadline. Such a tool is left to
// finish; its answer is dropped.
func (d *Device) call(ctx context.Context, t *Function, req request) []byte {
	done := make(chan []byte, 1)
	go func() {
		// runtime.Goexit in the tool skips the assignment but not this.
		payload := d.errorPayload(KindPanic, fmt.Sprintf("%s(): the host tool exited its goroutine without returning", t.name))
		defer func() { done <- payload }()
		payload = d.invoke(ctx, t, req)
	}()
	select {
	case payload := <-done:
		return payload
	case <-ctx.Done():
		return d.errorPayload(KindDeadline, fmt.Sprintf("%s(): the run's deadline passed during the call (%v)", t.name, context.Cause(ctx)))
	}
}

// invoke calls the tool and encodes its answer. A panic anywhere in the
// tool's code, its error's Error or its result's MarshalJSON included,
// becomes a panic error for the guest.
func (d *Device) invoke(ctx context.Context, t *Function, req request) (payload []byte) {
	defer func() {
		if v := recover(); v != nil {
			payload = d.errorPayload(KindPanic, fmt.Sprintf("%s(): the host tool panicked: %v", t.name, v))
		}
	}()
	out, err := t.invoke(ctx, req.Args, req.Kwargs)
	if err != nil {
		var ce *callError
		switch {
		case errors.As(err, &ce):
			return d.errorPayload(ce.kind, ce.msg)
		case ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
			return d.errorPayload(KindDeadline, fmt.Sprintf("%s(): the run's deadline passed during the call: %v", t.name, err))
		default:
			return d.errorPayload(KindError, err.Error())
		}
	}
	resp, err := json.Marshal(struct {
		OK any `json:"ok"`
	}{out})
	if err != nil {
		return d.errorPayload(KindError, fmt.Sprintf("%s(): the result cannot be sent as JSON: %v", t.name, err))
	}
	if len(resp) > d.maxPayload {
		return d.errorPayload(KindPayloadTooLarge, fmt.Sprintf("%s(): the result is %d bytes; the limit is %d", t.name, len(resp), d.maxPayload))
	}
	return resp
}

// clip shortens a guest-chosen string for an error message.
func clip(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "..."
}

func (d *Device) available() string {
	if len(d.allowed) == 0 {
		return "none"
	}
	names := make([]string, 0, len(d.allowed))
	for n := range d.allowed {
		names = append(names, n)
	}
	return strings.Join(sortedCopy(names), ", ")
}

func (d *Device) fail(kind, msg string) { d.respond(d.errorPayload(kind, msg)) }

// errorPayload is an error response; one whose message (a tool's error
// can be anything) would not fit the payload cap is cut to fit it, or to
// ~1 KiB under a smaller cap.
func (d *Device) errorPayload(kind, msg string) []byte {
	limit := max(d.maxPayload, 1<<10)
	for {
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"kind": kind, "message": msg}})
		if len(b) <= limit || len(msg) <= 3 {
			return b
		}
		// Escapes make the encoding longer than msg: cut at least the excess.
		msg = strings.ToValidUTF8(msg[:max(len(msg)-(len(b)-limit)-3, 0)], "") + "..."
	}
}

// responseKind is the error kind of a response payload, "" for a result.
func responseKind(payload []byte) string {
	if len(payload) < 9 || string(payload[:9]) != `{"error":` {
		return ""
	}
	var e struct {
		Error struct{ Kind string } `json:"error"`
	}
	if json.Unmarshal(payload, &e) != nil || e.Error.Kind == "" {
		return KindError
	}
	return e.Error.Kind
}

func (d *Device) respond(payload []byte) { d.resp = append(d.resp[:0], payload...) }

// serve answers one complete request payload (frame.Conn's Handle).
func (d *Device) serve(ctx context.Context, body []byte) []byte {
	d.resp = d.resp[:0]
	d.handle(ctx, body)
	return d.resp
}
