package airlock

import (
	"context"
	"net/http"

	"github.com/airlock-sandbox/airlock/python"
)

// ReleaseBundleSHA256 is the manifest sha256 of the own build's bundle
// released with this version of the module: what FetchBuild checks a
// download against when its caller names no other. Empty in a
// development version.
const ReleaseBundleSHA256 = python.ReleaseBundleSHA256

// FetchBuild's errors.
var (
	// ErrBundleNotPinned: no manifest sha256 to check the bundle against
	// (none given and this version pins none), or one that is not a sha256.
	ErrBundleNotPinned = python.ErrBundleNotPinned
	// ErrBundleFetch: the URL did not serve the bundle.
	ErrBundleFetch = python.ErrBundleFetch
)

// BuildSource is where FetchBuild gets the own build: a bundle (`airlock
// setup --export`'s) at URL, a release's or a mirror of it.
type BuildSource struct {
	URL string
	// SHA256 is the bundle's manifest sha256 (`airlock setup --export`
	// prints it); "" takes ReleaseBundleSHA256.
	SHA256 string
	// CacheDir is where it is installed; "" for the default, as New's.
	CacheDir string
	// Client fetches it; nil for http.DefaultClient.
	Client *http.Client
}

// FetchBuild installs the own CPython build from a bundle, for a program
// that embeds the library on a host that cannot build it (no root, apt or
// wasm-opt): afterwards New (with WithCacheDir(src.CacheDir)) runs it,
// with snapshots. The bundle is read whole and checked, every file
// against the manifest and the manifest against src.SHA256, before
// anything is installed; a refused bundle changes nothing.
//
// # Errors
// ErrBundleNotPinned, ErrBundleFetch (wrapped), ErrChecksum (wrapped, for
// a bundle that is not the pinned one or is damaged), or another reason a
// bundle is refused or cannot be installed.
func FetchBuild(ctx context.Context, src BuildSource) error {
	dir := src.CacheDir
	if dir == "" {
		var err error
		if dir, err = python.CacheDir(); err != nil {
			return err
		}
	}
	_, err := python.FetchBundle(ctx, src.Client, src.URL, src.SHA256, dir)
	return err
}
