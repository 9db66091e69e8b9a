package memfs

import (
	"bytes"
	"errors"
	"fmt"
	iofs "io/fs"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// newFS returns an FS with a deterministic clock and the tree
//
//	/d1/f1 "one"   /d1/sub/x "x"   /d2/   /d3/y "y"   /f2 "two"
func newFS(t testing.TB, q Quota) *FS {
	t.Helper()
	var clock int64
	fs := New(Options{Quota: q, Now: func() int64 { clock++; return clock }})
	for p, data := range map[string]string{"/d1/f1": "one", "/d1/sub/x": "x", "/d3/y": "y", "/f2": "two"} {
		if err := fs.WriteFile(p, []byte(data)); err != nil {
			t.Fatalf("WriteFile(%q): %v", p, err)
		}
	}
	if _, err := fs.MkdirAll("/d2"); err != nil {
		t.Fatal(err)
	}
	return fs
}

// dump renders the tree as "path/" for dirs and path=contents for files.
func dump(t testing.TB, fs *FS) string {
	t.Helper()
	var parts []string
	err := fs.Walk("/", func(p string, n *Inode) error {
		if n.Kind() == KindDir {
			if p != "/" {
				p += "/"
			}
			parts = append(parts, p)
			return nil
		}
		parts = append(parts, p+"="+string(n.data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(parts, " ")
}

const baseTree = "/ /d1/ /d1/f1=one /d1/sub/ /d1/sub/x=x /d2/ /d3/ /d3/y=y /f2=two"

// wantErr fails unless err is nil (want 0) or exactly the Errno want.
func wantErr(t testing.TB, what string, err error, want errno.Errno) {
	t.Helper()
	if err == nil {
		if want != 0 {
			t.Errorf("%s: got nil, want %v", what, want)
		}
		return
	}
	e, ok := err.(errno.Errno)
	if !ok {
		t.Errorf("%s: got non-Errno error %T %v", what, err, err)
		return
	}
	if e != want {
		t.Errorf("%s: got %v, want %v", what, e, want)
	}
}

func mustLookup(t testing.TB, fs *FS, p string) *Inode {
	t.Helper()
	n, err := fs.Lookup(fs.Root(), p)
	if err != nil {
		t.Fatalf("Lookup(%q): %v", p, err)
	}
	return n
}

func TestLookup(t *testing.T) {
	fs := newFS(t, Quota{})
	root := fs.Root()
	d1 := mustLookup(t, fs, "d1")
	f1 := mustLookup(t, fs, "d1/f1")
	f2 := mustLookup(t, fs, "f2")
	sub := mustLookup(t, fs, "d1/sub")
	other := New(Options{})
	long255 := strings.Repeat("n", 255)
	path4096 := strings.Repeat("./", 2045) + "d1//f1"
	if len(path4096) != 4096 {
		t.Fatalf("boundary path has length %d", len(path4096))
	}
	tests := []struct {
		name string
		dir  *Inode
		path string
		want *Inode
		err  errno.Errno
	}{
		{"relative", root, "d1", d1, 0},
		{"nested", root, "d1/f1", f1, 0},
		{"from dir", d1, "f1", f1, 0},
		{"absolute ignores dir", sub, "/f2", f2, 0},
		{"absolute with nil dir", nil, "/d1/f1", f1, 0},
		{"dot", d1, ".", d1, 0},
		{"dot in middle", root, "d1/./f1", f1, 0},
		{"double slash", root, "d1//f1", f1, 0},
		{"dotdot", sub, "..", d1, 0},
		{"dotdot in middle", root, "d1/sub/../f1", f1, 0},
		{"trailing slash dir", root, "d1/", d1, 0},
		{"trailing slashes dir", root, "d1///", d1, 0},
		{"root", d1, "/", root, 0},
		{"root slashes", d1, "///", root, 0},
		{"dotdot at root", root, "..", root, 0},
		{"dotdot above root", sub, "../../../../..", root, 0},
		{"absolute dotdot", d1, "/../..", root, 0},
		{"dotdot escape then down", root, "../../d1/f1", f1, 0},
		{"empty", root, "", nil, errno.ENOENT},
		{"missing", root, "nope", nil, errno.ENOENT},
		{"missing intermediate", root, "nope/f1", nil, errno.ENOENT},
		{"file intermediate", root, "f2/x", nil, errno.ENOTDIR},
		{"file then dotdot", root, "f2/..", nil, errno.ENOTDIR},
		{"file then dotdot then dir", root, "f2/../d1", nil, errno.ENOTDIR},
		{"file two levels up", root, "d1/f1/x/y", nil, errno.ENOTDIR},
		{"file then dot", root, "d1/f1/.", nil, errno.ENOTDIR},
		{"trailing slash file", root, "f2/", nil, errno.ENOTDIR},
		{"dir is file", f2, "x", nil, errno.ENOTDIR},
		{"dir is nil", nil, "d1", nil, errno.EBADF},
		{"dir from other FS", other.Root(), "d1", nil, errno.EBADF},
		{"NUL", root, "d1\x00/f1", nil, errno.EILSEQ},
		{"NUL only", root, "\x00", nil, errno.EILSEQ},
		{"component 255", root, long255, nil, errno.ENOENT},
		{"component 256", root, long255 + "n", nil, errno.ENAMETOOLONG},
		{"component 256 intermediate", root, long255 + "n/x", nil, errno.ENAMETOOLONG},
		{"path 4096", root, path4096, f1, 0},
		{"path 4097", root, path4096 + "/", nil, errno.ENAMETOOLONG},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fs.Lookup(tt.dir, tt.path)
			wantErr(t, "Lookup", err, tt.err)
			if got != tt.want {
				t.Errorf("Lookup(%q) = ino %d, want ino %d", tt.path, got.Ino(), tt.want.Ino())
			}
		})
	}
}

func TestOpen(t *testing.T) {
	tests := []struct {
		path  string
		flags OpenFlags
		err   errno.Errno
		kind  Kind
		size  int64 // of the result
		tree  string
	}{
		{"f2", 0, 0, KindFile, 3, baseTree},
		{"f2", OTrunc, 0, KindFile, 0, strings.Replace(baseTree, "/f2=two", "/f2=", 1)},
		{"f2", OCreat, 0, KindFile, 3, baseTree},
		{"f2", OCreat | OTrunc, 0, KindFile, 0, strings.Replace(baseTree, "/f2=two", "/f2=", 1)},
		{"f2", OCreat | OExcl, errno.EEXIST, 0, 0, baseTree},
		{"f2", ODirectory, errno.ENOTDIR, 0, 0, baseTree},
		{"f2/", 0, errno.ENOTDIR, 0, 0, baseTree},
		{"f2/", OCreat, errno.ENOTDIR, 0, 0, baseTree},
		{"d1", 0, 0, KindDir, 0, baseTree},
		{"d1", ODirectory, 0, KindDir, 0, baseTree},
		{"d1/", ODirectory, 0, KindDir, 0, baseTree},
		{"d1", OCreat, errno.EISDIR, 0, 0, baseTree},
		{"d1", OTrunc, errno.EISDIR, 0, 0, baseTree},
		{"d1", OCreat | OExcl, errno.EEXIST, 0, 0, baseTree},
		{".", ODirectory, 0, KindDir, 0, baseTree},
		{"/", 0, 0, KindDir, 0, baseTree},
		{"/", OCreat, errno.EISDIR, 0, 0, baseTree},
		{"new", 0, errno.ENOENT, 0, 0, baseTree},
		{"new", ODirectory, errno.ENOENT, 0, 0, baseTree},
		{"new", OCreat, 0, KindFile, 0, baseTree + " /new="},
		{"new", OCreat | OExcl | OTrunc, 0, KindFile, 0, baseTree + " /new="},
		{"new", OCreat | ODirectory, errno.EINVAL, 0, 0, baseTree},
		{"new/", OCreat, errno.EISDIR, 0, 0, baseTree},
		{"d2/new", OCreat, 0, KindFile, 0, strings.Replace(baseTree, "/d2/", "/d2/ /d2/new=", 1)},
		{"nope/new", OCreat, errno.ENOENT, 0, 0, baseTree},
		{"f2/new", OCreat, errno.ENOTDIR, 0, 0, baseTree},
		{"f2", 1 << 9, errno.EINVAL, 0, 0, baseTree},
		{"", OCreat, errno.ENOENT, 0, 0, baseTree},
		{"a\x00", OCreat, errno.EILSEQ, 0, 0, baseTree},
		{strings.Repeat("x", 256), OCreat, errno.ENAMETOOLONG, 0, 0, baseTree},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%#x", tt.path, tt.flags), func(t *testing.T) {
			fs := newFS(t, Quota{})
			n, err := fs.Open(fs.Root(), tt.path, tt.flags)
			wantErr(t, "Open", err, tt.err)
			if err == nil {
				if n.Kind() != tt.kind || n.Size() != tt.size {
					t.Errorf("got kind %d size %d, want kind %d size %d", n.Kind(), n.Size(), tt.kind, tt.size)
				}
			} else if n != nil {
				t.Errorf("got inode %d with error", n.Ino())
			}
			if got := dump(t, fs); got != tt.tree {
				t.Errorf("tree:\n got %s\nwant %s", got, tt.tree)
			}
		})
	}
}

// TestMutations covers Mkdir, Rmdir, Unlink and Link against the base tree.
func TestMutations(t *testing.T) {
	tests := []struct {
		op   string
		a, b string
		err  errno.Errno
		tree string // "" means unchanged
	}{
		{"mkdir", "new", "", 0, baseTree + " /new/"},
		{"mkdir", "new/", "", 0, baseTree + " /new/"},
		{"mkdir", "new//", "", 0, baseTree + " /new/"},
		{"mkdir", "d2/new", "", 0, strings.Replace(baseTree, "/d2/", "/d2/ /d2/new/", 1)},
		{"mkdir", "d1", "", errno.EEXIST, ""},
		{"mkdir", "f2", "", errno.EEXIST, ""},
		{"mkdir", "f2/", "", errno.EEXIST, ""},
		{"mkdir", ".", "", errno.EEXIST, ""},
		{"mkdir", "..", "", errno.EEXIST, ""},
		{"mkdir", "/", "", errno.EEXIST, ""},
		{"mkdir", "nope/new", "", errno.ENOENT, ""},
		{"mkdir", "f2/new", "", errno.ENOTDIR, ""},
		{"mkdir", "", "", errno.ENOENT, ""},
		{"mkdir", "n\x00", "", errno.EILSEQ, ""},

		{"rmdir", "d2", "", 0, strings.Replace(baseTree, "/d2/ ", "", 1)},
		{"rmdir", "d2/", "", 0, strings.Replace(baseTree, "/d2/ ", "", 1)},
		{"rmdir", "d1/../d2", "", 0, strings.Replace(baseTree, "/d2/ ", "", 1)},
		{"rmdir", "d3", "", errno.ENOTEMPTY, ""},
		{"rmdir", "f2", "", errno.ENOTDIR, ""},
		{"rmdir", "f2/", "", errno.ENOTDIR, ""},
		{"rmdir", "/", "", errno.EBUSY, ""},
		{"rmdir", "//", "", errno.EBUSY, ""},
		{"rmdir", ".", "", errno.EINVAL, ""},
		{"rmdir", "d2/.", "", errno.EINVAL, ""},
		{"rmdir", "..", "", errno.ENOTEMPTY, ""},
		{"rmdir", "d2/..", "", errno.ENOTEMPTY, ""},
		{"rmdir", "nope", "", errno.ENOENT, ""},
		{"rmdir", "", "", errno.ENOENT, ""},

		{"unlink", "f2", "", 0, strings.Replace(baseTree, " /f2=two", "", 1)},
		{"unlink", "d1/sub/x", "", 0, strings.Replace(baseTree, " /d1/sub/x=x", "", 1)},
		{"unlink", "d2", "", errno.EISDIR, ""},
		{"unlink", "d2/", "", errno.EISDIR, ""},
		{"unlink", "f2/", "", errno.ENOTDIR, ""},
		{"unlink", ".", "", errno.EISDIR, ""},
		{"unlink", "..", "", errno.EISDIR, ""},
		{"unlink", "/", "", errno.EISDIR, ""},
		{"unlink", "nope", "", errno.ENOENT, ""},
		{"unlink", "f2/x", "", errno.ENOTDIR, ""},

		{"link", "f2", "g", 0, baseTree + " /g=two"},
		{"link", "f2", "d2/g", 0, strings.Replace(baseTree, "/d2/", "/d2/ /d2/g=two", 1)},
		{"link", "d2", "g", errno.EPERM, ""},
		{"link", ".", "g", errno.EPERM, ""},
		{"link", "f2", "d1", errno.EEXIST, ""},
		{"link", "f2", "d1/f1", errno.EEXIST, ""},
		{"link", "f2", "f2", errno.EEXIST, ""},
		{"link", "f2", ".", errno.EEXIST, ""},
		{"link", "f2", "..", errno.EEXIST, ""},
		{"link", "f2", "/", errno.EEXIST, ""},
		{"link", "f2", "g/", errno.ENOENT, ""},
		{"link", "nope", "g", errno.ENOENT, ""},
		{"link", "f2", "nope/g", errno.ENOENT, ""},
		{"link", "f2/", "g", errno.ENOTDIR, ""},
		{"link", "f2", "f2/g", errno.ENOTDIR, ""},
		{"link", "f2", "g\x00", errno.EILSEQ, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %q %q", tt.op, tt.a, tt.b), func(t *testing.T) {
			fs := newFS(t, Quota{})
			_, before := fs.Usage()
			var err error
			switch tt.op {
			case "mkdir":
				err = fs.Mkdir(fs.Root(), tt.a)
			case "rmdir":
				err = fs.Rmdir(fs.Root(), tt.a)
			case "unlink":
				err = fs.Unlink(fs.Root(), tt.a)
			case "link":
				err = fs.Link(fs.Root(), tt.a, fs.Root(), tt.b)
			}
			wantErr(t, tt.op, err, tt.err)
			want := tt.tree
			if want == "" {
				want = baseTree
			}
			if got := dump(t, fs); got != want {
				t.Errorf("tree:\n got %s\nwant %s", got, want)
			}
			_, after := fs.Usage()
			wantInodes := before
			if err == nil {
				switch tt.op {
				case "mkdir":
					wantInodes++
				case "rmdir", "unlink":
					wantInodes--
				}
			}
			if after != wantInodes {
				t.Errorf("inodes %d, want %d", after, wantInodes)
			}
		})
	}
}

