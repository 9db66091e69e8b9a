package wasi_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/errno"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Preview1 constants, spelled out here from wasi_snapshot_preview1.witx
// rather than imported, so the tests check the package against the spec.
const (
	filetypeCharDev   = 2
	filetypeDirectory = 3
	filetypeRegular   = 4

	rightFdRead  = 1 << 1
	rightFdSeek  = 1 << 2
	rightFdTell  = 1 << 5
	rightFdWrite = 1 << 6

	rightFdDatasync        = 1 << 0
	rightFdFdstatSetFlags  = 1 << 3
	rightFdSync            = 1 << 4
	rightFdAllocate        = 1 << 8
	rightPathCreateFile    = 1 << 10
	rightPathOpen          = 1 << 13
	rightFdReaddir         = 1 << 14
	rightPathFilestatSize  = 1 << 19
	rightFdFilestatGet     = 1 << 21
	rightFdFilestatSetSize = 1 << 22
	rightPathSymlink       = 1 << 24
	rightPathUnlinkFile    = 1 << 26

	// What wasi-libc's open() asks path_open for (cloudlibc's openat):
	// every right but those an access mode withholds, within the
	// directory's inheriting rights.
	libcWithheld = rightFdDatasync | rightFdRead | rightFdWrite | rightFdAllocate | rightFdReaddir | rightFdFilestatSetSize
	rightsRO     = ^uint64(libcWithheld) | rightFdRead | rightFdReaddir
	rightsWO     = ^uint64(libcWithheld) | rightFdDatasync | rightFdWrite | rightFdAllocate | rightFdFilestatSetSize
	rightsRW     = rightsRO | rightsWO

	oflagCreat     = 1
	oflagDirectory = 2
	oflagExcl      = 4
	oflagTrunc     = 8

	fdflagAppend = 1

	fstAtim    = 1
	fstAtimNow = 2
	fstMtim    = 4
	fstMtimNow = 8

	whenceSet = 0
	whenceCur = 1
	whenceEnd = 2

	eventClock  = 0
	eventFdRead = 1

	subSize   = 48
	eventSize = 32

	// maxErrno is the largest preview1 errno (ENOTCAPABLE).
	maxErrno = 76
)

const memSize = 64 << 10

// Fixed scratch areas of guest memory the tests use.
const (
	resPtr   = 0x10   // 8-byte results
	res2Ptr  = 0x18   // a second result
	statPtr  = 0x40   // 64-byte filestat / 24-byte fdstat
	pathPtr  = 0x100  // a path
	path2Ptr = 0x180  // a second path
	iovPtr   = 0x200  // an iovec array
	subPtr   = 0x400  // poll subscriptions
	evPtr    = 0x800  // poll events
	bufPtr   = 0x1000 // I/O buffers
)

var funcs = func() map[string]wasi.HostFunc {
	m := map[string]wasi.HostFunc{}
	for _, f := range wasi.Functions() {
		m[f.Name] = f
	}
	return m
}()

// invoke calls f as an engine would: i32 parameters zero-extended, the
// stack as long as the longer of params and results. It returns the raw
// errno slot and the trap, if any.
func invoke(ctx context.Context, s *wasi.State, mem []byte, f wasi.HostFunc, params []uint64) (uint64, error) {
	stack := make([]uint64, max(len(f.Params), len(f.Results)))
	for i, p := range params {
		if f.Params[i] == wasi.I32 {
			p = uint64(uint32(p))
		}
		stack[i] = p
	}
	err := f.Call(ctx, s, mem, stack)
	if err != nil || len(f.Results) == 0 {
		return 0, err
	}
	return stack[0], err
}

// harness is one run's State and a guest memory.
type harness struct {
	t     testing.TB
	cfg   wasi.Config
	s     *wasi.State
	mem   []byte
	ctx   context.Context
	clock *wasi.FakeClock
	fs    *memfs.FS
}

// fsNow is the memfs clock in tests: constant, so timestamps are exact.
const fsNow = 42

func newFS(q memfs.Quota) *memfs.FS {
	return memfs.New(memfs.Options{Quota: q, Now: func() int64 { return fsNow }})
}

func newHarness(t testing.TB, cfg wasi.Config) *harness {
	t.Helper()
	h := &harness{t: t, mem: make([]byte, memSize), ctx: context.Background()}
	if cfg.Clock == nil {
		h.clock = wasi.NewFakeClock()
		cfg.Clock = h.clock
	}
	if cfg.FS == nil {
		cfg.FS = newFS(memfs.Quota{})
	}
	h.cfg, h.fs = cfg, cfg.FS
	h.s = wasi.NewState(cfg)
	t.Cleanup(h.s.Close)
	return h
}

// call runs the named function and returns its errno and trap.
func (h *harness) call(name string, params ...uint64) (errno.Errno, error) {
	h.t.Helper()
	f, ok := funcs[name]
	if !ok {
		h.t.Fatalf("no function %q", name)
	}
	if len(params) != len(f.Params) {
		h.t.Fatalf("%s takes %d params, got %d", name, len(f.Params), len(params))
	}
	raw, err := invoke(h.ctx, h.s, h.mem, f, params)
	if raw > maxErrno {
		h.t.Fatalf("%s returned invalid errno %d", name, raw)
	}
	return errno.Errno(raw), err
}

// errno runs the named function, which must not trap, and returns its errno.
func (h *harness) errno(name string, params ...uint64) errno.Errno {
	h.t.Helper()
	e, err := h.call(name, params...)
	if err != nil {
		h.t.Fatalf("%s%v trapped: %v", name, params, err)
	}
	return e
}

// ok runs the named function and requires success.
func (h *harness) ok(name string, params ...uint64) {
	h.t.Helper()
	if e := h.errno(name, params...); e != errno.ESUCCESS {
		h.t.Fatalf("%s%v = %v, want success", name, params, e)
	}
}

// want runs the named function and requires errno want.
func (h *harness) want(want errno.Errno, name string, params ...uint64) {
	h.t.Helper()
	if e := h.errno(name, params...); e != want {
		h.t.Fatalf("%s%v = %v, want %v", name, params, e, want)
	}
}

// str puts s at ptr and returns the (ptr, len) argument pair.
func (h *harness) str(ptr uint32, s string) (uint64, uint64) {
	copy(h.mem[ptr:], s)
	return uint64(ptr), uint64(len(s))
}

type iov struct{ base, n uint32 }

// iovs writes an iovec array at ptr and returns the (ptr, count) pair.
func (h *harness) iovs(ptr uint32, vs ...iov) (uint64, uint64) {
	for i, v := range vs {
		binary.LittleEndian.PutUint32(h.mem[ptr+uint32(i)*8:], v.base)
		binary.LittleEndian.PutUint32(h.mem[ptr+uint32(i)*8+4:], v.n)
	}
	return uint64(ptr), uint64(len(vs))
}

func (h *harness) u8(off uint32) byte    { return h.mem[off] }
func (h *harness) u16(off uint32) uint16 { return binary.LittleEndian.Uint16(h.mem[off:]) }
func (h *harness) u32(off uint32) uint32 { return binary.LittleEndian.Uint32(h.mem[off:]) }
func (h *harness) u64(off uint32) uint64 { return binary.LittleEndian.Uint64(h.mem[off:]) }

// open opens path under fd 3 and returns the new fd, failing the test on
// an error.
func (h *harness) open(path string, oflags, rights, fdflags uint64) uint32 {
	h.t.Helper()
	e, fd := h.openErr(path, oflags, rights, fdflags)
	if e != errno.ESUCCESS {
		h.t.Fatalf("path_open(%q, oflags=%d) = %v", path, oflags, e)
	}
	return fd
}

func (h *harness) openErr(path string, oflags, rights, fdflags uint64) (errno.Errno, uint32) {
	h.t.Helper()
	p, n := h.str(pathPtr, path)
	binary.LittleEndian.PutUint32(h.mem[resPtr:], 0xdeadbeef)
	e := h.errno("path_open", 3, 0, p, n, oflags, rights, 0, fdflags, resPtr)
	return e, h.u32(resPtr)
}

// write writes data at fd's position through one iovec and returns the count.
func (h *harness) write(fd uint32, data string) uint32 {
	h.t.Helper()
	copy(h.mem[bufPtr:], data)
	p, n := h.iovs(iovPtr, iov{bufPtr, uint32(len(data))})
	h.ok("fd_write", uint64(fd), p, n, resPtr)
	return h.u32(resPtr)
}

// read reads up to n bytes from fd through one iovec.
func (h *harness) read(fd uint32, n uint32) string {
	h.t.Helper()
	p, c := h.iovs(iovPtr, iov{bufPtr, n})
	h.ok("fd_read", uint64(fd), p, c, resPtr)
	return string(h.mem[bufPtr : bufPtr+h.u32(resPtr)])
}

func (h *harness) seek(fd uint32, off int64, whence uint64) (errno.Errno, uint64) {
	h.t.Helper()
	e := h.errno("fd_seek", uint64(fd), uint64(off), whence, resPtr)
	return e, h.u64(resPtr)
}

func (h *harness) fileContents(path string) string {
	h.t.Helper()
	b, err := h.fs.ReadFile(path)
	if err != nil {
		h.t.Fatalf("ReadFile(%q): %v", path, err)
	}
	return string(b)
}

func (h *harness) exists(path string) bool {
	_, err := h.fs.Lookup(h.fs.Root(), path)
	return err == nil
}

func mustWrite(t testing.TB, fs *memfs.FS, path, data string) {
	t.Helper()
	if err := fs.WriteFile(path, []byte(data)); err != nil {
		t.Fatalf("WriteFile(%q): %v", path, err)
	}
}

func mustMkdir(t testing.TB, fs *memfs.FS, path string) {
	t.Helper()
	if _, err := fs.MkdirAll(path); err != nil {
		t.Fatalf("MkdirAll(%q): %v", path, err)
	}
}

func TestFunctionsTable(t *testing.T) {
	// Every wasi_snapshot_preview1 import, with the witx signature lowered
	// to core wasm types.
	want := map[string]string{
		"args_get": "ii", "args_sizes_get": "ii", "environ_get": "ii", "environ_sizes_get": "ii",
		"clock_res_get": "ii", "clock_time_get": "iIi",
		"fd_advise": "iIIi", "fd_allocate": "iII", "fd_close": "i", "fd_datasync": "i",
		"fd_fdstat_get": "ii", "fd_fdstat_set_flags": "ii", "fd_fdstat_set_rights": "iII",
		"fd_filestat_get": "ii", "fd_filestat_set_size": "iI", "fd_filestat_set_times": "iIIi",
		"fd_pread": "iiiIi", "fd_prestat_get": "ii", "fd_prestat_dir_name": "iii",
		"fd_pwrite": "iiiIi", "fd_read": "iiii", "fd_readdir": "iiiIi", "fd_renumber": "ii",
		"fd_seek": "iIii", "fd_sync": "i", "fd_tell": "ii", "fd_write": "iiii",
		"path_create_directory": "iii", "path_filestat_get": "iiiii",
		"path_filestat_set_times": "iiiiIIi", "path_link": "iiiiiii",
		"path_open": "iiiiiIIii", "path_readlink": "iiiiii", "path_remove_directory": "iii",
		"path_rename": "iiiiii", "path_symlink": "iiiii", "path_unlink_file": "iii",
		"poll_oneoff": "iiii", "proc_exit": "i", "proc_raise": "i", "sched_yield": "",
		"random_get": "ii", "sock_accept": "iii", "sock_recv": "iiiiii", "sock_send": "iiiii",
		"sock_shutdown": "ii",
	}
	if len(wasi.Functions()) != len(want) {
		t.Errorf("Functions() has %d entries, want %d", len(wasi.Functions()), len(want))
	}
	for _, f := range wasi.Functions() {
		var sig strings.Builder
		for _, p := range f.Params {
			sig.WriteByte(map[wasi.ValueType]byte{wasi.I32: 'i', wasi.I64: 'I'}[p])
		}
		if w, ok := want[f.Name]; !ok {
			t.Errorf("unexpected function %s", f.Name)
		} else if sig.String() != w {
			t.Errorf("%s params %q, want %q", f.Name, sig.String(), w)
		}
		wantResults := 1
		if f.Name == "proc_exit" {
			wantResults = 0
		}
		if len(f.Results) != wantResults || (wantResults == 1 && f.Results[0] != wasi.I32) {
			t.Errorf("%s results %v", f.Name, f.Results)
		}
	}
}

func TestStateContext(t *testing.T) {
	s := wasi.NewState(wasi.Config{})
	defer s.Close()
	if wasi.StateFrom(context.Background()) != nil {
		t.Error("StateFrom(Background) != nil")
	}
	if got := wasi.StateFrom(wasi.WithState(context.Background(), s)); got != s {
		t.Errorf("StateFrom(WithState(s)) = %p, want %p", got, s)
	}
	if s.FS() == nil {
		t.Error("nil Config.FS did not get a filesystem")
	}
}

func TestArgsEnviron(t *testing.T) {
	tests := []struct {
		name     string
		list     []string
		sizes    string
		get      string
		env      bool
		wantSize uint32
	}{
		{name: "no args", sizes: "args_sizes_get", get: "args_get"},
		{name: "args", list: []string{"python", "-c", "print('é')", ""}, sizes: "args_sizes_get", get: "args_get"},
		{name: "no env", sizes: "environ_sizes_get", get: "environ_get", env: true},
		{name: "env", list: []string{"A=1", "PYTHONHASHSEED=0"}, sizes: "environ_sizes_get", get: "environ_get", env: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := wasi.Config{Args: tt.list}
			if tt.env {
				cfg = wasi.Config{Env: tt.list}
			}
			h := newHarness(t, cfg)
			size := 0
			for _, a := range tt.list {
				size += len(a) + 1
			}
			h.ok(tt.sizes, resPtr, res2Ptr)
			if got := h.u32(resPtr); got != uint32(len(tt.list)) {
				t.Errorf("count = %d, want %d", got, len(tt.list))
			}
			if got := h.u32(res2Ptr); got != uint32(size) {
				t.Errorf("buf size = %d, want %d", got, size)
			}
			// Mark the bytes just past both regions to catch overruns.
			const ptrs, buf = 0x2000, 0x3000
			h.mem[ptrs+4*len(tt.list)] = 0xee
			h.mem[buf+size] = 0xee
			h.ok(tt.get, ptrs, buf)
			for i, a := range tt.list {
				p := h.u32(ptrs + uint32(4*i))
				end := bytes.IndexByte(h.mem[p:], 0)
				if got := string(h.mem[p : p+uint32(end)]); got != a {
					t.Errorf("[%d] = %q, want %q", i, got, a)
				}
			}
			if h.mem[ptrs+4*len(tt.list)] != 0xee || h.mem[buf+size] != 0xee {
				t.Error("wrote past the reported sizes")
			}
		})
	}
}

