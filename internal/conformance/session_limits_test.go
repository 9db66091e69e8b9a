package airlock_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/hostfuncs"
)

// Where a saved session's limits are: magic, version, image key, memory
// sum, calls, then timeout, memory, output, fs bytes, fs files, host
// calls, host payload, fuel (i64 each).
const blobLimits = 16 + 4 + 32 + 32 + 8

// rewriteLimits is what anyone holding a blob can do: set its limits and
// recompute the checksum, which is no MAC.
func rewriteLimits(b []byte, l airlock.Limits) []byte {
	b = bytes.Clone(b)
	for i, v := range []int64{int64(l.Timeout), l.Memory, l.Output, l.FSBytes, int64(l.FSFiles), int64(l.HostCalls), l.HostPayload, l.Fuel} {
		binary.LittleEndian.PutUint64(b[blobLimits+8*i:], uint64(v))
	}
	sum := sha256.Sum256(b[:len(b)-32])
	copy(b[len(b)-32:], sum[:])
	return b
}

// A blob rewritten to a 1-hour timeout, a 1 TiB filesystem quota and 4 GiB
// of memory loads with the Sandbox's limits: a run still stops at the
// Sandbox's timeout and its files at the Sandbox's quota. (Before, the
// blob's limits were honoured: a call wrote 160 MiB of files into host
// memory where the untouched blob stops at 64 MiB.)
func TestSessionLoadCannotRaiseItsLimits(t *testing.T) {
	ctx := context.Background()
	sandbox, err := airlock.New(ctx, airlock.WithLimits(airlock.Limits{Timeout: time.Second, FSBytes: 8 << 20}))
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.Close(ctx)
	s := newSession(t, sandbox, airlock.SessionOptions{})
	call(t, s, airlock.Request{Code: "x = 41"}, "", "")
	blob := rewriteLimits(saved(t, s), airlock.Limits{Timeout: time.Hour, Memory: 4 << 30, Output: 1 << 40, FSBytes: 1 << 40, FSFiles: 1 << 30, HostCalls: 1 << 30, HostPayload: 1 << 30})
	l, err := sandbox.LoadSession(ctx, bytes.NewReader(blob), airlock.LoadOptions{})
	if err != nil {
		t.Fatalf("LoadSession: %v", err)
	}
	defer l.Close(ctx)
	call(t, l, airlock.Request{Code: "print(x + 1)"}, "42\n", "")
	start := time.Now()
	call(t, l, airlock.Request{Code: "while True: pass"}, "", airlock.KindTimeout)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the endless loop ran %v: the blob's hour, not the Sandbox's second", d)
	}
	res := call(t, l, airlock.Request{Code: "for i in range(20):\n    open(f'f{i}', 'wb').write(b'x' * (1 << 20))"}, "", airlock.KindFSQuota)
	if !res.RolledBack {
		t.Error("a call over the quota was kept")
	}
	// The same under explicit, lower maxima.
	l2, err := sandbox.LoadSession(ctx, bytes.NewReader(blob), airlock.LoadOptions{MaxLimits: airlock.Limits{FSBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close(ctx)
	call(t, l2, airlock.Request{Code: "open('f', 'wb').write(b'x' * (2 << 20))"}, "", airlock.KindFSQuota)
	call(t, l2, airlock.Request{Code: "open('f', 'wb').write(b'x' * (512 << 10))"}, "", "")
	// Lower limits a blob was saved with stay its own.
	small := newSession(t, sandbox, airlock.SessionOptions{Limits: airlock.Limits{FSBytes: 256 << 10}})
	l3, err := sandbox.LoadSession(ctx, bytes.NewReader(saved(t, small)), airlock.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close(ctx)
	call(t, l3, airlock.Request{Code: "open('f', 'wb').write(b'x' * (512 << 10))"}, "", airlock.KindFSQuota)
}

// A blob whose memory or files do not fit the loading limits is refused
// with ErrSessionOverLimits, and loads nothing.
func TestSessionLoadOverLimits(t *testing.T) {
	ctx := context.Background()
	sandbox := snapshotSandbox(t)
	before := sandbox.Sessions()
	s := newSession(t, sandbox, airlock.SessionOptions{})
	call(t, s, airlock.Request{Code: "blob = bytearray(96 << 20)\nopen('data', 'wb').write(b'x' * (3 << 20))"}, "", "")
	blob := saved(t, s)
	for name, max := range map[string]airlock.Limits{
		"memory": {Memory: 64 << 20},
		"bytes":  {FSBytes: 2 << 20},
		"files":  {FSFiles: 2},
	} {
		if _, err := sandbox.LoadSession(ctx, bytes.NewReader(blob), airlock.LoadOptions{MaxLimits: max}); !errors.Is(err, airlock.ErrSessionOverLimits) {
			t.Errorf("%s: %v, want ErrSessionOverLimits", name, err)
		}
	}
	// The reader is not read past what the limits allow.
	r := &countingReader{r: bytes.NewReader(append(bytes.Clone(blob), make([]byte, 200<<20)...))}
	if _, err := sandbox.LoadSession(ctx, r, airlock.LoadOptions{MaxLimits: airlock.Limits{Memory: 32 << 20, FSBytes: 1 << 20, FSFiles: 100}}); !errors.Is(err, airlock.ErrSessionOverLimits) {
		t.Errorf("a blob past the read bound: %v, want ErrSessionOverLimits", err)
	}
	if r.n > 128<<20 {
		t.Errorf("read %d MiB for limits of 32 MiB of memory and 1 MiB of files", r.n>>20)
	}
	if n := sandbox.Sessions(); n != before+1 {
		t.Errorf("%d sessions live, want %d: a refused load left one", n, before+1)
	}
}

// A call may ask for more memory than its session's default, and what it
// built stays the session's: saved, the session loads again under a cap
// that covers its memory, and is refused only by one that does not. (It
// was checked against the session's default, so serve could not bring
// back a session it had spilled: HTTP 500.)
func TestSessionLoadKeepsWhatALargerCallBuilt(t *testing.T) {
	ctx := context.Background()
	sandbox := snapshotSandbox(t)
	s := newSession(t, sandbox, airlock.SessionOptions{Limits: airlock.Limits{Memory: 64 << 20}})
	big := airlock.Limits{Memory: 200 << 20}
	call(t, s, airlock.Request{Code: "blob = bytearray(96 << 20)", Limits: big}, "", "")
	blob := saved(t, s)
	l, err := sandbox.LoadSession(ctx, bytes.NewReader(blob), airlock.LoadOptions{MaxLimits: big})
	if err != nil {
		t.Fatalf("LoadSession under a cap its memory fits: %v", err)
	}
	defer l.Close(ctx)
	call(t, l, airlock.Request{Code: "print(len(blob) >> 20)", Limits: big}, "96\n", "")
	if _, err := sandbox.LoadSession(ctx, bytes.NewReader(blob), airlock.LoadOptions{MaxLimits: airlock.Limits{Memory: 64 << 20}}); !errors.Is(err, airlock.ErrSessionOverLimits) {
		t.Errorf("under a cap below its memory: %v, want ErrSessionOverLimits", err)
	}
}

type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// LoadOptions.Tools narrows the tools a loaded session may call, whatever
// the blob's allow-list says.
func TestSessionLoadCapsTools(t *testing.T) {
	ctx := context.Background()
	echo := hostfuncs.Func("echo", "Echo.", func(_ context.Context, v json.RawMessage) (json.RawMessage, error) { return v, nil })
	secret := hostfuncs.Func("secret", "A secret.", func(context.Context, struct{}) (string, error) { return "s3cret", nil })
	sandbox, err := airlock.New(ctx, airlock.WithHostFuncs(echo, secret))
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.Close(ctx)
	s := newSession(t, sandbox, airlock.SessionOptions{}) // every tool
	blob := saved(t, s)
	l, err := sandbox.LoadSession(ctx, bytes.NewReader(blob), airlock.LoadOptions{Tools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	call(t, l, airlock.Request{Code: "import airlock\nprint(airlock.tools.echo(1))"}, "1\n", "")
	res := call(t, l, airlock.Request{Code: "import airlock\ntry:\n    airlock.call('secret')\nexcept airlock.UnknownToolError as e:\n    print('refused')"}, "refused\n", "")
	if strings.Contains(string(res.Stdout), "s3cret") {
		t.Fatal("the loaded session called a tool its loader did not allow")
	}
}

// With WithSessionKey, blobs are signed, and only those signed with the
// key load: not unsigned ones, not another key's, not a signed one
// changed and resealed with a checksum. A Sandbox without a key refuses
// signed blobs rather than load them unchecked.
func TestSessionKey(t *testing.T) {
	ctx := context.Background()
	newSB := func(opts ...airlock.Option) *airlock.Sandbox {
		t.Helper()
		s, err := airlock.New(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(ctx) })
		return s
	}
	key := []byte("0123456789abcdef-the-key")
	a := newSB(airlock.WithSessionKey(key))
	other := newSB(airlock.WithSessionKey([]byte("another key, 16+ bytes")))
	plain := snapshotSandbox(t)

	s := newSession(t, a, airlock.SessionOptions{})
	call(t, s, airlock.Request{Code: "x = 7"}, "", "")
	signed := saved(t, s)
	l, err := a.LoadSession(ctx, bytes.NewReader(signed), airlock.LoadOptions{})
	if err != nil {
		t.Fatalf("the key's own blob: %v", err)
	}
	call(t, l, airlock.Request{Code: "print(x)"}, "7\n", "")
	l.Close(ctx)
	// Another Sandbox with the same key loads it too.
	if l, err := newSB(airlock.WithSessionKey(key)).LoadSession(ctx, bytes.NewReader(signed), airlock.LoadOptions{}); err != nil {
		t.Errorf("same key, another Sandbox: %v", err)
	} else {
		l.Close(ctx)
	}

	unsigned := saved(t, newSession(t, plain, airlock.SessionOptions{}))
	flipped := bytes.Clone(signed)
	flipped[len(flipped)/2] ^= 1
	for name, tc := range map[string]struct {
		into *airlock.Sandbox
		blob []byte
	}{
		"unsigned into a keyed sandbox":     {a, unsigned},
		"another key's":                     {other, signed},
		"changed":                           {a, flipped},
		"raised limits, resealed":           {a, rewriteLimits(signed, airlock.Limits{Timeout: time.Hour})},
		"signed into a sandbox with no key": {plain, signed},
		"unsigned, relabelled as signed":    {a, relabel(unsigned, 3)},
		"signed, relabelled as unsigned":    {a, relabel(signed, 2)},
	} {
		if _, err := tc.into.LoadSession(ctx, bytes.NewReader(tc.blob), airlock.LoadOptions{}); !errors.Is(err, airlock.ErrSessionUnauthenticated) {
			t.Errorf("%s: %v, want ErrSessionUnauthenticated", name, err)
		}
	}
	if _, err := airlock.New(ctx, airlock.WithSessionKey([]byte("short"))); !errors.Is(err, airlock.ErrInvalidOption) || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a 5-byte key: %v, want ErrInvalidOption", err)
	}
}

// New checks the default limits once, so that no run takes a negative
// one, or a fuel limit that nothing meters, as its default.
func TestNewRefusesBadLimits(t *testing.T) {
	ctx := context.Background()
	for name, l := range map[string]airlock.Limits{
		"negative memory":  {Memory: -1},
		"negative timeout": {Timeout: -time.Second},
	} {
		if _, err := airlock.New(ctx, airlock.WithLimits(l)); !errors.Is(err, airlock.ErrInvalidOption) || !strings.Contains(err.Error(), "WithLimits") {
			t.Errorf("%s: %v, want ErrInvalidOption naming WithLimits", name, err)
		}
	}
	if _, err := airlock.New(ctx, airlock.WithEngine(airlock.EngineWazero), airlock.WithLimits(airlock.Limits{Fuel: 1000})); !errors.Is(err, airlock.ErrInvalidOption) || !strings.Contains(err.Error(), "wasmtime") {
		t.Errorf("fuel on wazero: %v, want ErrInvalidOption naming wasmtime", err)
	}
}

// relabel sets a blob's format version and reseals it with a checksum.
func relabel(b []byte, version uint32) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[16:], version)
	sum := sha256.Sum256(b[:len(b)-32])
	copy(b[len(b)-32:], sum[:])
	return b
}
