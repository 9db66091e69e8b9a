package airlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock/internal/frame"
	"github.com/airlock-sandbox/airlock/internal/pkgindex"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Packages from an index: the guest asks the host to install (the
// guest's airlock.install("name"), a subprocess call of pip install, a
// %pip line in a session), and the host resolves the request against the
// index the operator configured, with python.wasm's markers, fetches
// pure-Python wheels, checks each file's sha256 from the index, keeps
// them in a content-addressed cache, and mounts them read-only into the
// running filesystem. The guest never reaches the index itself.

// PackageIndex is the index runs may install from (WithPackageIndex).
type PackageIndex struct {
	// URL is the simple API's root (PEP 503/691), "https://host/simple/".
	URL string
	// Allow, if not empty, names the only projects that may be installed,
	// dependencies included (compared as PEP 503 normalizes names).
	Allow []string
	// FileOrigins are the origins ("https://files.example.org") besides
	// URL's that wheels may be fetched from, redirects included; a link
	// or redirect anywhere else is refused before any request, so the
	// index cannot steer the host to another address. An index that
	// keeps its files on another host needs that host named here.
	FileOrigins []string
	// MaxBytes bounds the wheels one install fetches and mounts (default
	// 64 MiB); MaxFiles their number (default 32); Timeout one install
	// (default 60 s, and never past the run's own deadline).
	MaxBytes int64
	MaxFiles int
	Timeout  time.Duration
	// MaxInstalls bounds the install requests of one run or session call
	// (default 16).
	MaxInstalls int
	// Client makes the requests to the index (default: Go's transport
	// without proxies from the environment, and with the egress
	// allow-list's address checks: an internal address, such as
	// loopback, private, link-local or cloud metadata, is reached only
	// where URL or FileOrigins names it literally, unless AllowInternal).
	Client *http.Client
	// AllowInternal lets the default client reach internal addresses
	// that the index's or a file origin's host name resolves to (a
	// mirror inside the host's network, by name).
	AllowInternal bool
	// CacheDir keeps the verified wheels, by sha256 (default:
	// "pkgindex" under the Sandbox's cache directory).
	CacheDir string
}

// WithPackageIndex lets runs and sessions install pure-Python wheels
// from ix. Without it an install is refused, and the guest is told that
// the operator has not configured an index.
//
// # Errors
// New fails for a URL that is not http(s) or an allow-list entry that
// is not a project name.
func WithPackageIndex(ix PackageIndex) Option {
	return func(c *config) { c.index = &ix }
}

// ErrNoPackageIndex is what a refused install says without an index.
var ErrNoPackageIndex = errors.New("airlock: no package index is configured (a Sandbox installs from one made WithPackageIndex)")

// ErrPackageNotCached is LoadSession's error for a saved session whose
// installed wheels are not in this host's package cache.
var ErrPackageNotCached = pkgindex.ErrNotCached

// packageCacheDir is where verified wheels from an index are kept, by
// sha256, under the cache directory.
func packageCacheDir(cacheDir string) string { return filepath.Join(cacheDir, "pkgindex") }

// PackageInstall records one install request of a run.
type PackageInstall struct {
	Requirements []string `json:"requirements"`
	Allowed      bool     `json:"allowed"`
	// Reason is why it was refused.
	Reason string `json:"reason,omitempty"`
	// Packages are the wheels it mounted.
	Packages []InstalledPackage `json:"packages,omitempty"`
	Duration time.Duration      `json:"duration_ns"`
}

// InstalledPackage is one wheel an install mounted.
type InstalledPackage struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Filename string `json:"filename"`
	SHA256   string `json:"sha256"`
	// Cached tells it came from the host's cache, not the index.
	Cached bool `json:"cached"`
}

const (
	pipDevice = "/dev/airlock-pip"
	// maxInstallRequest bounds a guest's request (its requirement strings).
	maxInstallRequest = 64 << 10
	maxRequirements   = 64
	defaultInstalls   = 16
	// extraInstallRecords bounds the refused requests recorded past the cap.
	extraInstallRecords = 16
)

// PackageIndex is the index the Sandbox's runs install from, and
// whether it has one (WithPackageIndex).
func (sb *Sandbox) PackageIndex() (PackageIndex, bool) {
	if sb.cfg.index == nil {
		return PackageIndex{}, false
	}
	ix := *sb.cfg.index
	ix.Allow = slices.Clone(ix.Allow)
	ix.FileOrigins = slices.Clone(ix.FileOrigins)
	return ix, true
}

// Validate checks ix as New does: an http(s) URL, project names in
// Allow, no negative caps.
func (ix PackageIndex) Validate() error {
	pc := ix.config("-", nil)
	if err := pc.Validate(); err != nil {
		return err
	}
	if ix.MaxInstalls < 0 {
		return errors.New("MaxInstalls must not be negative")
	}
	return nil
}