func TestClocks(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	for id := uint64(0); id < 4; id++ {
		h.ok("clock_res_get", id, resPtr)
		if got := h.u64(resPtr); got != uint64(time.Microsecond) {
			t.Errorf("clock_res_get(%d) = %d", id, got)
		}
	}
	h.want(errno.EINVAL, "clock_res_get", 4, resPtr)
	h.want(errno.EINVAL, "clock_time_get", 4, 0, resPtr)
	h.want(errno.EINVAL, "clock_time_get", 0xffffffff, 0, resPtr)

	// The fake clock starts at FakeEpoch and ticks 1 µs per reading, on
	// one timeline for every clock id.
	h.ok("clock_time_get", 0, 1, resPtr)
	if got, want := h.u64(resPtr), uint64(wasi.FakeEpoch+1000); got != want {
		t.Errorf("realtime = %d, want %d", got, want)
	}
	h.ok("clock_time_get", 0, 1, resPtr)
	if got, want := h.u64(resPtr), uint64(wasi.FakeEpoch+2000); got != want {
		t.Errorf("second realtime = %d, want %d", got, want)
	}
	for id, want := range []uint64{3000, 4000, 5000} {
		h.ok("clock_time_get", uint64(id+1), 0, resPtr)
		if got := h.u64(resPtr); got != want {
			t.Errorf("clock %d = %d, want %d", id+1, got, want)
		}
	}
	// The result is written only on success and exactly 8 bytes.
	h.want(errno.EFAULT, "clock_time_get", 0, 0, memSize-7)
	h.ok("clock_time_get", 0, 0, memSize-8)

	// The real clock is monotonic and near the host's.
	r := wasi.NewRealClock()
	if d := time.Now().UnixNano() - r.Realtime(); d > int64(time.Second) || d < -int64(time.Second) {
		t.Errorf("RealClock.Realtime off by %v", time.Duration(d))
	}
	if a, b := r.Monotonic(), r.Monotonic(); a < 0 || b < a {
		t.Errorf("RealClock.Monotonic not monotonic: %d then %d", a, b)
	}
}

func TestRandomGet(t *testing.T) {
	seed := bytes.Repeat([]byte("0123456789abcdef"), 4)
	h := newHarness(t, wasi.Config{Random: bytes.NewReader(seed)})
	h.mem[bufPtr+20] = 0xee
	h.ok("random_get", bufPtr, 20)
	if got := h.mem[bufPtr : bufPtr+20]; !bytes.Equal(got, seed[:20]) {
		t.Errorf("random_get wrote %q, want %q", got, seed[:20])
	}
	if h.mem[bufPtr+20] != 0xee {
		t.Error("random_get wrote past its buffer")
	}
	h.ok("random_get", bufPtr, 0)
	h.ok("random_get", memSize, 0)
	h.want(errno.EFAULT, "random_get", memSize-4, 5)
	h.want(errno.EFAULT, "random_get", 0xfffffff0, 0x20)
	// The source runs dry after 64 bytes: the call fails rather than
	// returning a short buffer.
	h.want(errno.EIO, "random_get", bufPtr, 64)

	// The default source is crypto/rand.
	h = newHarness(t, wasi.Config{})
	h.ok("random_get", bufPtr, 64)
	if bytes.Equal(h.mem[bufPtr:bufPtr+64], make([]byte, 64)) {
		t.Error("crypto random_get left the buffer zero")
	}
}

func TestPrestat(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	for i := range 8 {
		h.mem[resPtr+i] = 0xff
	}
	h.ok("fd_prestat_get", 3, resPtr)
	if tag, n := h.u8(resPtr), h.u32(resPtr+4); tag != 0 || n != 1 {
		t.Errorf("prestat = tag %d len %d, want 0 and 1", tag, n)
	}
	h.mem[bufPtr+1] = 0xee
	h.ok("fd_prestat_dir_name", 3, bufPtr, 1)
	if h.mem[bufPtr] != '/' || h.mem[bufPtr+1] != 0xee {
		t.Errorf("dir name = %q", h.mem[bufPtr:bufPtr+2])
	}
	h.ok("fd_prestat_dir_name", 3, bufPtr, 100) // a larger buffer is fine
	h.want(errno.ENAMETOOLONG, "fd_prestat_dir_name", 3, bufPtr, 0)
	h.want(errno.EFAULT, "fd_prestat_dir_name", 3, memSize, 1)
	h.want(errno.EFAULT, "fd_prestat_get", 3, memSize-7)
	for _, fd := range []uint64{0, 1, 2, 4, 1 << 31, 0xffffffff} {
		h.want(errno.EBADF, "fd_prestat_get", fd, resPtr)
		h.want(errno.EBADF, "fd_prestat_dir_name", fd, bufPtr, 1)
	}
	// A non-preopened directory is not a preopen.
	mustMkdir(t, h.fs, "d")
	fd := h.open("d", oflagDirectory, rightsRO, 0)
	h.want(errno.EBADF, "fd_prestat_get", uint64(fd), resPtr)
}

func TestFdstat(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "f", "x")
	mustMkdir(t, h.fs, "d")
	file := h.open("f", 0, rightsRW, fdflagAppend)
	dir := h.open("d", oflagDirectory, rightsRO, 0)
	const (
		stdin  = rightFdRead | rightFdSeek | rightFdTell | rightFdFdstatSetFlags | rightFdFilestatGet | 1<<27 | rightFdSync | rightFdDatasync
		stdout = stdin&^rightFdRead | rightFdWrite
		// A preopen's base rights are a directory's (no fd_sync,
		// fd_datasync or fd_fdstat_set_flags: EBADF there, as on
		// wasmtime); its inheriting rights add a file's.
		dirBase  = 0x7bffe00
		fileAll  = 0x8e001ff
		preopen  = dirBase | fileAll
		fileRW   = rightsRW & fileAll
		dirFromO = rightsRO & dirBase
	)
	tests := []struct {
		fd               uint32
		filetype         byte
		flags            uint16
		base, inheriting uint64
	}{
		{0, filetypeCharDev, 0, stdin, 0},
		{1, filetypeCharDev, 0, stdout, 0},
		{2, filetypeCharDev, 0, stdout, 0},
		{3, filetypeDirectory, 0, dirBase, preopen},
		{file, filetypeRegular, fdflagAppend, fileRW, 0},
		{dir, filetypeDirectory, 0, dirFromO, 0},
	}
	for _, tt := range tests {
		for i := range 24 {
			h.mem[statPtr+i] = 0xff
		}
		h.ok("fd_fdstat_get", uint64(tt.fd), statPtr)
		if got := h.u8(statPtr); got != tt.filetype {
			t.Errorf("fd %d filetype = %d, want %d", tt.fd, got, tt.filetype)
		}
		if got := h.u16(statPtr + 2); got != tt.flags {
			t.Errorf("fd %d flags = %#x, want %#x", tt.fd, got, tt.flags)
		}
		if h.u8(statPtr+1) != 0 || h.u32(statPtr+4) != 0 {
			t.Errorf("fd %d padding not zeroed: % x", tt.fd, h.mem[statPtr:statPtr+8])
		}
		// wasi-libc's isatty() is filetype == CHARACTER_DEVICE with neither
		// FD_SEEK nor FD_TELL: keeping them makes captured stdio not a tty.
		base, inheriting := h.u64(statPtr+8), h.u64(statPtr+16)
		if tt.filetype == filetypeCharDev && base&(rightFdSeek|rightFdTell) != rightFdSeek|rightFdTell {
			t.Errorf("fd %d rights %#x lack FD_SEEK|FD_TELL", tt.fd, base)
		}
		if base != tt.base || inheriting != tt.inheriting {
			t.Errorf("fd %d rights %#x/%#x, want %#x/%#x", tt.fd, base, inheriting, tt.base, tt.inheriting)
		}
		// A directory must be reopenable with the rights it reports: a
		// reopen asks for them and path_open would refuse FD_WRITE.
		if tt.filetype == filetypeDirectory {
			if base&(rightFdRead|rightFdWrite|rightFdSeek|rightFdFilestatSetSize) != 0 {
				t.Errorf("dir fd %d has file rights %#x", tt.fd, base)
			}
			p, n := h.str(pathPtr, ".")
			h.ok("path_open", uint64(tt.fd), 0, p, n, oflagDirectory, base, inheriting, 0, resPtr)
			h.ok("fd_close", uint64(h.u32(resPtr)))
		}
	}
	h.want(errno.EBADF, "fd_fdstat_get", 9, statPtr)
	h.want(errno.EFAULT, "fd_fdstat_get", 0, memSize-23)
	h.ok("fd_fdstat_get", 0, memSize-24)

	// fd_fdstat_set_flags changes what fd_fdstat_get reports.
	h.ok("fd_fdstat_set_flags", uint64(file), 0)
	h.ok("fd_fdstat_get", uint64(file), statPtr)
	if got := h.u16(statPtr + 2); got != 0 {
		t.Errorf("flags after set_flags(0) = %#x", got)
	}
	h.want(errno.EINVAL, "fd_fdstat_set_flags", uint64(file), 1<<5)
	h.want(errno.EBADF, "fd_fdstat_set_flags", 9, 0)
	h.want(errno.EBADF, "fd_fdstat_set_rights", 9, 0, 0)
}

// TestFdstatSetRights: rights only ever shrink, and every operation then
// checks its own.
func TestFdstatSetRights(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "f", "hello")
	fd := uint64(h.open("f", 0, rightsRW, 0))
	h.ok("fd_fdstat_get", fd, statPtr)
	base := h.u64(statPtr + 8)
	// Adding a right fails and changes nothing.
	h.want(errno.ENOTCAPABLE, "fd_fdstat_set_rights", fd, base|rightPathOpen, 0)
	h.want(errno.ENOTCAPABLE, "fd_fdstat_set_rights", fd, base, 1)
	h.ok("fd_fdstat_get", fd, statPtr)
	if got := h.u64(statPtr + 8); got != base {
		t.Fatalf("refused set_rights changed rights to %#x", got)
	}
	h.ok("fd_fdstat_set_rights", fd, base&^(rightFdRead|rightFdWrite), 0)
	h.ok("fd_fdstat_get", fd, statPtr)
	if got := h.u64(statPtr + 8); got != base&^(rightFdRead|rightFdWrite) {
		t.Fatalf("rights after drop = %#x", got)
	}
	p, n := h.iovs(iovPtr, iov{bufPtr, 4})
	h.want(errno.ENOTCAPABLE, "fd_read", fd, p, n, resPtr)
	h.want(errno.ENOTCAPABLE, "fd_write", fd, p, n, resPtr)
	h.ok("fd_seek", fd, 1, whenceSet, resPtr)
	// Dropping them back is no addition.
	h.want(errno.ENOTCAPABLE, "fd_fdstat_set_rights", fd, base, 0)
	h.ok("fd_fdstat_set_rights", fd, 0, 0)
	h.want(errno.ENOTCAPABLE, "fd_seek", fd, 0, whenceSet, resPtr)
	h.want(errno.ENOTCAPABLE, "fd_tell", fd, resPtr)
	h.want(errno.ENOTCAPABLE, "fd_filestat_get", fd, statPtr)
	h.want(errno.ENOTCAPABLE, "fd_sync", fd)
	if got := h.fileContents("f"); got != "hello" {
		t.Errorf("file = %q", got)
	}

	// A directory's rights bound what is opened from it: requested ∩
	// inheriting, and the directory's own base rights gate its paths.
	mustMkdir(t, h.fs, "d")
	pd, nd := h.str(pathPtr, "d")
	h.ok("path_open", 3, 0, pd, nd, oflagDirectory, ^uint64(rightFdWrite), rightFdRead|rightPathOpen, 0, resPtr)
	dir := uint64(h.u32(resPtr))
	pf, nf := h.str(path2Ptr, "../f")
	h.want(errno.EPERM, "path_open", dir, 0, pf, nf, 0, rightsRW, 0, 0, resPtr) // ".." above d
	mustWrite(t, h.fs, "d/g", "x")
	pg, ng := h.str(path2Ptr, "g")
	h.ok("path_open", dir, 0, pg, ng, 0, rightsRW, 0, 0, resPtr)
	g := uint64(h.u32(resPtr))
	h.ok("fd_fdstat_get", g, statPtr)
	if got := h.u64(statPtr + 8); got != rightFdRead {
		t.Errorf("child rights = %#x, want FD_READ only", got)
	}
	h.want(errno.ENOTCAPABLE, "fd_write", g, p, n, resPtr)
	// Without PATH_CREATE_FILE nothing is created, without
	// PATH_FILESTAT_SET_SIZE nothing is truncated.
	h.ok("fd_fdstat_set_rights", dir, rightPathOpen, rightFdRead)
	pn, nn := h.str(path2Ptr, "new")
	h.want(errno.ENOTCAPABLE, "path_open", dir, 0, pn, nn, oflagCreat, 0, 0, 0, resPtr)
	if h.exists("d/new") {
		t.Error("created without PATH_CREATE_FILE")
	}
	h.want(errno.ENOTCAPABLE, "path_open", dir, 0, pg, ng, oflagTrunc, 0, 0, 0, resPtr)
	if got := h.fileContents("d/g"); got != "x" {
		t.Errorf("truncated without PATH_FILESTAT_SET_SIZE: %q", got)
	}
	h.want(errno.ENOTCAPABLE, "fd_readdir", dir, bufPtr, 64, 0, resPtr)
	h.want(errno.ENOTCAPABLE, "path_unlink_file", dir, pg, ng)
	h.want(errno.ENOTCAPABLE, "path_create_directory", dir, pn, nn)
	if !h.exists("d/g") || h.exists("d/new") {
		t.Error("a refused call changed the directory")
	}
}

// TestPathOpenOflags tries every oflags combination on an existing file, an
// existing directory and a missing path, read-only and read-write, against
// Linux open(2) semantics.
func TestPathOpenOflags(t *testing.T) {
	const (
		ok = errno.ESUCCESS
		ro = rightsRO
		rw = rightsRW
	)
	type row [16]errno.Errno
	tests := []struct {
		target string // "file", "dir", "missing"
		rights uint64
		want   row
	}{
		{"file", ro, row{
			ok, ok, errno.ENOTDIR, errno.ENOTDIR, ok, errno.EEXIST, errno.ENOTDIR, errno.EEXIST,
			ok, ok, errno.ENOTDIR, errno.ENOTDIR, ok, errno.EEXIST, errno.ENOTDIR, errno.EEXIST}},
		{"file", rw, row{
			ok, ok, errno.ENOTDIR, errno.ENOTDIR, ok, errno.EEXIST, errno.ENOTDIR, errno.EEXIST,
			ok, ok, errno.ENOTDIR, errno.ENOTDIR, ok, errno.EEXIST, errno.ENOTDIR, errno.EEXIST}},
		// O_TRUNC implies writing, and a directory cannot be opened for
		// writing (EISDIR); but an existing name with O_CREAT|O_EXCL is
		// EEXIST first, as open(2) has it (tempfile retries only on that).
		{"dir", ro, row{
			ok, errno.EISDIR, ok, errno.EISDIR, ok, errno.EEXIST, ok, errno.EEXIST,
			errno.EISDIR, errno.EISDIR, errno.EISDIR, errno.EISDIR,
			errno.EISDIR, errno.EEXIST, errno.EISDIR, errno.EEXIST}},
		{"dir", rw, row{
			errno.EISDIR, errno.EISDIR, errno.EISDIR, errno.EISDIR, errno.EISDIR, errno.EEXIST, errno.EISDIR, errno.EEXIST,
			errno.EISDIR, errno.EISDIR, errno.EISDIR, errno.EISDIR, errno.EISDIR, errno.EEXIST, errno.EISDIR, errno.EEXIST}},
		{"missing", ro, row{
			errno.ENOENT, ok, errno.ENOENT, errno.EINVAL, errno.ENOENT, ok, errno.ENOENT, errno.EINVAL,
			errno.ENOENT, ok, errno.ENOENT, errno.EINVAL, errno.ENOENT, ok, errno.ENOENT, errno.EINVAL}},
		{"missing", rw, row{
			errno.ENOENT, ok, errno.ENOENT, errno.EINVAL, errno.ENOENT, ok, errno.ENOENT, errno.EINVAL,
			errno.ENOENT, ok, errno.ENOENT, errno.EINVAL, errno.ENOENT, ok, errno.ENOENT, errno.EINVAL}},
	}
	for _, tt := range tests {
		for oflags, want := range tt.want {
			t.Run(fmt.Sprintf("%s/rights=%#x/oflags=%d", tt.target, tt.rights, oflags), func(t *testing.T) {
				h := newHarness(t, wasi.Config{})
				mustWrite(t, h.fs, "file", "hello")
				mustMkdir(t, h.fs, "dir")
				e, fd := h.openErr(tt.target, uint64(oflags), tt.rights, 0)
				if e != want {
					t.Fatalf("path_open = %v, want %v", e, want)
				}
				if e != ok {
					if fd != 0xdeadbeef {
						t.Errorf("failed path_open wrote fd %d", fd)
					}
					if got := h.fileContents("file"); got != "hello" {
						t.Errorf("failed path_open changed the file to %q", got)
					}
					if h.exists("missing") {
						t.Error("failed path_open created the file")
					}
					return
				}
				if fd != 4 {
					t.Errorf("fd = %d, want 4", fd)
				}
				h.ok("fd_fdstat_get", uint64(fd), statPtr)
				wantType := byte(filetypeRegular)
				if tt.target == "dir" {
					wantType = filetypeDirectory
				}
				if got := h.u8(statPtr); got != wantType {
					t.Errorf("filetype = %d, want %d", got, wantType)
				}
				switch tt.target {
				case "file":
					wantBody := "hello"
					if oflags&oflagTrunc != 0 {
						wantBody = ""
					}
					if got := h.fileContents("file"); got != wantBody {
						t.Errorf("contents = %q, want %q", got, wantBody)
					}
				case "missing":
					if got := h.fileContents("missing"); got != "" {
						t.Errorf("created file holds %q", got)
					}
				}
			})
		}
	}
}

