package python

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
)

// A release publishes the own build as a bundle (ExportBundle's) at a URL,
// and this module pins the sha256 of its manifest (ReleaseBundleSHA256),
// which names every file by its sum: a host with no root, apt or wasm-opt
// then gets the build in seconds, checked against the code it runs, from
// wherever the operator mirrors it (the URL is theirs to choose; the pin
// is not).

// ReleaseBundleSHA256 is the manifest sha256 of the bundle released with
// this version of the module, set when a version is tagged; empty in a
// development version, where FetchBundle's caller names the sum.
const ReleaseBundleSHA256 = ""

// maxBundleBytes bounds what FetchBundle reads: the entries' caps, the
// manifest's, and tar's headers and padding.
var maxBundleBytes = func() int64 {
	n := int64(manifestCap) + 64<<10
	for _, c := range bundleCaps {
		n += c.max + 1024
	}
	return n
}()

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ErrBundleNotPinned: FetchBundle was given no manifest sha256 and this
// version pins none, or one that is not a sha256.
var ErrBundleNotPinned = errors.New("python: no pinned bundle sha256")

// ErrBundleFetch: the bundle's URL did not answer with it (a network
// error, or a status other than 200).
var ErrBundleFetch = errors.New("python: fetch bundle")

// FetchBundle downloads the bundle at url with client (nil:
// http.DefaultClient), checks it whole as ImportBundle does and its
// manifest against manifestSHA256 ("" takes ReleaseBundleSHA256), then
// installs it into cacheDir as ImportBundle does. Nothing is written
// before all of it has been read and checked.
//
// # Errors
// ErrBundleNotPinned without a sum to check against; ErrBundleFetch
// (wrapped) when the URL does not serve the bundle; a *BundleError for a
// bundle refused (ErrBundleChecksum, naming manifest.json, for one that
// is not the pinned bundle), which changes nothing; an install error as
// for ImportBundle.
func FetchBundle(ctx context.Context, client *http.Client, url, manifestSHA256, cacheDir string) (*BundleManifest, error) {
	want := strings.ToLower(strings.TrimSpace(manifestSHA256))
	if want == "" {
		want = ReleaseBundleSHA256
	}
	if want == "" {
		return nil, fmt.Errorf("%w: this version of Airlock pins no release bundle; name the bundle's manifest sha256 (the exporting host's ExportBundle manifest)", ErrBundleNotPinned)
	}
	if !sha256Pattern.MatchString(want) {
		return nil, fmt.Errorf("%w: %q is not a sha256 (64 hex digits)", ErrBundleNotPinned, manifestSHA256)
	}
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrBundleFetch, url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBundleFetch, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w %s: %s", ErrBundleFetch, url, resp.Status)
	}
	if resp.ContentLength > maxBundleBytes {
		return nil, bundleErr(ErrBundleTooLarge, "", "%d bytes, at most %d", resp.ContentLength, maxBundleBytes)
	}
	// One byte past the bound reads as a cut tar: refused, not installed.
	b, err := readBundle(io.LimitReader(resp.Body, maxBundleBytes), nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrBundleFetch, url, ctx.Err())
		}
		return nil, err
	}
	if b.manifest.SHA256 != want {
		return nil, bundleErr(ErrBundleChecksum, bundleManifest, "sha256 %s, want %s: not the pinned bundle", b.manifest.SHA256, want)
	}
	return installBundle(b, cacheDir)
}