// setupIndex runs in New. Without a Client of the operator's, the
// Sandbox gets one of its own, shared by its runs (one transport, its
// idle connections closed with the Sandbox), rather than one per install.
func setupIndex(cfg *config) error {
	if cfg.index == nil {
		return nil
	}
	if err := cfg.index.Validate(); err != nil {
		return fmt.Errorf("airlock: WithPackageIndex: %w", err)
	}
	if cfg.index.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil // the package reads no environment
		cfg.index.Client = &http.Client{Transport: t}
		cfg.indexTransport = t
	}
	return nil
}

// indexLayers keeps the layers of installed wheels, most recently used
// last, within maxIndexLayerBytes: the guests choose what they install,
// so this cache must not grow with every wheel a server ever mounted.
// (Runs and sessions hold their own references; evicting only drops the
// cache's.)
type indexLayers struct {
	mu    sync.Mutex
	size  int64
	order []string
	byKey map[string]*pkg
}

// A variable so that a test can bound it lower.
var maxIndexLayerBytes int64 = MaxPackageBytes

func (c *indexLayers) get(p string) (*pkg, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[string]*pkg{}
	}
	if got := c.byKey[p]; got != nil {
		i := slices.Index(c.order, p)
		c.order = append(append(c.order[:i:i], c.order[i+1:]...), p)
		return got, nil
	}
	// The path is content-addressed (the wheel's sha256 names its
	// directory): what is loaded once never changes.
	loaded, err := loadPackage(p)
	if err != nil {
		return nil, err
	}
	c.byKey[p] = loaded
	c.order = append(c.order, p)
	c.size += loaded.layer.Size()
	for c.size > maxIndexLayerBytes && len(c.order) > 1 {
		old := c.order[0]
		c.order = c.order[1:]
		c.size -= c.byKey[old].layer.Size()
		delete(c.byKey, old)
	}
	return loaded, nil
}

func (ix PackageIndex) config(cacheDir string, env pkgindex.Env) pkgindex.Config {
	return pkgindex.Config{URL: ix.URL, Allow: append([]string(nil), ix.Allow...), FileOrigins: slices.Clone(ix.FileOrigins), MaxBytes: ix.MaxBytes, MaxFiles: ix.MaxFiles,
		Timeout: ix.Timeout, Client: ix.Client, AllowInternal: ix.AllowInternal, CacheDir: ix.cacheDir(cacheDir), Env: env}
}

func (ix *PackageIndex) cacheDir(sandboxCache string) string {
	if ix != nil && ix.CacheDir != "" {
		return ix.CacheDir
	}
	return packageCacheDir(sandboxCache)
}

// installDevice is one run's end of the install protocol: a frame with
// {"requirements": [...], "pre": bool} gets {"ok": {"installed": [...],
// "satisfied": [...], "paths": [...]}} or {"error": {"kind", "message"}}.
// The install runs on the guest's goroutine, under the run's context, so
// the mount into the run's filesystem never races the guest.
type installDevice struct {
	frame.Conn
	sb      *Sandbox
	fs      *memfs.FS
	have    map[string]pkgindex.Have
	max     int
	records []PackageInstall
	onDone  func(PackageInstall)
}

// newInstallDevice makes the run's device, or none without an index.
func (sb *Sandbox) newInstallDevice(fs *memfs.FS, pkgs *packageSet, onDone func(PackageInstall)) *installDevice {
	if sb.cfg.index == nil {
		return nil
	}
	d := &installDevice{sb: sb, fs: fs, have: map[string]pkgindex.Have{}, max: sb.cfg.index.MaxInstalls, onDone: onDone}
	if d.max == 0 {
		d.max = defaultInstalls
	}
	for name, v := range sb.artifact.Distributions() {
		d.have[name] = pkgindex.Have{Version: v, By: "python.wasm (built in)"}
	}
	if pkgs != nil {
		for _, p := range pkgs.pkgs {
			if name, version, ok := wheelDist(path.Base(p.sysPath)); ok {
				d.have[name] = pkgindex.Have{Version: version, By: "the host's mounted packages"}
			}
		}
	}
	sb.addDefaultHave(d.have)
	d.Max = maxInstallRequest
	d.Handle = d.handle
	d.Fail = func(msg string) []byte { return installError("invalid", "airlock: install: "+msg) }
	return d
}

// wheelDist is a wheel file name's project (normalized) and version.
func wheelDist(base string) (string, string, bool) {
	stem, ok := strings.CutSuffix(base, ".whl")
	parts := strings.Split(stem, "-")
	if !ok || len(parts) < 5 {
		return "", "", false
	}
	return pkgindex.Normalize(parts[0]), parts[1], true
}

// addInstalled counts a session's earlier installs as present.
func (d *installDevice) addInstalled(pkgs []InstalledPackage) {
	for _, p := range pkgs {
		d.have[p.Name] = pkgindex.Have{Version: p.Version, By: "this session (installed earlier)"}
	}
}

func installError(kind, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"kind": kind, "message": msg}})
	return b
}

