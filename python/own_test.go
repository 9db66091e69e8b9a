package python

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// writeOwn lays out an own build in cacheDir: the real one's files when
// `make python` has made them, else small stand-ins (these tests are about
// selection and verification, which read bytes and build.json only).
func writeOwn(t *testing.T, cacheDir string) (wasm, zip []byte) {
	t.Helper()
	wasm, zip = []byte("\x00asm\x01\x00\x00\x00"), []byte("PK\x05\x06"+string(make([]byte, 18)))
	if _, err := LoadOwn(OwnDir(mustCacheDir(t))); err == nil {
		real := OwnDir(mustCacheDir(t))
		wasm, _ = os.ReadFile(filepath.Join(real, OwnWasm))
		zip, _ = os.ReadFile(filepath.Join(real, OwnStdlib))
	}
	dir := OwnDir(cacheDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := BuildRecord{Key: "test", PythonVersion: "3.13.5", PythonWasmSHA256: sha(wasm), StdlibZipSHA256: sha(zip)}
	meta, _ := json.Marshal(rec)
	for name, data := range map[string][]byte{OwnWasm: wasm, OwnStdlib: zip, OwnRecord: meta} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return wasm, zip
}

// sharedFiles counts the stdlib zip's files the layer also serves as
// real files (OwnSharedData).
func sharedFiles(t *testing.T, data []byte) int {
	t.Helper()
	r, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range r.File {
		if strings.HasPrefix(f.Name, OwnSharedData) && !strings.HasSuffix(f.Name, "/") {
			n++
		}
	}
	return n
}

// cacheOnly makes Load look for the own build in the cache, as a binary
// without an embedded one does, for tests of that choice: under -tags
// airlock_embed Load takes the embedded build (TestEmbeddedOwnBuild).
func cacheOnly(t *testing.T) {
	saved := embeddedOwn
	embeddedOwn = nil
	t.Cleanup(func() { embeddedOwn = saved })
}

func mustCacheDir(t *testing.T) string {
	d, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestLoadChoosesOwnBuild(t *testing.T) {
	cacheOnly(t)
	t.Setenv(EnvPython, "")
	cache := t.TempDir()
	wasm, zip := writeOwn(t, cache)
	a, err := Load("", cache)
	if err != nil {
		t.Fatal(err)
	}
	if a.Build != "own" || a.SHA256 != sha(wasm) || a.StdlibSHA256 != sha(zip) || a.Version != "3.13.5" {
		t.Fatalf("loaded %+v, want the own build", a)
	}
	fs := memfs.New(memfs.Options{})
	if a.Layer == nil || a.Layer.Len() != 1+sharedFiles(t, zip) || fs.Mount(a.Layer) != nil {
		t.Fatalf("own build's layer: %+v, want the zip and its %s files", a.Layer, OwnSharedData)
	}
	if got, err := fs.ReadFile(OwnStdlibAt); err != nil || !bytes.Equal(got, zip) {
		t.Fatalf("%s in the layer: %v; want the stdlib zip", OwnStdlibAt, err)
	}
	if got := a.BaseEnv(); got[len(got)-1] != "PYTHONHOME="+OwnHome {
		t.Fatalf("BaseEnv %q lacks PYTHONHOME", got)
	}
	if StartupEnvDiffers(a.BaseEnv(), a.BaseEnv()) {
		t.Fatal("the own build's own environment counts as different from its image's")
	}
	// Asked for by name, each build is what was asked for: the npm one is
	// not fetched into this cache, so asking for it fails.
	if _, err := Load(SelectNPM, cache); !errors.Is(err, ErrNotFetched) {
		t.Fatalf("Load(npm) = %v, want ErrNotFetched", err)
	}
	// $AIRLOCK_PYTHON is the command's to read: cmd/airlock's
	// TestEnvChoosesBuild checks it picks these builds.
	if _, err := Load(SelectOwn, t.TempDir()); !errors.Is(err, ErrNoOwnBuild) {
		t.Fatalf("Load(own) without one = %v, want ErrNoOwnBuild", err)
	}
	// The npm build's old name says what the names are now.
	if _, err := Load("default", cache); err == nil || !strings.Contains(err.Error(), `"npm"`) {
		t.Fatalf(`Load("default") = %v, want an error naming "npm"`, err)
	}
}

// Without the own build, the default is an error that says how to make
// it, even when the npm build is there: a process never changes Python
// because of which files happen to be in the cache.
func TestLoadNeverFallsBack(t *testing.T) {
	cacheOnly(t)
	t.Setenv(EnvPython, "")
	cache := t.TempDir()
	npm := DefaultPath(cache)
	if err := os.MkdirAll(filepath.Dir(npm), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(npm, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Load("", cache)
	if !errors.Is(err, ErrNoOwnBuild) || a != nil {
		t.Fatalf("Load without the own build = %v, %v; want ErrNoOwnBuild", a, err)
	}
	for _, hint := range []string{"FetchBuild", "ImportBundle", "scripts/build-python.sh", SelectNPM, OwnDir(cache)} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("error %q does not mention %q", err, hint)
		}
	}
}

// InstallOwn writes a build aside and swings the link: loads before and
// after see one whole build each, a bad file changes nothing, and builds
// no longer linked are pruned.
func TestInstallOwn(t *testing.T) {
	cacheOnly(t)
	t.Setenv(EnvPython, "")
	cache := t.TempDir()
	files := func(key string, wasm []byte) map[string][]byte {
		zip := []byte("PK\x05\x06" + string(make([]byte, 18)))
		rec, _ := json.Marshal(BuildRecord{Key: key, PythonVersion: "3.13.5", PythonWasmSHA256: sha(wasm), StdlibZipSHA256: sha(zip)})
		return map[string][]byte{OwnWasm: wasm, OwnStdlib: zip, OwnRecord: rec}
	}
	keyA, keyB, keyC := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	wasmA, wasmB := []byte("\x00asm\x01\x00\x00\x00A"), []byte("\x00asm\x01\x00\x00\x00B")
	// An older layout's plain directory is replaced.
	writeOwn(t, cache)
	if _, err := InstallOwn(cache, files(keyA, wasmA)); err != nil {
		t.Fatal(err)
	}
	if a, err := Load("", cache); err != nil || a.SHA256 != sha(wasmA) || a.Record.Key != keyA {
		t.Fatalf("after installing A: %+v, %v", a, err)
	}
	if fi, err := os.Stat(OwnDir(cache)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed build's directory: %v, %v; want mode 0755, for users other than the installer", fi.Mode(), err)
	}
	bad := files(keyB, wasmB)
	bad[OwnWasm] = append([]byte(nil), wasmA...)
	var ce *ChecksumError
	if _, err := InstallOwn(cache, bad); !errors.As(err, &ce) {
		t.Fatalf("installing a file that is not its record's: %v, want a *ChecksumError", err)
	}
	if a, err := Load("", cache); err != nil || a.SHA256 != sha(wasmA) {
		t.Fatalf("a refused install changed the build in use: %+v, %v", a, err)
	}
	if _, err := InstallOwn(cache, files(keyB, wasmB)); err != nil {
		t.Fatal(err)
	}
	if a, err := Load("", cache); err != nil || a.SHA256 != sha(wasmB) {
		t.Fatalf("after installing B: %+v, %v", a, err)
	}
	if _, err := InstallOwn(cache, files(keyC, wasmB)); err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "python313-*"))
	if len(dirs) != 2 {
		t.Fatalf("installed builds left: %v; want the one in use and the one it replaced", dirs)
	}
	if fi, err := os.Lstat(OwnDir(cache)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s: %v, %v; want a symbolic link", OwnDir(cache), fi, err)
	}
}

func TestLoadRefusesTamperedOwnBuild(t *testing.T) {
	cacheOnly(t)
	t.Setenv(EnvPython, "")
	for _, file := range []string{OwnWasm, OwnStdlib} {
		t.Run(file, func(t *testing.T) {
			cache := t.TempDir()
			writeOwn(t, cache)
			p := filepath.Join(OwnDir(cache), file)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-1] ^= 1
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			a, err := Load("", cache)
			var ce *ChecksumError
			if !errors.As(err, &ce) || !errors.Is(err, ErrChecksum) || a != nil {
				t.Fatalf("Load of a tampered %s = %v, %v; want a *ChecksumError", file, a, err)
			}
			if ce.Path != p || ce.Got != sha(data) || ce.Got == ce.Want {
				t.Fatalf("ChecksumError %+v does not name %s and its sums", ce, p)
			}
		})
	}
	t.Run("bad record", func(t *testing.T) {
		cache := t.TempDir()
		writeOwn(t, cache)
		if err := os.WriteFile(filepath.Join(OwnDir(cache), OwnRecord), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
		if a, err := Load("", cache); err == nil || a != nil {
			t.Fatalf("Load with a broken build.json = %v, %v; want an error", a, err)
		}
	})
}
