package airlock

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Packages are pure-Python code the host makes importable in the guest
// without an install step: a wheel or zip is mounted as one read-only file
// and put on sys.path as is (zipimport reads it), a directory is mounted
// file by file. Each is read once into a memfs.Layer that every run
// mounts without copying.

// PackagesDir is where packages appear in the guest.
const PackagesDir = "/opt/airlock/packages"

// Package limits: a package is read whole into memory, so a request must
// not make the host read unbounded data.
const (
	// MaxPackageBytes bounds one package's size (a wheel's file size, or
	// the sum of a directory's files), and the sum of a request's packages.
	MaxPackageBytes = 256 << 20
	// maxPackageFiles bounds a package's file count: a directory's files,
	// a zip's entries.
	maxPackageFiles = 100_000
	// maxZipUncompressed bounds what checking a zip's entries decompresses.
	maxZipUncompressed = 1 << 30
)

// Environment variables the prelude reads (python/prelude.py).
const (
	envPackages    = "AIRLOCK_PACKAGES"     // sys.path entries, ':'-separated
	envWarmImports = "AIRLOCK_WARM_IMPORTS" // modules to import, ','-separated
)

var (
	// ErrCompiledExtension refuses a package holding native code
	// (.so, .pyd, .dylib, .dll), which python.wasm cannot load.
	ErrCompiledExtension = errors.New("airlock: compiled extension")
	// ErrInvalidPackage refuses a package that cannot be read or used: a
	// missing path, a corrupt zip, one over the size limits.
	ErrInvalidPackage = errors.New("airlock: invalid package")
	// ErrPreimport is New's error when a WithPreimport module does not
	// import; the message holds the guest's traceback.
	ErrPreimport = errors.New("airlock: pre-import failed")
)

// WithPackages makes pure-Python packages importable in every run: each
// path is a wheel (.whl), a zip, or a directory. They are read once, when
// New runs, and shared read-only by all runs (see Request.Packages for
// the forms a path may take).
//
// # Errors
// New fails with ErrCompiledExtension or ErrInvalidPackage.
func WithPackages(paths ...string) Option {
	return func(c *config) { c.packages = append(c.packages, paths...) }
}

// WithPreimport imports modules (from WithPackages' packages or the
// standard library) before every run's code. With snapshots the imports
// happen once, when the image is captured, so runs start with the modules
// in sys.modules at no cost; without, each run imports them first.
//
// # Errors
// New fails with ErrPreimport when a module does not import, and with a
// plain error when a name is not a dotted module name.
func WithPreimport(modules ...string) Option {
	return func(c *config) { c.preimport = append(c.preimport, modules...) }
}

var moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// pkg is one loaded package.
type pkg struct {
	layer   *memfs.Layer
	sysPath string // guest path to put on sys.path
}

// pkgCache keeps each loaded package by absolute host path, so repeated
// requests neither re-read nor copy it. An entry is reloaded when its
// fingerprint (sizes and modification times) changes; at most one
// version per path is kept.
type pkgCache struct {
	mu      sync.Mutex
	entries map[string]*pkgEntry
}

type pkgEntry struct {
	mu          sync.Mutex // held while (re)loading
	fingerprint [32]byte
	pkg         *pkg
}

// get returns the package at hostPath, loading it if it is new or changed.
func (c *pkgCache) get(hostPath string) (*pkg, error) {
	if hostPath == "" {
		// filepath.Abs would make it the working directory.
		return nil, fmt.Errorf("%w: an empty path", ErrInvalidPackage)
	}
	abs, err := filepath.Abs(hostPath)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidPackage, hostPath, err)
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]*pkgEntry{}
	}
	e := c.entries[abs]
	if e == nil {
		e = &pkgEntry{}
		c.entries[abs] = e
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	fp, err := fingerprint(abs)
	if err != nil {
		return nil, err
	}
	if e.pkg != nil && fp == e.fingerprint {
		return e.pkg, nil
	}
	p, err := loadPackage(abs)
	if err != nil {
		return nil, err
	}
	e.pkg, e.fingerprint = p, fp
	return p, nil
}