func TestPathOpenErrors(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "f", "data")
	mustMkdir(t, h.fs, "d/sub")
	file := h.open("f", 0, rightsRO, 0)

	// Each case is path_open(fd, 0, path at pathPtr, oflags, rights,
	// 0, fdflags, result) with one argument replaced.
	tests := []struct {
		name   string
		path   string
		params func(p, n uint64) []uint64
		want   errno.Errno
	}{
		{"unknown oflags", "f", func(p, n uint64) []uint64 { return []uint64{3, 0, p, n, 16, rightsRO, 0, 0, resPtr} }, errno.EINVAL},
		{"unknown fdflags", "f", func(p, n uint64) []uint64 { return []uint64{3, 0, p, n, 0, rightsRO, 0, 1 << 5, resPtr} }, errno.EINVAL},
		{"bad fd", "f", func(p, n uint64) []uint64 { return []uint64{9, 0, p, n, 0, rightsRO, 0, 0, resPtr} }, errno.EBADF},
		{"stdin as dir", "f", func(p, n uint64) []uint64 { return []uint64{0, 0, p, n, 0, rightsRO, 0, 0, resPtr} }, errno.ENOTDIR},
		{"file as dir", "f", func(p, n uint64) []uint64 { return []uint64{uint64(file), 0, p, n, 0, rightsRO, 0, 0, resPtr} }, errno.ENOTDIR},
		{"empty path", "", func(p, n uint64) []uint64 { return []uint64{3, 0, p, n, 0, rightsRO, 0, 0, resPtr} }, errno.ENOENT},
		{"path too long", "f", func(p, n uint64) []uint64 { return []uint64{3, 0, p, 4097, 0, rightsRO, 0, 0, resPtr} }, errno.ENAMETOOLONG},
		{"path len 0xffffffff", "f", func(p, n uint64) []uint64 { return []uint64{3, 0, p, 0xffffffff, 0, rightsRO, 0, 0, resPtr} }, errno.ENAMETOOLONG},
		{"path past memory", "f", func(p, n uint64) []uint64 { return []uint64{3, 0, memSize - 1, 2, 0, rightsRO, 0, 0, resPtr} }, errno.EFAULT},
		{"path wraps", "f", func(p, n uint64) []uint64 { return []uint64{3, 0, 0xfffffff0, 0x20, 0, rightsRO, 0, 0, resPtr} }, errno.EFAULT},
		{"result past memory", "f", func(p, n uint64) []uint64 { return []uint64{3, 0, p, n, 0, rightsRO, 0, 0, memSize - 3} }, errno.EFAULT},
		{"file with trailing slash", "f/", func(p, n uint64) []uint64 { return []uint64{3, 0, p, n, 0, rightsRO, 0, 0, resPtr} }, errno.ENOTDIR},
		{"component too long", strings.Repeat("x", 256), func(p, n uint64) []uint64 { return []uint64{3, 0, p, n, oflagCreat, rightsRO, 0, 0, resPtr} }, errno.ENAMETOOLONG},
		{"NUL in path", "f\x00x", func(p, n uint64) []uint64 { return []uint64{3, 0, p, n, 0, rightsRO, 0, 0, resPtr} }, errno.EILSEQ},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			binary.LittleEndian.PutUint32(h.mem[resPtr:], 0xdeadbeef)
			p, n := h.str(pathPtr, tt.path)
			h.want(tt.want, "path_open", tt.params(p, n)...)
			if h.u32(resPtr) != 0xdeadbeef {
				t.Error("failed path_open wrote a result")
			}
		})
	}
	p, n := h.str(pathPtr, "f")
	// The result may end exactly at the end of memory.
	h.ok("path_open", 3, 0, p, n, 0, rightsRO, 0, 0, memSize-4)
	// Paths resolve from the directory fd, which they may not leave: ".."
	// above it, or an absolute path, is EPERM, as wasmtime answers. On the
	// preopened root "/.." is "/", as wasi-libc's paths all start there.
	sub := h.open("d", oflagDirectory, rightsRO, 0)
	p2, n2 := h.str(path2Ptr, "../../../f")
	h.want(errno.EPERM, "path_open", uint64(sub), 0, p2, n2, 0, rightsRO, 0, 0, resPtr)
	p2, n2 = h.str(path2Ptr, "sub/../../f")
	h.want(errno.EPERM, "path_open", uint64(sub), 0, p2, n2, 0, rightsRO, 0, 0, resPtr)
	p2, n2 = h.str(path2Ptr, "/f")
	h.want(errno.EPERM, "path_open", uint64(sub), 0, p2, n2, 0, rightsRO, 0, 0, resPtr)
	h.want(errno.EPERM, "path_open", 3, 0, p2, n2, 0, rightsRO, 0, 0, resPtr)
	p2, n2 = h.str(path2Ptr, "sub/../sub/..")
	h.ok("path_open", uint64(sub), 0, p2, n2, oflagDirectory, rightsRO, 0, 0, resPtr)
	p2, n2 = h.str(path2Ptr, "../../../f")
	h.ok("path_open", 3, 0, p2, n2, 0, rightsRO, 0, 0, resPtr)
	p2, n2 = h.str(path2Ptr, "sub")
	h.ok("path_open", uint64(sub), 0, p2, n2, oflagDirectory, rightsRO, 0, 0, resPtr)
}

func TestAccessModes(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "f", "hello")
	mustMkdir(t, h.fs, "d")
	ro := h.open("f", 0, rightsRO, 0)
	wo := h.open("f", 0, rightsWO, 0)
	none := h.open("f", 0, 0, 0)
	dir := h.open("d", oflagDirectory, rightsRO, 0)
	p, n := h.iovs(iovPtr, iov{bufPtr, 4})
	// A descriptor whose access mode lacks an operation's right gets
	// EBADF, as wasmtime and Linux answer (ftruncate of a read-only file:
	// EINVAL); one whose rights were dropped gets ENOTCAPABLE
	// (TestFdstatSetRights).
	const nc, inval = errno.EBADF, errno.EINVAL
	tests := []struct {
		fd               uint32
		read, write      errno.Errno
		pread, pwrite    errno.Errno
		setSize, alloc   errno.Errno
		seek, tell, advs errno.Errno
	}{
		{ro, 0, nc, 0, nc, inval, nc, 0, 0, 0},
		{wo, nc, 0, nc, 0, 0, 0, 0, 0, 0},
		{none, nc, nc, nc, nc, inval, nc, nc, nc, nc},
		// Every file operation on a directory is EBADF, as wasmtime answers.
		{dir, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF},
		{0, 0, nc, errno.ESPIPE, errno.ESPIPE, errno.EBADF, errno.EBADF, errno.ESPIPE, errno.ESPIPE, errno.EBADF},
		{1, nc, 0, errno.ESPIPE, errno.ESPIPE, errno.EBADF, errno.EBADF, errno.ESPIPE, errno.ESPIPE, errno.EBADF},
		{9, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF, errno.EBADF},
	}
	for _, tt := range tests {
		fd := uint64(tt.fd)
		check := func(name string, want errno.Errno, params ...uint64) {
			t.Helper()
			if got := h.errno(name, params...); got != want {
				t.Errorf("fd %d: %s = %v, want %v", fd, name, got, want)
			}
		}
		check("fd_read", tt.read, fd, p, n, resPtr)
		check("fd_write", tt.write, fd, p, n, resPtr)
		check("fd_pread", tt.pread, fd, p, n, 0, resPtr)
		check("fd_pwrite", tt.pwrite, fd, p, n, 0, resPtr)
		check("fd_filestat_set_size", tt.setSize, fd, 5)
		check("fd_allocate", tt.alloc, fd, 0, 5)
		check("fd_seek", tt.seek, fd, 0, whenceCur, resPtr)
		check("fd_tell", tt.tell, fd, resPtr)
		check("fd_advise", tt.advs, fd, 0, 0, 0)
	}
}

func TestReadWrite(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	fd := uint64(h.open("f", oflagCreat, rightsRW, 0))

	// Scatter-gather with zero-length vectors in between and at the ends.
	h.str(bufPtr, "abc")
	h.str(bufPtr+0x100, "defgh")
	p, n := h.iovs(iovPtr, iov{bufPtr, 0}, iov{bufPtr, 3}, iov{0, 0}, iov{bufPtr + 0x100, 5}, iov{memSize, 0})
	h.ok("fd_write", fd, p, n, resPtr)
	if got := h.u32(resPtr); got != 8 {
		t.Errorf("nwritten = %d, want 8", got)
	}
	if got := h.fileContents("f"); got != "abcdefgh" {
		t.Errorf("contents = %q", got)
	}
	h.ok("fd_tell", fd, resPtr)
	if got := h.u64(resPtr); got != 8 {
		t.Errorf("tell = %d, want 8", got)
	}
	h.ok("fd_write", fd, p, 0, resPtr) // no vectors: nothing written
	if got := h.u32(resPtr); got != 0 {
		t.Errorf("nwritten for no vectors = %d", got)
	}

	// Read back into 2, 0 and 3 bytes, then a vector larger than what is
	// left: the read stops at end of file and leaves the rest alone.
	if e, _ := h.seek(uint32(fd), 0, whenceSet); e != 0 {
		t.Fatal(e)
	}
	dst := uint32(0x3000)
	for i := range 32 {
		h.mem[dst+uint32(i)] = '.'
	}
	p, n = h.iovs(iovPtr, iov{dst, 2}, iov{dst + 4, 0}, iov{dst + 4, 3}, iov{dst + 10, 10})
	h.ok("fd_read", fd, p, n, resPtr)
	if got := h.u32(resPtr); got != 8 {
		t.Errorf("nread = %d, want 8", got)
	}
	if got := string(h.mem[dst : dst+22]); got != "ab..cde...fgh........." {
		t.Errorf("memory after read = %q", got)
	}
	// At end of file: 0 bytes, success.
	h.ok("fd_read", fd, p, n, resPtr)
	if got := h.u32(resPtr); got != 0 {
		t.Errorf("nread at EOF = %d", got)
	}

	// pread and pwrite leave the position alone.
	p, n = h.iovs(iovPtr, iov{dst, 3}, iov{dst + 8, 2})
	h.ok("fd_pread", fd, p, n, 2, resPtr)
	if got := h.u32(resPtr); got != 5 {
		t.Errorf("pread count = %d", got)
	}
	if got := string(h.mem[dst:dst+3]) + string(h.mem[dst+8:dst+10]); got != "cdefg" {
		t.Errorf("pread = %q", got)
	}
	h.ok("fd_pread", fd, p, n, 100, resPtr) // past the end
	if got := h.u32(resPtr); got != 0 {
		t.Errorf("pread past end = %d", got)
	}
	h.str(dst, "XYZ")
	p, n = h.iovs(iovPtr, iov{dst, 1}, iov{0, 0}, iov{dst + 1, 2})
	h.ok("fd_pwrite", fd, p, n, 10, resPtr)
	if got := h.u32(resPtr); got != 3 {
		t.Errorf("pwrite count = %d", got)
	}
	if got := h.fileContents("f"); got != "abcdefgh\x00\x00XYZ" {
		t.Errorf("after pwrite past end: %q", got)
	}
	h.ok("fd_tell", fd, resPtr)
	if got := h.u64(resPtr); got != 8 {
		t.Errorf("tell after pread/pwrite = %d, want 8", got)
	}
	h.want(errno.EINVAL, "fd_pread", fd, p, n, uint64(1<<63), resPtr)
	h.want(errno.EINVAL, "fd_pwrite", fd, p, n, math.MaxUint64, resPtr)
	// A write past the 1 TiB file limit is EFBIG, not a huge allocation.
	h.want(errno.EFBIG, "fd_pwrite", fd, p, n, math.MaxInt64-1, resPtr)
	if e, _ := h.seek(uint32(fd), math.MaxInt64, whenceSet); e != 0 {
		t.Fatal(e)
	}
	h.want(errno.EFBIG, "fd_write", fd, p, n, resPtr)
	h.ok("fd_read", fd, p, n, resPtr)
	if got := h.u32(resPtr); got != 0 {
		t.Errorf("read at MaxInt64 = %d", got)
	}
}

func TestAppend(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "f", "0123")
	fd := h.open("f", 0, rightsRW, fdflagAppend)
	if e, _ := h.seek(fd, 0, whenceSet); e != 0 {
		t.Fatal(e)
	}
	h.write(fd, "ab")
	if got := h.fileContents("f"); got != "0123ab" {
		t.Errorf("append wrote %q", got)
	}
	h.ok("fd_tell", uint64(fd), resPtr)
	if got := h.u64(resPtr); got != 6 {
		t.Errorf("tell after append = %d, want 6", got)
	}
	// Turning APPEND off makes writes positional again, and on again
	// through fd_fdstat_set_flags.
	h.ok("fd_fdstat_set_flags", uint64(fd), 0)
	h.seek(fd, 1, whenceSet)
	h.write(fd, "X")
	h.ok("fd_fdstat_set_flags", uint64(fd), fdflagAppend)
	h.seek(fd, 0, whenceSet)
	h.write(fd, "Z")
	if got := h.fileContents("f"); got != "0X23abZ" {
		t.Errorf("contents = %q, want %q", got, "0X23abZ")
	}
}

