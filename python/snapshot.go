package python

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock/internal/filehash"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/internal/atomicfile"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/errno"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Snapshots (see engine/snapshot.go) need python.wasm transformed by
// Binaryen's asyncify so it can pause in fd_read. The transform takes a
// minute or two and ~1 GB of memory, so it runs at set-up time
// (Asyncify, called by `airlock setup`) and its output is kept in the
// cache directory; LoadAsyncified only ever reads that cache.

// asyncifyBase are wasm-opt's arguments for every build, besides input and
// output: only fd_read can pause; -g keeps the build's function names,
// by which the engine finds the entry functions (EntryFuncs).
var asyncifyBase = []string{"--asyncify", "--pass-arg=asyncify-imports@wasi_snapshot_preview1.fd_read", "-O1", "-g"}

// asyncifyArgs are wasm-opt's arguments, besides input and output, for a
// build whose pause path (see PausePath) is path, or nil when it is
// unknown: then every function that could reach a read is instrumented.
func asyncifyArgs(path []string) []string {
	if len(path) == 0 {
		return asyncifyBase
	}
	names := slices.Sorted(slices.Values(path))
	return append(slices.Clone(asyncifyBase), "--pass-arg=asyncify-onlylist@"+strings.Join(names, ","))
}

// missingName is wasm-opt's warning for a list entry the module lacks.
const missingName = "non-existing function name"

// ErrNoWasmOpt means Asyncify found no wasm-opt to run.
var ErrNoWasmOpt = errors.New("python: asyncify needs Binaryen's wasm-opt, on $PATH or named by Asyncify's wasmOpt argument")

// EnvWasmOpt names, for the airlock command, the wasm-opt to asyncify with
// instead of the one on $PATH.
const EnvWasmOpt = "AIRLOCK_WASM_OPT"

// ErrNotAsyncified means set-up has not produced the asyncified module
// for this python.wasm, so snapshots are unavailable.
var ErrNotAsyncified = errors.New("python: no asyncified python.wasm for snapshots; Asyncify makes it (with Binaryen's wasm-opt)")

// AsyncifyRecord is written beside an asyncified module: how it was made.
type AsyncifyRecord struct {
	InputSHA256  string   `json:"input_sha256"`
	OutputSHA256 string   `json:"output_sha256"`
	Tool         string   `json:"tool"` // wasm-opt --version
	Args         []string `json:"args"`
	Seconds      float64  `json:"seconds"`
}

// asyncifyStem is the cache file name without the tool version: one per
// input and argument list. LoadAsyncified takes any argument list (the
// record beside the file says which).
func asyncifyStem(cacheDir string, art *Artifact, args []string) string {
	sum := sha256.Sum256([]byte(strings.Join(args, "\x00")))
	return fmt.Sprintf("%s-args%x", asyncifyPrefix(cacheDir, art), sum[:4])
}

func asyncifyPrefix(cacheDir string, art *Artifact) string {
	return filepath.Join(cacheDir, "asyncify", "python-"+art.SHA256[:16])
}

