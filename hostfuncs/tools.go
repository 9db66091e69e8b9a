// Package hostfuncs lets sandboxed Python call Go functions the embedding
// program chose to expose (host functions; the guest and MCP call them
// tools), and nothing else. A sandbox takes them with airlock.WithHostFuncs.
//
// A [Function] is a typed Go function made by [Func]; its argument and
// result travel as JSON. A [Registry] holds a Sandbox's functions; each run gets
// its own Device (see Registry.NewDevice), which the WASI layer serves at
// DevicePath. The guest module `airlock` (shipped with the python package)
// speaks the device's protocol:
//
//	import airlock
//	airlock.call("lookup", "go", limit=3)   # or airlock.tools.lookup("go", limit=3)
//
// # Arguments
// When In is a struct, positional Python arguments fill its exported fields
// in declaration order and keyword arguments fill them by their JSON names.
// A field is required unless its json tag says omitempty or omitzero, or it
// is a pointer. Any other In takes exactly one positional argument.
//
// # Bytes
// Python bytes (and bytearray, memoryview) travel as standard base64
// strings, which is what encoding/json decodes into []byte (and Bytes).
// Toward Python, a Bytes value travels as {"$bytes": "<base64>"} and comes
// out as bytes; a plain []byte stays a base64 str, as encoding/json writes it.
//
// # Notes
// A Function may run concurrently for different runs; within a run
// calls are sequential, inside the guest's fd_write, with the run's context
// (ended at the run's deadline). CallInfo tells which run is calling.
package hostfuncs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// DevicePath is where a run's Device appears in the guest's filesystem.
const DevicePath = "/dev/airlock"

// Defaults for RunConfig fields left at zero.
const (
	DefaultMaxCalls   = 1000
	DefaultMaxPayload = 1 << 20
	// MaxPayloadLimit is the largest payload cap a frame header can carry.
	MaxPayloadLimit = 1<<31 - 1
)

// Sentinel errors of registration and run set-up.
var (
	ErrInvalidFunc = errors.New("hostfuncs: invalid host function")
	ErrUnknownFunc = errors.New("hostfuncs: unknown host function")

	// ErrInvalidTool is ErrInvalidFunc's old name.
	//
	// Deprecated: use ErrInvalidFunc.
	ErrInvalidTool = ErrInvalidFunc
	// ErrUnknownTool is ErrUnknownFunc's old name.
	//
	// Deprecated: use ErrUnknownFunc.
	ErrUnknownTool = ErrUnknownFunc
)

// Function is one Go function the guest may call, made by Func. The guest
// and MCP call it a tool (airlock.tools.NAME in Python).
type Function struct {
	name, description string
	schema            json.RawMessage
	params            []param
	// bind turns a call's arguments into In and calls the function.
	invoke func(ctx context.Context, args []json.RawMessage, kwargs map[string]json.RawMessage) (any, error)
	err    error
}

// Tool is Function's old name.
//
// Deprecated: use Function.
type Tool = Function

// Name is the function's name, as Python calls it.
func (t Function) Name() string { return t.name }

// Description is the tool's docstring in the guest.
func (t Function) Description() string { return t.description }

// Schema is the JSON schema of the tool's arguments, derived from In.
func (t Function) Schema() json.RawMessage { return t.schema }

// Func makes a Function of fn. name must be a Python identifier (not a keyword,
// not starting with "_"); In must be JSON-decodable and Out JSON-encodable.
// A bad name or an In of an unsupported kind (func, chan, complex) is
// reported by NewRegistry.
func Func[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) Function {
	t := Function{name: name, description: description}
	if err := checkName(name); err != nil {
		t.err = err
		return t
	}
	if fn == nil {
		t.err = fmt.Errorf("%w %q: nil function", ErrInvalidFunc, name)
		return t
	}
	typ := reflect.TypeFor[In]()
	sch, params, err := argSchema(typ)
	if err != nil {
		t.err = fmt.Errorf("%w %q: %w", ErrInvalidFunc, name, err)
		return t
	}
	t.schema, _ = json.Marshal(sch)
	t.params = params
	binder := newBinder(typ, params)
	t.invoke = func(ctx context.Context, args []json.RawMessage, kwargs map[string]json.RawMessage) (any, error) {
		var in In
		if err := binder.bind(&in, args, kwargs); err != nil {
			return nil, &callError{kind: KindInvalidArguments, msg: fmt.Sprintf("%s(): %v", name, err)}
		}
		return fn(ctx, in)
	}
	return t
}

var pyKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true,
	"await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true,
	"pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true,
}

func checkName(name string) error {
	ok := name != "" && len(name) <= 64 && name[0] != '_' && !pyKeywords[name]
	for i, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("%w %q: a name must be an ASCII Python identifier of at most 64 characters, not a keyword, not starting with _", ErrInvalidFunc, name)
	}
	return nil
}

// Registry is a validated, immutable set of tools; safe for concurrent use.
type Registry struct {
	tools map[string]*Function
	names []string // sorted
	// list is the answer to a list request when every tool is allowed.
	list []byte
}

// NewRegistry checks tools and indexes them by name.
//
// # Errors
// ErrInvalidFunc for a bad name, an unsupported argument type or a
// duplicate name.
func NewRegistry(tools ...Function) (*Registry, error) {
	r := &Registry{tools: make(map[string]*Function, len(tools))}
	for i := range tools {
		t := &tools[i]
		if t.err != nil {
			return nil, t.err
		}
		if t.invoke == nil {
			return nil, fmt.Errorf("%w: a Function must be made by Func", ErrInvalidFunc)
		}
		if _, dup := r.tools[t.name]; dup {
			return nil, fmt.Errorf("%w %q: registered twice", ErrInvalidFunc, t.name)
		}
		r.tools[t.name] = t
		r.names = append(r.names, t.name)
	}
	sort.Strings(r.names)
	r.list = r.listJSON(r.names)
	return r, nil
}

// Names lists the registered tools, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	return append([]string(nil), r.names...)
}

// Len is the number of registered tools.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return len(r.names)
}

type listEntry struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Signature   string          `json:"signature"`
	Params      []param         `json:"params"`
	Schema      json.RawMessage `json:"schema"`
}

func (r *Registry) listJSON(names []string) []byte {
	entries := make([]listEntry, 0, len(names))
	for _, n := range names {
		t := r.tools[n]
		entries = append(entries, listEntry{Name: n, Description: t.description, Signature: signature(n, t.params), Params: t.params, Schema: t.schema})
	}
	b, _ := json.Marshal(map[string]any{"ok": entries})
	return b
}

// signature renders a Python-like hint: lookup(query: str, limit: int = None).
func signature(name string, params []param) string {
	var b strings.Builder
	b.WriteString(name + "(")
	for i, p := range params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.Name)
		if p.Type != "" {
			b.WriteString(": " + p.Type)
		}
		if !p.Required {
			b.WriteString(" = None")
		}
	}
	b.WriteString(")")
	return b.String()
}

// Info describes the call a tool is serving; see CallInfo.
type Info struct {
	// RunID is random per run.
	RunID string
	// Values are those the caller attached to the run (Request.Values);
	// shared by the run's calls, to be read, not changed.
	Values map[string]any
	// Func is the name called; Call counts the run's calls from 1.
	Func string
	Call int
	// Tool is Func's old name, set to the same.
	//
	// Deprecated: use Func.
	Tool string
}

type infoKey struct{}

// CallInfo returns the run and call a tool's context belongs to; ok is
// false for a context that did not come from a Device.
func CallInfo(ctx context.Context) (info Info, ok bool) {
	p, ok := ctx.Value(infoKey{}).(*Info)
	if !ok {
		return Info{}, false
	}
	return *p, true
}