// installKind is the guest's name for why an install was refused.
func installKind(err error) string {
	for _, k := range []struct {
		err  error
		kind string
	}{
		{pkgindex.ErrNotAllowed, "not_allowed"}, {pkgindex.ErrNotFound, "not_found"},
		{pkgindex.ErrNoCompatible, "no_compatible_wheel"}, {pkgindex.ErrNativeCode, "compiled_extension"},
		{ErrCompiledExtension, "compiled_extension"}, {pkgindex.ErrHashMismatch, "hash_mismatch"},
		{pkgindex.ErrNoHash, "hash_mismatch"}, {pkgindex.ErrConflict, "conflict"},
		{pkgindex.ErrBadRequirement, "invalid"}, {pkgindex.ErrTooLarge, "too_large"},
		{pkgindex.ErrTimeout, "timeout"}, {pkgindex.ErrBadIndex, "index_error"},
		{pkgindex.ErrIndexUnavailable, "index_error"}, {pkgindex.ErrBadWheel, "invalid_wheel"},
		{ErrInvalidPackage, "invalid_wheel"},
	} {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return "error"
}

func (d *installDevice) handle(ctx context.Context, body []byte) []byte {
	var req struct {
		Requirements []string `json:"requirements"`
		Pre          bool     `json:"pre"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return installError("invalid", "airlock: install: malformed request: "+err.Error())
	}
	if len(req.Requirements) > maxRequirements {
		return installError("invalid", fmt.Sprintf("airlock: install: %d requirements in one request; at most %d", len(req.Requirements), maxRequirements))
	}
	start := time.Now()
	rec := PackageInstall{Requirements: req.Requirements}
	answer := func(kind string, err error) []byte {
		rec.Reason = strings.TrimPrefix(err.Error(), "airlock: ")
		rec.Duration = time.Since(start)
		d.record(rec)
		return installError(kind, "airlock: pip install "+strings.Join(req.Requirements, " ")+": "+rec.Reason)
	}
	if len(d.records) >= d.max {
		err := fmt.Errorf("this run has made its %d allowed install requests", d.max)
		if len(d.records) >= d.max+extraInstallRecords {
			// A guest asking on in a loop is answered, no longer recorded.
			return installError("too_many", "airlock: pip install "+strings.Join(req.Requirements, " ")+": "+err.Error())
		}
		return answer("too_many", err)
	}
	cfg := d.sb.cfg.index.config(d.sb.cfg.cacheDir, pkgindex.WASIEnv(d.sb.artifact.Version))
	cfg.Pre = req.Pre
	res, err := pkgindex.Install(ctx, cfg, req.Requirements, d.have)
	if err != nil {
		return answer(installKind(err), err)
	}
	// Load every wheel before mounting any: a wheel the loader refuses
	// leaves the filesystem as it was.
	pkgs := make([]*pkg, len(res.Wheels))
	for i, w := range res.Wheels {
		if pkgs[i], err = d.sb.indexLayers.get(w.Path); err != nil {
			return answer(installKind(err), err)
		}
	}
	var paths []string
	for i, p := range pkgs {
		if _, e := d.fs.Lookup(d.fs.Root(), p.sysPath); e != nil {
			if err := d.fs.Mount(p.layer); err != nil {
				return answer("error", fmt.Errorf("mount %s: %w", res.Wheels[i].Filename, err))
			}
		}
		paths = append(paths, p.sysPath)
		w := res.Wheels[i]
		rec.Packages = append(rec.Packages, InstalledPackage{Name: w.Name, Version: w.Version, Filename: w.Filename, SHA256: w.SHA256, Cached: w.Cached})
		d.have[w.Name] = pkgindex.Have{Version: w.Version, By: "this run (installed earlier)"}
	}
	rec.Allowed = true
	rec.Duration = time.Since(start)
	d.record(rec)
	out, _ := json.Marshal(map[string]any{"ok": map[string]any{"installed": rec.Packages, "satisfied": res.Satisfied, "paths": paths}})
	return out
}

func (d *installDevice) record(rec PackageInstall) {
	d.records = append(d.records, rec)
	if d.onDone != nil {
		d.onDone(rec)
	}
}

// installed are the wheels the run mounted, in order.
func (d *installDevice) installed() []InstalledPackage {
	if d == nil {
		return nil
	}
	var out []InstalledPackage
	for _, r := range d.records {
		out = append(out, r.Packages...)
	}
	return out
}

// mountInstalled mounts a saved session's installed wheels from the
// host's cache into fs.
func (sb *Sandbox) mountInstalled(fs *memfs.FS, pkgs []InstalledPackage) error {
	for _, ip := range pkgs {
		p, err := pkgindex.Cached(sb.cfg.index.cacheDir(sb.cfg.cacheDir), ip.SHA256, ip.Filename)
		if err != nil {
			return fmt.Errorf("airlock: the saved session installed %s %s: %w", ip.Name, ip.Version, err)
		}
		loaded, err := sb.indexLayers.get(p)
		if err != nil {
			return fmt.Errorf("airlock: the saved session's %s: %w", ip.Filename, err)
		}
		if _, e := fs.Lookup(fs.Root(), loaded.sysPath); e != nil {
			if err := fs.Mount(loaded.layer); err != nil {
				return fmt.Errorf("airlock: the saved session's %s: %w", ip.Filename, err)
			}
		}
	}
	return nil
}
