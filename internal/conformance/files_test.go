package airlock_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// Nothing the guest made is silently dropped: a file's holes count
// against the filesystem quota, so growing one past it (os.ftruncate to a
// terabyte, a write past a far seek) fails in the guest with ENOSPC, as
// on a small disk, and every file that does exist is returned whole, all
// together within the quota: from a run, from a session's call, and
// after a session's Save and load.
func TestSparseFilesLeaveWhole(t *testing.T) {
	const quota = 4 << 20
	code := `import errno, os
fd = os.open("huge", os.O_WRONLY | os.O_CREAT)
try:
    os.ftruncate(fd, 2**40)
except OSError as e:
    print("ftruncate", errno.errorcode[e.errno])
os.close(fd)
fd = os.open("far", os.O_WRONLY | os.O_CREAT)
os.lseek(fd, 2**33, os.SEEK_SET)
try:
    os.write(fd, b"x")
except OSError as e:
    print("far write", errno.errorcode[e.errno])
os.close(fd)
# Holes that fit: each file's size is charged, none is stored.
for i in range(3):
    with open(f"sparse{i}", "wb") as f:
        f.truncate(1 << 20)
with open("tail", "wb") as f:
    f.seek((1 << 20) - 1); f.write(b"t")
try:
    with open("one-more", "wb") as f:
        f.truncate(1 << 20)
except OSError as e:
    print("one more", errno.errorcode[e.errno])
print(sorted((n, os.path.getsize(n)) for n in os.listdir(".")))
`
	wantOut := "ftruncate ENOSPC\nfar write ENOSPC\none more ENOSPC\n" +
		"[('far', 0), ('huge', 0), ('one-more', 0), ('sparse0', 1048576), ('sparse1', 1048576), ('sparse2', 1048576), ('tail', 1048576)]\n"
	wantFiles := map[string]int64{"far": 0, "huge": 0, "one-more": 0, "sparse0": 1 << 20, "sparse1": 1 << 20, "sparse2": 1 << 20, "tail": 1 << 20}
	check := func(what string, res *airlock.Result, err error) {
		t.Helper()
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != wantOut {
			t.Fatalf("%s: err=%v exit=%d stdout=%q\nstderr:\n%s", what, err, res.ExitCode, res.Stdout, res.Stderr)
		}
		got := map[string]int64{}
		var total int64
		for _, f := range res.Files {
			name := strings.TrimPrefix(f.Path, "/home/user/")
			if int64(len(f.Data)) != f.Size {
				t.Errorf("%s: %s has %d bytes of data for size %d", what, name, len(f.Data), f.Size)
			}
			if name == "tail" && (len(f.Data) == 0 || f.Data[len(f.Data)-1] != 't' || bytes.Count(f.Data, []byte{0}) != len(f.Data)-1) {
				t.Errorf("%s: tail's contents are wrong", what)
			}
			got[name] = f.Size
			total += f.Size
		}
		if len(got) != len(wantFiles) || total > quota {
			t.Fatalf("%s: files %v (%d bytes), want %v within %d", what, got, total, wantFiles, quota)
		}
		for n, size := range wantFiles {
			if s, ok := got[n]; !ok || s != size {
				t.Fatalf("%s: files %v, want %v", what, got, wantFiles)
			}
		}
	}
	limits := airlock.Limits{FSBytes: quota}
	res, err := run(t, airlock.Request{Code: code, Limits: limits})
	check("run", res, err)
	if !sb.Snapshots() {
		return // sessions need snapshots; the suite without them checks runs only
	}

	ctx := context.Background()
	s, err := sb.NewSession(ctx, airlock.SessionOptions{Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	res, err = s.Run(ctx, airlock.Request{Code: code})
	check("session call", res, err)
	var saved bytes.Buffer
	if err := s.Save(&saved); err != nil {
		t.Fatal(err)
	}
	loaded, err := sb.LoadSession(ctx, &saved, airlock.LoadOptions{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer loaded.Close(ctx)
	res, err = loaded.Run(ctx, airlock.Request{Code: `import os; print(sorted((n, os.path.getsize(n)) for n in os.listdir(".")))`})
	if err != nil || !strings.Contains(string(res.Stdout), "('sparse2', 1048576), ('tail', 1048576)") {
		t.Fatalf("after load: %v %q", err, res.Stdout)
	}
}

// Files under a path longer than 4096 bytes (directories renamed into
// each other) are not listed, but counted: none is dropped unsaid.
func TestFilesPastThePathLimitAreCounted(t *testing.T) {
	res, err := run(t, airlock.Request{Code: `import os
name = lambda i: "d" * 250 + str(i).zfill(5)
for i in range(20):
    os.mkdir(name(i)); open(name(i) + "/f", "w").write("x")
for i in range(1, 20):
    os.rename(name(i - 1), name(i) + "/" + name(i - 1))
`})
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stderr)
	}
	if res.FilesOmitted == 0 || len(res.Files)+res.FilesOmitted != 20 {
		t.Fatalf("%d files listed, %d counted as omitted; want 20 in all, some omitted", len(res.Files), res.FilesOmitted)
	}
	for _, f := range res.Files {
		if len(f.Path) > 4096 {
			t.Fatalf("a %d-byte path listed", len(f.Path))
		}
	}
}