// Asyncify makes sure the asyncified form of art exists in cacheDir, running
// wasm-opt (the program wasmOpt names; "" is wasm-opt on $PATH) if it does not, and returns
// its path. Only the functions on the pause path are instrumented when the
// build's functions are named (PausePath), else every function that could
// reach a read. The file is keyed by the input's sha256, the arguments and
// the tool's version; a record of how it was made sits beside it (.json).
// A build that carries its asyncified module (the embedded one) needs
// nothing: the path is then "".
//
// # Errors
// ErrNoWasmOpt when wasm-opt is missing; its failure.
func Asyncify(ctx context.Context, art *Artifact, cacheDir, wasmOpt string, log io.Writer) (string, error) {
	if art.asyncified != nil {
		return "", nil
	}
	tool := wasmOpt
	if tool == "" {
		tool = "wasm-opt"
	}
	version, err := exec.CommandContext(ctx, tool, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoWasmOpt, err)
	}
	ver := strings.TrimSpace(string(version))
	path, err := PausePath(ctx, art, cacheDir)
	if err != nil && !errors.Is(err, ErrNoPausePath) {
		fmt.Fprintf(log, "airlock: %v; instrumenting every function instead (resumed runs then compute ~2x slower)\n", err)
	}
	asyncifyArgs := asyncifyArgs(path)
	dst := fmt.Sprintf("%s-%s.wasm", asyncifyStem(cacheDir, art, asyncifyArgs), sanitize(ver))
	record := strings.TrimSuffix(dst, ".wasm") + ".json"
	if _, err := os.Stat(dst); err == nil {
		// Made already, if it matches its record: a damaged file (a crash,
		// a disk error) is made again rather than refused at every load.
		if matchesRecord(dst, record, art) {
			return dst, nil
		}
		fmt.Fprintf(log, "airlock: %s does not match its record; asyncifying again\n", dst)
		os.Remove(dst)
		os.Remove(record)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("python: asyncify: %w", err)
	}
	wasm, err := art.Module()
	if err != nil {
		return "", fmt.Errorf("python: asyncify: %w", err)
	}
	tmp, err := os.CreateTemp("", "airlock-asyncify-*.wasm")
	if err != nil {
		return "", fmt.Errorf("python: asyncify: %w", err)
	}
	tmp.Write(wasm)
	tmp.Close()
	defer os.Remove(tmp.Name())
	// This process's own output file: set-ups running at once must not
	// write into or remove each other's.
	partFile, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".part-*")
	if err != nil {
		return "", fmt.Errorf("python: asyncify: %w", err)
	}
	partFile.Close()
	part := partFile.Name()
	defer os.Remove(part)
	// CreateTemp makes it 0600: a module asyncified by root (an image's
	// set-up) must be readable by the user who runs it.
	if err := os.Chmod(part, 0o644); err != nil {
		return "", fmt.Errorf("python: asyncify: %w", err)
	}
	fmt.Fprintf(log, "airlock: asyncifying python.wasm with %s for snapshots (a minute or two, ~1 GB of memory)...\n", ver)
	start := time.Now()
	args := append(slices.Clone(asyncifyArgs), tmp.Name(), "-o", part)
	cmd := exec.CommandContext(ctx, tool, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("python: %s %s: %w\n%s", tool, strings.Join(asyncifyArgs, " "), err, out.String())
	}
	if strings.Contains(out.String(), missingName) {
		// The trace named a function the name section does not: the
		// list would leave part of the pause path uninstrumented.
		return "", fmt.Errorf("python: asyncify: the pause path names functions wasm-opt does not find: %s", out.String())
	}
	result, err := os.ReadFile(part)
	if err != nil {
		return "", fmt.Errorf("python: asyncify: %w", err)
	}
	sum := sha256.Sum256(result)
	rec := AsyncifyRecord{InputSHA256: art.SHA256, OutputSHA256: hex.EncodeToString(sum[:]), Tool: ver,
		Args: asyncifyArgs, Seconds: time.Since(start).Round(time.Second / 10).Seconds()}
	meta, _ := json.MarshalIndent(rec, "", "  ")
	// The record, then the module, each by rename: a reader sees either
	// the whole of one or nothing (wasm-opt's output is the same from
	// every process, so records agree).
	if err := atomicfile.WriteBytes(record, 0o644, append(meta, '\n')); err != nil {
		return "", fmt.Errorf("python: asyncify: %w", err)
	}
	if err := os.Rename(part, dst); err != nil {
		return "", fmt.Errorf("python: asyncify: %w", err)
	}
	fmt.Fprintf(log, "airlock: asyncified in %.0fs: %s\n", rec.Seconds, dst)
	return dst, nil
}

// matchesRecord tells whether the module at path is what its record
// says was made from art.
func matchesRecord(path, record string, art *Artifact) bool {
	rec, err := readAsyncRecord(record, art)
	if err != nil {
		return false
	}
	sum, err := filehash.Sum(path)
	return err == nil && sum == rec.OutputSHA256
}

