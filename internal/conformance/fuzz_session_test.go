package airlock_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// sessionHeader is a saved blob's magic, format version and base image
// (key and memory checksum): what FuzzLoadSession keeps fixed, so that
// the fuzzer's bytes reach the fields after it. Its version is at
// sessionVersionAt.
const (
	sessionHeader    = 16 + 4 + 32 + 32
	sessionVersionAt = 16
)

// FuzzLoadSession loads blobs of this Sandbox's base image whose body is
// the fuzzer's (the trailer, an unsigned blob's sha256, is recomputed, so
// that mutations are not all checksum mismatches): LoadSession answers
// with a session or one of its documented errors, never a panic, and a
// session it answers with runs code to a result.
func FuzzLoadSession(f *testing.F) {
	if !sb.Snapshots() {
		f.Fatal("snapshots unavailable: scripts/setup.sh prepares them (Binaryen's wasm-opt)")
	}
	sandbox := sb
	ctx := context.Background()
	save := func(s *airlock.Session) []byte {
		var buf bytes.Buffer
		if err := s.Save(&buf); err != nil {
			f.Fatal(err)
		}
		s.Close(ctx)
		return buf.Bytes()[:buf.Len()-sha256.Size]
	}
	fresh, err := sandbox.NewSession(ctx, airlock.SessionOptions{Env: map[string]string{"A": "b"}, Tools: []string{}})
	if err != nil {
		f.Fatal(err)
	}
	body := save(fresh)
	header := bytes.Clone(body[:sessionHeader])
	f.Add(body[sessionHeader:], uint8(body[sessionVersionAt]))
	// One that has run: its image is a delta record over the base. Its
	// 3.6 MB are a seed of the ordinary test only: as a fuzzing input,
	// each mutation would copy, load and run them (the record itself is
	// FuzzReadDeltaRecord's, in engine).
	if fl := flag.Lookup("test.fuzz"); fl == nil || fl.Value.String() == "" {
		ran, err := sandbox.NewSession(ctx, airlock.SessionOptions{})
		if err != nil {
			f.Fatal(err)
		}
		if res, err := ran.Run(ctx, airlock.Request{Code: "x = 41\nopen('f', 'w').write('x')"}); err != nil || res.Error != nil {
			f.Fatalf("Exec: %v %v", err, res.Error)
		}
		if body := save(ran); bytes.Equal(body[:sessionHeader], header) {
			f.Add(body[sessionHeader:], uint8(body[sessionVersionAt]))
		}
	}
	f.Add(body[sessionHeader:], uint8(4))
	f.Add([]byte{}, uint8(2))
	f.Fuzz(func(t *testing.T, tail []byte, version uint8) {
		blob := append(bytes.Clone(header), tail...)
		blob[sessionVersionAt] = version
		sum := sha256.Sum256(blob)
		blob = append(blob, sum[:]...)
		s, err := sandbox.LoadSession(ctx, bytes.NewReader(blob), airlock.LoadOptions{})
		if err != nil {
			for _, want := range []error{airlock.ErrSessionCorrupt, airlock.ErrSessionMismatch, airlock.ErrSessionOverLimits,
				airlock.ErrSessionUnauthenticated, airlock.ErrTooManySessions} {
				if errors.Is(err, want) {
					return
				}
			}
			t.Fatalf("LoadSession: %v, not one of its documented errors", err)
		}
		defer s.Close(ctx)
		res, _ := s.Run(ctx, airlock.Request{Code: "print(6 * 7)", Limits: airlock.Limits{Timeout: 5 * time.Second}})
		if res == nil {
			t.Fatal("a loaded session's call returned no result")
		}
	})
}
