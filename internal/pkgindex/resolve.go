// Package pkgindex installs pure-Python wheels from a package index
// (the PEP 503/691 simple API) for the guest: it resolves requirements
// with python.wasm's markers, picks wheels it can load, verifies each
// file's sha256 from the index, and keeps verified wheels in a
// content-addressed cache. It never runs code from a package.
package pkgindex

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock/internal/atomicfile"
	"github.com/airlock-sandbox/airlock/internal/egress"
)

// Errors; each wraps one of these, with what was wrong named.
var (
	ErrBadRequirement   = errors.New("invalid requirement")
	ErrBadVersion       = errors.New("invalid version")
	ErrNotAllowed       = errors.New("not in the package allow-list")
	ErrNotFound         = errors.New("no such project on the index")
	ErrNoCompatible     = errors.New("no wheel python.wasm can load")
	ErrHashMismatch     = errors.New("sha256 mismatch")
	ErrNoHash           = errors.New("the index gives no sha256")
	ErrBadIndex         = errors.New("malformed index answer")
	ErrIndexUnavailable = errors.New("index unavailable")
	ErrTimeout          = errors.New("install timed out")
	ErrTooLarge         = errors.New("install too large")
	ErrConflict         = errors.New("conflicting requirements")
	ErrBadWheel         = errors.New("invalid wheel")
	ErrNativeCode       = errors.New("wheel holds compiled code")
	ErrNotCached        = errors.New("wheel not in the host cache")
)

// Config is one index and its bounds.
type Config struct {
	// URL is the simple API's root ("https://host/simple/").
	URL string
	// Allow, if not empty, names the only projects that may be installed,
	// dependencies included (compared as PEP 503 normalizes names).
	Allow []string
	// MaxBytes bounds the wheels one install fetches and mounts together
	// (default 64 MiB); MaxFiles their number (default 32); MaxPageBytes
	// one index page (default 8 MiB); Timeout one install (default 60 s,
	// within the caller's context).
	MaxBytes     int64
	MaxFiles     int
	MaxPageBytes int64
	Timeout      time.Duration
	// FileOrigins are origins ("https://files.example.org") besides the
	// index's own that files may be fetched from, a redirect included:
	// a page's link, or a redirect, anywhere else is refused unfetched,
	// so an index cannot point the host at another address.
	FileOrigins []string
	// Pre allows pre-releases where no specifier names one.
	Pre bool
	// Client makes the requests (default: one without proxies from the
	// environment, dialing with egress's address checks: see
	// AllowInternal).
	Client *http.Client
	// AllowInternal lets the default client reach internal addresses
	// (loopback, private, link-local, cloud metadata, ...) that URL's or
	// a file origin's host name resolves to. Without it only an address
	// named literally in URL or FileOrigins is reached there, so that
	// neither DNS nor a redirect can point the host into its own
	// networks.
	AllowInternal bool
	// CacheDir keeps verified wheels, as CacheDir/<sha256>/<filename>.
	CacheDir string
	// Env is the guest's marker environment (WASIEnv).
	Env Env
}

// Defaults.
const (
	DefaultMaxBytes     = 64 << 20
	DefaultMaxFiles     = 32
	DefaultMaxPageBytes = 8 << 20
	DefaultTimeout      = 60 * time.Second
	// maxMetadata bounds a wheel's METADATA.
	maxMetadata = 1 << 20
)

// WithDefaults fills c's zero fields.
func (c Config) WithDefaults() Config {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxFiles == 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.MaxPageBytes == 0 {
		c.MaxPageBytes = DefaultMaxPageBytes
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		if !c.AllowInternal {
			t.DialContext = egress.CheckedDialer(30*time.Second, nil, c.namedAddress)
		}
		c.Client = &http.Client{Transport: t}
	}
	if c.Env == nil {
		c.Env = WASIEnv("")
	}
	for i, a := range c.Allow {
		c.Allow[i] = Normalize(a)
	}
	return c
}

