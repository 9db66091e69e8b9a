package memfs

import (
	"bytes"
	"errors"
	"testing"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// sessionLike is a filesystem as a session leaves it: a layer, files,
// an empty directory and a hard link.
func sessionLike(t testing.TB) (*FS, *Layer) {
	l := NewLayer()
	if err := l.AddFile("/usr/lib/py.zip", []byte("stdlib")); err != nil {
		t.Fatal(err)
	}
	fs := New(Options{})
	if err := fs.Mount(l); err != nil {
		t.Fatal(err)
	}
	for p, data := range map[string]string{"/home/user/a.txt": "alpha", "/home/user/sub/b.bin": "\x00\x01", "/tmp/t": ""} {
		if err := fs.WriteFile(p, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fs.MkdirAll("/home/user/empty"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Link(fs.Root(), "/home/user/a.txt", fs.Root(), "/tmp/a-link"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Symlink("../home/user/sub", fs.Root(), "/tmp/sym"); err != nil {
		t.Fatal(err)
	}
	return fs, l
}

func listing(t testing.TB, fs *FS) map[string]string {
	out := map[string]string{}
	err := fs.Walk("/", func(p string, n *Inode) error {
		if n.Kind() == KindFile {
			data, _ := fs.ReadFile(p)
			out[p] = string(data)
		} else if n.Kind() == KindSymlink {
			target, _ := fs.Readlink(fs.Root(), p)
			out[p] = "-> " + target
		} else {
			out[p] = "<dir>"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCloneIsIndependent(t *testing.T) {
	fs, _ := sessionLike(t)
	want := listing(t, fs)
	b0, i0 := fs.Usage()
	c := fs.Clone(Quota{})
	if got := listing(t, c); !equalMaps(got, want) {
		t.Fatalf("clone = %v, want %v", got, want)
	}
	if b, i := c.Usage(); b != b0 || i != i0 {
		t.Errorf("clone usage %d, %d; original %d, %d", b, i, b0, i0)
	}
	if err := c.WriteFile("/home/user/a.txt", []byte("changed")); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.ReadFile("/tmp/a-link"); string(got) != "changed" {
		t.Errorf("hard link in the clone reads %q, want the shared inode's new data", got)
	}
	if err := c.Unlink(c.Root(), "/home/user/sub/b.bin"); err != nil {
		t.Fatal(err)
	}
	if got := listing(t, fs); !equalMaps(got, want) {
		t.Errorf("changing the clone changed the original: %v", got)
	}
	if err := c.WriteFile("/usr/lib/py.zip", nil); !errors.Is(err, errno.EROFS) {
		t.Errorf("layer file in the clone: %v, want EROFS", err)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	fs, l := sessionLike(t)
	var buf bytes.Buffer
	if err := fs.Save(&buf); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("stdlib")) {
		t.Error("Save wrote a layer's contents")
	}
	got, err := Load(bytes.NewReader(buf.Bytes()), Options{}, l)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if a, b := listing(t, got), listing(t, fs); !equalMaps(a, b) {
		t.Fatalf("loaded %v, want %v", a, b)
	}
	a, _ := got.Lookup(got.Root(), "/home/user/a.txt")
	link, _ := got.Lookup(got.Root(), "/tmp/a-link")
	if a != link || a.Nlink() != 2 {
		t.Error("hard link lost")
	}
	orig, _ := fs.Lookup(fs.Root(), "/home/user/a.txt")
	if _, m, _ := a.Times(); func() bool { _, om, _ := orig.Times(); return om != m }() {
		t.Error("times lost")
	}
	b0, i0 := fs.Usage()
	if b, i := got.Usage(); b != b0 || i != i0 {
		t.Errorf("usage %d, %d; want %d, %d", b, i, b0, i0)
	}
	if _, err := Load(bytes.NewReader(buf.Bytes()), Options{Quota: Quota{MaxBytes: 3}}, l); !errors.Is(err, errno.ENOSPC) {
		t.Errorf("over quota: %v, want ENOSPC", err)
	}
	if _, err := Load(bytes.NewReader(buf.Bytes()), Options{}); err != nil {
		t.Errorf("without the layer: %v", err)
	}
}

// TestLoadRefusesBadLinks: a saved link whose target Symlink would refuse
// (absolute, empty, NUL) is a typed error, not a link that leads out.
func TestLoadRefusesBadLinks(t *testing.T) {
	fs, l := sessionLike(t)
	var buf bytes.Buffer
	if err := fs.Save(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Load(bytes.NewReader(buf.Bytes()), Options{}, l)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := got.Lookup(got.Root(), "/tmp/sym/b.bin"); err != nil || n.Size() != 2 {
		t.Fatalf("link lost: %v", err)
	}
	for _, bad := range []string{"/home/user/sub/x", "/../../../../etc", "..\x00home/user/sub"} {
		mut := bytes.Replace(buf.Bytes(), []byte("../home/user/sub"), []byte(bad)[:16], 1)
		if _, err := Load(bytes.NewReader(mut), Options{}, l); !errors.Is(err, ErrCorrupt) {
			t.Errorf("target %q: %v, want ErrCorrupt", bad, err)
		}
	}
}

// TestLoadRejectsDamage: every truncation and many single-byte changes
// are refused with an error, never a panic or a silently different tree
// that breaks the filesystem's invariants.
func TestLoadRejectsDamage(t *testing.T) {
	fs, l := sessionLike(t)
	var buf bytes.Buffer
	fs.Save(&buf)
	data := buf.Bytes()
	for i := range len(data) {
		if _, err := Load(bytes.NewReader(data[:i]), Options{}, l); err == nil {
			t.Fatalf("truncated at %d: loaded", i)
		}
	}
	if _, err := Load(bytes.NewReader(append(bytes.Clone(data), 0)), Options{}, l); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailing byte: %v", err)
	}
	for i := range len(data) {
		for _, v := range []byte{0, 1, 2, 0x7f, 0xff} {
			mut := bytes.Clone(data)
			mut[i] = v
			if got, err := Load(bytes.NewReader(mut), Options{}, l); err == nil {
				checkTree(t, got)
			}
		}
	}
}

func FuzzLoad(f *testing.F) {
	fs, l := sessionLike(f)
	var buf bytes.Buffer
	fs.Save(&buf)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Load(bytes.NewReader(data), Options{Quota: Quota{MaxBytes: 1 << 20, MaxInodes: 1000}}, l)
		if err == nil {
			checkTree(t, got)
		}
	})
}

// checkTree verifies what Load promises: a tree whose directories each
// have one parent, usage that matches, and operations that work.
func checkTree(t *testing.T, fs *FS) {
	t.Helper()
	var bytes int64
	inodes := map[*Inode]bool{}
	err := fs.Walk("/", func(p string, n *Inode) error {
		if n.readOnly {
			return nil
		}
		if n.kind == KindDir && inodes[n] {
			t.Fatalf("directory %s reached twice", p)
		}
		if !inodes[n] {
			bytes += n.charged()
		}
		inodes[n] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, i := fs.Usage(); b != bytes || i != len(inodes) {
		t.Fatalf("usage %d, %d; tree has %d, %d", b, i, bytes, len(inodes))
	}
	if err := fs.WriteFile("/home/user/new", []byte("x")); err != nil && !errors.Is(err, errno.ENOTDIR) && !errors.Is(err, errno.EROFS) {
		t.Fatalf("write after load: %v", err)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
