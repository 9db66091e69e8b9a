package python

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock/internal/atomicfile"
)

// A bundle is the own build, ready for snapshots, in one file, for hosts
// that cannot build it (no root, no apt, no wasm-opt): a tar (gzipped or
// not) of a manifest and five files, each checked against the manifest's
// sha256 on import. Compiled code and snapshot images are not in it: they
// depend on the machine and the engine, and are made on first use or by
// `airlock setup`.
//
//	manifest.json   {"format": "airlock-bundle", "version": 1, "files": [{name, size, sha256}...]}
//	python.wasm     the own build's module
//	python313.zip   its stdlib
//	build.json      its record (BuildRecord), naming the two above by sha256
//	asyncify.wasm   the asyncified module (Asyncify), for snapshots
//	asyncify.json   its record (AsyncifyRecord), naming python.wasm and asyncify.wasm by sha256
//
// The manifest comes first, so that every later entry is checked as it is
// read, against sizes known before any byte of it is.

const (
	// BundleFormat is the manifest's "format": what says a tar is a bundle.
	BundleFormat = "airlock-bundle"
	// BundleVersion is the manifest's "version" this code writes and reads.
	BundleVersion = 1

	bundleManifest  = "manifest.json"
	bundleAsyncWasm = "asyncify.wasm"
	bundleAsyncRec  = "asyncify.json"
)

// bundleCaps are the entries a bundle has, in the order they are written,
// with the most bytes each may have: a hostile bundle cannot make an
// import read more than their sum. (The own build's files are ~10-40 MB.)
var bundleCaps = []struct {
	name string
	max  int64
}{
	{OwnWasm, 256 << 20},
	{OwnStdlib, 256 << 20},
	{OwnRecord, 1 << 20},
	{bundleAsyncWasm, 256 << 20},
	{bundleAsyncRec, 1 << 20},
}

const manifestCap = 1 << 20

func bundleCap(name string) (int64, bool) {
	if name == bundleManifest {
		return manifestCap, true
	}
	for _, c := range bundleCaps {
		if c.name == name {
			return c.max, true
		}
	}
	return 0, false
}

// What is wrong with a bundle that ImportBundle refuses: the Kind of a
// *BundleError, which matches it with errors.Is.
var (
	// ErrBundleFormat: not a bundle (no manifest first, another format, a
	// version this Airlock does not read), or entries missing, repeated,
	// not regular files or not in the manifest.
	ErrBundleFormat = errors.New("not a bundle, or not one this Airlock reads")
	// ErrBundleTruncated: the file ends before its last entry does.
	ErrBundleTruncated = errors.New("truncated")
	// ErrBundleChecksum: an entry's bytes are not those the manifest
	// names (its size or sha256). It matches ErrChecksum too.
	ErrBundleChecksum = errors.New("checksum mismatch")
	// ErrBundleUnsafePath: an entry's name would reach outside where it
	// is installed (a directory, "..", an absolute path) or is a link.
	ErrBundleUnsafePath = errors.New("unsafe entry name")
	// ErrBundleTooLarge: an entry is bigger than an entry of its kind may be.
	ErrBundleTooLarge = errors.New("entry too large")
	// ErrBundleMismatch: the entries do not belong together: a record
	// names another python.wasm, stdlib or asyncified module than the
	// bundle's.
	ErrBundleMismatch = errors.New("entries do not belong together")
)

// BundleError is a bundle ImportBundle refused, and why.
type BundleError struct {
	Kind   error  // one of the ErrBundle* values
	Entry  string // the entry at fault, "" for the bundle as a whole
	Detail string
	Err    error // the underlying error, if any
}

