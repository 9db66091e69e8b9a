package python

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// FetchBundle installs the bundle a loopback server serves when its
// manifest is the pinned one, and refuses, installing nothing, one that
// is another (a valid bundle of different content), cut short, declared
// too large, not there, or checked against no sum at all.
func TestFetchBundle(t *testing.T) {
	good := realBundle(t, true)
	b, err := readBundle(strings.NewReader(string(good)), nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := b.manifest.SHA256
	plain := realBundle(t, false)
	// Another bundle, whole and self-consistent: only its manifest's
	// informative version differs, so only the pin tells them apart.
	other := writeTar(t, remanifest(t, entries(t, plain), func(m *BundleManifest) { m.Python += "+rebuilt" }))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/good.tar.gz":
			w.Write(good)
		case "/plain.tar":
			w.Write(plain)
		case "/other.tar":
			w.Write(other)
		case "/cut.tar.gz":
			w.Write(good[:len(good)/2])
		case "/huge.tar":
			w.Header().Set("Content-Length", strconv.FormatInt(maxBundleBytes+1, 10))
			w.WriteHeader(http.StatusOK)
			w.Write(plain[:4096])
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	cache := t.TempDir()
	for _, tc := range []struct {
		path, sum string
		want      error
	}{
		{"/other.tar", sum, ErrBundleChecksum},
		{"/cut.tar.gz", sum, ErrBundleTruncated},
		{"/huge.tar", sum, ErrBundleTooLarge},
		{"/missing.tar", sum, ErrBundleFetch},
		{"/good.tar.gz", "", ErrBundleNotPinned}, // this version pins none
		{"/good.tar.gz", "0123", ErrBundleNotPinned},
	} {
		if tc.sum == "" && ReleaseBundleSHA256 != "" {
			continue
		}
		_, err := FetchBundle(ctx, nil, srv.URL+tc.path, tc.sum, cache)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.path, err, tc.want)
		}
		if l := listing(t, cache); len(l) != 1 { // the cache directory itself
			t.Fatalf("%s: a refused fetch left %v", tc.path, l)
		}
	}
	if _, err := FetchBundle(ctx, nil, srv.URL+"/other.tar", sum, cache); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), `"manifest.json"`) {
		t.Errorf("another bundle: %v, want ErrChecksum naming manifest.json", err)
	}

	// The pinned bundle, gzipped or not (the pin is the manifest's, not
	// the file's): installed as ImportBundle installs it.
	for _, path := range []string{"/good.tar.gz", "/plain.tar"} {
		dir := t.TempDir()
		man, err := FetchBundle(ctx, nil, srv.URL+path, strings.ToUpper(sum), dir)
		if err != nil || man.SHA256 != sum {
			t.Fatalf("%s: %v, %+v", path, err, man)
		}
		art, err := LoadOwn(OwnDir(dir))
		if err != nil {
			t.Fatalf("%s: the fetched build does not load: %v", path, err)
		}
		if _, _, err := LoadAsyncified(art, dir); err != nil {
			t.Fatalf("%s: the fetched asyncified module: %v", path, err)
		}
	}
}
