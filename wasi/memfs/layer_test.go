package memfs

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

func testLayer(t *testing.T) *Layer {
	t.Helper()
	l := NewLayer()
	for p, data := range map[string]string{"/usr/lib/py.zip": "zipdata", "/usr/lib/pkg/mod.py": "x = 1", "/opt/a.whl": "wheel"} {
		if err := l.AddFile(p, []byte(data)); err != nil {
			t.Fatalf("AddFile(%q): %v", p, err)
		}
	}
	return l
}

func TestLayerAddFileRefusesBadPaths(t *testing.T) {
	l := testLayer(t)
	for _, p := range []string{"", "rel/x", "/", "/usr/../x", "/usr//x", "/usr/lib/py.zip", "/usr/lib/py.zip/inner", "/usr/lib", "/a\x00b"} {
		if err := l.AddFile(p, nil); err == nil {
			t.Errorf("AddFile(%q) = nil, want an error", p)
		}
	}
	if l.Len() != 3 || l.Size() != int64(len("zipdata")+len("x = 1")+len("wheel")) {
		t.Errorf("Len, Size = %d, %d after refusals", l.Len(), l.Size())
	}
}

func TestMountSharesBytesReadOnlyAndUncharged(t *testing.T) {
	l := testLayer(t)
	fs := New(Options{Quota: Quota{MaxBytes: 4, MaxInodes: 4}})
	if _, err := fs.MkdirAll("/usr"); err != nil {
		t.Fatal(err)
	}
	bytesBefore, inodesBefore := fs.Usage()
	if err := fs.Mount(l); err != nil {
		t.Fatalf("Mount: %v", err)
	}
	if b, n := fs.Usage(); b != bytesBefore || n != inodesBefore {
		t.Errorf("Usage after Mount = %d, %d; want %d, %d (a layer is not the run's)", b, n, bytesBefore, inodesBefore)
	}
	got, err := fs.ReadFile("/usr/lib/py.zip")
	if err != nil || string(got) != "zipdata" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	n, _ := fs.Lookup(fs.Root(), "/usr/lib/py.zip")
	if !n.ReadOnly() || unsafe.SliceData(n.data) != unsafe.SliceData(l.files[indexOf(l, "/usr/lib/py.zip")].data) {
		t.Error("mounted file is not read-only or does not share the layer's bytes")
	}
	usr, _ := fs.Lookup(fs.Root(), "/usr")
	if usr.ReadOnly() {
		t.Error("an existing directory became read-only by mounting into it")
	}
	// The existing /usr stays writable; the layer's own directories do not.
	if err := fs.Mkdir(fs.Root(), "/usr/mine"); err != nil {
		t.Errorf("Mkdir in a writable directory that holds a layer dir: %v", err)
	}
	if err := fs.WriteFile("/usr/mine/f", []byte("f")); err != nil {
		t.Fatal(err)
	}
	lib, _ := fs.Lookup(fs.Root(), "/usr/lib")
	for name, err := range map[string]error{
		"open O_TRUNC":       second(fs.Open(fs.Root(), "/usr/lib/py.zip", OTrunc)),
		"create in layer":    second(fs.Open(fs.Root(), "/usr/lib/new.py", OCreat)),
		"write":              second(fs.WriteAt(n, []byte("x"), 0)),
		"truncate":           fs.Truncate(n, 0),
		"unlink":             fs.Unlink(fs.Root(), "/usr/lib/py.zip"),
		"mkdir in layer":     fs.Mkdir(lib, "sub"),
		"rmdir layer dir":    fs.Rmdir(fs.Root(), "/usr/lib/pkg"),
		"rename out":         fs.Rename(fs.Root(), "/usr/lib/py.zip", fs.Root(), "/usr/mine/py.zip"),
		"rename over":        fs.Rename(fs.Root(), "/usr/mine/f", fs.Root(), "/opt/a.whl"),
		"rename into":        fs.Rename(fs.Root(), "/usr/mine", fs.Root(), "/usr/lib/mine"),
		"link into layer":    fs.Link(fs.Root(), "/usr/mine/f", fs.Root(), "/usr/lib/f"),
		"host WriteFile":     fs.WriteFile("/opt/a.whl", []byte("evil")),
		"host WriteFile new": fs.WriteFile("/opt/b.whl", []byte("evil")),
	} {
		if !errors.Is(err, errno.EROFS) {
			t.Errorf("%s: %v, want EROFS", name, err)
		}
	}
	if err := fs.Link(fs.Root(), "/usr/lib/py.zip", fs.Root(), "/usr/mine/py.zip"); !errors.Is(err, errno.EXDEV) {
		t.Errorf("link out of the layer: %v, want EXDEV", err)
	}
	fs.SetTimes(n, 1, 1, true, true)
	if a, m, _ := n.Times(); a == 1 || m == 1 {
		t.Error("SetTimes changed a read-only inode")
	}
	if got, _ := fs.ReadFile("/usr/lib/py.zip"); string(got) != "zipdata" || string(l.files[indexOf(l, "/usr/lib/py.zip")].data) != "zipdata" {
		t.Errorf("layer bytes changed: %q", got)
	}
	// Opening read-only, listing and walking work as for any file.
	if _, err := fs.Open(fs.Root(), "/usr/lib/py.zip", 0); err != nil {
		t.Errorf("open read-only: %v", err)
	}
	if ents, err := fs.ReadDir(lib); err != nil || len(ents) != 2 {
		t.Errorf("ReadDir(/usr/lib) = %v, %v", ents, err)
	}
}

