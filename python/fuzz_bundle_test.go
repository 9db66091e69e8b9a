package python

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bundle is what `airlock setup --import` is given: whatever its bytes,
// reading it answers with a checked bundle or a *BundleError, and never
// reads past the entries' caps.
func FuzzReadBundle(f *testing.F) {
	good := fuzzBundle(f, []byte(fuzzBuildRecord), []byte(fuzzAsyncRecord), fuzzStdlib(f))
	f.Add(good)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good)
	zw.Close()
	f.Add(gz.Bytes())
	f.Add(good[:1024])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, load := range []func() (*bundle, error){
			func() (*bundle, error) { return readBundle(bytes.NewReader(data), nil) },
			func() (*bundle, error) { return readBundle(bytes.NewReader(data), data) },
		} {
			b, err := load()
			var be *BundleError
			if err != nil && !errors.As(err, &be) {
				t.Fatalf("error %v (%T), want a *BundleError", err, err)
			}
			if err == nil {
				checkFuzzedBundle(t, b)
			}
		}
	})
}

// FuzzBundleEntries fuzzes the bundle's records and stdlib zip inside a
// well-formed tar whose manifest is right (its sizes and sums computed),
// and whose records' sums are the files' where they say WASM, STDLIB or
// ASYNC: mutations reach the records' decoding, the stdlib's zip and the
// install, where a tar-level fuzzer would stop at the checksums. A bundle
// read whole installs into an empty cache directory and nowhere else, or
// fails with an error that leaves the directory as it found it.
func FuzzBundleEntries(f *testing.F) {
	stdlib := fuzzStdlib(f)
	f.Add([]byte(fuzzBuildRecord), []byte(fuzzAsyncRecord), stdlib)
	f.Add([]byte(`{"key": "`+strings.Repeat("0", 64)+`", "python_wasm_sha256": "WASM"}`), []byte(`{"tool": "../x", "args": ["a"]}`), []byte("PK"))
	f.Fuzz(func(t *testing.T, build, async, stdlib []byte) {
		b, err := readBundle(bytes.NewReader(fuzzBundle(t, build, async, stdlib)), nil)
		if err != nil {
			var be *BundleError
			if !errors.As(err, &be) {
				t.Fatalf("error %v (%T), want a *BundleError", err, err)
			}
			return
		}
		checkFuzzedBundle(t, b)
		cache := t.TempDir()
		if _, err := installBundle(b, cache); err != nil {
			// Only a stdlib that is not a readable zip is left to fail.
			if left := listing(t, cache); len(left) > 1 { // the directory itself
				t.Fatalf("a failed install (%v) left %v", err, left)
			}
			return
		}
		art, err := LoadOwn(OwnDir(cache))
		if err != nil {
			t.Fatalf("installed a bundle that does not load: %v", err)
		}
		if _, _, err := LoadAsyncified(art, cache); err != nil {
			t.Fatalf("installed a bundle whose asyncified module does not load: %v", err)
		}
		// Whatever the records say, the install stays in the cache
		// directory: the one link it makes names a directory beside it.
		filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type()&os.ModeSymlink != 0 {
				if target, _ := os.Readlink(p); p != OwnDir(cache) || strings.ContainsAny(target, `/\`) {
					t.Errorf("install left a link %s -> %s", p, target)
				}
			}
			return nil
		})
	})
}

const (
	fuzzBuildRecord = `{"key": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "python_version": "3.13.0",
		"python_wasm_sha256": "WASM", "stdlib_zip_sha256": "STDLIB"}`
	fuzzAsyncRecord = `{"input_sha256": "WASM", "output_sha256": "ASYNC", "tool": "wasm-opt version 1", "args": ["--asyncify"]}`
	fuzzWasm        = "\x00asm\x01\x00\x00\x00"
	fuzzAsyncWasm   = "\x00asm\x01\x00\x00\x00\x00"
)

// fuzzStdlib is a small stdlib zip.
func fuzzStdlib(tb testing.TB) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("os.py")
	if err != nil {
		tb.Fatal(err)
	}
	w.Write([]byte("sep = '/'\n"))
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// fuzzBundle is a plain bundle of the records given, the stdlib zip and
// two tiny modules, with the placeholders WASM, STDLIB and ASYNC in the
// records replaced by the sha256s of those.
func fuzzBundle(tb testing.TB, build, async, stdlib []byte) []byte {
	sums := strings.NewReplacer(`"WASM"`, `"`+sha256Hex([]byte(fuzzWasm))+`"`,
		`"STDLIB"`, `"`+sha256Hex(stdlib)+`"`, `"ASYNC"`, `"`+sha256Hex([]byte(fuzzAsyncWasm))+`"`)
	files := []struct {
		name string
		data []byte
	}{
		{OwnWasm, []byte(fuzzWasm)}, {OwnStdlib, stdlib}, {OwnRecord, []byte(sums.Replace(string(build)))},
		{bundleAsyncWasm, []byte(fuzzAsyncWasm)}, {bundleAsyncRec, []byte(sums.Replace(string(async)))},
	}
	man := BundleManifest{Format: BundleFormat, Version: BundleVersion}
	for _, f := range files {
		man.Files = append(man.Files, BundleFile{Name: f.name, Size: int64(len(f.data)), SHA256: sha256Hex(f.data)})
	}
	manJSON, _ := json.Marshal(man)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	put := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
		tw.Write(data)
	}
	put(bundleManifest, manJSON)
	for _, f := range files {
		put(f.name, f.data)
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// checkFuzzedBundle checks what readBundle accepted holds together.
func checkFuzzedBundle(t *testing.T, b *bundle) {
	t.Helper()
	if !validKey(b.build.Key) || b.build.PythonWasmSHA256 != sha256Hex(b.files[OwnWasm]) ||
		b.build.StdlibZipSHA256 != sha256Hex(b.files[OwnStdlib]) || b.async.InputSHA256 != b.build.PythonWasmSHA256 ||
		b.async.OutputSHA256 != sha256Hex(b.files[bundleAsyncWasm]) || len(b.files) != len(bundleCaps) {
		t.Fatalf("accepted a bundle whose parts do not match: %+v %+v", b.build, b.async)
	}
}