func TestStdio(t *testing.T) {
	var out, errOut bytes.Buffer
	h := newHarness(t, wasi.Config{Stdin: strings.NewReader("hello, world"), Stdout: &out, Stderr: &errOut})
	p, n := h.iovs(iovPtr, iov{bufPtr, 5}, iov{0, 0}, iov{bufPtr + 16, 2})
	h.ok("fd_read", 0, p, n, resPtr)
	if got := h.u32(resPtr); got != 7 {
		t.Errorf("nread = %d, want 7", got)
	}
	if got := string(h.mem[bufPtr:bufPtr+5]) + string(h.mem[bufPtr+16:bufPtr+18]); got != "hello, " {
		t.Errorf("read %q", got)
	}
	if got := h.read(0, 100); got != "world" {
		t.Errorf("second read %q", got)
	}
	if got := h.read(0, 100); got != "" {
		t.Errorf("read at EOF %q", got)
	}

	h.str(bufPtr, "out")
	h.str(bufPtr+8, "put\n")
	p, n = h.iovs(iovPtr, iov{bufPtr, 3}, iov{0, 0}, iov{bufPtr + 8, 4})
	h.ok("fd_write", 1, p, n, resPtr)
	if got := h.u32(resPtr); got != 7 {
		t.Errorf("nwritten = %d", got)
	}
	h.ok("fd_write", 2, p, n, resPtr)
	if out.String() != "output\n" || errOut.String() != "output\n" {
		t.Errorf("stdout %q stderr %q", out.String(), errOut.String())
	}
	for _, fd := range []uint64{0, 1, 2} {
		h.want(errno.ESPIPE, "fd_seek", fd, 0, whenceCur, resPtr)
		h.want(errno.ESPIPE, "fd_tell", fd, resPtr)
		h.ok("fd_filestat_get", fd, statPtr)
		if h.u8(statPtr+16) != filetypeCharDev || h.u64(statPtr+32) != 0 {
			t.Errorf("fd %d filestat % x", fd, h.mem[statPtr:statPtr+64])
		}
		h.want(errno.EBADF, "fd_filestat_set_times", fd, 0, 0, fstAtimNow)
		h.ok("fd_sync", fd)
		h.ok("fd_datasync", fd)
	}

	// Config zero values: stdin is empty, output is discarded.
	h = newHarness(t, wasi.Config{})
	if got := h.read(0, 10); got != "" {
		t.Errorf("default stdin gave %q", got)
	}
	h.write(1, "discarded")
}

type errReader struct {
	data string
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestStdinError(t *testing.T) {
	h := newHarness(t, wasi.Config{Stdin: &errReader{"ab", errors.New("broken")}})
	// Data before the failure is delivered; the failure itself is EIO.
	p, n := h.iovs(iovPtr, iov{bufPtr, 2}, iov{bufPtr + 2, 2})
	h.ok("fd_read", 0, p, n, resPtr)
	if got := h.u32(resPtr); got != 2 {
		t.Errorf("nread = %d", got)
	}
	binary.LittleEndian.PutUint32(h.mem[resPtr:], 77)
	h.want(errno.EIO, "fd_read", 0, p, n, resPtr)
	if h.u32(resPtr) != 77 {
		t.Error("failed read wrote nread")
	}
}

// capWriter accepts max bytes, then fails as an output cap does.
type capWriter struct {
	buf bytes.Buffer
	max int
}

var errCap = errors.New("output limit reached")

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:room])
		return room, errCap
	}
	return w.buf.Write(p)
}

func TestOutputWriterErrorTraps(t *testing.T) {
	for _, fd := range []uint64{1, 2} {
		w := &capWriter{max: 10}
		h := newHarness(t, wasi.Config{Stdout: w, Stderr: w})
		h.str(bufPtr, "0123456789abcdef")
		p, n := h.iovs(iovPtr, iov{bufPtr, 6}, iov{bufPtr + 6, 10})
		binary.LittleEndian.PutUint32(h.mem[resPtr:], 77)
		_, err := h.call("fd_write", fd, p, n, resPtr)
		if !errors.Is(err, errCap) {
			t.Fatalf("fd %d: trap = %v, want %v", fd, err, errCap)
		}
		if w.buf.String() != "0123456789" {
			t.Errorf("writer got %q", w.buf.String())
		}
		if h.u32(resPtr) != 77 {
			t.Error("trapping write stored nwritten")
		}
		// The trap belongs to that call only.
		h.ok("sched_yield")
		h.ok("fd_fdstat_get", fd, statPtr)
	}
}

func TestQuotaENOSPC(t *testing.T) {
	fs := newFS(memfs.Quota{MaxBytes: 100, MaxInodes: 3})
	h := newHarness(t, wasi.Config{FS: fs})
	fd := uint64(h.open("f", oflagCreat, rightsWO, 0))
	// Two vectors: the first fits, the second would pass the quota, so
	// the call is a short write of the first.
	p, n := h.iovs(iovPtr, iov{bufPtr, 60}, iov{bufPtr, 60})
	h.ok("fd_write", fd, p, n, resPtr)
	if got := h.u32(resPtr); got != 60 {
		t.Errorf("short write count = %d, want 60", got)
	}
	binary.LittleEndian.PutUint32(h.mem[resPtr:], 77)
	h.want(errno.ENOSPC, "fd_write", fd, p, n, resPtr)
	if h.u32(resPtr) != 77 {
		t.Error("failed write stored nwritten")
	}
	h.want(errno.ENOSPC, "fd_pwrite", fd, p, 1, 90, resPtr)
	// Growing by fd_filestat_set_size makes a hole: not stored, but its
	// size counts, so past the quota it is refused and changes nothing.
	// fd_allocate is refused whole too.
	h.want(errno.ENOSPC, "fd_filestat_set_size", fd, 101)
	if b, _ := fs.Usage(); b != 60 {
		t.Errorf("usage after a refused growth = %d, want 60", b)
	}
	h.want(errno.ENOSPC, "fd_allocate", fd, 50, 51)
	if b, _ := fs.Usage(); b != 60 {
		t.Errorf("usage after a refused fd_allocate = %d, want 60", b)
	}
	h.ok("fd_filestat_set_size", fd, 80)
	h.ok("fd_allocate", fd, 50, 50)
	h.ok("fd_allocate", fd, 0, 10) // inside the file: nothing to do
	if b, _ := fs.Usage(); b != 100 {
		t.Errorf("usage = %d bytes, want 100", b)
	}
	if !fs.QuotaHit() {
		t.Error("QuotaHit not set")
	}
	// The inode quota: root, f and one more.
	h.ok("path_create_directory", 3, pathPtr, uint64(copy(h.mem[pathPtr:], "d")))
	h.want(errno.ENOSPC, "path_create_directory", 3, pathPtr, uint64(copy(h.mem[pathPtr:], "e")))
	e, _ := h.openErr("g", oflagCreat, rightsWO, 0)
	if e != errno.ENOSPC {
		t.Errorf("path_open past inode quota = %v", e)
	}
	if b, i := fs.Usage(); b > 100 || i > 3 {
		t.Errorf("usage %d bytes %d inodes exceeds quota", b, i)
	}
}

func TestSeekTell(t *testing.T) {
	tests := []struct {
		name   string
		start  int64 // position before the seek
		delta  int64
		whence uint64
		want   errno.Errno
		pos    int64 // position after
	}{
		{"set", 3, 7, whenceSet, 0, 7},
		{"set 0", 3, 0, whenceSet, 0, 0},
		{"set past end", 3, 100, whenceSet, 0, 100},
		{"set negative", 3, -1, whenceSet, errno.EINVAL, 3},
		{"set min", 3, math.MinInt64, whenceSet, errno.EINVAL, 3},
		{"set max", 3, math.MaxInt64, whenceSet, 0, math.MaxInt64},
		{"cur forward", 3, 2, whenceCur, 0, 5},
		{"cur back", 3, -3, whenceCur, 0, 0},
		{"cur before start", 3, -4, whenceCur, errno.EINVAL, 3},
		{"cur overflow", math.MaxInt64, 1, whenceCur, errno.EINVAL, math.MaxInt64},
		{"cur zero", 3, 0, whenceCur, 0, 3},
		{"end", 3, 0, whenceEnd, 0, 10},
		{"end back", 3, -10, whenceEnd, 0, 0},
		{"end before start", 3, -11, whenceEnd, errno.EINVAL, 3},
		{"end forward", 3, 5, whenceEnd, 0, 15},
		{"end overflow", 3, math.MaxInt64, whenceEnd, errno.EINVAL, 3},
		{"bad whence", 3, 0, 3, errno.EINVAL, 3},
		{"whence 0xff", 3, 0, 0xff, errno.EINVAL, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, wasi.Config{})
			mustWrite(t, h.fs, "f", "0123456789")
			fd := h.open("f", 0, rightsRO, 0)
			if e, _ := h.seek(fd, tt.start, whenceSet); e != 0 {
				t.Fatal(e)
			}
			binary.LittleEndian.PutUint64(h.mem[resPtr:], 0xdeadbeef)
			e, got := h.seek(fd, tt.delta, tt.whence)
			if e != tt.want {
				t.Fatalf("fd_seek = %v, want %v", e, tt.want)
			}
			if e == 0 && got != uint64(tt.pos) {
				t.Errorf("new offset = %d, want %d", got, tt.pos)
			}
			if e != 0 && got != 0xdeadbeef {
				t.Errorf("failed seek wrote %d", got)
			}
			h.ok("fd_tell", uint64(fd), resPtr)
			if got := h.u64(resPtr); got != uint64(tt.pos) {
				t.Errorf("tell = %d, want %d", got, tt.pos)
			}
		})
	}
	h := newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "f", "0123456789")
	fd := uint64(h.open("f", 0, rightsRO, 0))
	h.want(errno.EFAULT, "fd_seek", fd, 1, whenceSet, memSize-7)
	h.want(errno.EFAULT, "fd_tell", fd, memSize-7)
	h.ok("fd_tell", fd, resPtr)
	if h.u64(resPtr) != 0 {
		t.Error("seek with a bad result pointer moved the offset")
	}
	h.want(errno.EBADF, "fd_seek", 3, 0, whenceSet, resPtr)
	h.want(errno.EBADF, "fd_tell", 3, resPtr)
	h.want(errno.EBADF, "fd_seek", 99, 0, whenceSet, resPtr)
	h.want(errno.EBADF, "fd_tell", 99, resPtr)
}

type dirent struct {
	next uint64
	ino  uint64
	typ  byte
	name string
}

// parseDirents decodes the whole entries in buf.
func parseDirents(buf []byte) (ents []dirent, rest int) {
	for len(buf) >= 24 {
		n := binary.LittleEndian.Uint32(buf[16:])
		if uint64(len(buf)-24) < uint64(n) {
			break
		}
		ents = append(ents, dirent{
			next: binary.LittleEndian.Uint64(buf),
			ino:  binary.LittleEndian.Uint64(buf[8:]),
			typ:  buf[20],
			name: string(buf[24 : 24+n]),
		})
		buf = buf[24+n:]
	}
	return ents, len(buf)
}

// readlink returns the target of the link at path, or "" with the errno
// spelled in brackets.
func (h *harness) readlink(path string) string {
	h.t.Helper()
	p, n := h.str(path2Ptr, path)
	if e := h.errno("path_readlink", 3, p, n, bufPtr, 4096, resPtr); e != 0 {
		return "[" + e.Error() + "]"
	}
	return string(h.mem[bufPtr : bufPtr+h.u32(resPtr)])
}

func (h *harness) ino(path string) uint64 {
	h.t.Helper()
	p, n := h.str(path2Ptr, path)
	h.ok("path_filestat_get", 3, 0, p, n, statPtr)
	return h.u64(statPtr + 8)
}

func TestReaddir(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	for _, f := range []string{"d/bb", "d/a", "d/ccc"} {
		mustWrite(t, h.fs, f, f)
	}
	mustMkdir(t, h.fs, "d/sub")
	fd := uint64(h.open("d", oflagDirectory, rightsRO, 0))
	want := []dirent{
		{1, h.ino("d"), filetypeDirectory, "."},
		{2, h.ino("."), filetypeDirectory, ".."},
		{3, h.ino("d/a"), filetypeRegular, "a"},
		{4, h.ino("d/bb"), filetypeRegular, "bb"},
		{5, h.ino("d/ccc"), filetypeRegular, "ccc"},
		{6, h.ino("d/sub"), filetypeDirectory, "sub"},
	}
	total := 0
	for _, d := range want {
		total += 24 + len(d.name)
	}

	// One large buffer: everything, bufused < buf_len.
	h.ok("fd_readdir", fd, bufPtr, 1024, 0, resPtr)
	used := h.u32(resPtr)
	if used != uint32(total) {
		t.Fatalf("bufused = %d, want %d", used, total)
	}
	got, rest := parseDirents(h.mem[bufPtr : bufPtr+used])
	if rest != 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("entries = %v (rest %d), want %v", got, rest, want)
	}

	// Every buffer size that holds the largest entry pages through the
	// listing as wasi-libc does: whole entries are consumed, the cookie of
	// the last one continues, a full buffer means "call again".
	const pattern = 0xa5
	for size := uint32(24 + 3); size <= uint32(total)+1; size++ {
		var all []dirent
		cookie := uint64(0)
		for calls := 0; ; calls++ {
			if calls > 20 {
				t.Fatalf("size %d: no end after %d calls", size, calls)
			}
			for i := range size + 8 {
				h.mem[bufPtr+i] = pattern
			}
			h.ok("fd_readdir", fd, bufPtr, uint64(size), cookie, resPtr)
			used := h.u32(resPtr)
			if used > size {
				t.Fatalf("size %d: bufused %d > buf_len", size, used)
			}
			if !bytes.Equal(h.mem[bufPtr+used:bufPtr+size+8], bytes.Repeat([]byte{pattern}, int(size+8-used))) {
				t.Fatalf("size %d: bytes past bufused were written", size)
			}
			ents, _ := parseDirents(h.mem[bufPtr : bufPtr+used])
			all = append(all, ents...)
			if len(ents) > 0 {
				cookie = ents[len(ents)-1].next
			}
			if used < size {
				break
			}
			if len(ents) == 0 {
				t.Fatalf("size %d: full buffer without a whole entry", size)
			}
		}
		if fmt.Sprint(all) != fmt.Sprint(want) {
			t.Errorf("size %d: paged entries = %v", size, all)
		}
	}

	// An entry split across the buffer's end: the prefix is there and
	// bufused == buf_len.
	h.ok("fd_readdir", fd, bufPtr, 30, 0, resPtr)
	if got := h.u32(resPtr); got != 30 {
		t.Errorf("bufused = %d, want 30", got)
	}
	if got := h.mem[bufPtr+25 : bufPtr+30]; !bytes.Equal(got, []byte{2, 0, 0, 0, 0}) {
		t.Errorf("split header starts % x, want d_next 2", got)
	}
	// A buffer too small for one header still fills it.
	h.ok("fd_readdir", fd, bufPtr, 10, 0, resPtr)
	if got := h.u32(resPtr); got != 10 {
		t.Errorf("tiny buffer bufused = %d", got)
	}
	h.ok("fd_readdir", fd, bufPtr, 0, 0, resPtr)
	if got := h.u32(resPtr); got != 0 {
		t.Errorf("zero buffer bufused = %d", got)
	}
	// Cookies at and past the end give nothing.
	for _, c := range []uint64{6, 7, 1 << 40, math.MaxUint64} {
		h.ok("fd_readdir", fd, bufPtr, 100, c, resPtr)
		if got := h.u32(resPtr); got != 0 {
			t.Errorf("cookie %d: bufused %d", c, got)
		}
	}
	// Cookies start anywhere.
	h.ok("fd_readdir", fd, bufPtr, 1024, 4, resPtr)
	if got, _ := parseDirents(h.mem[bufPtr : bufPtr+h.u32(resPtr)]); fmt.Sprint(got) != fmt.Sprint(want[4:]) {
		t.Errorf("from cookie 4: %v", got)
	}

	// A listing begun at cookie 0 is a snapshot: an entry created while
	// paging does not shift later pages; a new listing sees it.
	h.ok("fd_readdir", fd, bufPtr, 60, 0, resPtr)
	mustWrite(t, h.fs, "d/b0", "")
	h.ok("fd_readdir", fd, bufPtr, 1024, 3, resPtr)
	if got, _ := parseDirents(h.mem[bufPtr : bufPtr+h.u32(resPtr)]); fmt.Sprint(got) != fmt.Sprint(want[3:]) {
		t.Errorf("continued listing = %v, want %v", got, want[3:])
	}
	h.ok("fd_readdir", fd, bufPtr, 1024, 0, resPtr)
	if got, _ := parseDirents(h.mem[bufPtr : bufPtr+h.u32(resPtr)]); len(got) != 7 || got[3].name != "b0" {
		t.Errorf("new listing = %v", got)
	}

	// A removed directory still lists "." and "..".
	sub := uint64(h.open("d/sub", oflagDirectory, rightsRO, 0))
	p, n := h.str(pathPtr, "d/sub")
	h.ok("path_remove_directory", 3, p, n)
	h.ok("fd_readdir", sub, bufPtr, 1024, 0, resPtr)
	if got, _ := parseDirents(h.mem[bufPtr : bufPtr+h.u32(resPtr)]); len(got) != 2 || got[0].name != "." || got[1].name != ".." {
		t.Errorf("removed dir lists %v", got)
	}
	// The preopen lists the root.
	h.ok("fd_readdir", 3, bufPtr, 1024, 0, resPtr)
	if got, _ := parseDirents(h.mem[bufPtr : bufPtr+h.u32(resPtr)]); len(got) != 3 || got[1].ino != got[0].ino || got[2].name != "d" {
		t.Errorf("root lists %v", got)
	}

	file := uint64(h.open("d/a", 0, rightsRO, 0))
	h.want(errno.EBADF, "fd_readdir", file, bufPtr, 100, 0, resPtr)
	h.want(errno.EBADF, "fd_readdir", 0, bufPtr, 100, 0, resPtr)
	h.want(errno.EBADF, "fd_readdir", 99, bufPtr, 100, 0, resPtr)
	h.want(errno.EFAULT, "fd_readdir", fd, memSize-10, 11, 0, resPtr)
	h.want(errno.EFAULT, "fd_readdir", fd, 0xfffffff0, 0x20, 0, resPtr)
	h.want(errno.EFAULT, "fd_readdir", fd, bufPtr, 100, 0, memSize-3)
}

