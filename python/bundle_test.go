package python

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/internal/filehash"
)

// realBundle exports the own build from the cache (`make python`, then
// `airlock setup` to asyncify it), plain or gzipped.
func realBundle(t *testing.T, gz bool) []byte {
	t.Helper()
	cache := mustCacheDir(t)
	art, err := LoadOwn(OwnDir(cache))
	if err != nil {
		t.Fatalf("bundle tests export the own build (make python; airlock setup): %v", err)
	}
	var buf bytes.Buffer
	if _, err := ExportBundle(&buf, art, cache, gz); err != nil {
		t.Fatalf("export: %v", err)
	}
	return buf.Bytes()
}

type tarEntry struct {
	name string
	data []byte
	typ  byte
	link string
	size int64 // the header's size when not len(data) (a lying header)
}

// entries reads a plain bundle into its entries, in order.
func entries(t *testing.T, b []byte) []tarEntry {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	var out []tarEntry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out = append(out, tarEntry{name: h.Name, data: data, typ: h.Typeflag})
	}
}

func writeTar(t *testing.T, es []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		size := int64(len(e.data))
		if e.size != 0 {
			size = e.size
		}
		if typ != tar.TypeReg {
			size = 0
		}
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: size, Typeflag: typ, Linkname: e.link}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if size > int64(len(e.data)) {
			// A header that promises more than follows: stop here, as a
			// hostile or cut file would.
			tw.Write(e.data)
			return buf.Bytes()
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// remanifest makes entries' manifest describe their files again, after
// edit has changed it.
func remanifest(t *testing.T, es []tarEntry, edit func(*BundleManifest)) []tarEntry {
	t.Helper()
	man := BundleManifest{Format: BundleFormat, Version: BundleVersion, Python: "3.13.5"}
	for _, e := range es[1:] {
		man.Files = append(man.Files, BundleFile{Name: e.name, Size: int64(len(e.data)), SHA256: sha(e.data)})
	}
	if edit != nil {
		edit(&man)
	}
	data, _ := json.Marshal(man)
	return append([]tarEntry{{name: bundleManifest, data: data}}, es[1:]...)
}

// listing is every path under dir with its size, to show an import
// changed nothing. The stamps filehash leaves beside files it read are
// not the cache's content (a read made after two seconds leaves one).
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, filehash.StampSuffix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			t.Fatal(err)
		}
		line := p + " " + fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case !d.IsDir():
			data, _ := os.ReadFile(p)
			line += " " + sha(data)
		}
		out = append(out, line)
		return nil
	})
	sort.Strings(out)
	return out
}

// A bundle exported from the cache, imported into an empty one, is the
// same build with the same asyncified module, found where LoadAsyncified
// looks; gzipped or not; the same build exports to the same bytes.
func TestBundleRoundTrip(t *testing.T) {
	src, err := LoadOwn(OwnDir(mustCacheDir(t)))
	if err != nil {
		t.Fatal(err)
	}
	async, _, err := LoadAsyncified(src, mustCacheDir(t))
	if err != nil {
		t.Fatal(err)
	}
	plain := realBundle(t, false)
	if again := realBundle(t, false); !bytes.Equal(plain, again) {
		t.Fatal("two exports of one build differ")
	}
	for name, b := range map[string][]byte{"plain": plain, "gzip": realBundle(t, true)} {
		t.Run(name, func(t *testing.T) {
			if gz := isGzip(b); gz != (name == "gzip") {
				t.Fatalf("gzip magic: %v", gz)
			}
			cache := t.TempDir()
			man, err := ImportBundle(bytes.NewReader(b), cache)
			if err != nil {
				t.Fatal(err)
			}
			if man.Version != BundleVersion || len(man.Files) != len(bundleCaps) || man.Python != src.Version {
				t.Fatalf("manifest %+v", man)
			}
			art, err := Load(SelectOwn, cache)
			if err != nil {
				t.Fatal(err)
			}
			if art.SHA256 != src.SHA256 || art.StdlibSHA256 != src.StdlibSHA256 || art.Record.Key != src.Record.Key {
				t.Fatalf("imported %s/%s, exported %s/%s", art.SHA256, art.StdlibSHA256, src.SHA256, src.StdlibSHA256)
			}
			got, rec, err := LoadAsyncified(art, cache)
			if err != nil || !bytes.Equal(got, async) || rec.InputSHA256 != art.SHA256 {
				t.Fatalf("asyncified module after import: %v", err)
			}
			// Importing again changes nothing and succeeds.
			before := listing(t, cache)
			if _, err := ImportBundle(bytes.NewReader(b), cache); err != nil {
				t.Fatal(err)
			}
			if after := listing(t, cache); strings.Join(before, "\n") != strings.Join(after, "\n") {
				t.Fatalf("a second import changed the cache:\n%s\n---\n%s", before, after)
			}
		})
	}
	t.Run("loaded from memory", func(t *testing.T) {
		art, err := LoadBundle(plain)
		if err != nil {
			t.Fatal(err)
		}
		if art.Path != "" || art.SHA256 != src.SHA256 || art.Build != "own" {
			t.Fatalf("LoadBundle: %+v", art)
		}
		// It carries its asyncified module: no cache is looked in.
		got, _, err := LoadAsyncified(art, t.TempDir())
		if err != nil || !bytes.Equal(got, async) {
			t.Fatalf("LoadAsyncified of the carried module: %v", err)
		}
		if p, err := Asyncify(t.Context(), art, t.TempDir(), "", io.Discard); p != "" || err != nil {
			t.Fatalf("Asyncify of a build that carries its module: %q, %v", p, err)
		}
		// And it exports again to the same bundle.
		var buf bytes.Buffer
		if _, err := ExportBundle(&buf, art, "", false); err != nil || !bytes.Equal(buf.Bytes(), plain) {
			t.Fatalf("re-export from memory: %v (equal: %v)", err, bytes.Equal(buf.Bytes(), plain))
		}
	})
}