// Validate checks c as an operator gives it.
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case err != nil:
		return fmt.Errorf("index URL %q: %w", c.URL, err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return fmt.Errorf("index URL %q: want http(s)://host/path/", c.URL)
	case c.MaxBytes < 0, c.MaxFiles < 0, c.MaxPageBytes < 0, c.Timeout < 0:
		return errors.New("index caps must not be negative")
	case c.CacheDir == "":
		return errors.New("no cache directory")
	}
	for _, a := range c.Allow {
		if !extraRE.MatchString(a) {
			return fmt.Errorf("allow-list entry %q is not a project name", a)
		}
	}
	for _, o := range c.FileOrigins {
		if _, err := parseOrigin(o); err != nil {
			return err
		}
	}
	return nil
}

// origin is a URL's scheme://host:port, the port explicit, as files and
// redirects are compared with the allowed ones.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// parseOrigin reads a file origin as the operator names it:
// http(s)://host[:port], nothing after.
func parseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("file origin %q: want http(s)://host[:port]", s)
	}
	return origin(u), nil
}

// Wheel is one wheel an install chose, verified and in the cache.
type Wheel struct {
	Name     string `json:"name"` // normalized
	Version  string `json:"version"`
	Filename string `json:"filename"`
	SHA256   string `json:"sha256"`
	Path     string `json:"-"` // in the cache
	Size     int64  `json:"size"`
	// Cached tells the wheel came from the host cache, not the index.
	Cached bool `json:"cached"`
	// Requires are the requirements it brought in, as written.
	Requires []string `json:"requires,omitempty"`
}

// Satisfied is a requirement met by what the guest has already.
type Satisfied struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	By      string `json:"by"` // what has it: "python.wasm", "mounted", "installed"
}

// Have is something the guest already has: a project's version and what
// provides it.
type Have struct {
	Version string
	By      string
}

// Result is what an install did.
type Result struct {
	Wheels    []Wheel     `json:"wheels"`
	Satisfied []Satisfied `json:"satisfied"`
}

type resolver struct {
	cfg     Config
	base    *url.URL
	client  *http.Client
	origins []string // where files may come from: the index's, then FileOrigins
	bytes   int64
	// pending are verified wheels to cache once the whole install
	// resolves: a refused install leaves the cache as it was.
	pending []pendingWheel
}

type pendingWheel struct {
	path string
	data []byte
}