// readAsyncRecord reads an asyncified module's record and checks it was
// made from art.
func readAsyncRecord(record string, art *Artifact) (*AsyncifyRecord, error) {
	meta, err := os.ReadFile(record)
	if err != nil {
		return nil, fmt.Errorf("python: asyncified module's record: %w", err)
	}
	var rec AsyncifyRecord
	if err := json.Unmarshal(meta, &rec); err != nil {
		// Damaged (a crash, a disk error): Asyncify makes the pair again.
		return nil, fmt.Errorf("python: asyncified module's record %s: %w (`airlock setup` makes it again)", record, err)
	}
	if rec.InputSHA256 != art.SHA256 {
		return nil, fmt.Errorf("%w: %s was made from another build", ErrChecksum, record)
	}
	return &rec, nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// LoadAsyncified returns the asyncified form of art made by Asyncify (the
// newest, if several tool versions made one), checked against its record;
// for a build that carries its own (the embedded one, checked when it was
// loaded), that one, whatever the cache holds.
//
// # Errors
// ErrNotAsyncified when there is none; a read error; a checksum mismatch.
func LoadAsyncified(art *Artifact, cacheDir string) ([]byte, *AsyncifyRecord, error) {
	rec, read, err := AsyncifiedSource(art, cacheDir)
	if err != nil {
		return nil, nil, err
	}
	wasm, err := read()
	if err != nil {
		return nil, nil, err
	}
	return wasm, rec, nil
}

// AsyncifiedSource is LoadAsyncified with the module's bytes read only
// when read is called (then checked against rec.OutputSHA256): a process
// whose compiled code and snapshot come from the cache never needs them.
//
// # Errors
// ErrNotAsyncified when there is none; a record that does not read or is
// of another build (ErrChecksum). read returns a read error or
// ErrChecksum.
func AsyncifiedSource(art *Artifact, cacheDir string) (*AsyncifyRecord, func() ([]byte, error), error) {
	if art.asyncified != nil {
		return art.asyncRecord, func() ([]byte, error) { return art.asyncified, nil }, nil
	}
	matches, _ := filepath.Glob(asyncifyPrefix(cacheDir, art) + "-args*-*.wasm")
	if len(matches) == 0 {
		return nil, nil, ErrNotAsyncified
	}
	sort.Slice(matches, func(i, j int) bool { return modTime(matches[i]).After(modTime(matches[j])) })
	path := matches[0]
	rec, err := readAsyncRecord(strings.TrimSuffix(path, ".wasm")+".json", art)
	if err != nil {
		return nil, nil, err
	}
	read := sync.OnceValues(func() ([]byte, error) {
		wasm, sum, err := filehash.Read(path)
		if err != nil {
			return nil, fmt.Errorf("python: read %s: %w", path, err)
		}
		if sum != rec.OutputSHA256 {
			return nil, fmt.Errorf("%w: %s does not match its record (`airlock setup` makes it again)", ErrChecksum, path)
		}
		return wasm, nil
	})
	return rec, read, nil
}

func modTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// SnapshotEnv is the environment an image is captured with: the default
// one, plus the flag that makes the prelude warm up before pausing.
// Variables read at start-up (PYTHON*, LANG, LC_*) are fixed in the image;
// a run that sets them differently needs a fresh interpreter (see
// StartupEnvDiffers).
func SnapshotEnv() []string { return append(DefaultEnv(), "AIRLOCK_SNAPSHOT=1") }

// StartupEnvDiffers tells whether env sets a variable CPython reads at
// start-up differently from base, the environment the image was captured
// with (Artifact.BaseEnv), so that a run with env cannot be served from
// the image.
func StartupEnvDiffers(baseEnv, env []string) bool {
	base := map[string]string{}
	for _, kv := range baseEnv {
		k, v, _ := strings.Cut(kv, "=")
		base[k] = v
	}
	seen := 0
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if !startupVar(k) {
			continue
		}
		if bv, ok := base[k]; !ok || bv != v {
			return true
		}
		seen++
	}
	for k := range base {
		if startupVar(k) {
			seen--
		}
	}
	return seen != 0 // a start-up variable was removed
}