// fingerprint summarises what a package's content depends on, by stat
// alone: a file's size and mtime; for a directory, those of every entry.
func fingerprint(abs string) ([32]byte, error) {
	st, err := os.Stat(abs)
	if err != nil {
		return [32]byte{}, fmt.Errorf("%w %s: %w", ErrInvalidPackage, abs, err)
	}
	h := sha256.New()
	if !st.IsDir() {
		fmt.Fprintf(h, "file %d %d", st.Size(), st.ModTime().UnixNano())
	} else {
		n := 0
		err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if n++; n > maxPackageFiles {
				return fmt.Errorf("more than %d entries", maxPackageFiles)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00%d %d %d\x00", p, info.Mode(), info.Size(), info.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			return [32]byte{}, fmt.Errorf("%w %s: %w", ErrInvalidPackage, abs, err)
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, nil
}

// loadPackage reads the package at abs into a layer.
func loadPackage(abs string) (*pkg, error) {
	p, err := readPackage(abs)
	var native nativeFile
	switch {
	case errors.As(err, &native):
		return nil, fmt.Errorf("%w in %s: %s (python.wasm runs only pure-Python code)", ErrCompiledExtension, abs, string(native))
	case err != nil:
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidPackage, abs, err)
	}
	return p, nil
}

// nativeFile is the name of a compiled extension found in a package.
type nativeFile string

func (n nativeFile) Error() string { return "compiled extension " + string(n) }

func readPackage(abs string) (*pkg, error) {
	name := filepath.Base(abs)
	if strings.ContainsAny(name, ":,\x00") || name == "." || name == ".." {
		// ':' separates sys.path entries in AIRLOCK_PACKAGES.
		return nil, errors.New("the name must not contain ':', ',' or NUL")
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return readDir(abs, name)
	}
	ext := strings.ToLower(filepath.Ext(name))
	if ext != ".whl" && ext != ".zip" {
		return nil, errors.New("not a wheel (.whl), a zip or a directory")
	}
	return readZip(abs, name)
}

func readZip(abs, name string) (*pkg, error) {
	f, err := os.Open(abs)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > MaxPackageBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxPackageBytes)
	}
	// The limit holds also for a file that grows while being read.
	data, err := io.ReadAll(io.LimitReader(f, MaxPackageBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxPackageBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxPackageBytes)
	}
	if err := checkZip(data); err != nil {
		return nil, err
	}
	guest := PackagesDir + "/" + name
	l := memfs.NewLayer()
	if err := l.AddFile(guest, data); err != nil {
		return nil, err
	}
	return &pkg{layer: l, sysPath: guest}, nil
}

// checkZip refuses what zipimport could not import from: a corrupt
// archive, entries it cannot decompress, native code.
func checkZip(data []byte) error {
	// zip.NewReader keeps ~260 bytes per entry, and a central directory
	// entry can take 46: count the entries' signatures before parsing
	// (an upper bound, as file data may hold the bytes too).
	if n := bytes.Count(data, []byte("PK\x01\x02")); n > maxPackageFiles {
		return fmt.Errorf("more than %d entries", maxPackageFiles)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("not a readable zip: %w", err)
	}
	var total uint64
	for _, f := range zr.File {
		if isCompiledExtension(f.Name) {
			return nativeFile(f.Name)
		}
		if f.Method != zip.Store && f.Method != zip.Deflate {
			return fmt.Errorf("entry %s: compression method %d (zipimport reads only stored and deflated entries)", f.Name, f.Method)
		}
		// Compared with what is left, so a declared size near 2^64 cannot
		// wrap the total back under the cap.
		if f.UncompressedSize64 > maxZipUncompressed-total {
			return fmt.Errorf("entries decompress to more than %d bytes", maxZipUncompressed)
		}
		total += f.UncompressedSize64
	}
	for _, f := range zr.File {
		// Reading checks the CRC; archive/zip stops at the declared size.
		rc, err := f.Open()
		if err == nil {
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
		}
		if err != nil {
			return fmt.Errorf("entry %s: %w", f.Name, err)
		}
	}
	return nil
}

// readDir reads a directory package. A directory holding __init__.py is
// a package itself: it is mounted under its own name so that it imports
// by that name. Any other directory is a sys.path root (like
// site-packages or a src/ layout). __pycache__ and hidden directories are
// skipped: they hold nothing to import.
func readDir(abs, name string) (*pkg, error) {
	root := PackagesDir + "/" + name
	prefix := root
	if st, err := os.Stat(filepath.Join(abs, "__init__.py")); err == nil && st.Mode().IsRegular() {
		prefix = root + "/" + name
	}
	// First list and check everything, then read: a refused package
	// costs no reading.
	type file struct{ host, rel string }
	var files []file
	var total int64
	err := filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(abs, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if p != abs && (d.Name() == "__pycache__" || strings.HasPrefix(d.Name(), ".")) {
				return fs.SkipDir
			}
			return nil
		}
		if isCompiledExtension(rel) {
			return nativeFile(rel)
		}
		info, err := os.Stat(p) // follows a symbolic link to a file
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		if len(files) >= maxPackageFiles {
			return fmt.Errorf("more than %d files", maxPackageFiles)
		}
		if total += info.Size(); total > MaxPackageBytes {
			return fmt.Errorf("larger than %d bytes", MaxPackageBytes)
		}
		files = append(files, file{p, rel})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("no files")
	}
	l := memfs.NewLayer()
	total = 0
	for _, f := range files {
		data, err := os.ReadFile(f.host)
		if err != nil {
			return nil, err
		}
		if total += int64(len(data)); total > MaxPackageBytes { // grown since listed
			return nil, fmt.Errorf("larger than %d bytes", MaxPackageBytes)
		}
		if err := l.AddFile(path.Join(prefix, f.rel), data); err != nil {
			return nil, err
		}
	}
	return &pkg{layer: l, sysPath: root}, nil
}

// isCompiledExtension tells a native-code file by its name: extension
// modules (.so, .pyd) and the shared libraries they link (.dylib, .dll,
// libfoo.so.1 as in manylinux wheels' .libs directories).
func isCompiledExtension(name string) bool {
	base := strings.ToLower(path.Base(name))
	switch path.Ext(base) {
	case ".so", ".pyd", ".dylib", ".dll":
		return true
	}
	return strings.Contains(base, ".so.")
}

