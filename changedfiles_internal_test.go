package airlock

import (
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// A guest can give one file as many names as the quota has inodes; the
// files a run returns must still stay within the byte quota: one entry
// per file, under a name that is new.
func TestChangedFilesListsALinkedFileOnce(t *testing.T) {
	const quota = 1 << 20
	fs := memfs.New(memfs.Options{Quota: memfs.Quota{MaxBytes: quota, MaxInodes: 1000}})
	home, err := fs.MkdirAll(python.Home)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFile(python.Home+"/old", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFile(python.Home+"/big", make([]byte, quota-4)); err != nil {
		t.Fatal(err)
	}
	if err := fs.Link(home, "old", home, "a-new-name"); err != nil {
		t.Fatal(err)
	}
	links := 0
	for ; ; links++ {
		if err := fs.Link(home, "big", home, "big"+strconv.Itoa(links)); err != nil {
			break
		}
	}
	if links < 900 {
		t.Fatalf("only %d links made", links)
	}
	before := func(p string) ([]byte, bool) {
		if p == python.Home+"/old" {
			return []byte("kept"), true
		}
		return nil, false
	}
	files, _ := changedFiles(fs, python.Home, before)
	var total int64
	var names []string
	for _, f := range files {
		total += int64(len(f.Data))
		names = append(names, f.Path)
	}
	if total > quota {
		t.Fatalf("%d files returned with %d bytes, over the %d-byte quota", len(files), total, quota)
	}
	// "old" is unchanged, so its link is listed as the new name; "big"
	// once, under its first name.
	want := python.Home + "/a-new-name," + python.Home + "/big"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("files %s, want %s", got, want)
	}
}

// Renaming directories into each other builds paths longer than any
// guest path; listing the files must neither hold memory quadratic in
// the depth nor return those paths; the files left out are counted, so
// none is dropped unsaid.
func TestChangedFilesSkipsPathsPastTheLimit(t *testing.T) {
	fs := memfs.New(memfs.Options{Quota: memfs.Quota{MaxBytes: 1 << 20, MaxInodes: 10000}})
	if _, err := fs.MkdirAll(python.Home); err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { s := strconv.Itoa(i); return strings.Repeat("d", 255-len(s)) + s }
	const depth = 400 // ~100 KB of path at the bottom
	for i := range depth {
		if err := fs.Mkdir(fs.Root(), python.Home+"/"+name(i)); err != nil {
			t.Fatal(err)
		}
		if err := fs.WriteFile(python.Home+"/"+name(i)+"/f", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if err := fs.Rename(fs.Root(), python.Home+"/"+name(i-1), fs.Root(), python.Home+"/"+name(i)+"/"+name(i-1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, omitted := changedFiles(fs, python.Home, func(string) ([]byte, bool) { return nil, false })
	if len(files) == 0 {
		t.Fatal("no files listed")
	}
	for _, f := range files {
		if len(f.Path) > memfs.MaxPath {
			t.Fatalf("a %d-byte path listed", len(f.Path))
		}
	}
	// Every file whose path fits is listed: the top 15 levels.
	want := (memfs.MaxPath - len(python.Home) - 2) / 256
	if len(files) != want {
		t.Fatalf("%d files listed, want %d", len(files), want)
	}
	if omitted != depth-want {
		t.Fatalf("%d files counted as omitted, want %d", omitted, depth-want)
	}
}