// Install resolves reqs (PEP 508 strings) against the index, breadth
// first with the first choice per project (no backtracking: a later
// requirement the choice does not meet is a conflict, named), given what
// the guest has; it returns the wheels to mount, in dependency order
// reversed (dependencies last, as found), verified and cached.
func Install(ctx context.Context, cfg Config, reqs []string, have map[string]Have) (*Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, _ := url.Parse(cfg.URL)
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, fmt.Errorf("the %s install limit passed", cfg.Timeout))
	defer cancel()
	r := &resolver{cfg: cfg, base: base, origins: []string{origin(base)}}
	for _, o := range cfg.FileOrigins {
		o, _ := parseOrigin(o) // Validate checked it
		r.origins = append(r.origins, o)
	}
	// The operator's client, redirects held to the same origins: an index
	// could otherwise send the host anywhere by answering 302.
	client := *cfg.Client
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := r.checkOrigin(req.URL, "redirects to"); err != nil {
			return err
		}
		if cfg.Client.CheckRedirect != nil {
			return cfg.Client.CheckRedirect(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	r.client = &client

	type item struct {
		req  Requirement
		from string
	}
	var queue []item
	for _, s := range reqs {
		req, err := ParseRequirement(s)
		if err != nil {
			return nil, err
		}
		queue = append(queue, item{req, ""})
	}
	if len(queue) == 0 {
		return nil, fmt.Errorf("%w: nothing to install", ErrBadRequirement)
	}
	type choice struct {
		wheel    *Wheel
		version  Version
		extras   []string
		requires []Requirement
		from     string
	}
	chosen := map[string]*choice{}
	res := &Result{}
	satisfied := map[string]bool{}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		req := it.req
		if !req.Marker.Eval(cfg.Env, nil) && it.from == "" {
			continue // a top-level requirement whose marker excludes WASI
		}
		who := "requested"
		if it.from != "" {
			who = it.from + " requires"
		}
		// What the guest has is checked before the allow-list: a
		// dependency on numpy is met by the build's, allowed or not.
		if h, ok := have[req.Name]; ok {
			v, err := ParseVersion(h.Version)
			if err == nil && req.Spec.Allows(v, true) {
				if !satisfied[req.Name] {
					satisfied[req.Name] = true
					res.Satisfied = append(res.Satisfied, Satisfied{Name: req.Name, Version: h.Version, By: h.By})
				}
				continue
			}
			return nil, fmt.Errorf("%w: %s %s, but %s has %s %s, which cannot be replaced", ErrConflict, who, req.Text, h.By, req.Name, h.Version)
		}
		if err := r.allowed(req.Name); err != nil {
			if it.from != "" {
				return nil, fmt.Errorf("%w (%s %s)", err, who, req.Text)
			}
			return nil, err
		}
		if c := chosen[req.Name]; c != nil {
			if !req.Spec.Allows(c.version, true) {
				return nil, fmt.Errorf("%w: %s %s, but %s %s was chosen first (for %s); no backtracking is done: name a version that fits both",
					ErrConflict, who, req.Text, req.Name, c.version, c.from)
			}
			var added []string
			for _, e := range req.Extras {
				if !slices.Contains(c.extras, e) {
					c.extras = append(c.extras, e)
					added = append(added, e)
				}
			}
			if len(added) > 0 {
				for _, d := range c.requires {
					if d.Marker.Eval(cfg.Env, c.extras) && !d.Marker.Eval(cfg.Env, nil) {
						queue = append(queue, item{d, req.Name})
					}
				}
			}
			continue
		}
		if len(chosen) >= cfg.MaxFiles {
			return nil, fmt.Errorf("%w: more than %d wheels", ErrTooLarge, cfg.MaxFiles)
		}
		w, deps, err := r.fetchProject(ctx, req)
		if err != nil {
			return nil, err
		}
		v, _ := ParseVersion(w.Version)
		from := "requested"
		if it.from != "" {
			from = it.from
		}
		c := &choice{wheel: w, version: v, extras: req.Extras, requires: deps, from: from}
		chosen[req.Name] = c
		res.Wheels = append(res.Wheels, *w)
		for _, d := range deps {
			if d.Marker.Eval(cfg.Env, c.extras) {
				queue = append(queue, item{d, req.Name})
			}
		}
	}
	for _, p := range r.pending {
		if err := os.MkdirAll(filepath.Dir(p.path), 0o755); err != nil {
			return nil, fmt.Errorf("package cache: %w", err)
		}
		if err := atomicfile.WriteBytes(p.path, 0o644, p.data); err != nil {
			return nil, fmt.Errorf("package cache: %w", err)
		}
	}
	return res, nil
}

func (r *resolver) allowed(name string) error {
	if len(r.cfg.Allow) == 0 || slices.Contains(r.cfg.Allow, name) {
		return nil
	}
	return fmt.Errorf("%w: %s (allowed: %s)", ErrNotAllowed, name, strings.Join(r.cfg.Allow, ", "))
}

