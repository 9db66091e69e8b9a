package pkgindex_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/internal/egress"
	"github.com/airlock-sandbox/airlock/internal/pkgindex"
	"github.com/airlock-sandbox/airlock/internal/pkgindex/indextest"
)

// The index and its file origins go through egress's address checks: a
// name that resolves to an internal address (here localhost, loopback;
// cloud metadata is link-local, refused the same way) is refused before
// any request, unless the operator allows internal addresses; an address
// named literally is reached.
func TestIndexAddressChecks(t *testing.T) {
	w := indextest.Wheel{Name: "helper", Version: "2.3"}
	ix := indextest.NewIndex(t, w)
	byName := strings.Replace(ix.URL(), "127.0.0.1", "localhost", 1)
	cfg := pkgindex.Config{URL: byName, CacheDir: t.TempDir(), Env: pkgindex.WASIEnv("3.13.5")}
	_, err := pkgindex.Install(context.Background(), cfg, []string{"helper"}, nil)
	if !errors.Is(err, egress.ErrRefused) || !errors.Is(err, pkgindex.ErrIndexUnavailable) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("an index whose name resolves to loopback: %v; want a refusal naming the address class", err)
	}
	if n := ix.Downloads.Load(); n != 0 {
		t.Fatalf("%d files fetched from a refused index", n)
	}
	cfg.AllowInternal = true
	if res, err := pkgindex.Install(context.Background(), cfg, []string{"helper"}, nil); err != nil || len(res.Wheels) != 1 {
		t.Fatalf("with internal addresses allowed: %+v %v", res, err)
	}

	// A file origin by a name resolving to loopback: refused, unasked,
	// though the operator named the origin (by name, not address).
	// (Another project than the one installed above: a wheel already
	// verified would not be fetched again.)
	w2 := indextest.Wheel{Name: "other", Version: "1.0"}
	ix.Add(t, w2)
	elsewhere := indextest.NewIndex(t, w2)
	other := strings.Replace(elsewhere.Server.URL, "127.0.0.1", "localhost", 1)
	ix.FilesAt.Store(other)
	defer ix.FilesAt.Store("")
	cfg = pkgindex.Config{URL: ix.URL(), FileOrigins: []string{other}, CacheDir: t.TempDir(), Env: pkgindex.WASIEnv("3.13.5")}
	if _, err := pkgindex.Install(context.Background(), cfg, []string{"other"}, nil); !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("a file origin whose name resolves to loopback: %v", err)
	}
	if n := elsewhere.Downloads.Load(); n != 0 {
		t.Fatalf("the refused origin was asked %d times", n)
	}
	// Named by its address, it is the operator's choice: reached.
	ix.FilesAt.Store(elsewhere.Server.URL)
	cfg.FileOrigins, cfg.CacheDir = []string{elsewhere.Server.URL}, t.TempDir()
	if _, err := pkgindex.Install(context.Background(), cfg, []string{"other"}, nil); err != nil || elsewhere.Downloads.Load() != 1 {
		t.Fatalf("a file origin named by its loopback address: %v (%d fetches)", err, elsewhere.Downloads.Load())
	}
}