func TestFilestat(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "d/f", "hello")
	p, n := h.str(pathPtr, "d/f")
	h.ok("path_link", 3, 0, p, n, 3, path2Ptr, uint64(copy(h.mem[path2Ptr:], "g")))
	want := []uint64{1, h.ino("g"), filetypeRegular, 2, 5, fsNow, fsNow, fsNow}
	for i := range 64 {
		h.mem[statPtr+i] = 0xff
	}
	h.mem[statPtr+64] = 0xee
	h.ok("path_filestat_get", 3, 0, p, n, statPtr)
	for i, w := range want {
		if got := h.u64(statPtr + uint32(8*i)); got != w {
			t.Errorf("filestat word %d = %d, want %d", i, got, w)
		}
	}
	if h.mem[statPtr+64] != 0xee {
		t.Error("filestat wrote past 64 bytes")
	}
	fd := uint64(h.open("d/f", 0, rightsRO, 0))
	h.ok("fd_filestat_get", fd, res2Ptr+0x100)
	if !bytes.Equal(h.mem[res2Ptr+0x100:res2Ptr+0x140], h.mem[statPtr:statPtr+64]) {
		t.Error("fd_filestat_get and path_filestat_get disagree")
	}
	p, n = h.str(pathPtr, "d")
	h.ok("path_filestat_get", 3, 0, p, n, statPtr)
	if h.u8(statPtr+16) != filetypeDirectory || h.u64(statPtr+24) != 2 {
		t.Errorf("dir filestat % x", h.mem[statPtr:statPtr+64])
	}

	p, n = h.str(pathPtr, "nope")
	h.want(errno.ENOENT, "path_filestat_get", 3, 0, p, n, statPtr)
	h.want(errno.EFAULT, "path_filestat_get", 3, 0, p, n, memSize-63)
	h.want(errno.EFAULT, "fd_filestat_get", fd, memSize-63)
	h.want(errno.EBADF, "fd_filestat_get", 99, statPtr)
	h.ok("fd_filestat_get", fd, memSize-64)

	// Size changes through fd_filestat_set_size.
	wfd := uint64(h.open("d/f", 0, rightsWO, 0))
	h.ok("fd_filestat_set_size", wfd, 2)
	if got := h.fileContents("d/f"); got != "he" {
		t.Errorf("after set_size(2): %q", got)
	}
	h.ok("fd_filestat_set_size", wfd, 4)
	if got := h.fileContents("d/f"); got != "he\x00\x00" {
		t.Errorf("after set_size(4): %q", got)
	}
	h.want(errno.EINVAL, "fd_filestat_set_size", wfd, uint64(1<<63))
	h.want(errno.EFBIG, "fd_filestat_set_size", wfd, 1<<41)
	h.want(errno.EINVAL, "fd_allocate", wfd, math.MaxInt64, 1)
	h.want(errno.EINVAL, "fd_allocate", wfd, 0, 0)
	h.want(errno.EINVAL, "fd_allocate", wfd, math.MaxUint64, 1)
	h.want(errno.EFBIG, "fd_allocate", wfd, 1<<40, 1)
	h.ok("fd_advise", wfd, 0, 100, 5)
	h.want(errno.EINVAL, "fd_advise", wfd, 0, 100, 6)
	h.want(errno.EINVAL, "fd_advise", wfd, math.MaxUint64, 0, 0)
}

func TestSetTimes(t *testing.T) {
	const atim, mtim = 1000, 2000
	tests := []struct {
		flags   uint64
		want    errno.Errno
		atimNow bool
		atimSet bool
		mtimNow bool
		mtimSet bool
	}{
		{flags: 0},
		{flags: fstAtim, atimSet: true},
		{flags: fstMtim, mtimSet: true},
		{flags: fstAtim | fstMtim, atimSet: true, mtimSet: true},
		{flags: fstAtimNow, atimNow: true},
		{flags: fstMtimNow, mtimNow: true},
		{flags: fstAtimNow | fstMtimNow, atimNow: true, mtimNow: true},
		{flags: fstAtim | fstMtimNow, atimSet: true, mtimNow: true},
		{flags: fstAtimNow | fstMtim, atimNow: true, mtimSet: true},
		{flags: fstAtim | fstAtimNow, want: errno.EINVAL},
		{flags: fstMtim | fstMtimNow, want: errno.EINVAL},
		{flags: fstAtim | fstAtimNow | fstMtim, want: errno.EINVAL},
		{flags: 15, want: errno.EINVAL},
		{flags: 16, want: errno.EINVAL},
		{flags: 0xffff, want: errno.EINVAL},
	}
	for _, viaFd := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("fd=%v/flags=%#x", viaFd, tt.flags), func(t *testing.T) {
				h := newHarness(t, wasi.Config{})
				mustWrite(t, h.fs, "f", "x")
				fd := uint64(h.open("f", 0, rightsRO, 0))
				p, n := h.str(pathPtr, "f")
				now := uint64(h.clock.Realtime() + int64(time.Microsecond)) // the call's reading
				var e errno.Errno
				if viaFd {
					e = h.errno("fd_filestat_set_times", fd, atim, mtim, tt.flags)
				} else {
					e = h.errno("path_filestat_set_times", 3, 0, p, n, atim, mtim, tt.flags)
				}
				if e != tt.want {
					t.Fatalf("errno = %v, want %v", e, tt.want)
				}
				wantA, wantM := uint64(fsNow), uint64(fsNow)
				switch {
				case tt.atimNow:
					wantA = now
				case tt.atimSet:
					wantA = atim
				}
				switch {
				case tt.mtimNow:
					wantM = now
				case tt.mtimSet:
					wantM = mtim
				}
				h.ok("path_filestat_get", 3, 0, p, n, statPtr)
				if a, m := h.u64(statPtr+40), h.u64(statPtr+48); a != wantA || m != wantM {
					t.Errorf("atim, mtim = %d, %d, want %d, %d", a, m, wantA, wantM)
				}
			})
		}
	}
	h := newHarness(t, wasi.Config{})
	p, n := h.str(pathPtr, "nope")
	h.want(errno.ENOENT, "path_filestat_set_times", 3, 0, p, n, 0, 0, fstAtimNow)
	h.want(errno.EBADF, "fd_filestat_set_times", 99, 0, 0, fstAtimNow)
	h.ok("fd_filestat_set_times", 3, 5, 6, fstAtim|fstMtim) // the root
}

func TestPathOps(t *testing.T) {
	type op struct {
		name  string
		args  []string // paths, each relative to fd 3
		want  errno.Errno
		check func(h *harness) string
	}
	exists := func(paths ...string) func(h *harness) string {
		return func(h *harness) string {
			for _, p := range paths {
				neg := strings.HasPrefix(p, "!")
				if h.exists(strings.TrimPrefix(p, "!")) == neg {
					return "exists(" + p + ") wrong"
				}
			}
			return ""
		}
	}
	tests := []op{
		{"path_create_directory", []string{"new"}, 0, exists("new", "new/.")},
		{"path_create_directory", []string{"d/new"}, 0, exists("d/new")},
		{"path_create_directory", []string{"d"}, errno.EEXIST, nil},
		{"path_create_directory", []string{"f"}, errno.EEXIST, nil},
		{"path_create_directory", []string{"."}, errno.EEXIST, nil},
		{"path_create_directory", []string{"no/new"}, errno.ENOENT, exists("!no")},
		{"path_create_directory", []string{"f/new"}, errno.ENOTDIR, nil},
		{"path_create_directory", []string{""}, errno.ENOENT, nil},
		{"path_remove_directory", []string{"empty"}, 0, exists("!empty")},
		{"path_remove_directory", []string{"d"}, errno.ENOTEMPTY, exists("d")},
		{"path_remove_directory", []string{"f"}, errno.ENOTDIR, exists("f")},
		{"path_remove_directory", []string{"nope"}, errno.ENOENT, nil},
		{"path_remove_directory", []string{"/"}, errno.EPERM, nil},
		{"path_remove_directory", []string{"."}, errno.EINVAL, nil},
		{"path_remove_directory", []string{"empty/."}, errno.EINVAL, exists("empty")},
		{"path_unlink_file", []string{"f"}, 0, exists("!f")},
		{"path_unlink_file", []string{"d/g"}, 0, exists("!d/g", "d")},
		{"path_unlink_file", []string{"d"}, errno.EISDIR, exists("d")},
		{"path_unlink_file", []string{"nope"}, errno.ENOENT, nil},
		{"path_unlink_file", []string{"f/"}, errno.ENOTDIR, exists("f")},
		{"path_rename", []string{"f", "f2"}, 0, exists("!f", "f2")},
		{"path_rename", []string{"f", "d/g"}, 0, func(h *harness) string {
			if h.exists("f") || h.fileContents("d/g") != "file" {
				return "rename over a file did not replace it"
			}
			return ""
		}},
		{"path_rename", []string{"d", "empty"}, 0, exists("!d", "empty/g")},
		{"path_rename", []string{"d", "d/sub"}, errno.EINVAL, exists("d")},
		{"path_rename", []string{"f", "d"}, errno.EISDIR, exists("f")},
		{"path_rename", []string{"d", "f"}, errno.ENOTDIR, exists("d")},
		{"path_rename", []string{"empty", "d"}, errno.ENOTEMPTY, exists("empty")},
		{"path_rename", []string{"nope", "x"}, errno.ENOENT, exists("!x")},
		{"path_rename", []string{"f", "no/x"}, errno.ENOENT, exists("f")},
		{"path_link", []string{"f", "f2"}, 0, func(h *harness) string {
			if h.ino("f") != h.ino("f2") || h.fileContents("f2") != "file" {
				return "link is not the same file"
			}
			if h.u64(statPtr+24) != 2 {
				return "nlink != 2"
			}
			return ""
		}},
		{"path_link", []string{"d", "d2"}, errno.EPERM, exists("!d2")},
		{"path_link", []string{"f", "d/g"}, errno.EEXIST, nil},
		{"path_link", []string{"nope", "x"}, errno.ENOENT, exists("!x")},
		{"path_readlink", []string{"f"}, errno.EINVAL, nil},
		{"path_readlink", []string{"d"}, errno.EINVAL, nil},
		{"path_readlink", []string{"nope"}, errno.ENOENT, nil},
		{"path_symlink", []string{"f", "s"}, 0, func(h *harness) string {
			if got := h.readlink("s"); got != "f" {
				return fmt.Sprintf("readlink = %q", got)
			}
			return ""
		}},
		{"path_symlink", []string{"anything", "f"}, errno.EEXIST, nil},
		{"path_symlink", []string{"anything", "d/"}, errno.EEXIST, nil},
		{"path_symlink", []string{"anything", "s/"}, errno.ENOENT, exists("!s")},
		{"path_symlink", []string{"anything", "no/s"}, errno.ENOENT, nil},
		{"path_symlink", []string{"/f", "s"}, errno.EPERM, exists("!s")},
		{"path_symlink", []string{"", "s"}, errno.ENOENT, exists("!s")},
		{"path_symlink", []string{"f\x00", "s"}, errno.EILSEQ, exists("!s")},
		{"path_symlink", []string{"f", "/s"}, errno.EPERM, exists("!s")},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+strings.Join(tt.args, ","), func(t *testing.T) {
			h := newHarness(t, wasi.Config{})
			mustWrite(t, h.fs, "f", "file")
			mustWrite(t, h.fs, "d/g", "g")
			mustMkdir(t, h.fs, "d/sub")
			mustMkdir(t, h.fs, "empty")
			p1, n1 := h.str(pathPtr, tt.args[0])
			var e errno.Errno
			if len(tt.args) == 1 {
				switch tt.name {
				case "path_readlink":
					binary.LittleEndian.PutUint32(h.mem[resPtr:], 77)
					e = h.errno(tt.name, 3, p1, n1, bufPtr, 64, resPtr)
					if h.u32(resPtr) != 77 {
						t.Error("readlink wrote bufused")
					}
				default:
					e = h.errno(tt.name, 3, p1, n1)
				}
			} else {
				p2, n2 := h.str(path2Ptr, tt.args[1])
				switch tt.name {
				case "path_rename":
					e = h.errno(tt.name, 3, p1, n1, 3, p2, n2)
				case "path_link":
					e = h.errno(tt.name, 3, 0, p1, n1, 3, p2, n2)
				case "path_symlink":
					e = h.errno(tt.name, p1, n1, 3, p2, n2)
				}
			}
			if e != tt.want {
				t.Fatalf("errno = %v, want %v", e, tt.want)
			}
			if tt.check != nil {
				if msg := tt.check(h); msg != "" {
					t.Error(msg)
				}
			}
		})
	}

	// The directory argument: unknown fds, stdio and files are refused.
	h := newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "f", "")
	file := uint64(h.open("f", 0, rightsRO, 0))
	p, n := h.str(pathPtr, "x")
	for _, tc := range []struct {
		fd   uint64
		want errno.Errno
	}{{99, errno.EBADF}, {0xffffffff, errno.EBADF}, {0, errno.ENOTDIR}, {file, errno.ENOTDIR}} {
		h.want(tc.want, "path_create_directory", tc.fd, p, n)
		h.want(tc.want, "path_remove_directory", tc.fd, p, n)
		h.want(tc.want, "path_unlink_file", tc.fd, p, n)
		h.want(tc.want, "path_filestat_get", tc.fd, 0, p, n, statPtr)
		h.want(tc.want, "path_filestat_set_times", tc.fd, 0, p, n, 0, 0, 0)
		h.want(tc.want, "path_readlink", tc.fd, p, n, bufPtr, 10, resPtr)
		h.want(tc.want, "path_symlink", p, n, tc.fd, p, n)
		h.want(tc.want, "path_rename", tc.fd, p, n, 3, p, n)
		h.want(tc.want, "path_rename", 3, p, n, tc.fd, p, n)
		h.want(tc.want, "path_link", tc.fd, 0, p, n, 3, p, n)
		h.want(tc.want, "path_link", 3, 0, p, n, tc.fd, p, n)
	}
}