// fetchProject picks the newest wheel of req's project that python.wasm
// can load and req allows, fetches and verifies it, and reads its
// requirements.
func (r *resolver) fetchProject(ctx context.Context, req Requirement) (*Wheel, []Requirement, error) {
	files, err := r.projectFiles(ctx, req.Name)
	if err != nil {
		return nil, nil, err
	}
	py, _ := ParseVersion(r.cfg.Env["python_full_version"])
	minor := 13
	if len(py.Release) >= 2 {
		minor = py.Release[1]
	}
	var best *file
	var bestV Version
	var native, sdists, yanked, pyMismatch, badSpec, pre []string
	for i := range files {
		f := &files[i]
		wn, ok := parseWheelName(f.Filename)
		if !ok {
			if strings.HasSuffix(f.Filename, ".tar.gz") || strings.HasSuffix(f.Filename, ".zip") {
				sdists = append(sdists, f.Filename)
			}
			continue
		}
		if Normalize(wn.name) != req.Name {
			continue
		}
		if !wn.pure(minor) {
			native = append(native, f.Filename)
			continue
		}
		v, err := ParseVersion(wn.version)
		if err != nil {
			continue
		}
		if f.Yanked {
			yanked = append(yanked, f.Filename)
			continue
		}
		if f.RequiresPython != "" {
			spec, err := ParseSpecifiers(f.RequiresPython)
			if err != nil || !spec.Allows(py, true) {
				pyMismatch = append(pyMismatch, f.Filename+" (Requires-Python "+f.RequiresPython+")")
				continue
			}
		}
		if !req.Spec.Allows(v, r.cfg.Pre) {
			if v.IsPre() && req.Spec.Allows(v, true) {
				pre = append(pre, wn.version)
			} else {
				badSpec = append(badSpec, wn.version)
			}
			continue
		}
		if best == nil || v.Compare(bestV) > 0 {
			best, bestV = f, v
		}
	}
	if best == nil {
		return nil, nil, noWheel(req, native, sdists, yanked, pyMismatch, badSpec, pre)
	}
	if len(best.SHA256) != 64 {
		return nil, nil, fmt.Errorf("%w for %s, and no file is installed unverified", ErrNoHash, best.Filename)
	}
	data, cached, err := r.download(ctx, best)
	if err != nil {
		return nil, nil, err
	}
	deps, err := checkWheel(data, req.Name, bestV, best.Filename)
	if err != nil {
		return nil, nil, err
	}
	p, err := r.store(best, data, cached)
	if err != nil {
		return nil, nil, err
	}
	w := &Wheel{Name: req.Name, Version: bestV.String(), Filename: best.Filename, SHA256: best.SHA256, Path: p, Size: int64(len(data)), Cached: cached}
	for _, d := range deps {
		w.Requires = append(w.Requires, d.Text)
	}
	return w, deps, nil
}

func noWheel(req Requirement, native, sdists, yanked, pyMismatch, badSpec, pre []string) error {
	var why []string
	some := func(list []string) string {
		if len(list) > 3 {
			return strings.Join(list[:3], ", ") + fmt.Sprintf(" and %d more", len(list)-3)
		}
		return strings.Join(list, ", ")
	}
	if len(native) > 0 {
		why = append(why, "only wheels with compiled code for other platforms ("+some(native)+"); python.wasm loads pure-Python wheels (py3-none-any) only")
	}
	if len(sdists) > 0 {
		why = append(why, "source distributions ("+some(sdists)+"), which are not built here")
	}
	if len(yanked) > 0 {
		why = append(why, "yanked wheels ("+some(yanked)+")")
	}
	if len(pyMismatch) > 0 {
		why = append(why, "wheels for other Python versions ("+some(pyMismatch)+")")
	}
	if len(pre) > 0 {
		slices.Sort(pre)
		why = append(why, "only pre-releases that fit ("+some(slices.Compact(pre))+"), taken when a specifier names one (name>="+pre[0]+") or with pip install --pre")
	}
	if len(badSpec) > 0 {
		slices.Sort(badSpec)
		why = append(why, "pure wheels of versions outside "+req.Spec.String()+" ("+some(slices.Compact(badSpec))+")")
	}
	if len(why) == 0 {
		why = append(why, "no wheel files")
	}
	return fmt.Errorf("%w: %s: the index has %s", ErrNoCompatible, req.Text, strings.Join(why, "; "))
}

// cachePath is where a verified wheel is kept.
func (r *resolver) cachePath(f *file) string {
	return filepath.Join(r.cfg.CacheDir, f.SHA256, filepath.Base(f.Filename))
}