func TestRename(t *testing.T) {
	tests := []struct {
		setup    func(fs *FS)
		old, new string
		err      errno.Errno
		tree     string // "" means unchanged
	}{
		{nil, "f2", "f3", 0, strings.Replace(baseTree, "/f2=two", "/f3=two", 1)},
		{nil, "f2", "d2/f2", 0, strings.Replace(strings.Replace(baseTree, " /f2=two", "", 1), "/d2/", "/d2/ /d2/f2=two", 1)},
		{nil, "f2", "d1/f1", 0, strings.Replace(strings.Replace(baseTree, " /f2=two", "", 1), "f1=one", "f1=two", 1)},
		{nil, "d1/f1", "f2", 0, strings.Replace(strings.Replace(baseTree, " /d1/f1=one", "", 1), "f2=two", "f2=one", 1)},
		{nil, "d1", "d2", 0, "/ /d2/ /d2/f1=one /d2/sub/ /d2/sub/x=x /d3/ /d3/y=y /f2=two"},
		{nil, "d2/", "d4/", 0, "/ /d1/ /d1/f1=one /d1/sub/ /d1/sub/x=x /d3/ /d3/y=y /d4/ /f2=two"},
		{nil, "d1/sub", "sub", 0, "/ /d1/ /d1/f1=one /d2/ /d3/ /d3/y=y /f2=two /sub/ /sub/x=x"},
		{nil, "d1/sub", "d1/../d2/sub", 0, "/ /d1/ /d1/f1=one /d2/ /d2/sub/ /d2/sub/x=x /d3/ /d3/y=y /f2=two"},
		{nil, "f2", "f2", 0, ""},
		{nil, "f2", "./f2", 0, ""},
		{nil, "d1", "d1", 0, ""},
		{nil, "d1", "/d1/", 0, ""},
		{func(fs *FS) { fs.Link(fs.Root(), "f2", fs.Root(), "h") }, "f2", "h", 0, baseTree + " /h=two"},
		{nil, "f2", "d2", errno.EISDIR, ""},
		{nil, "d2", "f2", errno.ENOTDIR, ""},
		{nil, "d2", "d3", errno.ENOTEMPTY, ""},
		{nil, "d2", "d1/sub", errno.ENOTEMPTY, ""},
		{nil, "d1/sub", "d1", errno.ENOTEMPTY, ""},
		{nil, "d1", "d1/new", errno.EINVAL, ""},
		{nil, "d1", "d1/sub/new", errno.EINVAL, ""},
		{nil, "d1", "d1/sub", errno.EINVAL, ""},
		{nil, "d3", "d3/y", errno.EINVAL, ""},
		{nil, "nope", "x", errno.ENOENT, ""},
		{nil, "f2", "nope/x", errno.ENOENT, ""},
		{nil, "f2", "f2/x", errno.ENOTDIR, ""},
		{nil, "f2/", "x", errno.ENOTDIR, ""},
		{nil, "f2", "x/", errno.ENOTDIR, ""},
		{nil, ".", "x", errno.EBUSY, ""},
		{nil, "d1/..", "x", errno.EBUSY, ""},
		{nil, "/", "x", errno.EBUSY, ""},
		{nil, "f2", ".", errno.EBUSY, ""},
		{nil, "f2", "d1/..", errno.EBUSY, ""},
		{nil, "f2", "/", errno.EBUSY, ""},
		{nil, "", "x", errno.ENOENT, ""},
		{nil, "f2", "", errno.ENOENT, ""},
		{nil, "f2", "x\x00", errno.EILSEQ, ""},
		{nil, "f2", strings.Repeat("x", 256), errno.ENAMETOOLONG, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q->%q", tt.old, tt.new), func(t *testing.T) {
			fs := newFS(t, Quota{})
			if tt.setup != nil {
				tt.setup(fs)
			}
			before := dump(t, fs)
			err := fs.Rename(fs.Root(), tt.old, fs.Root(), tt.new)
			wantErr(t, "Rename", err, tt.err)
			want := tt.tree
			if want == "" {
				want = before
			}
			if got := dump(t, fs); got != want {
				t.Errorf("tree:\n got %s\nwant %s", got, want)
			}
			checkInvariants(t, fs, nil, nil)
		})
	}
}

func TestRenameAccounting(t *testing.T) {
	fs := newFS(t, Quota{})
	root := fs.Root()
	d1, d2 := mustLookup(t, fs, "d1"), mustLookup(t, fs, "d2")
	b0, i0 := fs.Usage()
	// Replacing a file frees the replaced file's bytes and inode.
	wantErr(t, "rename", fs.Rename(root, "f2", root, "d1/f1"), 0)
	if b, i := fs.Usage(); b != b0-3 || i != i0-1 {
		t.Errorf("usage after replace = %d,%d want %d,%d", b, i, b0-3, i0-1)
	}
	// Moving a directory moves its ".." link between parents.
	if d1.Nlink() != 3 || d2.Nlink() != 2 {
		t.Fatalf("nlink d1=%d d2=%d", d1.Nlink(), d2.Nlink())
	}
	sub := mustLookup(t, fs, "d1/sub")
	wantErr(t, "rename", fs.Rename(d1, "sub", d2, "sub"), 0)
	if d1.Nlink() != 2 || d2.Nlink() != 3 || fs.Parent(sub) != d2 {
		t.Errorf("after move nlink d1=%d d2=%d parent ok=%v", d1.Nlink(), d2.Nlink(), fs.Parent(sub) == d2)
	}
	// Replacing an empty directory removes it; an open one survives until Release.
	empty := mustLookup(t, fs, "d3")
	wantErr(t, "unlink", fs.Unlink(root, "d3/y"), 0)
	fs.Retain(empty)
	_, i1 := fs.Usage()
	wantErr(t, "rename", fs.Rename(root, "d2", root, "d3"), 0)
	if empty.Nlink() != 0 || mustLookup(t, fs, "d3/sub") != sub {
		t.Errorf("replaced dir nlink=%d", empty.Nlink())
	}
	if _, i := fs.Usage(); i != i1 {
		t.Errorf("open replaced dir freed early: inodes %d want %d", i, i1)
	}
	fs.Release(empty)
	if _, i := fs.Usage(); i != i1-1 {
		t.Errorf("after release inodes %d want %d", i, i1-1)
	}
	checkInvariants(t, fs, nil, nil)
}