func (e *BundleError) Error() string {
	var b strings.Builder
	b.WriteString("python: bundle")
	if e.Entry != "" {
		b.WriteString(" entry " + strconv.Quote(e.Entry))
	}
	b.WriteString(": " + e.Kind.Error())
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *BundleError) Unwrap() []error {
	errs := []error{e.Kind}
	if e.Kind == ErrBundleChecksum {
		errs = append(errs, ErrChecksum)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

func bundleErr(kind error, entry, format string, args ...any) *BundleError {
	return &BundleError{Kind: kind, Entry: entry, Detail: fmt.Sprintf(format, args...)}
}

// BundleManifest is a bundle's manifest.json.
type BundleManifest struct {
	Format  string       `json:"format"`
	Version int          `json:"version"`
	Python  string       `json:"python_version"` // informative: CPython's version
	Files   []BundleFile `json:"files"`
	// SHA256 is the sha256 of manifest.json's bytes as the bundle holds
	// them: as each file's sum is in it, this one names the whole bundle,
	// gzipped or not (what FetchBundle's caller pins).
	SHA256 string `json:"-"`
}

// BundleFile is one entry named in a bundle's manifest.
type BundleFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ErrExportNotOwn means ExportBundle was given a build other than the own
// one: only it is bundled (the npm one is fetched, a custom file unchecked).
var ErrExportNotOwn = errors.New("python: only the own build can be exported as a bundle")

// ExportBundle writes art, the own build, and its asyncified module (from
// cacheDir, or the one art carries) to w as a bundle, gzipped when gz is
// true, and returns the bundle's manifest. The asyncified module is
// checked against its record first; the files are art's, which were
// checked when it was loaded. The output depends on the files only (no
// time stamps), so the same build exports to the same bytes.
//
// # Errors
// ErrExportNotOwn for another build; ErrNotAsyncified (wrapped) when
// set-up has not asyncified it; a checksum error; w's error.
func ExportBundle(w io.Writer, art *Artifact, cacheDir string, gz bool) (*BundleManifest, error) {
	if art.Build != ownBuildName || art.recordJSON == nil || art.stdlibZip == nil {
		return nil, fmt.Errorf("%w (this is the %s build)", ErrExportNotOwn, art.Build)
	}
	async, rec, err := LoadAsyncified(art, cacheDir)
	if err != nil {
		return nil, fmt.Errorf("python: export bundle: %w", err)
	}
	recJSON, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("python: export bundle: %w", err)
	}
	wasm, err := art.Module()
	if err != nil {
		return nil, fmt.Errorf("python: export bundle: %w", err)
	}
	files := map[string][]byte{
		OwnWasm: wasm, OwnStdlib: art.stdlibZip, OwnRecord: art.recordJSON,
		bundleAsyncWasm: async, bundleAsyncRec: append(recJSON, '\n'),
	}
	man := &BundleManifest{Format: BundleFormat, Version: BundleVersion, Python: art.Version}
	for _, c := range bundleCaps {
		man.Files = append(man.Files, BundleFile{Name: c.name, Size: int64(len(files[c.name])), SHA256: sha256Hex(files[c.name])})
	}
	manJSON, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("python: export bundle: %w", err)
	}
	out := w
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(w)
		out = zw
	}
	tw := tar.NewWriter(out)
	write := func(name string, data []byte) error {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg,
			ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	manJSON = append(manJSON, '\n')
	man.SHA256 = sha256Hex(manJSON)
	if err := write(bundleManifest, manJSON); err != nil {
		return nil, fmt.Errorf("python: export bundle: %w", err)
	}
	for _, c := range bundleCaps {
		if err := write(c.name, files[c.name]); err != nil {
			return nil, fmt.Errorf("python: export bundle: %s: %w", c.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("python: export bundle: %w", err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("python: export bundle: %w", err)
		}
	}
	return man, nil
}

// bundle is a bundle read and checked whole: every entry matches the
// manifest and the records match the files.
type bundle struct {
	manifest *BundleManifest
	files    map[string][]byte
	build    *BuildRecord
	async    *AsyncifyRecord
}

// artifact is the bundle's build, carrying its asyncified module when
// carry is true (the embedded build: LoadAsyncified then needs no cache).
func (b *bundle) artifact(carry bool) (*Artifact, error) {
	art, err := ownArtifact(b.build, b.files[OwnRecord], b.files[OwnWasm], b.build.PythonWasmSHA256,
		b.files[OwnStdlib], b.build.StdlibZipSHA256, "")
	if err != nil {
		return nil, err
	}
	if carry {
		art.asyncified, art.asyncRecord = b.files[bundleAsyncWasm], b.async
	}
	return art, nil
}

// readBundle reads a bundle from r, gzipped or not, and checks it whole.
// When data is r's whole content (an embedded bundle), entries are
// slices of it rather than copies.
func readBundle(r io.Reader, data []byte) (*bundle, error) {
	var src io.Reader
	switch {
	case data != nil && !isGzip(data):
		// Slicing data needs tar's reader on it directly, with nothing
		// reading ahead.
		src = bytes.NewReader(data)
	default:
		br := bufio.NewReader(r)
		src = br
		if magic, _ := br.Peek(2); isGzip(magic) {
			zr, err := gzip.NewReader(br)
			if err != nil {
				return nil, &BundleError{Kind: ErrBundleFormat, Detail: "gzip", Err: err}
			}
			src, data = zr, nil
		}
	}
	tr := tar.NewReader(src)
	next := func() (*tar.Header, error) {
		h, err := tr.Next()
		switch {
		case err == nil:
			return h, nil
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, &BundleError{Kind: ErrBundleTruncated, Err: err}
		case err == io.EOF:
			return nil, err
		}
		return nil, &BundleError{Kind: ErrBundleFormat, Err: err}
	}
	read := func(h *tar.Header, max int64) ([]byte, error) {
		if err := checkEntry(h); err != nil {
			return nil, err
		}
		if h.Size > max {
			return nil, bundleErr(ErrBundleTooLarge, h.Name, "%d bytes, at most %d", h.Size, max)
		}
		if sr, ok := src.(*bytes.Reader); ok && data != nil {
			// tar reads headers block by block and nothing ahead: the
			// entry's bytes start where the reader stands.
			off := int64(len(data)) - int64(sr.Len())
			if off+h.Size > int64(len(data)) {
				return nil, &BundleError{Kind: ErrBundleTruncated, Entry: h.Name, Err: io.ErrUnexpectedEOF}
			}
			return data[off : off+h.Size : off+h.Size], nil
		}
		// Read as it comes, not allocated at the header's word: a header
		// that promises more than follows costs only what does follow.
		buf, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if errors.Is(err, io.ErrUnexpectedEOF) || err == nil && int64(len(buf)) < h.Size {
			return nil, &BundleError{Kind: ErrBundleTruncated, Entry: h.Name, Err: io.ErrUnexpectedEOF}
		} else if err != nil {
			return nil, &BundleError{Kind: ErrBundleFormat, Entry: h.Name, Err: err}
		}
		return buf, nil
	}

	h, err := next()
	if err == io.EOF {
		return nil, bundleErr(ErrBundleFormat, "", "empty")
	} else if errors.Is(err, ErrBundleTruncated) {
		// Not even one header: less a cut bundle than something else.
		return nil, &BundleError{Kind: ErrBundleFormat, Detail: "not a tar file", Err: io.ErrUnexpectedEOF}
	} else if err != nil {
		return nil, err
	}
	if h.Name != bundleManifest {
		if err := checkEntry(h); err != nil {
			return nil, err
		}
		return nil, bundleErr(ErrBundleFormat, h.Name, "the first entry is not %s", bundleManifest)
	}
	manJSON, err := read(h, manifestCap)
	if err != nil {
		return nil, err
	}
	man, want, err := parseManifest(manJSON)
	if err != nil {
		return nil, err
	}
	man.SHA256 = sha256Hex(manJSON)
	files := map[string][]byte{}
	for {
		h, err := next()
		if err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if err := checkEntry(h); err != nil {
			return nil, err
		}
		f, ok := want[h.Name]
		if !ok {
			return nil, bundleErr(ErrBundleFormat, h.Name, "not in the manifest")
		}
		if _, dup := files[h.Name]; dup {
			return nil, bundleErr(ErrBundleFormat, h.Name, "appears twice")
		}
		max, _ := bundleCap(h.Name)
		body, err := read(h, max)
		if err != nil {
			return nil, err
		}
		if int64(len(body)) != f.Size {
			return nil, bundleErr(ErrBundleChecksum, h.Name, "%d bytes, the manifest says %d", len(body), f.Size)
		}
		if got := sha256Hex(body); got != f.SHA256 {
			return nil, bundleErr(ErrBundleChecksum, h.Name, "sha256 %s, the manifest says %s", got, f.SHA256)
		}
		files[h.Name] = body
	}
	for _, c := range bundleCaps {
		if _, ok := files[c.name]; !ok {
			// Every entry named is required: a bundle missing one ended early.
			return nil, bundleErr(ErrBundleTruncated, c.name, "the bundle ends without it")
		}
	}
	return checkBundle(man, files)
}

// checkEntry refuses an entry that is not a plain file with a plain name:
// nothing in a bundle may name a place outside the entry itself.
func checkEntry(h *tar.Header) error {
	name := h.Name
	if name == "" || strings.ContainsAny(name, "/\\\x00") || name == "." || name == ".." || filepath.IsAbs(name) {
		return bundleErr(ErrBundleUnsafePath, name, "entries are plain file names")
	}
	for k := range h.PAXRecords {
		// A sparse file's map sits in its data: its bytes are not the entry's.
		if strings.HasPrefix(k, "GNU.sparse.") {
			return bundleErr(ErrBundleFormat, name, "a sparse file")
		}
	}
	switch h.Typeflag {
	case tar.TypeReg:
		return nil
	case tar.TypeSymlink, tar.TypeLink:
		return bundleErr(ErrBundleUnsafePath, name, "a link to %q", h.Linkname)
	}
	return bundleErr(ErrBundleFormat, name, "not a regular file (type %q)", h.Typeflag)
}

// parseManifest checks a manifest and returns its files by name.
func parseManifest(data []byte) (*BundleManifest, map[string]BundleFile, error) {
	var man BundleManifest
	if err := json.Unmarshal(data, &man); err != nil {
		return nil, nil, &BundleError{Kind: ErrBundleFormat, Entry: bundleManifest, Err: err}
	}
	if man.Format != BundleFormat {
		return nil, nil, bundleErr(ErrBundleFormat, bundleManifest, "format %q, want %q", man.Format, BundleFormat)
	}
	if man.Version != BundleVersion {
		return nil, nil, bundleErr(ErrBundleFormat, bundleManifest, "version %d; this Airlock reads version %d", man.Version, BundleVersion)
	}
	want := map[string]BundleFile{}
	for _, f := range man.Files {
		if strings.ContainsAny(f.Name, "/\\\x00") || f.Name == ".." || filepath.IsAbs(f.Name) {
			return nil, nil, bundleErr(ErrBundleUnsafePath, f.Name, "named in the manifest")
		}
		max, ok := bundleCap(f.Name)
		if !ok || f.Name == bundleManifest {
			return nil, nil, bundleErr(ErrBundleFormat, f.Name, "the manifest names an entry bundles do not have")
		}
		if _, dup := want[f.Name]; dup {
			return nil, nil, bundleErr(ErrBundleFormat, f.Name, "named twice in the manifest")
		}
		if f.Size < 0 || f.Size > max {
			return nil, nil, bundleErr(ErrBundleTooLarge, f.Name, "the manifest says %d bytes, at most %d", f.Size, max)
		}
		if len(f.SHA256) != 64 || !validKey(f.SHA256) {
			return nil, nil, bundleErr(ErrBundleFormat, f.Name, "the manifest's sha256 %q is not one", f.SHA256)
		}
		want[f.Name] = f
	}
	for _, c := range bundleCaps {
		if _, ok := want[c.name]; !ok {
			return nil, nil, bundleErr(ErrBundleFormat, c.name, "the manifest does not name it")
		}
	}
	return &man, want, nil
}

// checkBundle checks that the records describe the bundle's files.
func checkBundle(man *BundleManifest, files map[string][]byte) (*bundle, error) {
	var build BuildRecord
	if err := json.Unmarshal(files[OwnRecord], &build); err != nil {
		return nil, &BundleError{Kind: ErrBundleFormat, Entry: OwnRecord, Err: err}
	}
	if !validKey(build.Key) {
		return nil, bundleErr(ErrBundleFormat, OwnRecord, "no valid key (%q)", build.Key)
	}
	wasmSHA := sha256Hex(files[OwnWasm])
	if build.PythonWasmSHA256 != wasmSHA {
		return nil, bundleErr(ErrBundleMismatch, OwnRecord, "it records python.wasm %s, the bundle's is %s", build.PythonWasmSHA256, wasmSHA)
	}
	if got := sha256Hex(files[OwnStdlib]); build.StdlibZipSHA256 != got {
		return nil, bundleErr(ErrBundleMismatch, OwnRecord, "it records %s %s, the bundle's is %s", OwnStdlib, build.StdlibZipSHA256, got)
	}
	var async AsyncifyRecord
	if err := json.Unmarshal(files[bundleAsyncRec], &async); err != nil {
		return nil, &BundleError{Kind: ErrBundleFormat, Entry: bundleAsyncRec, Err: err}
	}
	if async.InputSHA256 != wasmSHA {
		return nil, bundleErr(ErrBundleMismatch, bundleAsyncRec, "the asyncified module was made from python.wasm %s, the bundle's is %s", async.InputSHA256, wasmSHA)
	}
	if got := sha256Hex(files[bundleAsyncWasm]); async.OutputSHA256 != got {
		return nil, bundleErr(ErrBundleMismatch, bundleAsyncRec, "it records %s %s, the bundle's is %s", bundleAsyncWasm, async.OutputSHA256, got)
	}
	// The tool's version names the installed file (sanitised): bounded.
	if async.Tool == "" || len(async.Tool) > 128 || len(async.Args) == 0 {
		return nil, bundleErr(ErrBundleFormat, bundleAsyncRec, "no tool or arguments, or a tool name over 128 bytes")
	}
	for _, name := range []string{OwnWasm, bundleAsyncWasm} {
		if !bytes.HasPrefix(files[name], []byte("\x00asm")) {
			return nil, bundleErr(ErrBundleFormat, name, "not a WebAssembly module")
		}
	}
	return &bundle{manifest: man, files: files, build: &build, async: &async}, nil
}

// ImportBundle reads a bundle (ExportBundle's, gzipped or not) from r,
// checks all of it, then installs it into cacheDir: the own build with
// InstallOwn, the asyncified module and its record into the asyncify
// directory under the name LoadAsyncified finds (each file written
// aside and renamed into place). It returns the bundle's manifest.
// Nothing is written before the whole bundle has been read and checked.
//
// # Errors
// A *BundleError (errors.Is one of ErrBundleFormat, ErrBundleTruncated,
// ErrBundleChecksum, ErrBundleUnsafePath, ErrBundleTooLarge,
// ErrBundleMismatch) for a bundle refused, which changes nothing; r's
// read error; a file system error while installing, after which the
// build in use is the one before (InstallOwn) and the asyncified files
// this call added are removed.
func ImportBundle(r io.Reader, cacheDir string) (*BundleManifest, error) {
	b, err := readBundle(r, nil)
	if err != nil {
		return nil, err
	}
	return installBundle(b, cacheDir)
}

// installBundle installs b, read and checked whole, as ImportBundle says.
func installBundle(b *bundle, cacheDir string) (*BundleManifest, error) {
	art, err := b.artifact(false)
	if err != nil {
		return nil, err
	}
	dst := asyncifyStem(cacheDir, art, b.async.Args) + "-" + sanitize(b.async.Tool) + ".wasm"
	record := strings.TrimSuffix(dst, ".wasm") + ".json"
	var added []string
	if !matchesRecord(dst, record, art) {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, fmt.Errorf("python: import bundle: %w", err)
		}
		recJSON, _ := json.MarshalIndent(b.async, "", "  ")
		for _, f := range []struct {
			path string
			data []byte
		}{{record, append(recJSON, '\n')}, {dst, b.files[bundleAsyncWasm]}} {
			if _, err := os.Stat(f.path); errors.Is(err, os.ErrNotExist) {
				added = append(added, f.path)
			}
			if err := atomicfile.WriteBytes(f.path, 0o644, f.data); err != nil {
				removeAll(added)
				return nil, fmt.Errorf("python: import bundle: %w", err)
			}
		}
	}
	if _, err := InstallOwn(cacheDir, map[string][]byte{
		OwnWasm: b.files[OwnWasm], OwnStdlib: b.files[OwnStdlib], OwnRecord: b.files[OwnRecord],
	}); err != nil {
		removeAll(added)
		return nil, fmt.Errorf("python: import bundle: %w", err)
	}
	return b.manifest, nil
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

func removeAll(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// LoadBundle reads the bundle data (checked as ImportBundle checks it)
// as an artifact that carries its asyncified module, without installing
// anything: the embedded build. Its files are slices of data, not copies.
//
// # Errors
// A *BundleError, as for ImportBundle.
func LoadBundle(data []byte) (*Artifact, error) {
	b, err := readBundle(bytes.NewReader(data), data)
	if err != nil {
		return nil, err
	}
	return b.artifact(true)
}

// Embedded tells whether this binary carries the own build (built with
// -tags airlock_embed), which Load then takes for SelectOwn.
func Embedded() bool { return embeddedOwn != nil }