// download returns the file's bytes, from the cache when a file there
// has the index's sha256, else from the index, checked against it.
func (r *resolver) download(ctx context.Context, f *file) ([]byte, bool, error) {
	room := r.cfg.MaxBytes - r.bytes
	if data, err := readCapped(r.cachePath(f), room); err == nil && sum(data) == f.SHA256 {
		r.bytes += int64(len(data))
		return data, true, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrBadIndex, f.Filename, err)
	}
	if err := r.checkOrigin(req.URL, "links "+f.Filename+" at"); err != nil {
		return nil, false, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		var oe *originError
		if errors.As(err, &oe) {
			return nil, false, oe
		}
		return nil, false, r.fetchError(ctx, f.Filename, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false, fmt.Errorf("%w: the index answered %s for %s", ErrIndexUnavailable, resp.Status, f.Filename)
	}
	if resp.ContentLength > room {
		return nil, false, fmt.Errorf("%w: %s is %d bytes, over what is left of the %d-byte limit", ErrTooLarge, f.Filename, resp.ContentLength, r.cfg.MaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, room+1))
	if err != nil {
		return nil, false, r.fetchError(ctx, f.Filename, err)
	}
	if int64(len(data)) > room {
		return nil, false, fmt.Errorf("%w: %s passes the %d-byte limit on an install's wheels", ErrTooLarge, f.Filename, r.cfg.MaxBytes)
	}
	if got := sum(data); got != f.SHA256 {
		return nil, false, fmt.Errorf("%w: %s: the index says %s, the file has %s; it was not installed", ErrHashMismatch, f.Filename, f.SHA256, got)
	}
	r.bytes += int64(len(data))
	return data, false, nil
}

// originError is a file link or redirect to an origin files may not
// come from.
type originError struct{ msg string }

func (e *originError) Error() string { return e.msg }
func (e *originError) Unwrap() error { return ErrBadIndex }

// checkOrigin refuses u unless it is on an origin files may come from;
// what says how the index pointed there.
func (r *resolver) checkOrigin(u *url.URL, what string) error {
	o := origin(u)
	if slices.Contains(r.origins, o) {
		return nil
	}
	return &originError{fmt.Sprintf("%s: the index %s %s, an origin this host does not fetch from (files come from %s only; "+
		"the operator can name more: PackageIndex.FileOrigins, --index-file-origin)", ErrBadIndex, what, o, strings.Join(r.origins, ", "))}
}

// store schedules a verified wheel for the cache (unless it came from
// there) and returns where it will be.
func (r *resolver) store(f *file, data []byte, cached bool) (string, error) {
	p := r.cachePath(f)
	if !cached {
		r.pending = append(r.pending, pendingWheel{p, data})
	}
	return p, nil
}

func readCapped(p string, room int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, room+1))
	if err == nil && int64(len(data)) > room {
		return nil, fmt.Errorf("%w: %s passes the install's byte limit", ErrTooLarge, filepath.Base(p))
	}
	return data, err
}

func sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// Cached returns the cached wheel with that sha256 and file name, checked
// again (a saved session names its wheels by sha256).
func Cached(cacheDir, sha, filename string) (string, error) {
	if len(sha) != 64 || strings.Trim(sha, "0123456789abcdef") != "" || filename != filepath.Base(filename) || !strings.HasSuffix(filename, ".whl") {
		return "", fmt.Errorf("%w: %q (%s) is not a wheel's name and sha256", ErrNotCached, clip(filename), clip(sha))
	}
	p := filepath.Join(cacheDir, sha, filename)
	data, err := readCapped(p, 1<<30)
	if err != nil {
		return "", fmt.Errorf("%w: %s (sha256 %s): %w", ErrNotCached, filename, sha, err)
	}
	if sum(data) != sha {
		return "", fmt.Errorf("%w: %s: the cached file no longer has sha256 %s", ErrNotCached, filename, sha)
	}
	return p, nil
}

// wheelName is a wheel's file name, split (PEP 427).
type wheelName struct {
	name, version     string
	py, abi, platform []string
}

func parseWheelName(fn string) (wheelName, bool) {
	stem, ok := strings.CutSuffix(fn, ".whl")
	if !ok || strings.ContainsAny(fn, "/\\\x00") {
		return wheelName{}, false
	}
	parts := strings.Split(stem, "-")
	if len(parts) != 5 && len(parts) != 6 {
		return wheelName{}, false
	}
	n := len(parts)
	return wheelName{name: parts[0], version: parts[1],
		py: strings.Split(parts[n-3], "."), abi: strings.Split(parts[n-2], "."), platform: strings.Split(parts[n-1], ".")}, true
}