func TestCloseAndReuse(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "f", "data")
	fd := uint64(h.open("f", 0, rightsRO, 0))
	if fd != 4 {
		t.Fatalf("first fd = %d, want 4", fd)
	}
	h.ok("fd_close", fd)
	h.want(errno.EBADF, "fd_close", fd)
	p, n := h.iovs(iovPtr, iov{bufPtr, 4})
	h.want(errno.EBADF, "fd_read", fd, p, n, resPtr)
	h.want(errno.EBADF, "fd_fdstat_get", fd, statPtr)
	h.want(errno.EBADF, "fd_sync", fd)
	h.want(errno.EBADF, "fd_close", 0xffffffff)
	if got := h.open("f", 0, rightsRO, 0); got != 4 {
		t.Errorf("reopened fd = %d, want 4 (lowest free)", got)
	}
	// Closing stdio and the preopen works, and frees their numbers.
	h.ok("fd_close", 0)
	h.ok("fd_close", 3)
	h.want(errno.EBADF, "fd_prestat_get", 3, resPtr)
	h.want(errno.EBADF, "fd_read", 0, p, n, resPtr)

	// An unlinked file lives while open and is freed on close.
	h = newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "f", "data")
	fd = uint64(h.open("f", 0, rightsRO, 0))
	p, n = h.str(pathPtr, "f")
	h.ok("path_unlink_file", 3, p, n)
	if got := h.read(uint32(fd), 10); got != "data" {
		t.Errorf("unlinked file reads %q", got)
	}
	if b, i := h.fs.Usage(); b != 4 || i != 2 {
		t.Errorf("usage while open = %d, %d", b, i)
	}
	h.ok("fd_close", fd)
	if b, i := h.fs.Usage(); b != 0 || i != 1 {
		t.Errorf("usage after close = %d, %d", b, i)
	}
}

func TestRenumber(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	mustWrite(t, h.fs, "a", "A")
	mustWrite(t, h.fs, "b", "BB")
	a := uint64(h.open("a", 0, rightsRO, 0))
	b := uint64(h.open("b", 0, rightsRO, 0))
	// Unlink b so its inode lives only through fd b.
	p, n := h.str(pathPtr, "b")
	h.ok("path_unlink_file", 3, p, n)
	h.ok("fd_renumber", a, b)
	if got := h.read(uint32(b), 10); got != "A" {
		t.Errorf("renumbered fd reads %q", got)
	}
	h.want(errno.EBADF, "fd_close", a)
	if bytes, inodes := h.fs.Usage(); bytes != 1 || inodes != 2 {
		t.Errorf("usage = %d, %d: the replaced fd's file was not released", bytes, inodes)
	}
	h.ok("fd_renumber", b, b)
	h.want(errno.EBADF, "fd_renumber", a, b)
	h.want(errno.EBADF, "fd_renumber", b, 9)
	h.want(errno.EBADF, "fd_renumber", 0xffffffff, b)
	// Stdout can be moved over stderr.
	var out, errOut bytes.Buffer
	h = newHarness(t, wasi.Config{Stdout: &out, Stderr: &errOut})
	h.ok("fd_renumber", 1, 2)
	h.write(2, "x")
	if out.String() != "x" || errOut.Len() != 0 {
		t.Errorf("after renumber 1->2: stdout %q stderr %q", out.String(), errOut.String())
	}
	h.want(errno.EBADF, "fd_write", 1, iovPtr, 1, resPtr)
	// The freed number is reused.
	mustWrite(t, h.fs, "a", "")
	if fd := h.open("a", 0, rightsRO, 0); fd != 1 {
		t.Errorf("next fd = %d, want 1", fd)
	}
}

func TestMaxFDs(t *testing.T) {
	h := newHarness(t, wasi.Config{MaxFDs: 6})
	mustWrite(t, h.fs, "f", "keep")
	h.open("f", 0, rightsRO, 0)
	fd := h.open("f", 0, rightsRO, 0)
	tests := []struct {
		path   string
		oflags uint64
	}{
		{"f", 0},
		{"f", oflagTrunc},
		{"f", oflagCreat | oflagTrunc},
		{"new", oflagCreat},
		{"new", oflagCreat | oflagExcl},
		{".", oflagDirectory},
	}
	for _, tt := range tests {
		e, got := h.openErr(tt.path, tt.oflags, rightsRW, 0)
		if e != errno.EMFILE {
			t.Errorf("open(%q, %d) at the limit = %v (fd %d), want EMFILE", tt.path, tt.oflags, e, got)
		}
	}
	// A refused open has no side effect: nothing created, nothing truncated.
	if h.exists("new") {
		t.Error("EMFILE path_open created a file")
	}
	if got := h.fileContents("f"); got != "keep" {
		t.Errorf("EMFILE path_open truncated the file to %q", got)
	}
	h.ok("fd_close", uint64(fd))
	if got := h.open("f", 0, rightsRO, 0); got != fd {
		t.Errorf("after close got fd %d, want %d", got, fd)
	}
	// The default cap is 1024 descriptors.
	h = newHarness(t, wasi.Config{})
	var e errno.Errno
	opened := 4
	for ; opened < 2000; opened++ {
		if e, _ = h.openErr(".", oflagDirectory, rightsRO, 0); e != 0 {
			break
		}
	}
	if e != errno.EMFILE || opened != 1024 {
		t.Errorf("default cap: %v after %d fds, want EMFILE after 1024", e, opened)
	}
}

// putSub writes subscription i at subPtr.
func (h *harness) putSub(i int, userdata uint64, typ byte, a uint32, timeout uint64, flags uint16) {
	b := h.mem[subPtr+i*subSize : subPtr+(i+1)*subSize]
	clear(b)
	binary.LittleEndian.PutUint64(b, userdata)
	b[8] = typ
	binary.LittleEndian.PutUint32(b[16:], a) // clock id or fd
	binary.LittleEndian.PutUint64(b[24:], timeout)
	binary.LittleEndian.PutUint16(b[40:], flags)
}

type event struct {
	userdata uint64
	err      errno.Errno
	typ      byte
	nbytes   uint64
}

func (h *harness) events(n uint32) []event {
	var evs []event
	for i := range n {
		b := h.mem[evPtr+i*eventSize:]
		evs = append(evs, event{binary.LittleEndian.Uint64(b), errno.Errno(binary.LittleEndian.Uint16(b[8:])), b[10], binary.LittleEndian.Uint64(b[16:])})
	}
	return evs
}

func TestPollOneoff(t *testing.T) {
	const ms = uint64(time.Millisecond)
	type sub struct {
		userdata uint64
		typ      byte
		a        uint32
		timeout  uint64
		flags    uint16
	}
	tests := []struct {
		name  string
		subs  []sub
		slept time.Duration // by the fake clock
		want  []event
	}{
		{"relative clock", []sub{{7, eventClock, 1, 10 * ms, 0}}, 10 * time.Millisecond,
			[]event{{7, 0, eventClock, 0}}},
		{"realtime relative", []sub{{7, eventClock, 0, 3 * ms, 0}}, 3 * time.Millisecond,
			[]event{{7, 0, eventClock, 0}}},
		{"zero timeout", []sub{{7, eventClock, 1, 0, 0}}, 0, []event{{7, 0, eventClock, 0}}},
		{"earliest of two", []sub{{1, eventClock, 1, 10 * ms, 0}, {2, eventClock, 1, 5 * ms, 0}}, 5 * time.Millisecond,
			[]event{{2, 0, eventClock, 0}}},
		{"equal timers both fire", []sub{{1, eventClock, 1, 5 * ms, 0}, {2, eventClock, 1, 5 * ms, 0}}, 5 * time.Millisecond,
			[]event{{1, 0, eventClock, 0}, {2, 0, eventClock, 0}}},
		{"fd read ready at once", []sub{{1, eventClock, 1, 1000 * ms, 0}, {2, eventFdRead, 0, 0, 0}}, 0,
			[]event{{2, 0, eventFdRead, 1}}},
		{"fd write ready at once", []sub{{3, 2, 1, 0, 0}}, 0, []event{{3, 0, 2, 1}}},
		{"bad fd", []sub{{4, eventFdRead, 99, 0, 0}}, 0, []event{{4, errno.EBADF, eventFdRead, 0}}},
		{"bad clock id", []sub{{5, eventClock, 9, 10 * ms, 0}}, 0, []event{{5, errno.EINVAL, eventClock, 0}}},
		{"bad abstime clock id", []sub{{5, eventClock, 9, 10 * ms, 1}}, 0, []event{{5, errno.EINVAL, eventClock, 0}}},
		{"bad event type", []sub{{6, 3, 0, 0, 0}}, 0, []event{{6, errno.EINVAL, 3, 0}}},
		// Two readings of the fake clock (1 µs each) to resolve the deadline.
		{"past abstime", []sub{{8, eventClock, 1, 0, 1}}, 2 * time.Microsecond, []event{{8, 0, eventClock, 0}}},
		{"huge timeout", []sub{{9, eventClock, 1, math.MaxUint64, 0}}, 1 << 62, []event{{9, 0, eventClock, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, wasi.Config{})
			for i, s := range tt.subs {
				h.putSub(i, s.userdata, s.typ, s.a, s.timeout, s.flags)
			}
			for i := range eventSize * len(tt.subs) {
				h.mem[evPtr+i] = 0xff
			}
			before := h.clock.Monotonic()
			start := time.Now()
			h.ok("poll_oneoff", subPtr, evPtr, uint64(len(tt.subs)), resPtr)
			if d := time.Since(start); d > time.Second {
				t.Errorf("fake clock poll took %v of real time", d)
			}
			if got := time.Duration(h.clock.Monotonic() - before - 1000); got != tt.slept {
				t.Errorf("fake clock advanced %v, want %v", got, tt.slept)
			}
			n := h.u32(resPtr)
			if got := h.events(n); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("events = %v, want %v", got, tt.want)
			}
			// Event padding is zeroed.
			for i := range n {
				ev := h.mem[evPtr+i*eventSize:]
				if ev[11] != 0 || !bytes.Equal(ev[12:16], make([]byte, 4)) || !bytes.Equal(ev[24:32], make([]byte, 8)) {
					t.Errorf("event %d padding: % x", i, ev[:32])
				}
			}
		})
	}

	// An absolute deadline on the realtime clock sleeps until it.
	h := newHarness(t, wasi.Config{})
	deadline := uint64(h.clock.Realtime()) + 5*ms
	h.putSub(0, 1, eventClock, 0, deadline, 1)
	h.ok("poll_oneoff", subPtr, evPtr, 1, resPtr)
	if now := uint64(h.clock.Realtime()); now < deadline || now > deadline+ms {
		t.Errorf("woke at %d, deadline %d", now, deadline)
	}
	if h.u32(resPtr) != 1 {
		t.Errorf("nevents = %d", h.u32(resPtr))
	}

	h.want(errno.EINVAL, "poll_oneoff", subPtr, evPtr, 0, resPtr)
	h.want(errno.EFAULT, "poll_oneoff", memSize-47, evPtr, 1, resPtr)
	h.want(errno.EFAULT, "poll_oneoff", subPtr, memSize-31, 1, resPtr)
	h.want(errno.EFAULT, "poll_oneoff", subPtr, evPtr, 1, memSize-3)
	h.want(errno.EFAULT, "poll_oneoff", subPtr, evPtr, 0xffffffff, resPtr)
	h.want(errno.EFAULT, "poll_oneoff", subPtr, evPtr, 0x05555556, resPtr) // n*48 wraps uint32
}

func TestPollOneoffCancel(t *testing.T) {
	// The real clock: a 10 s sleep cut short by the run's context.
	h := newHarness(t, wasi.Config{Clock: wasi.NewRealClock()})
	ctx, cancel := context.WithCancel(context.Background())
	h.ctx = ctx
	h.putSub(0, 1, eventClock, 1, uint64(10*time.Second), 0)
	binary.LittleEndian.PutUint32(h.mem[resPtr:], 77)
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err := h.call("poll_oneoff", subPtr, evPtr, 1, resPtr)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("trap = %v, want context.Canceled", err)
	}
	if h.u32(resPtr) != 77 {
		t.Error("cancelled poll wrote nevents")
	}
	// A short real sleep completes.
	h.ctx = context.Background()
	h.putSub(0, 1, eventClock, 1, uint64(time.Millisecond), 0)
	start = time.Now()
	h.ok("poll_oneoff", subPtr, evPtr, 1, resPtr)
	if d := time.Since(start); d < time.Millisecond {
		t.Errorf("1ms real sleep took %v", d)
	}

	// The fake clock also honours an ended context.
	h = newHarness(t, wasi.Config{})
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	h.ctx = ctx
	h.putSub(0, 1, eventClock, 1, uint64(time.Millisecond), 0)
	if _, err := h.call("poll_oneoff", subPtr, evPtr, 1, resPtr); !errors.Is(err, context.Canceled) {
		t.Errorf("fake clock, cancelled ctx: trap = %v", err)
	}
}

func TestProcAndSock(t *testing.T) {
	h := newHarness(t, wasi.Config{})
	for _, code := range []uint64{0, 3, 255, 0xffffffff} {
		_, err := h.call("proc_exit", code)
		var exit *wasi.ExitError
		if !errors.As(err, &exit) || uint64(exit.Code) != code {
			t.Errorf("proc_exit(%d) = %v, want ExitError{%d}", code, err, code)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprint(code)) {
			t.Errorf("ExitError message %q lacks the code", err.Error())
		}
	}
	h.want(errno.ENOTSUP, "proc_raise", 9)
	h.ok("sched_yield")
	h.want(errno.ENOTSUP, "sock_accept", 3, 0, resPtr)
	h.want(errno.ENOTSUP, "sock_recv", 3, iovPtr, 1, 0, resPtr, res2Ptr)
	h.want(errno.ENOTSUP, "sock_send", 3, iovPtr, 1, 0, resPtr)
	h.want(errno.ENOTSOCK, "sock_shutdown", 3, 3)
	h.want(errno.ENOTSOCK, "sock_shutdown", 1, 3)
	h.want(errno.EBADF, "sock_shutdown", 9, 3)
}

// span is a range of guest memory [off, off+n).
type span struct{ off, n uint64 }