// TestRemovedDir checks a directory handle that outlives its rmdir.
func TestRemovedDir(t *testing.T) {
	fs := newFS(t, Quota{})
	root := fs.Root()
	d2 := mustLookup(t, fs, "d2")
	fs.Retain(d2)
	_, i0 := fs.Usage()
	wantErr(t, "rmdir", fs.Rmdir(root, "d2"), 0)
	if _, i := fs.Usage(); i != i0 {
		t.Errorf("open dir freed on rmdir")
	}
	if d2.Nlink() != 0 {
		t.Errorf("nlink %d", d2.Nlink())
	}
	_, err := fs.Open(d2, "x", OCreat)
	wantErr(t, "create in removed", err, errno.ENOENT)
	wantErr(t, "mkdir in removed", fs.Mkdir(d2, "x"), errno.ENOENT)
	wantErr(t, "link into removed", fs.Link(root, "f2", d2, "x"), errno.ENOENT)
	wantErr(t, "rename into removed", fs.Rename(root, "f2", d2, "x"), errno.ENOENT)
	wantErr(t, "rename dir into removed", fs.Rename(root, "d1", d2, "x"), errno.ENOENT)
	if n, err := fs.Lookup(d2, "."); n != d2 || err != nil {
		t.Errorf("Lookup . = %v, %v", n, err)
	}
	if n, err := fs.Lookup(d2, ".."); n != root || err != nil {
		t.Errorf("Lookup .. = %v, %v", n, err)
	}
	if ents, err := fs.ReadDir(d2); len(ents) != 0 || err != nil {
		t.Errorf("ReadDir = %v, %v", ents, err)
	}
	fs.Release(d2)
	if _, i := fs.Usage(); i != i0-1 {
		t.Errorf("inodes %d want %d", i, i0-1)
	}
	fs.Release(d2) // unbalanced: ignored
	if _, i := fs.Usage(); i != i0-1 {
		t.Errorf("unbalanced Release changed usage")
	}
}

func TestReadWrite(t *testing.T) {
	fs := newFS(t, Quota{})
	f, _ := fs.Open(fs.Root(), "f", OCreat)
	d := mustLookup(t, fs, "d1")
	buf := make([]byte, 16)

	n, err := fs.WriteAt(f, []byte("hello"), 0)
	wantErr(t, "write", err, 0)
	if n != 5 || f.Size() != 5 {
		t.Fatalf("n=%d size=%d", n, f.Size())
	}
	// Gap is zero filled.
	fs.WriteAt(f, []byte("!"), 8)
	if got, _ := fs.ReadFile("/f"); string(got) != "hello\x00\x00\x00!" {
		t.Errorf("got %q", got)
	}
	// Short read at end, nothing at and past EOF.
	if n, err := fs.ReadAt(f, buf[:4], 7); n != 2 || err != nil || string(buf[:2]) != "\x00!" {
		t.Errorf("ReadAt tail = %d, %v, %q", n, err, buf[:n])
	}
	for _, off := range []int64{9, 10, 1 << 50} {
		if n, err := fs.ReadAt(f, buf, off); n != 0 || err != nil {
			t.Errorf("ReadAt(%d) = %d, %v", off, n, err)
		}
	}
	// Truncate down then up exposes zeros, not the old bytes.
	wantErr(t, "truncate", fs.Truncate(f, 2), 0)
	wantErr(t, "truncate", fs.Truncate(f, 6), 0)
	if got, _ := fs.ReadFile("/f"); string(got) != "he\x00\x00\x00\x00" {
		t.Errorf("after truncate got %q", got)
	}
	// Write past end after shrink within capacity, too.
	fs.Truncate(f, 1)
	fs.WriteAt(f, []byte("Z"), 4)
	if got, _ := fs.ReadFile("/f"); string(got) != "h\x00\x00\x00Z" {
		t.Errorf("after sparse write got %q", got)
	}
	// Empty write never extends.
	if n, err := fs.WriteAt(f, nil, 100); n != 0 || err != nil || f.Size() != 5 {
		t.Errorf("empty write = %d, %v, size %d", n, err, f.Size())
	}

	errs := []struct {
		name string
		err  error
		want errno.Errno
	}{
		{"read dir", second(fs.ReadAt(d, buf, 0)), errno.EISDIR},
		{"write dir", second(fs.WriteAt(d, buf, 0)), errno.EISDIR},
		{"truncate dir", fs.Truncate(d, 0), errno.EISDIR},
		{"read negative", second(fs.ReadAt(f, buf, -1)), errno.EINVAL},
		{"write negative", second(fs.WriteAt(f, buf, -1)), errno.EINVAL},
		{"truncate negative", fs.Truncate(f, -1), errno.EINVAL},
		{"write past 1TiB", second(fs.WriteAt(f, buf, 1<<40-15)), errno.EFBIG},
		{"write overflow", second(fs.WriteAt(f, buf, 1<<63-1)), errno.EFBIG},
		{"truncate past 1TiB", fs.Truncate(f, 1<<40+1), errno.EFBIG},
		{"read nil", second(fs.ReadAt(nil, buf, 0)), errno.EBADF},
		{"write nil", second(fs.WriteAt(nil, buf, 0)), errno.EBADF},
		{"truncate nil", fs.Truncate(nil, 0), errno.EBADF},
		{"write foreign", second(fs.WriteAt(New(Options{}).Root(), buf, 0)), errno.EBADF},
	}
	for _, e := range errs {
		wantErr(t, e.name, e.err, e.want)
	}
	if f.Size() != 5 {
		t.Errorf("failed ops changed size to %d", f.Size())
	}
}

func second[T any](_ T, err error) error { return err }

// TestAppend writes 10k 100-byte records sequentially; with quadratic
// copying this would move ~5 GB and time out.
func TestAppend(t *testing.T) {
	fs := New(Options{Quota: Quota{MaxBytes: 2 << 20}})
	f, err := fs.Open(fs.Root(), "log", OCreat)
	if err != nil {
		t.Fatal(err)
	}
	rec := bytes.Repeat([]byte("0123456789"), 10)
	allocs := 0
	for i := range 10000 {
		c := cap(f.data)
		if _, err := fs.WriteAt(f, rec, int64(i*len(rec))); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if cap(f.data) != c {
			allocs++
		}
	}
	if f.Size() != 1e6 {
		t.Fatalf("size %d", f.Size())
	}
	if allocs > 40 {
		t.Errorf("%d reallocations for 10k appends: growth is not geometric", allocs)
	}
	if b, _ := fs.Usage(); b != 1e6 {
		t.Errorf("usage counts %d bytes, want logical size 1e6", b)
	}
	if cap(f.data) > 2<<20 {
		t.Errorf("capacity %d exceeds the byte quota", cap(f.data))
	}
	got, _ := fs.ReadFile("/log")
	if !bytes.Equal(got, bytes.Repeat(rec, 10000)) {
		t.Error("contents differ")
	}
	// A big shrink gives memory back.
	fs.Truncate(f, 10)
	if cap(f.data) > 20 {
		t.Errorf("capacity %d after truncate to 10", cap(f.data))
	}
}

// TestTruncatedMemory checks that truncated files do not pin memory the
// quota no longer charges: grow-then-truncate across many files would
// otherwise let a guest hold far more than MaxBytes.
func TestTruncatedMemory(t *testing.T) {
	fs := New(Options{Quota: Quota{MaxBytes: 64 << 10}})
	for i := range 100 {
		f, err := fs.Open(fs.Root(), "f"+strconv.Itoa(i), OCreat)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fs.WriteAt(f, make([]byte, 64<<10), 0); err != nil {
			t.Fatal(err)
		}
		for _, size := range []int64{40 << 10, 1, 0} {
			fs.Truncate(f, size)
			if cap(f.data) > 2*int(size) {
				t.Fatalf("capacity %d after truncate to %d", cap(f.data), size)
			}
		}
	}
	if b, _ := fs.Usage(); b != 0 {
		t.Errorf("usage %d", b)
	}
}

func TestQuotaBytes(t *testing.T) {
	fs := New(Options{Quota: Quota{MaxBytes: 100}})
	root := fs.Root()
	a, _ := fs.Open(root, "a", OCreat)
	if _, err := fs.WriteAt(a, make([]byte, 60), 0); err != nil {
		t.Fatal(err)
	}
	if fs.QuotaHit() {
		t.Fatal("QuotaHit before any refusal")
	}
	n, err := fs.WriteAt(a, make([]byte, 50), 60)
	wantErr(t, "write over quota", err, errno.ENOSPC)
	if n != 0 || a.Size() != 60 || !fs.QuotaHit() {
		t.Fatalf("refused write: n=%d size=%d hit=%v", n, a.Size(), fs.QuotaHit())
	}
	// Overwriting in place needs no quota; filling exactly to the limit is fine.
	if _, err := fs.WriteAt(a, make([]byte, 60), 0); err != nil {
		t.Error(err)
	}
	if _, err := fs.WriteAt(a, make([]byte, 40), 60); err != nil {
		t.Error(err)
	}
	wantErr(t, "one more byte", second(fs.WriteAt(a, []byte{1}, 100)), errno.ENOSPC)
	wantErr(t, "sparse write", second(fs.WriteAt(a, []byte{1}, 1<<30)), errno.ENOSPC)
	// Growth by truncation is a hole, not stored, but its size counts.
	wantErr(t, "truncate up", fs.Truncate(a, 1<<39), errno.ENOSPC)
	if b, _ := fs.Usage(); b != 100 || a.Size() != 100 {
		t.Errorf("usage %d size %d after truncating up", b, a.Size())
	}
	wantErr(t, "WriteFile", fs.WriteFile("/b", []byte("x")), errno.ENOSPC)
	if b, _ := fs.Usage(); b != 100 {
		t.Errorf("usage %d", b)
	}
	// Truncate frees.
	wantErr(t, "truncate down", fs.Truncate(a, 10), 0)
	if b, _ := fs.Usage(); b != 10 {
		t.Errorf("usage after truncate %d", b)
	}
	wantErr(t, "WriteFile", fs.WriteFile("/b", make([]byte, 90)), 0)
	// WriteFile replacing contents counts the difference.
	wantErr(t, "WriteFile replace", fs.WriteFile("/b", make([]byte, 80)), 0)
	wantErr(t, "WriteFile too big", fs.WriteFile("/b", make([]byte, 91)), errno.ENOSPC)
	if got, _ := fs.ReadFile("/b"); len(got) != 80 {
		t.Errorf("refused WriteFile changed contents to %d bytes", len(got))
	}
	// Unlink frees, but not while open.
	b := mustLookup(t, fs, "b")
	fs.Retain(b)
	wantErr(t, "unlink", fs.Unlink(root, "b"), 0)
	if u, _ := fs.Usage(); u != 90 {
		t.Errorf("unlinked-but-open usage %d, want 90", u)
	}
	// Still usable and still charged.
	wantErr(t, "write unlinked", second(fs.WriteAt(b, make([]byte, 5), 80)), 0)
	wantErr(t, "write unlinked over", second(fs.WriteAt(b, make([]byte, 10), 85)), errno.ENOSPC)
	if n, _ := fs.ReadAt(b, make([]byte, 100), 0); n != 85 {
		t.Errorf("read unlinked n=%d", n)
	}
	fs.Release(b)
	if u, i := fs.Usage(); u != 10 || i != 2 {
		t.Errorf("after release usage %d,%d want 10,2", u, i)
	}
	// A freed inode refuses writes rather than growing uncharged.
	wantErr(t, "write freed", second(fs.WriteAt(b, []byte{1}, 0)), errno.EBADF)
	wantErr(t, "truncate freed", fs.Truncate(b, 5), errno.EBADF)
	// Hard links share one charge.
	wantErr(t, "link", fs.Link(root, "a", root, "a2"), 0)
	wantErr(t, "unlink", fs.Unlink(root, "a"), 0)
	if u, _ := fs.Usage(); u != 10 {
		t.Errorf("linked usage %d", u)
	}
	wantErr(t, "unlink", fs.Unlink(root, "a2"), 0)
	if u, i := fs.Usage(); u != 0 || i != 1 {
		t.Errorf("empty usage %d,%d", u, i)
	}
}

