package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// FuzzDecode sends arbitrary bodies to the request decoder of POST
// /v1/run: it never panics; it accepts only a JSON object with a code and
// known fields, writing nothing; it refuses everything else with 400 or
// 413 and a JSON error body; and the limits it accepts clamp to no more
// than the server's maxima.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"code": "print(1)"}`,
		`{"code": "x", "filename": "a.py", "files": {"in.txt": "aGk="}, "stdin": "eA==", "env": {"A": "b"},
		  "limits": {"timeout_ms": 99999999, "memory": -1, "output": 9223372036854775807, "fs_files": 2147483647, "host_calls": 5},
		  "deterministic": true, "seed": 18446744073709551615, "tools": ["echo"]}`,
		`{"code": ""}`, `{"code": "x"} {"code": "y"}`, `{"code": "x", "nope": 1}`, `[]`, `null`, ``, `{"code": "x"`,
		`{"code": "x", "files": {"a": "not base64"}}`, `{"code": "x", "limits": {"timeout_ms": 1e400}}`,
		`{"code": "\ud800", "env": {"\u0000": "\u0000"}}`, `{"code": "x"}` + string(bytes.Repeat([]byte(" "), 5000)),
	} {
		f.Add([]byte(seed))
	}
	maxima := airlock.Limits{Timeout: 30 * time.Second, Memory: 256 << 20, Output: 1 << 20, FSBytes: 64 << 20, FSFiles: 10000, HostCalls: 1000, HostPayload: 1 << 20}
	s, err := New(Config{Sandbox: sb, MaxLimits: maxima, MaxBody: 4096, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		req, ok := s.decode(w, httptest.NewRequest(http.MethodPost, "/v1/run", bytes.NewReader(body)))
		if ok {
			if req.Code == "" || w.Body.Len() != 0 {
				t.Fatalf("accepted %q: code %q, wrote %q", body, req.Code, w.Body.Bytes())
			}
			l, _ := clampLimits(req.Limits, sb.Limits(), maxima)
			if l.Timeout == 0 || l.Memory == 0 || l.Output == 0 || l.FSBytes == 0 || l.FSFiles == 0 || l.HostCalls == 0 || l.HostPayload == 0 {
				t.Fatalf("accepted %q: limits %+v left a field to the Sandbox's default", body, l)
			}
			if l.Timeout > maxima.Timeout || l.Memory > maxima.Memory || l.Output > maxima.Output || l.FSBytes > maxima.FSBytes ||
				l.FSFiles > maxima.FSFiles || l.HostCalls > maxima.HostCalls || l.HostPayload > maxima.HostPayload {
				t.Fatalf("accepted %q: limits %+v past the maxima %+v", body, l, maxima)
			}
			return
		}
		if w.Code != http.StatusBadRequest && w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("refused %q with status %d", body, w.Code)
		}
		var e errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Kind == "" || e.Error.Message == "" {
			t.Fatalf("refused %q with body %q (%v)", body, w.Body.Bytes(), err)
		}
	})
}