// specWrites lists the guest memory a successful call may write, per the
// preview1 spec; a failed call may write nothing at all.
func specWrites(cfg *wasi.Config, name string, p []uint64, before []byte) []span {
	u32 := func(i int) uint64 { return uint64(uint32(p[i])) }
	listSize := func(list []string) uint64 {
		n := uint64(0)
		for _, a := range list {
			n += uint64(len(a)) + 1
		}
		return n
	}
	iovecs := func(ptr, count uint64) []span {
		var out []span
		if count > 1024 || ptr+8*count > uint64(len(before)) {
			return nil
		}
		for i := range count {
			b := before[ptr+8*i:]
			out = append(out, span{uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[4:]))})
		}
		return out
	}
	switch name {
	case "args_get":
		return []span{{u32(0), 4 * uint64(len(cfg.Args))}, {u32(1), listSize(cfg.Args)}}
	case "environ_get":
		return []span{{u32(0), 4 * uint64(len(cfg.Env))}, {u32(1), listSize(cfg.Env)}}
	case "args_sizes_get", "environ_sizes_get":
		return []span{{u32(0), 4}, {u32(1), 4}}
	case "clock_res_get", "fd_tell":
		return []span{{u32(1), 8}}
	case "clock_time_get":
		return []span{{u32(2), 8}}
	case "fd_fdstat_get":
		return []span{{u32(1), 24}}
	case "fd_filestat_get":
		return []span{{u32(1), 64}}
	case "path_filestat_get":
		return []span{{u32(4), 64}}
	case "fd_prestat_get":
		return []span{{u32(1), 8}}
	case "fd_prestat_dir_name":
		return []span{{u32(1), u32(2)}}
	case "fd_read":
		return append(iovecs(u32(1), u32(2)), span{u32(3), 4})
	case "fd_pread":
		return append(iovecs(u32(1), u32(2)), span{u32(4), 4})
	case "fd_write":
		return []span{{u32(3), 4}}
	case "fd_pwrite":
		return []span{{u32(4), 4}}
	case "fd_readdir":
		return []span{{u32(1), u32(2)}, {u32(4), 4}}
	case "fd_seek":
		return []span{{u32(3), 8}}
	case "path_open":
		return []span{{u32(8), 4}}
	case "path_readlink":
		return []span{{u32(3), u32(4)}, {u32(5), 4}}
	case "poll_oneoff":
		return []span{{u32(1), 32 * u32(2)}, {u32(3), 4}}
	case "random_get":
		return []span{{u32(0), u32(1)}}
	case "sock_accept":
		return []span{{u32(2), 4}}
	case "sock_recv":
		return append(iovecs(u32(1), u32(2)), span{u32(4), 4}, span{u32(5), 2})
	case "sock_send":
		return []span{{u32(4), 4}}
	}
	return nil
}

// checkWrites reports the first byte a call changed outside what it may
// write: nothing if it failed or trapped, specWrites if it succeeded.
func checkWrites(cfg *wasi.Config, name string, p []uint64, failed bool, before, after []byte) error {
	if bytes.Equal(before, after) {
		return nil
	}
	var allowed []span
	if !failed {
		allowed = specWrites(cfg, name, p, before)
	}
	for i := range before {
		if before[i] == after[i] {
			continue
		}
		ok := false
		for _, s := range allowed {
			if uint64(i) >= s.off && uint64(i)-s.off < s.n {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("%s%v (failed=%v) changed byte %#x outside %v", name, p, failed, i, allowed)
		}
	}
	return nil
}

// hostileFixture is a State with a file at fd 4, a directory at fd 5 and
// a second file at fd 6, and memory holding valid-looking arguments for
// the baseline calls over a pattern.
func hostileFixture(t testing.TB, template []byte) *harness {
	h := newHarness(t, wasi.Config{
		Args:   []string{"python", "-c", "pass"},
		Env:    []string{"A=1"},
		Random: rand.NewChaCha8([32]byte{}),
		FS:     newFS(memfs.Quota{MaxBytes: 1 << 16, MaxInodes: 64}),
	})
	mustWrite(t, h.fs, "f", "0123456789abcdef")
	mustWrite(t, h.fs, "h", "h")
	mustMkdir(t, h.fs, "d")
	h.open("f", 0, rightsRW, 0)
	h.open("d", oflagDirectory, rightsRO, 0)
	h.open("h", 0, rightsRW, 0)
	copy(h.mem, template)
	return h
}

func hostileTemplate() []byte {
	mem := make([]byte, memSize)
	for i := range mem {
		mem[i] = byte(i*7 + 3)
	}
	put := func(off int, b []byte) { copy(mem[off:], b) }
	put(0x100, []byte("f"))
	put(0x110, []byte("d"))
	put(0x120, []byte("g"))
	le := binary.LittleEndian
	le.PutUint32(mem[0x200:], 0x1000)
	le.PutUint32(mem[0x204:], 16)
	le.PutUint32(mem[0x208:], 0x1100)
	le.PutUint32(mem[0x20c:], 16)
	// Two subscriptions: a relative 1 ms monotonic clock, and fd_read on 0.
	clear(mem[subPtr : subPtr+2*subSize])
	le.PutUint64(mem[subPtr:], 1)
	le.PutUint32(mem[subPtr+16:], 1)
	le.PutUint64(mem[subPtr+24:], uint64(time.Millisecond))
	le.PutUint64(mem[subPtr+subSize:], 2)
	mem[subPtr+subSize+8] = eventFdRead
	return mem
}

// baselines are valid calls of every function against hostileFixture,
// and their errnos.
var baselines = map[string]struct {
	params []uint64
	want   errno.Errno
}{
	"args_get":                {[]uint64{0x3000, 0x3100}, 0},
	"args_sizes_get":          {[]uint64{0x10, 0x14}, 0},
	"environ_get":             {[]uint64{0x3000, 0x3100}, 0},
	"environ_sizes_get":       {[]uint64{0x10, 0x14}, 0},
	"clock_res_get":           {[]uint64{0, 0x10}, 0},
	"clock_time_get":          {[]uint64{0, 1, 0x10}, 0},
	"fd_advise":               {[]uint64{4, 0, 10, 0}, 0},
	"fd_allocate":             {[]uint64{4, 0, 32}, 0},
	"fd_close":                {[]uint64{4}, 0},
	"fd_datasync":             {[]uint64{4}, 0},
	"fd_fdstat_get":           {[]uint64{4, 0x40}, 0},
	"fd_fdstat_set_flags":     {[]uint64{4, 1}, 0},
	"fd_fdstat_set_rights":    {[]uint64{4, 0, 0}, 0},
	"fd_filestat_get":         {[]uint64{4, 0x40}, 0},
	"fd_filestat_set_size":    {[]uint64{4, 10}, 0},
	"fd_filestat_set_times":   {[]uint64{4, 1, 2, fstAtim | fstMtim}, 0},
	"fd_pread":                {[]uint64{4, 0x200, 2, 0, 0x10}, 0},
	"fd_prestat_get":          {[]uint64{3, 0x10}, 0},
	"fd_prestat_dir_name":     {[]uint64{3, 0x10, 1}, 0},
	"fd_pwrite":               {[]uint64{4, 0x200, 2, 0, 0x10}, 0},
	"fd_read":                 {[]uint64{4, 0x200, 2, 0x10}, 0},
	"fd_readdir":              {[]uint64{3, 0x2000, 256, 0, 0x10}, 0},
	"fd_renumber":             {[]uint64{4, 6}, 0},
	"fd_seek":                 {[]uint64{4, 3, whenceSet, 0x10}, 0},
	"fd_sync":                 {[]uint64{4}, 0},
	"fd_tell":                 {[]uint64{4, 0x10}, 0},
	"fd_write":                {[]uint64{1, 0x200, 2, 0x10}, 0},
	"path_create_directory":   {[]uint64{3, 0x120, 1}, 0},
	"path_filestat_get":       {[]uint64{3, 0, 0x100, 1, 0x40}, 0},
	"path_filestat_set_times": {[]uint64{3, 0, 0x100, 1, 1, 2, fstAtim | fstMtim}, 0},
	"path_link":               {[]uint64{3, 0, 0x100, 1, 3, 0x120, 1}, 0},
	"path_open":               {[]uint64{3, 0, 0x100, 1, 0, rightsRW, 0, 0, 0x10}, 0},
	"path_readlink":           {[]uint64{3, 0x100, 1, 0x3000, 64, 0x10}, errno.EINVAL},
	"path_remove_directory":   {[]uint64{3, 0x110, 1}, 0},
	"path_rename":             {[]uint64{3, 0x100, 1, 3, 0x120, 1}, 0},
	"path_symlink":            {[]uint64{0x100, 1, 3, 0x120, 1}, 0},
	"path_unlink_file":        {[]uint64{3, 0x100, 1}, 0},
	"poll_oneoff":             {[]uint64{subPtr, evPtr, 2, 0x10}, 0},
	"proc_exit":               {[]uint64{0}, 0},
	"proc_raise":              {[]uint64{0}, errno.ENOTSUP},
	"sched_yield":             {nil, 0},
	"random_get":              {[]uint64{0x3000, 32}, 0},
	"sock_accept":             {[]uint64{3, 0, 0x10}, errno.ENOTSUP},
	"sock_recv":               {[]uint64{3, 0x200, 2, 0, 0x10, 0x14}, errno.ENOTSUP},
	"sock_send":               {[]uint64{3, 0x200, 2, 0, 0x10}, errno.ENOTSUP},
	"sock_shutdown":           {[]uint64{3, 0}, errno.ENOTSOCK},
}

var (
	hostileI32 = []uint64{
		0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 24, 0xff, 0x100, 0xffff,
		memSize - 64, memSize - 48, memSize - 32, memSize - 24, memSize - 8, memSize - 4, memSize - 1,
		memSize, memSize + 1, 0x7fffffff, 0x80000000, 0xfffffff0, 0xfffffffc, 0xffffffff,
	}
	hostileI64 = []uint64{
		0, 1, 1 << 31, 1 << 32, 1 << 40, 1<<40 + 1, 1 << 62, math.MaxInt64, 1 << 63,
		math.MaxUint64, math.MaxUint64 - 1,
	}
)

// hostileCall runs one call on a fresh fixture and checks it: no panic, a
// valid errno, no trap but proc_exit's, and no memory written beyond what
// the spec allows.
func hostileCall(t *testing.T, template []byte, f wasi.HostFunc, params []uint64) errno.Errno {
	t.Helper()
	h := hostileFixture(t, template)
	before := append([]byte(nil), h.mem...)
	var raw uint64
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s%#x panicked: %v", f.Name, params, r)
			}
		}()
		raw, err = invoke(h.ctx, h.s, h.mem, f, params)
	}()
	if raw > maxErrno {
		t.Errorf("%s%#x returned invalid errno %d", f.Name, params, raw)
	}
	var exit *wasi.ExitError
	if err != nil && !(f.Name == "proc_exit" && errors.As(err, &exit)) {
		t.Errorf("%s%#x trapped: %v", f.Name, params, err)
	}
	if werr := checkWrites(&h.cfg, f.Name, params, raw != 0 || err != nil, before, h.mem); werr != nil {
		t.Error(werr)
	}
	if b, i := h.fs.Usage(); b > 1<<16 || i > 64 {
		t.Errorf("%s%#x: usage %d bytes %d inodes past quota", f.Name, params, b, i)
	}
	return errno.Errno(raw)
}

// TestHostileArguments calls every function with each parameter in turn
// replaced by hostile values (pointers at and past the end of memory,
// lengths that wrap, unknown fds, negative offsets), then with random
// mixes of them.
func TestHostileArguments(t *testing.T) {
	template := hostileTemplate()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range wasi.Functions() {
		t.Run(f.Name, func(t *testing.T) {
			base, ok := baselines[f.Name]
			if !ok {
				t.Fatalf("no baseline for %s", f.Name)
			}
			if e := hostileCall(t, template, f, base.params); e != base.want {
				t.Fatalf("baseline %s%v = %v, want %v", f.Name, base.params, e, base.want)
			}
			for i, typ := range f.Params {
				vals := hostileI32
				if typ == wasi.I64 {
					vals = hostileI64
				}
				for _, v := range vals {
					p := append([]uint64(nil), base.params...)
					p[i] = v
					hostileCall(t, template, f, p)
				}
			}
			for range 300 {
				p := append([]uint64(nil), base.params...)
				for i, typ := range f.Params {
					if rng.IntN(2) == 0 {
						continue
					}
					if typ == wasi.I64 {
						p[i] = hostileI64[rng.IntN(len(hostileI64))]
					} else {
						p[i] = hostileI32[rng.IntN(len(hostileI32))]
					}
				}
				hostileCall(t, template, f, p)
			}
		})
	}
}

// TestHostileCases names the hostile calls the spec's shapes invite, with
// their exact errnos.
func TestHostileCases(t *testing.T) {
	template := hostileTemplate()
	put := func(mem []byte, off uint32, vals ...uint32) {
		for i, v := range vals {
			binary.LittleEndian.PutUint32(mem[off+uint32(4*i):], v)
		}
	}
	tests := []struct {
		name   string
		fn     string
		params []uint64
		setup  func(mem []byte)
		want   errno.Errno
	}{
		{"iovec count 0xffffffff", "fd_write", []uint64{1, iovPtr, 0xffffffff, resPtr}, nil, errno.EINVAL},
		{"iovec count past IOV_MAX", "fd_read", []uint64{4, iovPtr, 1025, resPtr}, nil, errno.EINVAL},
		{"iovec array past memory", "fd_read", []uint64{4, memSize - 8, 2, resPtr}, nil, errno.EFAULT},
		{"iovec wraps 32 bits", "fd_write", []uint64{1, iovPtr, 1, resPtr},
			func(m []byte) { put(m, iovPtr, 0xfffffff0, 0x20) }, errno.EFAULT},
		{"iovec lengths sum past 4 GiB", "fd_write", []uint64{1, iovPtr, 2, resPtr},
			func(m []byte) { put(m, iovPtr, 0, 0x80000000, 0, 0x80000001) }, errno.EFAULT},
		{"second iovec bad, first valid", "fd_read", []uint64{4, iovPtr, 2, resPtr},
			func(m []byte) { put(m, iovPtr, bufPtr, 4, memSize-2, 4) }, errno.EFAULT},
		{"pread second iovec bad", "fd_pread", []uint64{4, iovPtr, 2, 0, resPtr},
			func(m []byte) { put(m, iovPtr, bufPtr, 4, memSize, 1) }, errno.EFAULT},
		{"pwrite second iovec bad", "fd_pwrite", []uint64{4, iovPtr, 2, 0, resPtr},
			func(m []byte) { put(m, iovPtr, bufPtr, 4, 0xffffffff, 2) }, errno.EFAULT},
		{"read result past memory", "fd_read", []uint64{4, iovPtr, 2, memSize - 3}, nil, errno.EFAULT},
		{"write result past memory", "fd_write", []uint64{1, iovPtr, 2, memSize - 3}, nil, errno.EFAULT},
		{"pread negative offset", "fd_pread", []uint64{4, iovPtr, 2, math.MaxUint64, resPtr}, nil, errno.EINVAL},
		{"pwrite negative offset", "fd_pwrite", []uint64{4, iovPtr, 2, 1 << 63, resPtr}, nil, errno.EINVAL},
		{"seek negative", "fd_seek", []uint64{4, math.MaxUint64, whenceSet, resPtr}, nil, errno.EINVAL},
		{"path len 0xffffffff", "path_open", []uint64{3, 0, pathPtr, 0xffffffff, 0, 0, 0, 0, resPtr}, nil, errno.ENAMETOOLONG},
		{"path wraps", "path_open", []uint64{3, 0, 0xfffffff0, 0x20, 0, 0, 0, 0, resPtr}, nil, errno.EFAULT},
		{"path at end of memory", "path_filestat_get", []uint64{3, 0, memSize, 1, statPtr}, nil, errno.EFAULT},
		{"empty path at end of memory", "path_filestat_get", []uint64{3, 0, memSize, 0, statPtr}, nil, errno.ENOENT},
		{"link second path bad", "path_link", []uint64{3, 0, 0x100, 1, 3, 0xfffffff0, 0x20}, nil, errno.EFAULT},
		{"rename second path too long", "path_rename", []uint64{3, 0x100, 1, 3, 0x120, 0xffffffff}, nil, errno.ENAMETOOLONG},
		{"random wraps", "random_get", []uint64{0xfffffff0, 0x20}, nil, errno.EFAULT},
		{"readdir wraps", "fd_readdir", []uint64{3, 0xfffffff0, 0x20, 0, resPtr}, nil, errno.EFAULT},
		{"poll count wraps", "poll_oneoff", []uint64{subPtr, evPtr, 0xffffffff, resPtr}, nil, errno.EFAULT},
		{"poll events past memory", "poll_oneoff", []uint64{subPtr, memSize - 63, 2, resPtr}, nil, errno.EFAULT},
		{"args pointers past memory", "args_get", []uint64{memSize - 11, 0x3000}, nil, errno.EFAULT},
		{"args buffer past memory", "args_get", []uint64{0x3000, memSize - 14}, nil, errno.EFAULT},
		{"environ buffer wraps", "environ_get", []uint64{0x3000, 0xfffffffe}, nil, errno.EFAULT},
		// The count is writable but the size is not: nothing may be written.
		{"args sizes half valid", "args_sizes_get", []uint64{resPtr, memSize - 2}, nil, errno.EFAULT},
		{"args sizes half valid reversed", "args_sizes_get", []uint64{memSize - 2, resPtr}, nil, errno.EFAULT},
		{"environ sizes half valid", "environ_sizes_get", []uint64{resPtr, 0xffffffff}, nil, errno.EFAULT},
		{"fdstat past memory", "fd_fdstat_get", []uint64{0, memSize - 23}, nil, errno.EFAULT},
		{"filestat past memory", "fd_filestat_get", []uint64{4, memSize - 63}, nil, errno.EFAULT},
		{"prestat dir name wraps", "fd_prestat_dir_name", []uint64{3, 0xffffffff, 1}, nil, errno.EFAULT},
		{"clock result wraps", "clock_time_get", []uint64{0, 0, 0xfffffffc}, nil, errno.EFAULT},
		{"unknown fd 0xffffffff", "fd_read", []uint64{0xffffffff, iovPtr, 2, resPtr}, nil, errno.EBADF},
		{"unknown fd 2^31", "fd_filestat_get", []uint64{1 << 31, statPtr}, nil, errno.EBADF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := append([]byte(nil), template...)
			if tt.setup != nil {
				tt.setup(tmpl)
			}
			if got := hostileCall(t, tmpl, funcs[tt.fn], tt.params); got != tt.want {
				t.Errorf("%s = %v, want %v", tt.fn, got, tt.want)
			}
		})
	}
}

