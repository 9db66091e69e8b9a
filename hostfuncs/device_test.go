package hostfuncs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

type pair struct {
	A int `json:"a"`
	B int `json:"b,omitempty"`
}

func testRegistry(t testing.TB) *Registry {
	t.Helper()
	r, err := NewRegistry(
		Func("add", "Add.", func(_ context.Context, in pair) (int, error) { return in.A + in.B, nil }),
		Func("echo", "Echo.", func(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil }),
		Func("boom", "Panic.", func(_ context.Context, in string) (int, error) { panic(in) }),
		Func("info", "CallInfo.", func(ctx context.Context, _ struct{}) (Info, error) {
			info, _ := CallInfo(ctx)
			return info, nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// roundtrip writes payload as one frame and reads the whole response.
func roundtrip(t testing.TB, ctx context.Context, d *Device, payload string) string {
	t.Helper()
	frame := fmt.Sprintf("%08x%s", len(payload), payload)
	if n, err := d.Write(ctx, []byte(frame)); err != nil || n != len(frame) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	return readAll(d)
}

func readAll(d *Device) string {
	var out []byte
	buf := make([]byte, 7) // small reads on purpose
	for {
		n, _ := d.Read(context.Background(), buf)
		if n == 0 {
			break
		}
		out = append(out, buf[:n]...)
	}
	if len(out) < 8 {
		return string(out)
	}
	return string(out[8:])
}

func TestDeviceProtocol(t *testing.T) {
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		name    string
		ctx     context.Context
		cfg     RunConfig
		payload string
		want    string
	}{
		{"call", ctx, RunConfig{}, `{"name":"add","args":[1,2]}`, `{"ok":3}`},
		{"kwargs and optional", ctx, RunConfig{}, `{"name":"add","kwargs":{"a":5}}`, `{"ok":5}`},
		{"op call", ctx, RunConfig{}, `{"op":"call","name":"echo","args":[{"x":[1,"é"]}]}`, `{"ok":{"x":[1,"é"]}}`},
		{"panic", ctx, RunConfig{}, `{"name":"boom","args":["oops"]}`, `{"error":{"kind":"panic","message":"boom(): the host tool panicked: oops"}}`},
		{"unknown", ctx, RunConfig{}, `{"name":"nope"}`, `{"error":{"kind":"unknown_tool","message":"no host tool \"nope\" in this run (available: add, boom, echo, info)"}}`},
		{"not allowed", ctx, RunConfig{Allow: []string{"echo"}}, `{"name":"add","args":[1,2]}`, `"kind":"unknown_tool"`},
		{"missing arg", ctx, RunConfig{}, `{"name":"add","args":[]}`, `{"error":{"kind":"invalid_arguments","message":"add(): missing required argument \"a\""}}`},
		{"after deadline", done, RunConfig{}, `{"name":"add","args":[1]}`, `{"error":{"kind":"deadline","message":"add(): the run's deadline has passed (context canceled)"}}`},
		{"list allowed", ctx, RunConfig{Allow: []string{"add"}}, `{"op":"list"}`, `{"ok":[{"name":"add","description":"Add.","signature":"add(a: int, b: int = None)","params":[{"name":"a","type":"int","required":true},{"name":"b","type":"int","required":false}],"schema":{"additionalProperties":false,"properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a"],"type":"object"}}]}`},
		{"not json", ctx, RunConfig{}, `nope`, `"kind":"invalid_request"`},
		{"request too large", ctx, RunConfig{MaxPayload: 10}, `{"name":"add","args":[1,2]}`, `{"error":{"kind":"payload_too_large","message":"the request is 27 bytes; the limit is 10"}}`},
		{"result too large", ctx, RunConfig{MaxPayload: 40}, `{"name":"echo","args":["xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]}`, `{"error":{"kind":"payload_too_large"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := testRegistry(t).NewDevice(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := roundtrip(t, tc.ctx, d, tc.payload); !strings.Contains(got, tc.want) {
				t.Fatalf("response %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestDeviceLimitsAndInfo(t *testing.T) {
	d, err := testRegistry(t).NewDevice(RunConfig{MaxCalls: 2, RunID: "r1", Values: map[string]any{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got := roundtrip(t, ctx, d, `{"name":"info"}`); got != `{"ok":{"RunID":"r1","Values":{"k":"v"},"Func":"info","Call":1,"Tool":"info"}}` {
		t.Fatal(got)
	}
	roundtrip(t, ctx, d, `{"op":"list"}`) // does not count
	roundtrip(t, ctx, d, `{"name":"add","args":[1]}`)
	if got := roundtrip(t, ctx, d, `{"name":"add","args":[1]}`); !strings.Contains(got, `"too_many_calls"`) {
		t.Fatal(got)
	}
	if _, err := testRegistry(t).NewDevice(RunConfig{Allow: []string{"add", "rm"}}); err == nil {
		t.Fatal("an unknown allowed name was accepted")
	}
}

func TestDeviceFraming(t *testing.T) {
	ctx := context.Background()
	d, _ := testRegistry(t).NewDevice(RunConfig{MaxPayload: 64})
	// Byte by byte: the write completing the frame runs the call.
	frame := `0000001b{"name":"add","args":[4,5]}`
	for i := range len(frame) {
		if n, _ := d.Write(ctx, []byte{frame[i]}); n != 1 {
			t.Fatalf("byte %d: wrote %d", i, n)
		}
	}
	if got := readAll(d); got != `{"ok":9}` {
		t.Fatal(got)
	}
	// Two frames in one write: only the first is taken.
	if n, _ := d.Write(ctx, []byte(frame+frame)); n != len(frame) {
		t.Fatalf("wrote %d of two frames", n)
	}
	// An oversized payload is answered at once and its bytes discarded.
	big := fmt.Sprintf("%08x", 1000) + strings.Repeat("y", 1000)
	if n, _ := d.Write(ctx, []byte(big[:500])); n != 500 {
		t.Fatal(n)
	}
	if n, _ := d.Write(ctx, []byte(big[500:])); n != len(big)-500 {
		t.Fatal(n)
	}
	if got := readAll(d); !strings.Contains(got, "payload_too_large") {
		t.Fatal(got)
	}
	// Then the stream is in step again; an unread response is dropped by the next request.
	d.Write(ctx, []byte(`0000001b{"name":"add","args":[1,1]}`))
	if got := roundtrip(t, ctx, d, `{"name":"add","args":[2,2]}`); got != `{"ok":4}` {
		t.Fatal(got)
	}
	// Nothing pending reads as end of file.
	if n, err := d.Read(ctx, make([]byte, 8)); n != 0 || err != nil {
		t.Fatal(n, err)
	}
}

// FuzzDevice writes arbitrary bytes, in arbitrary pieces, with reads in
// between: the device must never panic, never fail, never report more
// bytes than it was given, and must answer every complete frame.
func FuzzDevice(f *testing.F) {
	f.Add([]byte(`0000001b{"name":"add","args":[4,5]}`), uint8(3))
	f.Add([]byte(`0000000d{"op":"list"}0000001a{"name":"boom","args":[1]}`), uint8(0))
	f.Add([]byte(`zzzzzzzz`), uint8(1))
	f.Add([]byte(`ffffffff`), uint8(2))
	f.Add([]byte(`00000030{"name":"echo","args":[{"$bytes":"AAEC"}],"kwargs":{}}`), uint8(5))
	f.Add([]byte(`00000020{"name":"add","kwargs":{"a":1,"z":2}}`), uint8(7))
	r := testRegistry(f)
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		d, err := r.NewDevice(RunConfig{MaxPayload: 256, MaxCalls: 8})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		step := int(split)%17 + 1
		buf := make([]byte, int(split)%5+1)
		readAfterWrite := false
		for len(data) > 0 {
			chunk := data[:min(step, len(data))]
			n, err := d.Write(ctx, chunk)
			if err != nil || n < 0 || n > len(chunk) || (n == 0 && len(chunk) > 0) {
				t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
			}
			data = data[n:]
			readAfterWrite = false
			if split&0x80 != 0 {
				k, err := d.Read(ctx, buf)
				if err != nil || k < 0 || k > len(buf) {
					t.Fatalf("Read = %d, %v", k, err)
				}
				readAfterWrite = k > 0
			}
		}
		// A response not read into yet is a whole frame of JSON.
		if resp := readAll(d); !readAfterWrite && resp != "" && !json.Valid([]byte(resp)) {
			t.Fatalf("response is not JSON: %q", resp)
		}
	})
}

func TestSchema(t *testing.T) {
	type inner struct {
		X []float64 `json:"x"`
	}
	type args struct {
		Name  string            `json:"name"`
		Tags  map[string]int    `json:"tags,omitempty"`
		In    inner             `json:"in"`
		Data  []byte            `json:"data,omitempty"`
		Any   any               `json:"any,omitzero"`
		Skip  int               `json:"-"`
		Ptr   *bool             `json:"ptr"`
		Raw   json.RawMessage   `json:"raw,omitempty"`
		Deep  map[string][]pair `json:"deep,omitempty"`
		hide  int
		NoTag string
	}
	tool := Func("x", "", func(context.Context, args) (int, error) { return 0, nil })
	if tool.err != nil {
		t.Fatal(tool.err)
	}
	want := `{"additionalProperties":false,"properties":{"NoTag":{"type":"string"},"any":{},"data":{"contentEncoding":"base64","type":"string"},"deep":{"additionalProperties":{"items":{"properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a"],"type":"object"},"type":"array"},"type":"object"},"in":{"properties":{"x":{"items":{"type":"number"},"type":"array"}},"required":["x"],"type":"object"},"name":{"type":"string"},"ptr":{"type":"boolean"},"raw":{},"tags":{"additionalProperties":{"type":"integer"},"type":"object"}},"required":["name","in","NoTag"],"type":"object"}`
	if string(tool.Schema()) != want {
		t.Fatalf("schema\n%s\nwant\n%s", tool.Schema(), want)
	}
	if got := signature("x", tool.params); got != "x(name: str, tags: dict = None, in: dict, data: bytes = None, any = None, ptr: bool = None, raw = None, deep: dict = None, NoTag: str)" {
		t.Fatal(got)
	}
	type node struct {
		Next *node `json:"next"`
	}
	if tool := Func("r", "", func(context.Context, node) (int, error) { return 0, nil }); tool.err != nil || !strings.Contains(string(tool.Schema()), `"next":{}`) {
		t.Fatal(tool.err, string(tool.Schema()))
	}
}

func TestBytesJSON(t *testing.T) {
	b, _ := json.Marshal(Bytes{0, 1, 2})
	if string(b) != `{"$bytes":"AAEC"}` {
		t.Fatal(string(b))
	}
	for _, in := range []string{`{"$bytes":"AAEC"}`, `"AAEC"`} {
		var got Bytes
		if err := json.Unmarshal([]byte(in), &got); err != nil || string(got) != "\x00\x01\x02" {
			t.Fatal(in, got, err)
		}
	}
	var got Bytes
	if err := json.Unmarshal([]byte(`{"x":1}`), &got); err == nil {
		t.Fatal("accepted an object without $bytes")
	}
}

func BenchmarkDeviceCall(b *testing.B) {
	d, _ := testRegistry(b).NewDevice(RunConfig{MaxCalls: 1 << 62})
	ctx := context.Background()
	frame := []byte(`0000001b{"name":"add","args":[4,5]}`)
	buf := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		d.Write(ctx, frame)
		d.Read(ctx, buf)
	}
}

type marshalPanics struct{}

func (marshalPanics) MarshalJSON() ([]byte, error) { panic("MarshalJSON exploded") }

type nilDerefError struct{ msg string }

func (e *nilDerefError) Error() string { return e.msg }

// A panic in the tool's code outside the function itself (its result's
// MarshalJSON, its error's Error) is the guest's panic error too, not a
// panic out of Device.Write.
func TestDevicePanicsOutsideTheFunction(t *testing.T) {
	r, err := NewRegistry(
		Func("badresult", "", func(context.Context, struct{}) (marshalPanics, error) { return marshalPanics{}, nil }),
		Func("typednil", "", func(context.Context, struct{}) (int, error) {
			var e *nilDerefError
			return 0, e
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"badresult", "typednil"} {
		d, _ := r.NewDevice(RunConfig{})
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("%s: a panic escaped Device.Write: %v", name, v)
				}
			}()
			if got := roundtrip(t, context.Background(), d, `{"name":"`+name+`"}`); !strings.Contains(got, `"kind":"panic"`) {
				t.Errorf("%s: response %s, want kind panic", name, got)
			}
		}()
	}
}

// Error responses stay within the payload cap, however the guest's input
// they quote escapes (U+2028 grows from 3 bytes to 6 in JSON).
func TestDeviceErrorsFitThePayloadCap(t *testing.T) {
	const limit = 1 << 16
	d, _ := testRegistry(t).NewDevice(RunConfig{MaxPayload: limit})
	name := strings.Repeat("\u2028", (limit-40)/3)
	for _, payload := range []string{`{"name":"` + name + `"}`, `{"op":"` + name + `"}`} {
		if got := roundtrip(t, context.Background(), d, payload); len(got) > limit {
			t.Errorf("a %d-byte response for a %d-byte cap: %.80s", len(got), limit, got)
		}
	}
}

// A tool that ignores its context cannot hold the run past its deadline:
// the call answers deadline when the context ends.
func TestDeviceCallEndsWithTheContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	r, err := NewRegistry(Func("stuck", "", func(context.Context, struct{}) (int, error) {
		<-release
		return 1, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.NewDevice(RunConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	got := roundtrip(t, ctx, d, `{"name":"stuck"}`)
	if !strings.Contains(got, `"kind":"deadline"`) || time.Since(start) > 5*time.Second {
		t.Fatalf("after %v: %s, want a deadline error", time.Since(start), got)
	}
}

type checkedLine struct {
	SKU  string  `json:"sku"`
	Qty  int     `json:"qty"`
	Note *string `json:"note"`
}

type checkedArgs struct {
	Query string        `json:"query"`
	Limit int           `json:"limit,omitempty"`
	Lines []checkedLine `json:"lines,omitempty"`
	Pair  *[2]int       `json:"pair"`
	Tags  []string      `json:"tags"`
}

// Arguments are held to the published schema where encoding/json would
// let them through: None for a required value, a nested struct's missing
// or differently spelt keys, a Go array's length.
func TestDeviceChecksArgumentsAgainstTheSchema(t *testing.T) {
	r, err := NewRegistry(
		Func("find", "", func(_ context.Context, in checkedArgs) (string, error) { return fmt.Sprintf("%+v", in), nil }),
		Func("one", "", func(_ context.Context, n int) (int, error) { return n, nil }),
	)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.NewDevice(RunConfig{})
	for _, tc := range []struct{ req, want string }{
		{`{"name":"find","args":[null]}`, `argument \"query\" must not be None`},
		{`{"name":"one","args":[null]}`, `the argument must not be None`},
		{`{"name":"find","args":["q"],"kwargs":{"lines":[{"sku":"a"}]}}`, `missing key \"qty\"`},
		{`{"name":"find","args":["q"],"kwargs":{"lines":[{"SKU":"a","qty":1}]}}`, `key \"SKU\" is spelt \"sku\"`},
		{`{"name":"find","args":["q"],"kwargs":{"pair":[1,2,3]}}`, `has 3 items; it takes exactly 2`},
		{`{"name":"find","args":["q"],"kwargs":{"lines":[null]}}`, `[0] must not be None`},
	} {
		if got := roundtrip(t, context.Background(), d, tc.req); !strings.Contains(got, `"kind":"invalid_arguments"`) || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s, want invalid_arguments with %s", tc.req, got, tc.want)
		}
	}
	// None stays fine where Go has a nil or the field is optional.
	got := roundtrip(t, context.Background(), d, `{"name":"find","args":["q"],"kwargs":{"limit":null,"pair":null,"tags":null,"lines":[{"sku":"a","qty":1,"note":null}]}}`)
	if !strings.Contains(got, `"ok":`) || !strings.Contains(got, `Query:q`) {
		t.Errorf("optional Nones: %s", got)
	}
}