// Every kind of bad bundle is refused with its kind of error, naming the
// entry at fault, and the cache is left exactly as it was.
func TestImportBundleRefuses(t *testing.T) {
	good := realBundle(t, false)
	es := entries(t, good)
	find := func(es []tarEntry, name string) int {
		for i, e := range es {
			if e.name == name {
				return i
			}
		}
		t.Fatalf("no %s in the bundle", name)
		return -1
	}
	edited := func(edit func([]tarEntry) []tarEntry) []byte {
		c := make([]tarEntry, len(es))
		for i, e := range es {
			c[i] = tarEntry{name: e.name, data: bytes.Clone(e.data), typ: e.typ}
		}
		return writeTar(t, edit(c))
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good)
	zw.Close()
	otherWasm := sha([]byte("another python.wasm"))

	cases := []struct {
		name   string
		bundle []byte
		kind   error
		entry  string
	}{
		{"not a tar", []byte(strings.Repeat("this is no bundle\n", 100)), ErrBundleFormat, ""},
		{"empty", nil, ErrBundleFormat, ""},
		{"shorter than a header", []byte("junk\n"), ErrBundleFormat, ""},
		{"foreign tar", writeTar(t, []tarEntry{{name: "README", data: []byte("hi")}}), ErrBundleFormat, "README"},
		{"newer version", edited(func(c []tarEntry) []tarEntry {
			return remanifest(t, c, func(m *BundleManifest) { m.Version = 2 })
		}), ErrBundleFormat, bundleManifest},
		{"other format", edited(func(c []tarEntry) []tarEntry {
			return remanifest(t, c, func(m *BundleManifest) { m.Format = "zip-of-stuff" })
		}), ErrBundleFormat, bundleManifest},
		{"manifest not JSON", edited(func(c []tarEntry) []tarEntry { c[0].data = []byte("{"); return c }), ErrBundleFormat, bundleManifest},
		{"truncated", good[:len(good)/2], ErrBundleTruncated, ""},
		{"truncated at an entry's end", edited(func(c []tarEntry) []tarEntry { return c[:len(c)-1] }), ErrBundleTruncated, bundleAsyncRec},
		{"truncated gzip", gz.Bytes()[:gz.Len()*2/3], ErrBundleTruncated, ""},
		{"flipped byte", edited(func(c []tarEntry) []tarEntry {
			i := find(c, OwnStdlib)
			c[i].data[len(c[i].data)/2] ^= 1
			return c
		}), ErrBundleChecksum, OwnStdlib},
		{"shorter file", edited(func(c []tarEntry) []tarEntry {
			i := find(c, bundleAsyncWasm)
			c[i].data = c[i].data[:len(c[i].data)-1]
			return c
		}), ErrBundleChecksum, bundleAsyncWasm},
		{"dot-dot entry", edited(func(c []tarEntry) []tarEntry {
			return append(c, tarEntry{name: "../../escape.txt", data: []byte("x")})
		}), ErrBundleUnsafePath, "../../escape.txt"},
		{"absolute entry", edited(func(c []tarEntry) []tarEntry {
			return append(c[:1], append([]tarEntry{{name: "/etc/cron.d/x", data: []byte("x")}}, c[1:]...)...)
		}), ErrBundleUnsafePath, "/etc/cron.d/x"},
		{"entry in a directory", edited(func(c []tarEntry) []tarEntry {
			c[find(c, OwnWasm)].name = "python313/../" + OwnWasm
			return c
		}), ErrBundleUnsafePath, "python313/../" + OwnWasm},
		{"symlink", edited(func(c []tarEntry) []tarEntry {
			c[find(c, OwnRecord)] = tarEntry{name: OwnRecord, typ: tar.TypeSymlink, link: "/etc/passwd"}
			return c
		}), ErrBundleUnsafePath, OwnRecord},
		{"manifest names a path", edited(func(c []tarEntry) []tarEntry {
			return remanifest(t, c, func(m *BundleManifest) { m.Files[0].Name = "../python.wasm" })
		}), ErrBundleUnsafePath, "../python.wasm"},
		{"manifest claims a huge file", edited(func(c []tarEntry) []tarEntry {
			return remanifest(t, c, func(m *BundleManifest) { m.Files[0].Size = 1 << 40 })
		}), ErrBundleTooLarge, OwnWasm},
		{"header claims a huge file", edited(func(c []tarEntry) []tarEntry {
			i := find(c, OwnRecord)
			c[i].size = 64 << 30
			return c[:i+1]
		}), ErrBundleTooLarge, OwnRecord},
		{"huge manifest", writeTar(t, []tarEntry{{name: bundleManifest, data: make([]byte, manifestCap+1)}}), ErrBundleTooLarge, bundleManifest},
		{"entry not in the manifest", edited(func(c []tarEntry) []tarEntry {
			return append(c, tarEntry{name: "extra.py", data: []byte("import os")})
		}), ErrBundleFormat, "extra.py"},
		{"entry twice", edited(func(c []tarEntry) []tarEntry { return append(c, c[find(c, OwnRecord)]) }), ErrBundleFormat, OwnRecord},
		{"a directory entry", edited(func(c []tarEntry) []tarEntry {
			return append(c, tarEntry{name: "sub", typ: tar.TypeDir})
		}), ErrBundleFormat, "sub"},
		{"asyncified from another python.wasm", edited(func(c []tarEntry) []tarEntry {
			i := find(c, bundleAsyncRec)
			var rec AsyncifyRecord
			json.Unmarshal(c[i].data, &rec)
			rec.InputSHA256 = otherWasm
			c[i].data, _ = json.Marshal(rec)
			return remanifest(t, c, nil) // consistent sums: only the record lies
		}), ErrBundleMismatch, bundleAsyncRec},
		{"asyncified module not its record's", edited(func(c []tarEntry) []tarEntry {
			c[find(c, bundleAsyncWasm)].data = c[find(c, OwnWasm)].data
			return remanifest(t, c, nil)
		}), ErrBundleMismatch, bundleAsyncRec},
		{"build record names another python.wasm", edited(func(c []tarEntry) []tarEntry {
			i := find(c, OwnRecord)
			var rec map[string]any
			json.Unmarshal(c[i].data, &rec)
			rec["python_wasm_sha256"] = otherWasm
			c[i].data, _ = json.Marshal(rec)
			return remanifest(t, c, nil)
		}), ErrBundleMismatch, OwnRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			// A cache with a file of its own, to see that nothing is added,
			// removed or changed.
			if err := os.WriteFile(filepath.Join(cache, "keep"), []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := listing(t, cache)
			man, err := ImportBundle(bytes.NewReader(tc.bundle), cache)
			var be *BundleError
			if !errors.As(err, &be) || !errors.Is(err, tc.kind) || man != nil {
				t.Fatalf("import = %v, %v; want a *BundleError of kind %q", man, err, tc.kind)
			}
			t.Log(err)
			if tc.entry != "" && be.Entry != tc.entry {
				t.Fatalf("error %q names entry %q, want %q", err, be.Entry, tc.entry)
			}
			if tc.entry != "" && !strings.Contains(err.Error(), tc.entry) {
				t.Fatalf("error %q does not name %q", err, tc.entry)
			}
			if tc.kind == ErrBundleChecksum && !errors.Is(err, ErrChecksum) {
				t.Fatalf("a checksum mismatch %v does not match ErrChecksum", err)
			}
			if after := listing(t, cache); strings.Join(before, "\n") != strings.Join(after, "\n") {
				t.Fatalf("a refused import changed the cache:\n%s\n---\n%s", before, after)
			}
			// Loaded from memory (the embedded build), it is refused alike.
			if art, err := LoadBundle(tc.bundle); !errors.Is(err, tc.kind) || art != nil {
				t.Fatalf("LoadBundle = %v, %v; want kind %q", art, err, tc.kind)
			}
		})
	}
}

// Only the own build is bundled; one never asyncified has nothing to bundle.
func TestExportBundleRefuses(t *testing.T) {
	npm := newArtifact([]byte("\x00asm\x01\x00\x00\x00"), "x.wasm")
	if _, err := ExportBundle(io.Discard, npm, t.TempDir(), false); !errors.Is(err, ErrExportNotOwn) {
		t.Fatalf("export of a custom build: %v, want ErrExportNotOwn", err)
	}
	cache := t.TempDir()
	writeOwn(t, cache)
	art, err := LoadOwn(OwnDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ExportBundle(io.Discard, art, cache, false); !errors.Is(err, ErrNotAsyncified) {
		t.Fatalf("export of a build never asyncified: %v, want ErrNotAsyncified", err)
	}
}