// packageSet is the packages of one run: the Sandbox's (the first
// base, mounted through Sandbox.layers), then the request's, each once.
type packageSet struct {
	pkgs []*pkg
	base int
}

// add appends p unless it is already in the set, and tells whether it
// did; two different packages with the same guest path are refused.
func (s *packageSet) add(p *pkg, hostPath string) (bool, error) {
	for _, q := range s.pkgs {
		if q == p {
			return false, nil
		}
		if q.sysPath == p.sysPath {
			return false, fmt.Errorf("%w %s: another package has the name %s", ErrInvalidPackage, hostPath, path.Base(p.sysPath))
		}
	}
	s.pkgs = append(s.pkgs, p)
	return true, nil
}

func (s *packageSet) layers() []*memfs.Layer {
	out := make([]*memfs.Layer, len(s.pkgs))
	for i, p := range s.pkgs {
		out[i] = p.layer
	}
	return out
}

// requestLayers are the layers a run mounts besides the Sandbox's.
func (s *packageSet) requestLayers() []*memfs.Layer { return s.layers()[s.base:] }

func (s *packageSet) sysPath() string {
	paths := make([]string, len(s.pkgs))
	for i, p := range s.pkgs {
		paths[i] = p.sysPath
	}
	return strings.Join(paths, ":")
}

// requestPackages adds a request's packages to the Sandbox's.
func (sb *Sandbox) requestPackages(paths []string) (*packageSet, *Error) {
	set := &packageSet{pkgs: sb.pkgs.pkgs, base: len(sb.pkgs.pkgs)}
	if len(paths) == 0 {
		return set, nil
	}
	set.pkgs = append([]*pkg(nil), set.pkgs...)
	var total int64
	for _, hp := range paths {
		p, err := sb.pkgCache.get(hp)
		added := false
		if err == nil {
			added, err = set.add(p, hp)
		}
		if added {
			if total += p.layer.Size(); total > MaxPackageBytes {
				err = fmt.Errorf("%w: the request's packages exceed %d bytes together", ErrInvalidPackage, MaxPackageBytes)
			}
		}
		if err != nil {
			return nil, newError(KindInvalidRequest, err, "%s", strings.TrimPrefix(err.Error(), "airlock: "))
		}
	}
	return set, nil
}

// loadSandboxPackages loads WithPackages' packages for New.
func loadSandboxPackages(cache *pkgCache, cfg config) (*packageSet, error) {
	set := &packageSet{}
	for _, hp := range cfg.packages {
		p, err := cache.get(hp)
		if err == nil {
			_, err = set.add(p, hp)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, m := range cfg.preimport {
		if !moduleName.MatchString(m) {
			return nil, fmt.Errorf("airlock: pre-import %q: not a module name", m)
		}
	}
	return set, nil
}

// packageEnv is what tells the prelude about a run's packages.
func (sb *Sandbox) packageEnv(set *packageSet) map[string]string {
	env := map[string]string{}
	if paths := sb.withDefaultSysPath(set.sysPath()); paths != "" {
		env[envPackages] = paths
	}
	if len(sb.cfg.preimport) > 0 {
		env[envWarmImports] = strings.Join(sb.cfg.preimport, ",")
	}
	return env
}

// imageExtras is what the snapshot image depends on through packages.
// Nothing unless modules are pre-imported, so that Sandboxes with other
// packages share the default image and New captures none; otherwise the
// Sandbox's packages, mounted and on sys.path, and the modules to import.
func (sb *Sandbox) imageExtras() python.ImageSpec {
	if len(sb.cfg.preimport) == 0 {
		return python.ImageSpec{}
	}
	env := sb.packageEnv(sb.pkgs)
	keys := slices.Sorted(maps.Keys(env))
	spec := python.ImageSpec{Layers: sb.pkgs.layers()}
	for _, k := range keys {
		spec.Env = append(spec.Env, k+"="+env[k])
	}
	return spec
}

// preimportError explains a snapshot capture that failed because a
// pre-imported module did not import (the prelude exits before pausing).
func (sb *Sandbox) preimportError(err error) error {
	if len(sb.cfg.preimport) > 0 && errors.Is(err, engine.ErrNoPausePoint) {
		return fmt.Errorf("%w (%s): %w", ErrPreimport, strings.Join(sb.cfg.preimport, ", "), err)
	}
	return err
}

// checkPreimport makes New fail, without snapshots, as it does with them
// when a pre-imported module does not import: one run imports them.
func (sb *Sandbox) checkPreimport(ctx context.Context) error {
	if len(sb.cfg.preimport) == 0 {
		return nil
	}
	res, err := sb.Run(ctx, Request{})
	if err != nil {
		return fmt.Errorf("%w (%s): %w", ErrPreimport, strings.Join(sb.cfg.preimport, ", "), err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%w (%s): exit status %d\n%s", ErrPreimport, strings.Join(sb.cfg.preimport, ", "), res.ExitCode, res.Stderr)
	}
	return nil
}