// TestHostileReadHasNoEffect: a read refused for a bad result pointer or
// iovec moves no data and no file offset.
func TestHostileReadHasNoEffect(t *testing.T) {
	h := newHarness(t, wasi.Config{Stdin: strings.NewReader("stdin")})
	mustWrite(t, h.fs, "f", "0123456789")
	fd := uint64(h.open("f", 0, rightsRW, 0))
	p, n := h.iovs(iovPtr, iov{bufPtr, 4})
	h.want(errno.EFAULT, "fd_read", fd, p, n, memSize-1)
	h.want(errno.EFAULT, "fd_read", 0, p, n, memSize-1)
	p2, n2 := h.iovs(iovPtr+0x40, iov{bufPtr, 4}, iov{memSize, 1})
	h.want(errno.EFAULT, "fd_write", fd, p2, n2, resPtr)
	h.want(errno.EFAULT, "fd_read", 0, p2, n2, resPtr)
	if got := h.read(uint32(fd), 4); got != "0123" {
		t.Errorf("file read after refused calls = %q", got)
	}
	if got := h.read(0, 5); got != "stdin" {
		t.Errorf("stdin after refused calls = %q", got)
	}
	if got := h.fileContents("f"); got != "0123456789" {
		t.Errorf("refused write changed the file: %q", got)
	}
}

// TestIovecTotalOverflow: overlapping iovecs can describe more bytes than
// a size (u32) or wasm32's ssize_t can count. Such a call is refused with
// EINVAL before anything moves (as readv(2) refuses a sum overflowing
// ssize_t) instead of reporting a wrapped count; up to MaxInt32 is fine.
func TestIovecTotalOverflow(t *testing.T) {
	const big = 4<<20 + 64 // 1024 vectors of this sum past 4 GiB
	const rest = math.MaxInt32 - 511*big
	var counted int64
	h := newHarness(t, wasi.Config{Stdout: countWriter{&counted}, Stdin: zeroReader{&counted}})
	h.mem = make([]byte, big)
	const arr = big - 0x3000 // the iovec array; the result goes at big-4
	for _, tc := range []struct {
		name  string
		fn    string
		fd    uint64
		count int
		last  uint32 // length of the last vector; the others are big
		want  errno.Errno
	}{
		{"write sum past 4 GiB", "fd_write", 1, 1024, big, errno.EINVAL},
		{"write sum past 2 GiB", "fd_write", 1, 520, big, errno.EINVAL},
		{"write sum MaxInt32+1", "fd_write", 1, 512, rest + 1, errno.EINVAL},
		{"write sum MaxInt32", "fd_write", 1, 512, rest, errno.ESUCCESS},
		{"read sum past 4 GiB", "fd_read", 0, 1024, big, errno.EINVAL},
		{"read sum MaxInt32+1", "fd_read", 0, 512, rest + 1, errno.EINVAL},
	} {
		vs := make([]iov, tc.count)
		for i := range vs {
			vs[i] = iov{0, big}
		}
		vs[len(vs)-1].n = tc.last
		counted = 0
		p, n := h.iovs(arr, vs...)
		binary.LittleEndian.PutUint32(h.mem[big-4:], 77)
		if e := h.errno(tc.fn, tc.fd, p, n, big-4); e != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, e, tc.want)
		}
		got := h.u32(big - 4)
		switch {
		case tc.want != errno.ESUCCESS && (got != 77 || counted != 0):
			t.Errorf("%s: refused call moved %d bytes, stored %d", tc.name, counted, got)
		case tc.want == errno.ESUCCESS && (got != math.MaxInt32 || counted != math.MaxInt32):
			t.Errorf("%s: reported %d bytes, moved %d", tc.name, got, counted)
		}
	}
}

type countWriter struct{ n *int64 }

func (w countWriter) Write(p []byte) (int, error) { *w.n += int64(len(p)); return len(p), nil }

// zeroReader is an endless stdin that counts what it hands out.
type zeroReader struct{ n *int64 }

func (r zeroReader) Read(p []byte) (int, error) { clear(p); *r.n += int64(len(p)); return len(p), nil }

// A deterministic run's sleeps are the guest's to choose; however long
// they add up to, the clock stops at its largest time instead of wrapping
// into the past.
func TestFakeClockSaturates(t *testing.T) {
	c := wasi.NewFakeClock()
	for range 3 {
		c.Sleep(context.Background(), time.Duration(math.MaxInt64))
	}
	if m, r := c.Monotonic(), c.Realtime(); m <= 0 || r <= 0 || r != math.MaxInt64 {
		t.Fatalf("after long sleeps: monotonic %d, realtime %d", m, r)
	}
}

// A directory listing keeps the names and inodes it saw alive. A guest
// that fills a directory, lists it through a descriptor it keeps open and
// empties it, round after round, frees its quota each time; the listings
// must not keep the host memory it let go.
func TestDirectoryListingsDoNotPinRemovedFiles(t *testing.T) {
	const perRound, rounds = 2000, 40
	fs := newFS(memfs.Quota{MaxBytes: 1 << 20, MaxInodes: perRound + 8})
	h := newHarness(t, wasi.Config{FS: fs})
	p, n := h.str(pathPtr, "d")
	h.ok("path_create_directory", 3, p, n)
	name := func(i int) string { s := strconv.Itoa(i); return "d/" + strings.Repeat("n", 255-len(s)) + s }
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	for r := range rounds {
		for i := range perRound {
			h.ok("fd_close", uint64(h.open(name(r*perRound+i), oflagCreat, rightsWO, 0)))
		}
		dfd := h.open("d", oflagDirectory, rightsRO, 0)
		h.ok("fd_readdir", uint64(dfd), bufPtr, 512, 0, resPtr)
		for i := range perRound {
			p, n := h.str(pathPtr, name(r*perRound+i))
			h.ok("path_unlink_file", 3, p, n)
		}
	}
	runtime.KeepAlive(h)
	// 80000 removed entries with 255-byte names held ~35 MiB before.
	if grown := int64(heap()) - int64(base); grown > 16<<20 {
		t.Fatalf("%d rounds of list-and-remove left %d MiB held", rounds, grown>>20)
	}
}

// TestSymlinksThroughWASI: path_symlink, path_readlink and lookupflags as
// preview1 and Linux have them, links resolved only within what the
// descriptor reaches.
func TestSymlinksThroughWASI(t *testing.T) {
	h := newHarness(t, wasi.Config{HiddenDevices: map[string]wasi.Device{"/dev/airlock-x": &echoDevice{}}})
	mustWrite(t, h.fs, "f", "hello")
	mustWrite(t, h.fs, "d/x", "x")
	symlink := func(target, at string) errno.Errno {
		pt, nt := h.str(pathPtr, target)
		pa, na := h.str(path2Ptr, at)
		return h.errno("path_symlink", pt, nt, 3, pa, na)
	}
	for _, l := range [][2]string{{"f", "lf"}, {"d", "ld"}, {"../f", "d/up"}, {"loop", "loop"}, {"dev/airlock-x", "dev-link"}, {"nope", "dangling"}} {
		if e := symlink(l[0], l[1]); e != 0 {
			t.Fatalf("path_symlink(%q, %q) = %v", l[0], l[1], e)
		}
	}
	// lstat and stat.
	p, n := h.str(pathPtr, "lf")
	h.ok("path_filestat_get", 3, 0, p, n, statPtr)
	if h.u8(statPtr+16) != 7 || h.u64(statPtr+32) != 1 {
		t.Errorf("lstat: filetype %d size %d, want 7 and 1", h.u8(statPtr+16), h.u64(statPtr+32))
	}
	h.ok("path_filestat_get", 3, 1, p, n, statPtr)
	if h.u8(statPtr+16) != filetypeRegular || h.u64(statPtr+32) != 5 {
		t.Errorf("stat: filetype %d size %d", h.u8(statPtr+16), h.u64(statPtr+32))
	}
	// path_filestat_set_times without follow changes the link only.
	h.ok("path_filestat_set_times", 3, 0, p, n, 0, 7, fstMtim)
	h.ok("path_filestat_get", 3, 1, p, n, statPtr)
	if h.u64(statPtr+48) == 7 {
		t.Error("set_times on the link changed its target")
	}
	// Opening: O_NOFOLLOW is ELOOP, following works, O_DIRECTORY checks
	// the target.
	open := func(lookup uint64, path string, oflags uint64) errno.Errno {
		p, n := h.str(pathPtr, path)
		e := h.errno("path_open", 3, lookup, p, n, oflags, rightsRO, 0, 0, resPtr)
		if e == 0 {
			h.ok("fd_close", uint64(h.u32(resPtr)))
		}
		return e
	}
	for _, tt := range []struct {
		lookup uint64
		path   string
		oflags uint64
		want   errno.Errno
	}{
		{0, "lf", 0, errno.ELOOP},
		{1, "lf", 0, 0},
		{1, "lf", oflagDirectory, errno.ENOTDIR},
		{0, "ld", oflagDirectory, errno.ELOOP},
		{0, "ld/", oflagDirectory, 0}, // a trailing slash follows
		{1, "ld/x", 0, 0},
		{0, "ld/x", 0, 0}, // only the last component is NOFOLLOW's
		{1, "d/up", 0, 0},
		{1, "loop", 0, errno.ELOOP},
		{0, "dangling", 0, errno.ELOOP},
		{1, "dangling", 0, errno.ENOENT},
		{1, "dangling", oflagCreat | oflagExcl, errno.EEXIST},
		// Hidden devices answer their exact path only, never a link.
		{1, "dev-link", 0, errno.ENOENT},
		{1, "d/../dev/airlock-x", 0, errno.ENOENT},
		{1, "dev//airlock-x", 0, errno.ENOENT},
		{1, "dev/airlock-x", 0, 0},
	} {
		if e := open(tt.lookup, tt.path, tt.oflags); e != tt.want {
			t.Errorf("path_open(lookup %d, %q, oflags %d) = %v, want %v", tt.lookup, tt.path, tt.oflags, e, tt.want)
		}
	}
	if h.exists("nope") {
		t.Error("O_CREAT|O_EXCL created a dangling link's target")
	}
	// From a descriptor for d, the link out of it is refused.
	d := uint64(h.open("d", oflagDirectory, rightsRO, 0))
	pu, nu := h.str(pathPtr, "up")
	h.want(errno.EPERM, "path_open", d, 1, pu, nu, 0, rightsRO, 0, 0, resPtr)
	h.want(errno.EPERM, "path_filestat_get", d, 1, pu, nu, statPtr)
	h.ok("path_filestat_get", d, 0, pu, nu, statPtr) // the link itself is inside
	// Readlink: truncation to the buffer, no NUL, the rest untouched.
	for i := range 8 {
		h.mem[bufPtr+i] = 0xaa
	}
	h.ok("path_readlink", d, pu, nu, bufPtr, 2, resPtr)
	if h.u32(resPtr) != 2 || string(h.mem[bufPtr:bufPtr+2]) != ".." || h.mem[bufPtr+2] != 0xaa {
		t.Errorf("readlink into 2 bytes: %d %q", h.u32(resPtr), h.mem[bufPtr:bufPtr+4])
	}
	binary.LittleEndian.PutUint32(h.mem[resPtr:], 77)
	h.want(errno.EFAULT, "path_readlink", d, pu, nu, memSize-1, 2, resPtr)
	h.want(errno.EFAULT, "path_readlink", d, pu, nu, bufPtr, 8, memSize-3)
	pf, nf := h.str(path2Ptr, "f")
	h.want(errno.EINVAL, "path_readlink", 3, pf, nf, bufPtr, 8, resPtr)
	h.want(errno.ENOENT, "path_readlink", 3, pf, 0, bufPtr, 8, resPtr)
	if h.u32(resPtr) != 77 || h.mem[bufPtr+2] != 0xaa {
		t.Error("a failed readlink wrote")
	}
	// Listing shows the link's type.
	h.ok("fd_readdir", 3, bufPtr, 4096, 0, resPtr)
	if !bytes.Contains(h.mem[bufPtr:bufPtr+h.u32(resPtr)], append([]byte{7, 0, 0, 0}, "lf"...)) {
		t.Error("fd_readdir does not give lf the symbolic-link type")
	}
	// Rename and unlink act on the name, through links on the way.
	pa, na := h.str(pathPtr, "ld/x")
	pb, nb := h.str(path2Ptr, "ld/y")
	h.ok("path_rename", 3, pa, na, 3, pb, nb)
	if h.fileContents("d/y") != "x" {
		t.Error("rename through a link to a directory")
	}
	h.ok("path_unlink_file", 3, pb, nb)
	pl, nl := h.str(pathPtr, "lf")
	h.ok("path_unlink_file", 3, pl, nl)
	if h.exists("d/y") || h.exists("lf") || h.fileContents("f") != "hello" {
		t.Error("unlink removed the wrong thing")
	}
	// Without PATH_SYMLINK nothing is made.
	h.ok("fd_fdstat_set_rights", d, 0, 0)
	pn, nn := h.str(pathPtr, "new")
	h.want(errno.ENOTCAPABLE, "path_symlink", pn, nn, d, pn, nn)
	h.want(errno.ENOTCAPABLE, "path_readlink", d, pu, nu, bufPtr, 8, resPtr)
	if h.exists("d/new") {
		t.Error("symlink made without the right")
	}
}