func TestQuotaInodes(t *testing.T) {
	fs := New(Options{Quota: Quota{MaxInodes: 3}})
	root := fs.Root()
	if _, i := fs.Usage(); i != 1 {
		t.Fatalf("root not counted: %d", i)
	}
	if _, err := fs.Open(root, "a", OCreat); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "mkdir", fs.Mkdir(root, "d"), 0)
	if fs.QuotaHit() {
		t.Fatal("hit too early")
	}
	wantErr(t, "create", second2(fs.Open(root, "c", OCreat)), errno.ENOSPC)
	if !fs.QuotaHit() {
		t.Error("QuotaHit false after refusal")
	}
	wantErr(t, "mkdir", fs.Mkdir(root, "e"), errno.ENOSPC)
	wantErr(t, "mkdirall", second2(fs.MkdirAll("/x/y")), errno.ENOSPC)
	wantErr(t, "writefile", fs.WriteFile("/c", nil), errno.ENOSPC)
	// Existing names still report EEXIST, not ENOSPC.
	wantErr(t, "mkdir existing", fs.Mkdir(root, "d"), errno.EEXIST)
	// Links and renames need no inode.
	wantErr(t, "link", fs.Link(root, "a", root, "d/a"), 0)
	wantErr(t, "rename", fs.Rename(root, "a", root, "b"), 0)
	// Names are capped too: root has none, a, d and d/a make 3.
	wantErr(t, "link over name cap", fs.Link(root, "b", root, "d/a2"), errno.ENOSPC)
	// Removing frees.
	wantErr(t, "rmdir busy", fs.Rmdir(root, "d"), errno.ENOTEMPTY)
	wantErr(t, "unlink", fs.Unlink(root, "d/a"), 0)
	wantErr(t, "rmdir", fs.Rmdir(root, "d"), 0)
	wantErr(t, "mkdir after free", fs.Mkdir(root, "e"), 0)
	wantErr(t, "unlink", fs.Unlink(root, "b"), 0)
	wantErr(t, "create after free", second2(fs.Open(root, "c", OCreat)), 0)
	// Unlinked-but-open keeps its inode.
	c := mustLookup(t, fs, "c")
	fs.Retain(c)
	wantErr(t, "unlink", fs.Unlink(root, "c"), 0)
	wantErr(t, "create while open", second2(fs.Open(root, "c", OCreat)), errno.ENOSPC)
	fs.Release(c)
	wantErr(t, "create after release", second2(fs.Open(root, "c", OCreat)), 0)
}

func second2(_ *Inode, err error) error { return err }

func TestTimes(t *testing.T) {
	var clock int64 = 1000
	fs := New(Options{Now: func() int64 { clock++; return clock }})
	root := fs.Root()
	if a, m, c := root.Times(); a != 1001 || m != 1001 || c != 1001 {
		t.Fatalf("root times %d %d %d", a, m, c)
	}
	f, _ := fs.Open(root, "f", OCreat) // 1002
	if a, m, c := f.Times(); a != 1002 || m != 1002 || c != 1002 {
		t.Errorf("new file times %d %d %d", a, m, c)
	}
	if _, m, c := root.Times(); m != 1002 || c != 1002 {
		t.Errorf("parent not touched by create: %d %d", m, c)
	}
	fs.WriteAt(f, []byte("x"), 0) // 1003
	if a, m, c := f.Times(); a != 1002 || m != 1003 || c != 1003 {
		t.Errorf("after write %d %d %d", a, m, c)
	}
	fs.ReadAt(f, make([]byte, 1), 0) // noatime
	if a, _, _ := f.Times(); a != 1002 {
		t.Errorf("read changed atime to %d", a)
	}
	fs.Truncate(f, 0) // 1004
	if _, m, c := f.Times(); m != 1004 || c != 1004 {
		t.Errorf("after truncate %d %d", m, c)
	}
	fs.SetTimes(f, 7, 8, true, false) // ctim 1005
	if a, m, c := f.Times(); a != 7 || m != 1004 || c != 1005 {
		t.Errorf("SetTimes atim only: %d %d %d", a, m, c)
	}
	fs.SetTimes(f, 9, 10, false, true) // 1006
	if a, m, c := f.Times(); a != 7 || m != 10 || c != 1006 {
		t.Errorf("SetTimes mtim only: %d %d %d", a, m, c)
	}
	fs.Mkdir(root, "d")               // 1007
	fs.Rename(root, "f", root, "d/g") // 1008
	d := mustLookup(t, fs, "d")
	if _, _, c := f.Times(); c != 1008 {
		t.Errorf("rename did not touch ctime: %d", c)
	}
	if _, m, _ := root.Times(); m != 1008 {
		t.Errorf("rename did not touch old parent: %d", m)
	}
	if _, m, _ := d.Times(); m != 1008 {
		t.Errorf("rename did not touch new parent: %d", m)
	}
	fs.Link(d, "g", root, "h") // 1009
	if _, _, c := f.Times(); c != 1009 {
		t.Errorf("link ctime %d", c)
	}
	fs.Unlink(d, "g") // 1010
	if _, m, _ := d.Times(); m != 1010 {
		t.Errorf("unlink parent mtime %d", m)
	}
	fs.SetTimes(nil, 1, 1, true, true) // ignored, no panic
	// Default clock is real time.
	if _, m, _ := New(Options{}).Root().Times(); m <= 0 {
		t.Errorf("default clock gave %d", m)
	}
}

func TestReadDir(t *testing.T) {
	fs := newFS(t, Quota{})
	root := fs.Root()
	names := func(ents []DirEntry) string {
		var s []string
		for _, e := range ents {
			s = append(s, e.Name)
		}
		return strings.Join(s, ",")
	}
	ents, err := fs.ReadDir(root)
	if err != nil || names(ents) != "d1,d2,d3,f2" {
		t.Fatalf("ReadDir = %s, %v", names(ents), err)
	}
	again, _ := fs.ReadDir(root)
	if &again[0] != &ents[0] {
		t.Error("unchanged directory rebuilt its listing")
	}
	fs.WriteFile("/B", nil)
	fs.WriteFile("/a", nil)
	fs.Unlink(root, "f2")
	now, _ := fs.ReadDir(root)
	if names(now) != "B,a,d1,d2,d3" {
		t.Errorf("after change = %s", names(now))
	}
	if names(ents) != "d1,d2,d3,f2" {
		t.Errorf("earlier snapshot modified: %s", names(ents))
	}
	// Replacing an entry by rename changes its inode in the listing.
	fs.Rename(root, "a", root, "B")
	now, _ = fs.ReadDir(root)
	if names(now) != "B,d1,d2,d3" || now[0].Inode != mustLookup(t, fs, "B") {
		t.Errorf("after rename = %s", names(now))
	}
	if empty, err := fs.ReadDir(mustLookup(t, fs, "d2")); len(empty) != 0 || err != nil {
		t.Errorf("empty dir = %v, %v", empty, err)
	}
	wantErr(t, "file", second3(fs.ReadDir(mustLookup(t, fs, "B"))), errno.ENOTDIR)
	wantErr(t, "nil", second3(fs.ReadDir(nil)), errno.EBADF)
}

func second3(_ []DirEntry, err error) error { return err }

// TestBigDir checks a 100k-entry directory: creation, sorted listing,
// cheap paging while unchanged, lookups and removal.
func TestBigDir(t *testing.T) {
	const n = 100_000
	fs := New(Options{Quota: Quota{MaxInodes: n + 2}})
	d, err := fs.MkdirAll("/big")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := fs.Open(d, "f"+strconv.Itoa(i), OCreat|OExcl); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if _, i := fs.Usage(); i != n+2 {
		t.Fatalf("inodes %d", i)
	}
	wantErr(t, "one more", second2(fs.Open(d, "extra", OCreat)), errno.ENOSPC)
	// Page through 100 entries per call, as fd_readdir with cookies does.
	var seen []string
	var first *DirEntry
	for cookie := 0; ; cookie += 100 {
		ents, err := fs.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = &ents[0]
		} else if first != &ents[0] {
			t.Fatal("listing rebuilt between pages of an unchanged directory")
		}
		if cookie >= len(ents) {
			break
		}
		for _, e := range ents[cookie:min(cookie+100, len(ents))] {
			seen = append(seen, e.Name)
		}
	}
	if len(seen) != n || !slices.IsSorted(seen) {
		t.Fatalf("saw %d entries, sorted=%v", len(seen), slices.IsSorted(seen))
	}
	if got, err := fs.Lookup(d, "f99999"); err != nil || got.Kind() != KindFile {
		t.Errorf("Lookup f99999 = %v, %v", got, err)
	}
	for i := 0; i < n; i += 2 {
		if err := fs.Unlink(d, "f"+strconv.Itoa(i)); err != nil {
			t.Fatalf("unlink %d: %v", i, err)
		}
	}
	ents, _ := fs.ReadDir(d)
	if len(ents) != n/2 || !slices.IsSortedFunc(ents, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("after removing half: %d entries", len(ents))
	}
	if _, i := fs.Usage(); i != n/2+2 {
		t.Errorf("inodes %d", i)
	}
}