func startupVar(k string) bool {
	return strings.HasPrefix(k, "PYTHON") || k == "LANG" || strings.HasPrefix(k, "LC_")
}

// SnapshotMemory is the memory cap an image is captured under; it does
// not bound runs, whose own cap must only exceed the image's size.
const SnapshotMemory = 1 << 30

// ImageImportsVar names, in an ImageSpec's Env, modules the prelude
// imports into the image (','-separated); it is gone from the image's
// environment, so runs need not remove it.
const ImageImportsVar = "AIRLOCK_IMAGE_IMPORTS"

// ImageSpec is what an image depends on besides the prelude and the
// default environment, which every image shares.
type ImageSpec struct {
	// ModuleSHA is the sha256 of the asyncified module.
	ModuleSHA string
	// Layers are mounted read-only into the capture's filesystem, as they
	// are into every run's (the interpreter's stdlib, packages).
	Layers []*memfs.Layer
	// Env is added to the snapshot environment.
	Env []string
}

// Env is the environment the image is captured with.
func (s ImageSpec) env() []string { return append(SnapshotEnv(), s.Env...) }

// fs is the filesystem the interpreter starts with before its snapshot:
// the home and temporary directories, and the spec's layers.
func (s ImageSpec) fs() (*memfs.FS, error) {
	fs := memfs.New(memfs.Options{})
	for _, dir := range []string{Home, "/tmp"} {
		if _, err := fs.MkdirAll(dir); err != nil {
			return nil, err
		}
	}
	for _, l := range s.Layers {
		if err := fs.Mount(l); err != nil {
			return nil, err
		}
	}
	return fs, nil
}

// Key is everything an image depends on.
func (s ImageSpec) Key() engine.ImageKey {
	h := sha256.New()
	fmt.Fprintf(h, "airlock image\x00format %d\x00module %s\x00", engine.ImageFormat, s.ModuleSHA)
	for _, f := range EntryFuncs {
		fmt.Fprintf(h, "entry %s\x00", f)
	}
	for _, a := range Args() {
		fmt.Fprintf(h, "arg %d %s\x00", len(a), a)
	}
	for _, e := range s.env() {
		fmt.Fprintf(h, "env %d %s\x00", len(e), e)
	}
	for _, l := range s.Layers {
		fmt.Fprintf(h, "layer %x\x00", l.Digest())
	}
	var key engine.ImageKey
	h.Sum(key[:0])
	return key
}

var (
	imagesMu sync.Mutex
	images   = map[engine.ImageKey]*engine.Snapshot{}
)

// Snapshot returns the image of the prelude paused at its first read,
// for mod (loaded by engine.LoadResumable from the asyncified module whose
// sha256 is spec.ModuleSHA): from this process's memory, else from cacheDir
// ("" for none), else captured now (~0.5-1 s) and stored there.
//
// A stored image that is corrupt or was made from other inputs is
// reported to notice (when not nil), discarded and replaced.
//
// # Errors
// A capture that fails (see engine.Compiled.Capture).
func Snapshot(ctx context.Context, mod *engine.Compiled, spec ImageSpec, cacheDir string, notice io.Writer) (*engine.Snapshot, error) {
	key := spec.Key()
	imagesMu.Lock()
	defer imagesMu.Unlock()
	if img, ok := images[key]; ok {
		return img, nil
	}
	img, err := loadOrCapture(ctx, mod, spec, cacheDir, notice)
	if err != nil {
		return nil, err
	}
	images[key] = img
	return img, nil
}