// pure tells whether python.wasm (Python 3.minor) can load the wheel: an
// interpreter tag for Python 3 up to its version (py3, py3X, cp3<minor>),
// abi none, platform any.
func (w wheelName) pure(minor int) bool {
	okPy := false
	for _, t := range w.py {
		switch {
		case t == "py3", t == fmt.Sprintf("cp3%d", minor):
			okPy = true
		case strings.HasPrefix(t, "py3"):
			var m int
			if _, err := fmt.Sscanf(t[3:], "%d", &m); err == nil && fmt.Sprint(m) == t[3:] && m <= minor {
				okPy = true
			}
		}
	}
	return okPy && slices.Contains(w.abi, "none") && slices.Contains(w.platform, "any")
}

// checkWheel reads a downloaded wheel: a zip whose dist-info METADATA
// names the project and version the file name gives, with no compiled
// code; it returns its Requires-Dist.
func checkWheel(data []byte, name string, v Version, filename string) ([]Requirement, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: not a zip: %w", ErrBadWheel, filename, err)
	}
	var meta *zip.File
	for _, f := range zr.File {
		base := strings.ToLower(path.Base(f.Name))
		switch path.Ext(base) {
		case ".so", ".pyd", ".dylib", ".dll":
			return nil, fmt.Errorf("%w: %s holds %s; python.wasm loads pure-Python code only", ErrNativeCode, filename, f.Name)
		}
		if strings.Contains(base, ".so.") {
			return nil, fmt.Errorf("%w: %s holds %s; python.wasm loads pure-Python code only", ErrNativeCode, filename, f.Name)
		}
		dir, file, ok := strings.Cut(f.Name, "/")
		if ok && file == "METADATA" && strings.HasSuffix(dir, ".dist-info") {
			meta = f
		}
	}
	if meta == nil {
		return nil, fmt.Errorf("%w: %s has no *.dist-info/METADATA", ErrBadWheel, filename)
	}
	rc, err := meta.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadWheel, filename, err)
	}
	defer rc.Close()
	text, err := io.ReadAll(io.LimitReader(rc, maxMetadata+1))
	if err != nil || len(text) > maxMetadata {
		return nil, fmt.Errorf("%w: %s: METADATA unreadable or over %d bytes", ErrBadWheel, filename, maxMetadata)
	}
	headers := parseMetadata(text)
	if len(headers["name"]) == 0 || Normalize(headers["name"][0]) != name {
		return nil, fmt.Errorf("%w: %s: METADATA names project %q", ErrBadWheel, filename, clip(strings.Join(headers["name"], ",")))
	}
	if len(headers["version"]) == 0 {
		return nil, fmt.Errorf("%w: %s: METADATA has no Version", ErrBadWheel, filename)
	}
	if mv, err := ParseVersion(headers["version"][0]); err != nil || mv.Compare(v) != 0 {
		return nil, fmt.Errorf("%w: %s: METADATA says version %q", ErrBadWheel, filename, clip(headers["version"][0]))
	}
	var deps []Requirement
	for _, s := range headers["requires-dist"] {
		d, err := ParseRequirement(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: Requires-Dist: %w", ErrBadWheel, filename, err)
		}
		deps = append(deps, d)
	}
	return deps, nil
}

// parseMetadata reads the header block of a core metadata file (RFC 822
// style: "Key: value", continuation lines indented) by lower-case key.
func parseMetadata(text []byte) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), maxMetadata)
	var last string
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			break // the body (the description) follows
		}
		if (line[0] == ' ' || line[0] == '\t') && last != "" {
			vs := out[last]
			vs[len(vs)-1] += " " + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		last = strings.ToLower(strings.TrimSpace(k))
		out[last] = append(out[last], strings.TrimSpace(v))
	}
	return out
}