func TestWalk(t *testing.T) {
	fs := newFS(t, Quota{})
	fs.WriteFile("/d1/a", []byte("A"))
	fs.WriteFile("/d1/sub/deeper/z", nil)
	var got []string
	collect := func(p string, n *Inode) error { got = append(got, p); return nil }
	if err := fs.Walk("/", collect); err != nil {
		t.Fatal(err)
	}
	want := "/ /d1 /d1/a /d1/f1 /d1/sub /d1/sub/deeper /d1/sub/deeper/z /d1/sub/x /d2 /d3 /d3/y /f2"
	if strings.Join(got, " ") != want {
		t.Errorf("Walk /:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	tests := []struct {
		root string
		fn   func(p string, n *Inode) error
		want string
		err  error
	}{
		{"d1/sub/", nil, "/d1/sub /d1/sub/deeper /d1/sub/deeper/z /d1/sub/x", nil},
		{"/d1/../d3", nil, "/d3 /d3/y", nil},
		{"f2", nil, "/f2", nil},
		{"/", func(p string, n *Inode) error {
			if p == "/d1" {
				return iofs.SkipDir
			}
			return nil
		}, "/ /d1 /d2 /d3 /d3/y /f2", nil},
		{"/d1", func(p string, n *Inode) error {
			if p == "/d1/f1" {
				return iofs.SkipDir // from a file: rest of /d1 skipped
			}
			return nil
		}, "/d1 /d1/a /d1/f1", nil},
		{"/", func(p string, n *Inode) error {
			if p == "/d1/sub" {
				return iofs.SkipAll
			}
			return nil
		}, "/ /d1 /d1/a /d1/f1 /d1/sub", nil},
		{"/", func(p string, n *Inode) error {
			if p == "/d2" {
				return errors.New("stop")
			}
			return nil
		}, "/ /d1 /d1/a /d1/f1 /d1/sub /d1/sub/deeper /d1/sub/deeper/z /d1/sub/x /d2", errors.New("stop")},
		{"/", func(p string, n *Inode) error { return iofs.SkipDir }, "/", nil},
		{"/", func(p string, n *Inode) error { return iofs.SkipAll }, "/", nil},
		{"/d2", func(p string, n *Inode) error { return errors.New("at root") }, "/d2", errors.New("at root")},
		{"/f2", func(p string, n *Inode) error { return iofs.SkipDir }, "/f2", nil},
		{"nope", nil, "", errno.ENOENT},
		{"f2/", nil, "", errno.ENOTDIR},
	}
	for _, tt := range tests {
		t.Run(tt.root, func(t *testing.T) {
			got = nil
			err := fs.Walk(tt.root, func(p string, n *Inode) error {
				got = append(got, p)
				if tt.fn != nil {
					return tt.fn(p, n)
				}
				return nil
			})
			if fmt.Sprint(err) != fmt.Sprint(tt.err) {
				t.Errorf("err %v, want %v", err, tt.err)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %s\nwant %s", strings.Join(got, " "), tt.want)
			}
		})
	}
	// fn may delete what it visits.
	err := fs.Walk("/", func(p string, n *Inode) error {
		if n.Kind() == KindFile {
			return fs.Unlink(fs.Root(), p)
		}
		return nil
	})
	if err != nil || dump(t, fs) != "/ /d1/ /d1/sub/ /d1/sub/deeper/ /d2/ /d3/" {
		t.Errorf("deleting walk: %v, %s", err, dump(t, fs))
	}
}

// TestWalkMemoryIsLinearInPathLength: renaming directories into each other
// builds a chain of 255-byte names a thousand deep out of short paths;
// walking it must not keep every level's full path alive at the bottom
// (~125 MiB here, gigabytes at the default inode quota).
func TestWalkMemoryIsLinearInPathLength(t *testing.T) {
	fs := New(Options{Quota: Quota{MaxBytes: 1 << 20, MaxInodes: 10000}})
	name := func(i int) string { s := strconv.Itoa(i); return strings.Repeat("n", 255-len(s)) + s }
	const depth = 1000
	for i := range depth {
		if err := fs.Mkdir(fs.Root(), name(i)); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if err := fs.Rename(fs.Root(), name(i-1), fs.Root(), name(i)+"/"+name(i-1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base, peak, longest := heap(), uint64(0), 0
	err := fs.Walk("/", func(p string, n *Inode) error {
		longest = max(longest, len(p))
		if n.kind == KindDir && len(n.children) == 0 { // the bottom: every level is open
			peak = heap()
		}
		return nil
	})
	if err != nil || longest < depth*256 {
		t.Fatalf("walk: %v, longest path %d", err, longest)
	}
	if grown := int64(peak) - int64(base); grown > 8<<20 {
		t.Fatalf("the walk held %d MiB at the bottom of a %d-deep tree; its longest path is %d KiB", grown>>20, depth, longest>>10)
	}
}

// Links fill the name quota before the inode quota: creating must then
// fail too, or the tree holds names a Load under the same quota refuses.
func TestCreateCountsNamesAfterLinks(t *testing.T) {
	opts := Options{Quota: Quota{MaxInodes: 10}}
	fs := New(opts)
	if err := fs.WriteFile("/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if err := fs.Link(fs.Root(), "f", fs.Root(), "l"+strconv.Itoa(i)); err != nil {
			wantErr(t, "link past the quota", err, errno.ENOSPC)
			break
		}
	}
	wantErr(t, "create past the name quota", fs.WriteFile("/g", nil), errno.ENOSPC)
	wantErr(t, "mkdir past the name quota", fs.Mkdir(fs.Root(), "d"), errno.ENOSPC)
	var saved bytes.Buffer
	if err := fs.Save(&saved); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(&saved, opts); err != nil {
		t.Fatalf("a tree the quota admitted does not load under it: %v", err)
	}
}

// TestDeepTree builds a chain deeper than any path can name, through
// directory handles, and walks and removes it.
func TestDeepTree(t *testing.T) {
	fs := New(Options{})
	d := fs.Root()
	const depth = 3000
	for range depth {
		if err := fs.Mkdir(d, "dd"); err != nil {
			t.Fatal(err)
		}
		d, _ = fs.Lookup(d, "dd")
	}
	count := 0
	if err := fs.Walk("/", func(string, *Inode) error { count++; return nil }); err != nil || count != depth+1 {
		t.Fatalf("walk: %v, %d", err, count)
	}
	// Moving an ancestor into the deepest directory must be refused.
	wantErr(t, "rename into subtree", fs.Rename(fs.Root(), "dd", d, "x"), errno.EINVAL)
	for range depth {
		p := fs.Parent(d)
		wantErr(t, "rmdir", fs.Rmdir(p, "dd"), 0)
		d = p
	}
	if d != fs.Root() || dump(t, fs) != "/" {
		t.Errorf("not back at an empty root")
	}
}

func TestHostHelpers(t *testing.T) {
	fs := New(Options{})
	d, err := fs.MkdirAll("/a/b/c")
	if err != nil || d.Kind() != KindDir {
		t.Fatal(err)
	}
	if again, err := fs.MkdirAll("a/./b/../b/c/"); again != d || err != nil {
		t.Errorf("MkdirAll existing = %v, %v", again, err)
	}
	if root, err := fs.MkdirAll("/"); root != fs.Root() || err != nil {
		t.Errorf("MkdirAll / = %v, %v", root, err)
	}
	wantErr(t, "WriteFile", fs.WriteFile("/a/b/f", []byte("data")), 0)
	wantErr(t, "WriteFile new dirs", fs.WriteFile("/x/y/z", []byte("deep")), 0)
	wantErr(t, "WriteFile replace", fs.WriteFile("/a/b/f", []byte("new")), 0)
	if got, err := fs.ReadFile("/a/b/f"); string(got) != "new" || err != nil {
		t.Errorf("ReadFile = %q, %v", got, err)
	}
	if got, err := fs.ReadFile("/x/y/z"); string(got) != "deep" || err != nil {
		t.Errorf("ReadFile = %q, %v", got, err)
	}
	// ReadFile copies, WriteFile copies.
	src := []byte("abc")
	fs.WriteFile("/copy", src)
	src[0] = 'X'
	got, _ := fs.ReadFile("/copy")
	got[1] = 'Y'
	if again, _ := fs.ReadFile("/copy"); string(again) != "abc" {
		t.Errorf("aliasing: %q", again)
	}
	if got, err := fs.ReadFile("/empty-not-there"); got != nil || err == nil {
		t.Errorf("missing ReadFile = %v, %v", got, err)
	}
	fs.WriteFile("/empty", nil)
	if got, err := fs.ReadFile("/empty"); got == nil || len(got) != 0 || err != nil {
		t.Errorf("empty ReadFile = %v, %v", got, err)
	}
	errs := []struct {
		name string
		err  error
		want errno.Errno
	}{
		{"MkdirAll through file", second2(fs.MkdirAll("/a/b/f/g")), errno.ENOTDIR},
		{"MkdirAll on file", second2(fs.MkdirAll("/a/b/f")), errno.ENOTDIR},
		{"MkdirAll empty", second2(fs.MkdirAll("")), errno.ENOENT},
		{"MkdirAll NUL", second2(fs.MkdirAll("/a\x00")), errno.EILSEQ},
		{"WriteFile dir", fs.WriteFile("/a/b", nil), errno.EISDIR},
		{"WriteFile root", fs.WriteFile("/", nil), errno.EISDIR},
		{"WriteFile trailing slash", fs.WriteFile("/new/", nil), errno.EISDIR},
		{"WriteFile through file", fs.WriteFile("/a/b/f/g", nil), errno.ENOTDIR},
		{"WriteFile empty", fs.WriteFile("", nil), errno.ENOENT},
		{"WriteFile long", fs.WriteFile("/"+strings.Repeat("n", 256), nil), errno.ENAMETOOLONG},
		{"ReadFile dir", second4(fs.ReadFile("/a")), errno.EISDIR},
		{"ReadFile missing", second4(fs.ReadFile("/nope")), errno.ENOENT},
	}
	for _, e := range errs {
		wantErr(t, e.name, e.err, e.want)
	}
}

func second4(_ []byte, err error) error { return err }

func TestInodeBasics(t *testing.T) {
	fs := newFS(t, Quota{})
	root := fs.Root()
	if fs.Parent(root) != root {
		t.Error("root's parent is not root")
	}
	d1 := mustLookup(t, fs, "d1")
	sub := mustLookup(t, fs, "d1/sub")
	if fs.Parent(sub) != d1 || fs.Parent(d1) != root {
		t.Error("Parent wrong")
	}
	if fs.Parent(mustLookup(t, fs, "f2")) != nil || fs.Parent(nil) != nil || fs.Parent(New(Options{}).Root()) != nil {
		t.Error("Parent of file, nil or foreign inode is not nil")
	}
	if root.Nlink() != 2+3 || d1.Nlink() != 3 || sub.Nlink() != 2 || mustLookup(t, fs, "f2").Nlink() != 1 {
		t.Errorf("nlink root=%d d1=%d sub=%d", root.Nlink(), d1.Nlink(), sub.Nlink())
	}
	if root.Kind() != KindDir || mustLookup(t, fs, "f2").Kind() != KindFile || mustLookup(t, fs, "f2").Size() != 3 {
		t.Error("Kind/Size wrong")
	}
	// Inode numbers are unique and not reused after deletion.
	inos := map[uint64]bool{}
	fs.Walk("/", func(_ string, n *Inode) error {
		if inos[n.Ino()] {
			t.Errorf("duplicate ino %d", n.Ino())
		}
		inos[n.Ino()] = true
		return nil
	})
	fs.Unlink(root, "f2")
	n, _ := fs.Open(root, "f2", OCreat)
	if inos[n.Ino()] {
		t.Errorf("ino %d reused", n.Ino())
	}
	// Methods on a nil inode do not panic.
	var nilInode *Inode
	a, m, c := nilInode.Times()
	if nilInode.Kind() != 0 || nilInode.Ino() != 0 || nilInode.Size() != 0 || nilInode.Nlink() != 0 || a|m|c != 0 {
		t.Error("nil inode not zero")
	}
	fs.Retain(nil)
	fs.Release(nil)
	other := New(Options{})
	fs.Retain(other.Root())
	fs.Release(other.Root())
	if other.Root().open != 0 {
		t.Error("foreign Retain counted")
	}
}

// checkInvariants recomputes usage from the tree plus the open inodes and
// checks directory structure, link counts and, when shadow is non-nil,
// file contents.
// shadowFile is what a file should hold: its size and the bytes written
// (anything else reads as zero), so files with holes near 1 TiB cost the
// test nothing.
type shadowFile struct {
	size int64
	b    map[int64]byte
}

func (s *shadowFile) write(p []byte, off int64) {
	for i, c := range p {
		s.b[off+int64(i)] = c
	}
	s.size = max(s.size, off+int64(len(p)))
}

func (s *shadowFile) truncate(size int64) {
	for o := range s.b {
		if o >= size {
			delete(s.b, o)
		}
	}
	s.size = size
}

func (s *shadowFile) read(p []byte, off int64) []byte {
	if off >= s.size {
		return nil
	}
	out := p[:min(int64(len(p)), s.size-off)]
	for i := range out {
		out[i] = s.b[off+int64(i)]
	}
	return out
}

func newShadow(p []byte) *shadowFile {
	s := &shadowFile{b: map[int64]byte{}}
	s.write(p, 0)
	return s
}

// sameContents checks n against s: its size, every byte it stores and
// every byte s holds.
func sameContents(t testing.TB, fs *FS, n *Inode, s *shadowFile) {
	t.Helper()
	if n.Size() != s.size {
		t.Fatalf("ino %d size %d, want %d", n.Ino(), n.Size(), s.size)
	}
	at := func(o int64, got byte) {
		if got != s.b[o] {
			t.Fatalf("ino %d byte %d = %d, want %d", n.Ino(), o, got, s.b[o])
		}
	}
	for i, c := range n.data {
		at(int64(i), c)
	}
	for k, e := range n.ext {
		if e.off <= int64(len(n.data))+holeMin || (k > 0 && e.off <= n.ext[k-1].end()+holeMin) || e.end() > n.size || len(e.b) == 0 {
			t.Fatalf("ino %d extent %d at %d+%d misplaced", n.Ino(), k, e.off, len(e.b))
		}
		for i, c := range e.b {
			at(e.off+int64(i), c)
		}
	}
	var one [1]byte
	for o, c := range s.b {
		if got, err := fs.ReadAt(n, one[:], o); got != 1 || err != nil || one[0] != c {
			t.Fatalf("ino %d ReadAt(%d) = %d %v %d, want %d", n.Ino(), o, got, err, one[0], c)
		}
	}
}

func checkInvariants(t testing.TB, fs *FS, open []*Inode, shadow map[*Inode]*shadowFile) {
	t.Helper()
	live := map[*Inode]bool{}
	names := map[*Inode]uint64{}
	inos := map[uint64]bool{}
	var walkDir func(dir *Inode)
	walkDir = func(dir *Inode) {
		live[dir] = true
		ents, err := fs.ReadDir(dir)
		if err != nil {
			t.Fatalf("ReadDir: %v", err)
		}
		if len(ents) != len(dir.children) {
			t.Fatalf("ReadDir has %d entries, dir has %d", len(ents), len(dir.children))
		}
		subdirs := uint64(0)
		for i, e := range ents {
			if i > 0 && ents[i-1].Name >= e.Name {
				t.Fatalf("ReadDir not strictly sorted: %q then %q", ents[i-1].Name, e.Name)
			}
			if got, err := fs.Lookup(dir, e.Name, NoFollow); got != e.Inode || err != nil {
				t.Fatalf("Lookup(%q) = %v, %v; ReadDir says %v", e.Name, got, err, e.Inode)
			}
			if e.Inode.freed {
				t.Fatalf("%q is freed but has a name", e.Name)
			}
			if e.Inode.Kind() == KindDir {
				if live[e.Inode] {
					t.Fatalf("directory %q reachable twice", e.Name)
				}
				if fs.Parent(e.Inode) != dir {
					t.Fatalf("Parent(%q) wrong", e.Name)
				}
				subdirs++
				walkDir(e.Inode)
			} else {
				live[e.Inode] = true
				names[e.Inode]++
			}
		}
		if dir.Nlink() != 2+subdirs {
			t.Fatalf("dir nlink %d, want %d", dir.Nlink(), 2+subdirs)
		}
	}
	walkDir(fs.Root())
	for n, k := range names {
		if n.Nlink() != k {
			t.Fatalf("file ino %d nlink %d, has %d names", n.Ino(), n.Nlink(), k)
		}
	}
	for _, n := range open {
		if !live[n] {
			if n.Nlink() != 0 || n.freed {
				t.Fatalf("open unreachable inode %d has nlink %d freed %v", n.Ino(), n.Nlink(), n.freed)
			}
			if n.Kind() == KindDir && len(n.children) != 0 {
				t.Fatalf("removed dir has entries")
			}
			live[n] = true
		}
	}
	var bytesSum int64
	for n := range live {
		bytesSum += n.charged()
		if n.stored() > n.charged() {
			t.Fatalf("ino %d stores %d bytes, more than its charge of %d", n.Ino(), n.stored(), n.charged())
		}
		if inos[n.Ino()] {
			t.Fatalf("duplicate ino %d", n.Ino())
		}
		inos[n.Ino()] = true
		if cap(n.data) > 2*len(n.data) {
			t.Fatalf("ino %d holds capacity %d for %d bytes", n.Ino(), cap(n.data), len(n.data))
		}
		if shadow != nil && n.Kind() == KindFile {
			if shadow[n] == nil {
				shadow[n] = newShadow(nil)
			}
			sameContents(t, fs, n, shadow[n])
		}
	}
	totalNames := 0
	for _, k := range names {
		totalNames += int(k)
	}
	for n := range live {
		if n.Kind() == KindDir && n != fs.Root() && n.Nlink() != 0 {
			totalNames++
		}
	}
	if fs.entries != totalNames {
		t.Fatalf("entries %d, counted %d names", fs.entries, totalNames)
	}
	if q := fs.quota.MaxInodes; q > 0 && fs.entries > 2*q {
		t.Fatalf("%d names exceed twice MaxInodes %d", fs.entries, q)
	}
	b, i := fs.Usage()
	if b != bytesSum || i != len(live) {
		t.Fatalf("Usage() = %d bytes %d inodes, recomputed %d bytes %d inodes", b, i, bytesSum, len(live))
	}
	if q := fs.quota; (q.MaxBytes > 0 && b > q.MaxBytes) || (q.MaxInodes > 0 && i > q.MaxInodes) {
		t.Fatalf("usage %d,%d over quota %+v", b, i, q)
	}
}

// fuzzPaths are the paths FuzzOps picks from: a small set of names so
// operations collide, plus every awkward form resolution handles.
var fuzzPaths = []string{
	"a", "b", "c", "a/b", "a/c", "b/a", "a/b/c", "c/a",
	".", "..", "/", "a/", "b/", "a/..", "../a", "/a/b/../c", "a/./b/", "b/../../c",
	"", "a\x00", strings.Repeat("z", 256), "l", "a/l", "l/", "l/b",
}

// fuzzTargets are what FuzzOps's links point to: loops, escapes, chains.
var fuzzTargets = []string{"a", "l", "a/l", "..", "../..", "a/../..", "b/c", "/a", "", ".", "l/b"}

type fuzzReader struct{ data []byte }

func (r *fuzzReader) next() byte {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

// FuzzOps runs random operation sequences and checks the invariants
// (usage, structure, contents) after every step.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 2, 3, 7, 0, 5, 4, 8, 1, 12})
	f.Add([]byte{3, 40, 5, 1, 1, 0, 1, 7, 1, 9, 30, 0, 4, 0, 0, 10, 0, 12})
	f.Add([]byte{1, 2, 2, 0, 0, 1, 0, 3, 3, 1, 0, 3, 0, 5, 0, 0, 0, 3, 0, 10, 0})
	f.Add([]byte{2, 1, 14, 6, 5, 1, 0, 4, 1, 0, 6, 0, 0, 2, 0, 0, 3, 4, 0, 1, 0, 2, 10, 0, 3})
	f.Add([]byte("\x03\x10\x04\x0e\x06\x20\x0e\x05\x20\x01\x00\x00\x03\x07\x01\x00\x00\x05\x00\x00\x01\x00\x04\x00\x00\x00\x0b\x00\x0f\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{data}
		// A byte quota is always set so sparse writes cannot allocate gigabytes.
		cfg := r.next()
		q := Quota{MaxBytes: int64(r.next())*32 + 1}
		if cfg&1 != 0 {
			q.MaxInodes = int(r.next()%16) + 1
		}
		var clock int64
		fs := New(Options{Quota: q, Now: func() int64 { clock++; return clock }})
		var open []*Inode
		shadow := map[*Inode]*shadowFile{}
		path := func() string { return fuzzPaths[int(r.next())%len(fuzzPaths)] }
		dir := func() *Inode {
			i := int(r.next()) % (len(open) + 1)
			if i == 0 {
				return fs.Root()
			}
			return open[i-1]
		}
		file := func() *Inode {
			if b := r.next(); len(open) > 0 && b&1 == 0 {
				return open[int(b>>1)%len(open)]
			}
			n, _ := fs.Lookup(fs.Root(), path())
			return n
		}
		payload := func() []byte {
			n := int(r.next() % 80)
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(i + 1)
			}
			return p
		}
		offset := func() int64 {
			b := r.next()
			switch b % 8 {
			case 6:
				return 1<<40 - int64(b>>3)
			case 7:
				return -int64(b >> 3)
			}
			return int64(b)
		}
		check := func(op string, err error) {
			if err != nil {
				if _, ok := err.(errno.Errno); !ok {
					t.Fatalf("%s returned non-Errno %T %v", op, err, err)
				}
			}
		}
		wasHit := false
		for step := 0; len(r.data) > 0 && step < 300; step++ {
			var op string
			var rules Rule
			if b := r.next(); b&1 != 0 {
				rules |= Beneath
			} else if b&2 != 0 {
				rules |= NoFollow
			}
			switch code := r.next() % 18; code {
			case 0:
				op = "Lookup"
				_, err := fs.Lookup(dir(), path(), rules)
				check(op, err)
			case 1:
				op = "Open"
				n, err := fs.Open(dir(), path(), OpenFlags(r.next()&0x1f), rules)
				check(op, err)
				if err == nil {
					if n.Kind() == KindFile && n.Size() == 0 {
						shadow[n] = newShadow(nil)
					}
					fs.Retain(n)
					open = append(open, n)
				}
			case 2:
				op = "Mkdir"
				check(op, fs.Mkdir(dir(), path()))
			case 3:
				op = "Rmdir"
				check(op, fs.Rmdir(dir(), path()))
			case 4:
				op = "Unlink"
				check(op, fs.Unlink(dir(), path()))
			case 5:
				op = "Rename"
				check(op, fs.Rename(dir(), path(), dir(), path()))
			case 6:
				op = "Link"
				check(op, fs.Link(dir(), path(), dir(), path()))
			case 7:
				op = "WriteAt"
				n, p, off := file(), payload(), offset()
				w, err := fs.WriteAt(n, p, off)
				check(op, err)
				if err == nil {
					if w != len(p) {
						t.Fatalf("short write %d of %d", w, len(p))
					}
					if len(p) > 0 {
						shadow[n].write(p, off)
					}
				} else if w != 0 {
					t.Fatalf("failed write reported %d bytes", w)
				}
			case 8:
				op = "Truncate"
				n, size := file(), offset()
				err := fs.Truncate(n, size)
				check(op, err)
				if err == nil {
					shadow[n].truncate(size)
				}
			case 9:
				op = "ReadAt"
				n, off := file(), offset()
				buf := make([]byte, r.next())
				got, err := fs.ReadAt(n, buf, off)
				check(op, err)
				if err == nil {
					want := shadow[n].read(make([]byte, len(buf)), off)
					if !bytes.Equal(buf[:got], want) {
						t.Fatalf("ReadAt got %q want %q", buf[:got], want)
					}
				}
			case 10:
				op = "Release"
				if len(open) > 0 {
					i := int(r.next()) % len(open)
					fs.Release(open[i])
					open = slices.Delete(open, i, i+1)
				}
			case 11:
				op = "Retain again"
				if len(open) > 0 {
					n := open[int(r.next())%len(open)]
					fs.Retain(n)
					open = append(open, n)
				}
			case 12:
				op = "ReadDir"
				_, err := fs.ReadDir(dir())
				check(op, err)
			case 13:
				op = "MkdirAll"
				_, err := fs.MkdirAll(path())
				check(op, err)
			case 14:
				op = "WriteFile"
				p, content := path(), payload()
				err := fs.WriteFile(p, content)
				check(op, err)
				if err == nil {
					n, err := fs.Lookup(fs.Root(), p)
					if err != nil {
						t.Fatalf("WriteFile(%q) ok but Lookup: %v", p, err)
					}
					shadow[n] = newShadow(content)
				} else if n, err := fs.Lookup(fs.Root(), p); err == nil && n.Kind() == KindFile && n.Size() == 0 {
					shadow[n] = newShadow(nil) // a refused WriteFile may leave a new empty file
				}
			case 15:
				op = "SetTimes"
				fs.SetTimes(file(), 1, 2, r.next()&1 != 0, r.next()&2 != 0)
			case 16:
				op = "Symlink"
				check(op, fs.Symlink(fuzzTargets[int(r.next())%len(fuzzTargets)], dir(), path(), rules))
			case 17:
				op = "Readlink"
				_, err := fs.Readlink(dir(), path(), rules)
				check(op, err)
			}
			checkInvariants(t, fs, open, shadow)
			if wasHit && !fs.QuotaHit() {
				t.Fatalf("QuotaHit went back to false after %s", op)
			}
			wasHit = fs.QuotaHit()
		}
		for _, n := range open {
			fs.Release(n)
		}
		checkInvariants(t, fs, nil, shadow)
	})
}

// TestSymlinks: links resolve inside the tree, with Linux's rules for the
// last component, trailing slashes and loops.
func TestSymlinks(t *testing.T) {
	fs := newFS(t, Quota{})
	root := fs.Root()
	d1 := mustLookup(t, fs, "/d1")
	for _, l := range [][2]string{
		{"d1/f1", "/lf"}, {"d1", "/ld"}, {"nope", "/dangling"}, {"loop", "/loop"},
		{"a", "/b"}, {"b", "/a"}, {"../f2", "/d1/up"}, {"../../../../f2", "/d1/far"},
		{"sub/../../d3/y", "/d1/round"}, {"ld/sub", "/chain"}, {"lf/", "/slashfile"},
	} {
		wantErr(t, "Symlink "+l[1], fs.Symlink(l[0], root, l[1]), 0)
	}
	f1, sub, y, f2 := mustLookup(t, fs, "/d1/f1"), mustLookup(t, fs, "/d1/sub"), mustLookup(t, fs, "/d3/y"), mustLookup(t, fs, "/f2")
	tests := []struct {
		dir   *Inode
		path  string
		rules Rule
		want  *Inode
		err   errno.Errno
	}{
		{root, "lf", 0, f1, 0},
		{root, "ld/f1", 0, f1, 0},
		{root, "ld/sub/x", 0, mustLookup(t, fs, "/d1/sub/x"), 0},
		{root, "chain", 0, sub, 0},
		{root, "chain/..", 0, d1, 0}, // the physical parent
		{root, "ld/..", 0, root, 0},
		{root, "dangling", 0, nil, errno.ENOENT},
		{root, "loop", 0, nil, errno.ELOOP},
		{root, "a", 0, nil, errno.ELOOP},
		{root, "a/x", 0, nil, errno.ELOOP},
		{root, "lf/", 0, nil, errno.ENOTDIR},
		{root, "slashfile", 0, nil, errno.ENOTDIR},
		{root, "ld/", NoFollow, d1, 0}, // a trailing slash follows
		{root, "d1/up", 0, f2, 0},
		{root, "d1/far", 0, f2, 0}, // ".." at the root stays there
		{d1, "up", Beneath, nil, errno.EPERM},
		{d1, "far", Beneath, nil, errno.EPERM},
		{d1, "round", Beneath, nil, errno.EPERM},
		{d1, "sub/..", Beneath, d1, 0},
		{d1, "sub/../..", Beneath, nil, errno.EPERM},
		{d1, "..", Beneath, nil, errno.EPERM},
		{d1, "/f2", Beneath, nil, errno.EPERM},
		{root, "d1/round", Beneath, y, 0}, // beneath the root: fine
		{root, "ld/../d3/y", Beneath, y, 0},
	}
	for _, tt := range tests {
		n, err := fs.Lookup(tt.dir, tt.path, tt.rules)
		wantErr(t, fmt.Sprintf("Lookup(%q, %v)", tt.path, tt.rules), err, tt.err)
		if n != tt.want {
			t.Errorf("Lookup(%q, %v) = ino %d, want ino %d", tt.path, tt.rules, n.Ino(), tt.want.Ino())
		}
	}
	// NoFollow finds the link itself, which Readlink reads.
	l := mustLookupRules(t, fs, "/lf", NoFollow)
	if l.Kind() != KindSymlink || l.Size() != int64(len("d1/f1")) {
		t.Fatalf("lstat of a link: kind %d size %d", l.Kind(), l.Size())
	}
	if got, err := fs.Readlink(root, "lf"); got != "d1/f1" || err != nil {
		t.Errorf("Readlink = %q, %v", got, err)
	}
	_, err := fs.Readlink(root, "f2")
	wantErr(t, "Readlink of a file", err, errno.EINVAL)
	_, err = fs.Readlink(d1, "../lf", Beneath)
	wantErr(t, "Readlink above Beneath", err, errno.EPERM)

	// Open follows unless NoFollow (ELOOP, as O_NOFOLLOW), and creates
	// through a dangling link; O_CREAT|O_EXCL never follows.
	_, err = fs.Open(root, "lf", 0, NoFollow)
	wantErr(t, "Open NoFollow", err, errno.ELOOP)
	_, err = fs.Open(root, "dangling", OCreat|OExcl)
	wantErr(t, "Open excl on a link", err, errno.EEXIST)
	n, err := fs.Open(root, "dangling", OCreat)
	wantErr(t, "Open create through a link", err, 0)
	if n != mustLookup(t, fs, "/nope") {
		t.Error("creating through a dangling link did not create its target")
	}
	_, err = fs.Open(d1, "up", OCreat, Beneath)
	wantErr(t, "Open create escaping", err, errno.EPERM)

	// Names, not targets, are what Unlink, Rename, Mkdir and Rmdir act on.
	wantErr(t, "Mkdir over a link", fs.Mkdir(root, "ld"), errno.EEXIST)
	wantErr(t, "Rmdir a link", fs.Rmdir(root, "ld"), errno.ENOTDIR)
	wantErr(t, "Rename a link", fs.Rename(root, "ld", root, "ld2"), 0)
	wantErr(t, "Unlink a link", fs.Unlink(root, "ld2"), 0)
	if mustLookup(t, fs, "/d1") != d1 || mustLookup(t, fs, "/d1/f1") != f1 {
		t.Fatal("removing a link touched its target")
	}
	wantErr(t, "Unlink a link to a file", fs.Unlink(root, "lf"), 0)
	if mustLookup(t, fs, "/d1/f1") != f1 {
		t.Fatal("unlinking a link removed its target")
	}
	// A hard link to a link is the link, with NoFollow.
	wantErr(t, "Link NoFollow", fs.LinkRules(root, "dangling", NoFollow, root, "hard", 0), 0)
	if got, _ := fs.Readlink(root, "hard"); got != "nope" {
		t.Errorf("hard link to a link reads %q", got)
	}

	wantErr(t, "absolute target", fs.Symlink("/etc/passwd", root, "abs"), errno.EPERM)
	wantErr(t, "empty target", fs.Symlink("", root, "empty"), errno.ENOENT)
	wantErr(t, "NUL target", fs.Symlink("a\x00b", root, "nul"), errno.EILSEQ)
	wantErr(t, "long target", fs.Symlink(strings.Repeat("a/", 2049), root, "long"), errno.ENAMETOOLONG)
	wantErr(t, "existing name", fs.Symlink("x", root, "f2"), errno.EEXIST)
	wantErr(t, "missing with slash", fs.Symlink("x", root, "new/"), errno.ENOENT)
	wantErr(t, "escaping name", fs.Symlink("x", d1, "../new", Beneath), errno.EPERM)
	checkInvariants(t, fs, nil, nil)
}

// TestSymlinkLoopLimit: 40 links in a chain resolve, 41 do not (ELOOP).
func TestSymlinkLoopLimit(t *testing.T) {
	fs := New(Options{})
	root := fs.Root()
	wantErr(t, "WriteFile", fs.WriteFile("/l0", []byte("end")), 0)
	for i := 1; i <= 41; i++ {
		wantErr(t, "Symlink", fs.Symlink("l"+strconv.Itoa(i-1), root, "l"+strconv.Itoa(i)), 0)
	}
	if _, err := fs.Lookup(root, "l40"); err != nil {
		t.Errorf("40 links: %v", err)
	}
	_, err := fs.Lookup(root, "l41")
	wantErr(t, "41 links", err, errno.ELOOP)
	// Each link met counts, in the middle of a path too.
	wantErr(t, "Mkdir", fs.Mkdir(root, "d"), 0)
	wantErr(t, "Symlink", fs.Symlink("d", root, "m0"), 0)
	for i := 1; i <= 40; i++ {
		wantErr(t, "Symlink", fs.Symlink("m"+strconv.Itoa(i-1), root, "m"+strconv.Itoa(i)), 0)
	}
	_, err = fs.Lookup(root, "m40/x")
	wantErr(t, "41 links mid-path", err, errno.ELOOP)
}

// TestSymlinkQuota: a link's target counts as bytes, the link as an inode.
func TestSymlinkQuota(t *testing.T) {
	fs := New(Options{Quota: Quota{MaxBytes: 10, MaxInodes: 3}})
	root := fs.Root()
	wantErr(t, "too long for the bytes", fs.Symlink("aaaaaaaaaaa", root, "a"), errno.ENOSPC)
	if !fs.QuotaHit() {
		t.Error("QuotaHit not set")
	}
	wantErr(t, "fits", fs.Symlink("aaaaaaaaaa", root, "a"), 0)
	if b, i := fs.Usage(); b != 10 || i != 2 {
		t.Errorf("usage %d bytes %d inodes", b, i)
	}
	wantErr(t, "no bytes left", fs.Symlink("b", root, "b"), errno.ENOSPC)
	wantErr(t, "Unlink", fs.Unlink(root, "a"), 0)
	if b, i := fs.Usage(); b != 0 || i != 1 {
		t.Errorf("usage after unlink %d bytes %d inodes", b, i)
	}
}

func mustLookupRules(t testing.TB, fs *FS, p string, rules Rule) *Inode {
	t.Helper()
	n, err := fs.Lookup(fs.Root(), p, rules)
	if err != nil {
		t.Fatalf("Lookup(%q): %v", p, err)
	}
	return n
}

// TestSparse: a write far past the end stores only what is written (CPython's
// test_large_file_ops seeks to 2 GiB), holes read as zeros, and the
// quota counts the size, holes included.
func TestSparse(t *testing.T) {
	const large = 5 << 29 // 2.5 GiB
	const quota = 3 << 30
	fs := New(Options{Quota: Quota{MaxBytes: quota}})
	root := fs.Root()
	f, err := fs.Open(root, "big", OCreat)
	wantErr(t, "Open", err, 0)
	wantErr(t, "head", second(fs.WriteAt(f, []byte("head"), 0)), 0)
	wantErr(t, "far", second(fs.WriteAt(f, []byte("xxx"), large)), 0)
	if f.Size() != large+3 {
		t.Fatalf("size %d", f.Size())
	}
	if b, _ := fs.Usage(); b != large+3 || f.stored() != 4+3+extentCost {
		t.Fatalf("usage %d, stored %d, want %d and %d", b, f.stored(), large+3, 4+3+extentCost)
	}
	buf := bytes.Repeat([]byte{0xee}, 10)
	if n, err := fs.ReadAt(f, buf, large-5); n != 8 || err != nil || string(buf[:8]) != "\x00\x00\x00\x00\x00xxx" {
		t.Fatalf("ReadAt across the hole = %d %v %q", n, err, buf[:n])
	}
	// Appending after the far write grows one extent, amortised.
	for i := range 1000 {
		wantErr(t, "append", second(fs.WriteAt(f, []byte("ab"), large+3+int64(2*i))), 0)
	}
	if len(f.ext) != 1 || f.stored() != 4+2003+extentCost {
		t.Fatalf("%d extents storing %d", len(f.ext), f.stored())
	}
	// A write near another extent joins it; gaps up to holeMin are zeros.
	wantErr(t, "near", second(fs.WriteAt(f, []byte("n"), large-100)), 0)
	if len(f.ext) != 1 || f.ext[0].off != large-100 {
		t.Fatalf("extents %d, first at %d", len(f.ext), f.ext[0].off)
	}
	// Filling the prefix up to an extent absorbs it.
	other := New(Options{})
	g, _ := other.Open(other.Root(), "g", OCreat)
	wantErr(t, "g far", second(other.WriteAt(g, []byte("z"), 3*holeMin)), 0)
	wantErr(t, "g up to it", second(other.WriteAt(g, make([]byte, 2*holeMin+10), 0)), 0)
	if len(g.ext) != 0 || len(g.data) != 3*holeMin+1 || g.data[3*holeMin] != 'z' {
		t.Fatalf("prefix %d, %d extents", len(g.data), len(g.ext))
	}
	if b, _ := other.Usage(); b != 3*holeMin+1 {
		t.Fatalf("usage after absorbing %d", b)
	}
	// The quota holds for the size, holes included.
	wantErr(t, "over quota", second(fs.WriteAt(f, []byte("x"), quota)), errno.ENOSPC)
	// Truncation cuts and drops extents, and frees their charge.
	wantErr(t, "cut", fs.Truncate(f, large+1), 0)
	if b, _ := fs.Usage(); b != large+1 || f.stored() != 4+101+extentCost {
		t.Fatalf("usage after cut %d, stored %d", b, f.stored())
	}
	wantErr(t, "drop", fs.Truncate(f, 2), 0)
	if b, _ := fs.Usage(); b != 2 || len(f.ext) != 0 {
		t.Fatalf("usage after drop %d, %d extents", b, len(f.ext))
	}
	// Without a byte quota, host helpers do not materialise a hole past
	// 2 GiB; under one, every file fits in it and reads whole.
	unbounded := New(Options{})
	h, _ := unbounded.Open(unbounded.Root(), "big", OCreat)
	wantErr(t, "regrow", unbounded.Truncate(h, large), 0)
	_, err = unbounded.ReadFile("/big")
	wantErr(t, "ReadFile of a huge sparse file", err, errno.EFBIG)
	_, err = unbounded.View("/big")
	wantErr(t, "View of a huge sparse file", err, errno.EFBIG)
	wantErr(t, "small", fs.Truncate(f, 10), 0)
	if got, err := fs.ReadFile("/big"); err != nil || string(got) != "he\x00\x00\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("ReadFile of a small sparse file = %q, %v", got, err)
	}
	checkInvariants(t, fs, []*Inode{f}, nil)
}

// TestSparseSurvivesSaveAndClone: holes stay holes.
func TestSparseSurvivesSaveAndClone(t *testing.T) {
	fs := New(Options{})
	f, _ := fs.Open(fs.Root(), "s", OCreat)
	fs.WriteAt(f, []byte("a"), 0)
	fs.WriteAt(f, []byte("b"), 1<<33)
	fs.WriteAt(f, []byte("c"), 1<<34)
	fs.Truncate(f, 1<<35)
	check := func(what string, c *FS) {
		t.Helper()
		n := mustLookup(t, c, "/s")
		if n.Size() != 1<<35 || len(n.ext) != 2 || n.stored() != 3+2*extentCost {
			t.Fatalf("%s: size %d, %d extents, %d stored", what, n.Size(), len(n.ext), n.stored())
		}
		var b [1]byte
		for off, want := range map[int64]byte{0: 'a', 1 << 33: 'b', 1 << 34: 'c', 1 << 20: 0, 1<<35 - 1: 0} {
			if _, err := c.ReadAt(n, b[:], off); err != nil || b[0] != want {
				t.Fatalf("%s: byte %d = %q, %v", what, off, b[0], err)
			}
		}
		if u, _ := c.Usage(); u != 1<<35 {
			t.Fatalf("%s: usage %d", what, u)
		}
	}
	check("clone", fs.Clone(Quota{}))
	var buf bytes.Buffer
	if err := fs.Save(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 200 {
		t.Errorf("saved %d bytes for 3 stored", buf.Len())
	}
	got, err := Load(bytes.NewReader(buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	check("load", got)
	if _, err := Load(bytes.NewReader(buf.Bytes()), Options{Quota: Quota{MaxBytes: 1<<35 - 1}}); !errors.Is(err, errno.ENOSPC) {
		t.Errorf("over quota: %v", err)
	}
}

// TestQuotaCountsApparentSize: the byte quota counts a file's size, holes
// included, as a disk without sparse files would, so that every file the
// guest can make can also leave the sandbox whole, all of them together
// within the quota. Growth past it, by truncation, a write past a hole or
// an allocation, is refused with ENOSPC and changes nothing; holes are
// still not stored.
func TestQuotaCountsApparentSize(t *testing.T) {
	const q = 1 << 20
	fs := New(Options{Quota: Quota{MaxBytes: q}})
	root := fs.Root()
	f, _ := fs.Open(root, "f", OCreat)
	g, _ := fs.Open(root, "g", OCreat)
	wantErr(t, "truncate to a terabyte", fs.Truncate(f, 1<<40), errno.ENOSPC)
	wantErr(t, "truncate past the quota", fs.Truncate(f, q+1), errno.ENOSPC)
	wantErr(t, "write past a hole past the quota", second(fs.WriteAt(f, []byte("x"), 1<<35)), errno.ENOSPC)
	wantErr(t, "allocate past the quota", fs.Allocate(f, q, 1), errno.ENOSPC)
	if f.Size() != 0 || !fs.QuotaHit() {
		t.Fatalf("after refusals: size %d, quota hit %v", f.Size(), fs.QuotaHit())
	}
	wantErr(t, "truncate within", fs.Truncate(f, q/2), 0)
	if b, _ := fs.Usage(); b != q/2 || f.Stored() != 0 {
		t.Fatalf("a %d-byte hole: usage %d, stored %d", q/2, b, f.Stored())
	}
	// Two files whose holes together pass the quota cannot both exist.
	wantErr(t, "second hole past the rest", fs.Truncate(g, q/2+1), errno.ENOSPC)
	wantErr(t, "write past the rest", second(fs.WriteAt(g, []byte("y"), q/2)), errno.ENOSPC)
	wantErr(t, "second hole within", second(fs.WriteAt(g, []byte("y"), q/2-1)), 0)
	wantErr(t, "not a byte more", fs.WriteFile("/h", []byte("z")), errno.ENOSPC)
	// Shrinking gives the room back.
	wantErr(t, "shrink", fs.Truncate(f, 10), 0)
	wantErr(t, "room again", fs.WriteFile("/h", []byte("z")), 0)
	// Every file reads back whole; together within the quota.
	var total int64
	for _, p := range []string{"/f", "/g", "/h"} {
		b, err := fs.View(p)
		if err != nil {
			t.Fatalf("View(%s): %v", p, err)
		}
		total += int64(len(b))
	}
	if b, _ := fs.Usage(); total > q || total != b {
		t.Fatalf("files hold %d bytes, usage %d, quota %d", total, b, q)
	}
	checkInvariants(t, fs, []*Inode{f, g}, nil)
	// A clone and a saved copy count the same.
	b0, _ := fs.Usage()
	if b, _ := fs.Clone(fs.Quota()).Usage(); b != b0 {
		t.Fatalf("clone usage %d, want %d", b, b0)
	}
	var buf bytes.Buffer
	if err := fs.Save(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Load(bytes.NewReader(buf.Bytes()), Options{Quota: fs.Quota()})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := got.Usage(); b != b0 {
		t.Fatalf("loaded usage %d, want %d", b, b0)
	}
	if _, err := Load(bytes.NewReader(buf.Bytes()), Options{Quota: Quota{MaxBytes: b0 - 1}}); !errors.Is(err, errno.ENOSPC) {
		t.Fatalf("load under a smaller quota: %v", err)
	}
}