func loadOrCapture(ctx context.Context, mod *engine.Compiled, spec ImageSpec, cacheDir string, notice io.Writer) (*engine.Snapshot, error) {
	key := spec.Key()
	path := ""
	if cacheDir != "" {
		path = ImagePath(cacheDir, key)
		img, err := engine.ReadSnapshotFile(path, key)
		if err == nil {
			return img, nil
		}
		var bad *engine.ImageError
		if errors.As(err, &bad) {
			if notice != nil {
				fmt.Fprintf(notice, "airlock: %v; capturing a new one\n", err)
			}
			os.Remove(path) // replaced below, by whichever process stores first
			filehash.Forget(path)
		}
	}
	img, err := Capture(ctx, mod, spec)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return img, nil
	}
	// Processes sharing a cache must share the image too (a session saved
	// in one loads only in a process with the same image), so the first
	// one stored wins: a process that captured at the same time takes it.
	switch err := engine.CreateSnapshotFile(path, key, img); {
	case errors.Is(err, fs.ErrExist):
		if theirs, rerr := engine.ReadSnapshotFile(path, key); rerr == nil {
			img.Close()
			return theirs, nil
		}
	case err != nil && notice != nil:
		fmt.Fprintf(notice, "airlock: %v\n", err)
	}
	return img, nil
}

// ImagePath is where the image with key is stored. The file also holds
// the whole key, checked on reading: a file that does not match is
// rejected and replaced.
func ImagePath(cacheDir string, key engine.ImageKey) string {
	return filepath.Join(cacheDir, "snapshots", fmt.Sprintf("python-%x.img", key[:8]))
}

// EntryFuncs are the functions a run resumed from an image calls, where
// the build names them (engine.Options.Entry): the interpreter's thread
// takes back the GIL, which the loop's read had released, then the
// prelude's entry point (its function `enter`) is called with no
// arguments. The run then starts in the prelude at once, on an empty
// stack: no rewind of asyncify's through the loop's read, and no
// statement for the loop to compile (~0.1 ms, and 37% of the
// instructions of a run of `pass`).
var EntryFuncs = []string{"PyGILState_Ensure", "PyObject_CallNoArgs"}

// entryDevice is where, at a capture, the prelude tells its entry point:
// the address of its function `call` (CPython's id()).
const entryDevice = "/dev/airlock-entry"

// Capture starts the prelude in spec's snapshot environment and returns
// the image of it paused in the interactive loop's first read, with the
// prelude's entry point when mod can call it (engine.Compiled.Enters).
func Capture(ctx context.Context, mod *engine.Compiled, spec ImageSpec) (*engine.Snapshot, error) {
	fs, err := spec.fs()
	if err != nil {
		return nil, fmt.Errorf("python: snapshot: %w", err)
	}
	var stderr bytes.Buffer
	var entry entryReport
	var random randomReport
	state := wasi.NewState(wasi.Config{Args: Args(), Env: spec.env(), FS: fs, Stdout: &stderr, Stderr: &stderr,
		Devices: map[string]wasi.Device{entryDevice: &entry, immortalDevice: &immortaliser{}, randomDevice: &random}})
	defer state.Close()
	img, err := mod.Capture(ctx, engine.RunSpec{WASI: state, MemoryLimit: SnapshotMemory, PauseWhen: LoopRead})
	if err != nil {
		return nil, fmt.Errorf("python: %w\n%s", err, stderr.Bytes())
	}
	var entryAt uint32 // the image's entry point: none unless the module enters
	if mod.Enters() {
		if entry.addr == 0 {
			img.Close()
			return nil, fmt.Errorf("python: snapshot: the prelude did not report its entry point on %s\n%s", entryDevice, stderr.Bytes())
		}
		entryAt = entry.addr
	}
	img.SetEntry(entryAt, random.state)
	return img, nil
}

// entryReport receives the prelude's entry point at a capture.
type entryReport struct{ addr uint32 }

func (d *entryReport) Write(_ context.Context, p []byte) (int, error) {
	addr, err := strconv.ParseUint(string(p), 10, 32)
	if err != nil || addr == 0 {
		return 0, fmt.Errorf("python: entry point %q: not an address", p)
	}
	d.addr = uint32(addr)
	return len(p), nil
}

func (d *entryReport) Read(context.Context, []byte) (int, error) { return 0, nil }

// immortalDevice is where, at a capture, the prelude names the objects
// alive in the image, for the host to make immortal (immortaliser).
const immortalDevice = "/dev/airlock-immortal"