// The host helpers refuse a layer's directories as the guest's calls do:
// a file the host placed there would be read by the run but, not being
// the run's, left out of a session's Save.
func TestHostHelpersRefuseLayerDirectories(t *testing.T) {
	fs := New(Options{})
	if err := fs.Mount(testLayer(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.MkdirAll("/usr/lib/new/deeper"); !errors.Is(err, errno.EROFS) {
		t.Errorf("MkdirAll in a layer's directory: %v, want EROFS", err)
	}
	if err := fs.WriteFile("/usr/lib/new/x.txt", []byte("x")); !errors.Is(err, errno.EROFS) {
		t.Errorf("WriteFile below a layer's directory: %v, want EROFS", err)
	}
	if _, err := fs.Lookup(fs.Root(), "/usr/lib/new"); !errors.Is(err, errno.ENOENT) {
		t.Errorf("a refused call left /usr/lib/new behind: %v", err)
	}
	if _, err := fs.MkdirAll("/usr/lib/pkg"); err != nil {
		t.Errorf("MkdirAll of an existing layer directory: %v", err)
	}
}

func TestMountConflicts(t *testing.T) {
	l := testLayer(t)
	fs := New(Options{})
	if err := fs.WriteFile("/opt/a.whl", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if err := fs.Mount(l); !errors.Is(err, errno.EEXIST) {
		t.Errorf("Mount over an existing file: %v, want EEXIST", err)
	}
	fs = New(Options{})
	if err := fs.WriteFile("/usr", []byte("a file")); err != nil {
		t.Fatal(err)
	}
	if err := fs.Mount(l); !errors.Is(err, errno.ENOTDIR) {
		t.Errorf("Mount below a file: %v, want ENOTDIR", err)
	}
	// Two layers may share directories.
	fs = New(Options{})
	other := NewLayer()
	if err := other.AddFile("/usr/lib/other.zip", []byte("o")); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(fs.Mount(l), fs.Mount(other)); err != nil {
		t.Errorf("two layers sharing /usr/lib: %v", err)
	}
	if err := fs.Mount(nil); err != nil {
		t.Errorf("Mount(nil) = %v", err)
	}
}

func indexOf(l *Layer, p string) int {
	for i, f := range l.files {
		if f.path == p {
			return i
		}
	}
	return -1
}