// immortaliser makes the objects the prelude names immortal, in the
// guest's memory as it names them: CPython (3.12 on) neither counts
// references to an immortal object nor frees it, so a run no longer
// writes to an image page just to count a reference to something on it.
// Marking the objects from the guest's own code is not possible
// (CPython has no call for it); marking them in the image after the
// capture is not safe, since an object named may have been freed by
// then and its memory reused.
//
// Each write is one little-endian 32-bit word after another: the
// immortal count (the prelude's sys.getrefcount(None)), then the
// addresses (id()) of objects, whose count is their first word
// (PyObject.ob_refcnt on a 32-bit build). A write that names a place
// outside memory, a misaligned one, or one holding a count of zero (no
// live object) changes nothing and answers EINVAL.
type immortaliser struct{}

func (immortaliser) WriteMemory(_ context.Context, mem, p []byte) (int, error) {
	if len(p) < 8 || len(p)%4 != 0 {
		return 0, errno.EINVAL
	}
	words := make([]uint32, len(p)/4) // p is guest memory, which the loop below changes
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(p[4*i:])
	}
	immortal, addrs := words[0], words[1:]
	if immortal == 0 {
		return 0, errno.EINVAL
	}
	for _, a := range addrs {
		if a%4 != 0 || uint64(a)+4 > uint64(len(mem)) || binary.LittleEndian.Uint32(mem[a:]) == 0 {
			return 0, errno.EINVAL
		}
	}
	for _, a := range addrs {
		binary.LittleEndian.PutUint32(mem[a:], immortal)
	}
	return len(p), nil
}

func (immortaliser) Write(context.Context, []byte) (int, error) { return 0, errno.EINVAL }
func (immortaliser) Read(context.Context, []byte) (int, error)  { return 0, nil }

// randomDevice is where, at a capture, the prelude tells where the state
// of random's shared generator lies, for the host to fill with fresh
// bytes at each run from the image (engine.Snapshot.Fresh) instead of the
// guest reseeding it: random.seed() is ~87,000 WebAssembly instructions,
// a third of a run of `pass`. The generator is a Mersenne Twister, and a
// state of 624 uniformly random words is what seeding from 2,496 bytes
// of OS entropy approximates.
const randomDevice = "/dev/airlock-random"

// mtWords is the Mersenne Twister's state size in 32-bit words.
const mtWords = 624

// randomReport receives, at a capture, one write of little-endian 32-bit
// words: the generator object's address (id(random._inst)), then its
// state as getstate() gives it (624 words, then the index). The state's
// place inside the object is CPython's (RandomObject: the object header,
// the index, the words), so the device looks for the index followed by
// the words just past the object's header rather than assume an offset,
// and takes the words' range only where memory holds exactly what the
// guest reported. Anything else (a write of another size, an address
// outside memory, no match) is EINVAL, and the image gets no fresh range:
// the guest then reseeds itself.
type randomReport struct{ state engine.Range }

func (d *randomReport) WriteMemory(_ context.Context, mem, p []byte) (int, error) {
	const stateBytes = 4 * mtWords
	if len(p) != 4+stateBytes+4 {
		return 0, errno.EINVAL
	}
	addr := uint64(binary.LittleEndian.Uint32(p))
	state, index := p[4:4+stateBytes], p[4+stateBytes:]
	// The header is two words on a 32-bit build; a few more are allowed
	// for a layout that grows one.
	for off := uint64(8); off <= 32; off += 4 {
		at := addr + off
		if at+4+stateBytes > uint64(len(mem)) {
			break
		}
		if bytes.Equal(mem[at:at+4], index) && bytes.Equal(mem[at+4:at+4+stateBytes], state) {
			d.state = engine.Range{Addr: uint32(at + 4), Len: stateBytes}
			return len(p), nil
		}
	}
	return 0, errno.EINVAL
}

func (*randomReport) Write(context.Context, []byte) (int, error) { return 0, errno.EINVAL }
func (*randomReport) Read(context.Context, []byte) (int, error)  { return 0, nil }
