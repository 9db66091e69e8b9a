package wasi_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// echoDevice answers each write with the same bytes upper-cased; a write
// of "E" answers EAGAIN, "T" traps.
type echoDevice struct{ pending []byte }

var errDeviceTrap = errors.New("device trap")

func (d *echoDevice) Write(_ context.Context, p []byte) (int, error) {
	switch string(p) {
	case "E":
		return 0, errno.EAGAIN
	case "T":
		return 0, errDeviceTrap
	}
	for _, c := range p {
		if c >= 'a' && c <= 'z' {
			c -= 32
		}
		d.pending = append(d.pending, c)
	}
	return len(p), nil
}

func (d *echoDevice) Read(_ context.Context, p []byte) (int, error) {
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	return n, nil
}

// devCall calls one WASI function by name on a 64 KiB memory.
func devCall(t *testing.T, s *wasi.State, mem []byte, name string, params ...uint64) (errno.Errno, error) {
	t.Helper()
	for _, f := range wasi.Functions() {
		if f.Name == name {
			stack := make([]uint64, max(len(params), 1))
			copy(stack, params)
			err := f.Call(context.Background(), s, mem, stack)
			return errno.Errno(stack[0]), err
		}
	}
	t.Fatalf("no function %s", name)
	return 0, nil
}

func TestDevice(t *testing.T) {
	dev := &echoDevice{}
	s := wasi.NewState(wasi.Config{Devices: map[string]wasi.Device{"/dev/echo": dev, "relative": dev}})
	mem := make([]byte, 1<<16)
	must := func(want errno.Errno, name string, params ...uint64) {
		t.Helper()
		if got, err := devCall(t, s, mem, name, params...); got != want || err != nil {
			t.Fatalf("%s = %v, %v; want %v", name, got, err, want)
		}
	}
	// The path exists as a file; a relative device path is ignored.
	if _, err := s.FS().ReadFile("/dev/echo"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FS().ReadFile("/relative"); err == nil {
		t.Fatal("a relative device path was created")
	}
	path := "dev/echo"
	copy(mem[100:], path)
	must(errno.ESUCCESS, "path_open", 3, 0, 100, uint64(len(path)), 0, 1<<1|1<<6, 0, 0, 200)
	fd := uint64(binary.LittleEndian.Uint32(mem[200:]))

	// fd_write then fd_read through the device, with two iovecs each.
	copy(mem[1000:], "hello")
	binary.LittleEndian.PutUint32(mem[300:], 1000)
	binary.LittleEndian.PutUint32(mem[304:], 2)
	binary.LittleEndian.PutUint32(mem[308:], 1002)
	binary.LittleEndian.PutUint32(mem[312:], 3)
	must(errno.ESUCCESS, "fd_write", fd, 300, 2, 400)
	if n := binary.LittleEndian.Uint32(mem[400:]); n != 5 {
		t.Fatalf("wrote %d", n)
	}
	binary.LittleEndian.PutUint32(mem[300:], 2000)
	binary.LittleEndian.PutUint32(mem[304:], 3)
	binary.LittleEndian.PutUint32(mem[308:], 2003)
	binary.LittleEndian.PutUint32(mem[312:], 10)
	must(errno.ESUCCESS, "fd_read", fd, 300, 2, 400)
	if n := binary.LittleEndian.Uint32(mem[400:]); n != 5 || string(mem[2000:2005]) != "HELLO" {
		t.Fatalf("read %d %q", n, mem[2000:2005])
	}
	must(errno.ESUCCESS, "fd_read", fd, 300, 2, 400)
	if n := binary.LittleEndian.Uint32(mem[400:]); n != 0 {
		t.Fatalf("read %d at end", n)
	}

	// Character device; no seeking or positioned I/O.
	must(errno.ESUCCESS, "fd_fdstat_get", fd, 500)
	if mem[500] != 2 {
		t.Fatalf("filetype %d, want character device", mem[500])
	}
	must(errno.ESPIPE, "fd_seek", fd, 0, 0, 600)
	must(errno.ESPIPE, "fd_tell", fd, 600)
	must(errno.ESPIPE, "fd_pread", fd, 300, 1, 0, 400)
	must(errno.ESPIPE, "fd_pwrite", fd, 300, 1, 0, 400)
	must(errno.EBADF, "fd_filestat_set_size", fd, 10)

	// An errno from the device reaches the guest; another error traps.
	copy(mem[1000:], "ET")
	binary.LittleEndian.PutUint32(mem[300:], 1000)
	binary.LittleEndian.PutUint32(mem[304:], 1)
	must(errno.EAGAIN, "fd_write", fd, 300, 1, 400)
	binary.LittleEndian.PutUint32(mem[300:], 1001)
	if _, err := devCall(t, s, mem, "fd_write", fd, 300, 1, 400); !errors.Is(err, errDeviceTrap) {
		t.Fatalf("trap = %v", err)
	}
	must(errno.ESUCCESS, "fd_close", fd)
}

// patchDevice is a MemoryDevice: each write names an offset in the
// guest's memory, where it stores 0xff.
type patchDevice struct{ plain int }

func (d *patchDevice) WriteMemory(_ context.Context, mem, p []byte) (int, error) {
	mem[binary.LittleEndian.Uint32(p)] = 0xff
	return len(p), nil
}
func (d *patchDevice) Write(context.Context, []byte) (int, error) { d.plain++; return 0, errno.EINVAL }
func (d *patchDevice) Read(context.Context, []byte) (int, error)  { return 0, nil }

// A MemoryDevice's writes get the guest's memory, and go nowhere else.
func TestMemoryDevice(t *testing.T) {
	dev := &patchDevice{}
	s := wasi.NewState(wasi.Config{Devices: map[string]wasi.Device{"/dev/patch": dev}})
	mem := make([]byte, 1<<16)
	path := "dev/patch"
	copy(mem[100:], path)
	if got, err := devCall(t, s, mem, "path_open", 3, 0, 100, uint64(len(path)), 0, 1<<6, 0, 0, 200); got != errno.ESUCCESS || err != nil {
		t.Fatalf("path_open = %v, %v", got, err)
	}
	fd := uint64(binary.LittleEndian.Uint32(mem[200:]))
	binary.LittleEndian.PutUint32(mem[1000:], 5000) // the offset to patch
	binary.LittleEndian.PutUint32(mem[300:], 1000)
	binary.LittleEndian.PutUint32(mem[304:], 4)
	if got, err := devCall(t, s, mem, "fd_write", fd, 300, 1, 400); got != errno.ESUCCESS || err != nil {
		t.Fatalf("fd_write = %v, %v", got, err)
	}
	if mem[5000] != 0xff || binary.LittleEndian.Uint32(mem[400:]) != 4 || dev.plain != 0 {
		t.Fatalf("after the write: mem[5000]=%#x, nwritten %d, plain writes %d", mem[5000], binary.LittleEndian.Uint32(mem[400:]), dev.plain)
	}
}

// Null takes writes whole and discards them, reads at end of file, and
// takes seeks and positioned I/O at offset 0, as Linux's /dev/null.
func TestNullDevice(t *testing.T) {
	s := wasi.NewState(wasi.Config{Devices: map[string]wasi.Device{wasi.NullPath: wasi.Null}})
	mem := make([]byte, 1<<16)
	must := func(want errno.Errno, name string, params ...uint64) {
		t.Helper()
		if got, err := devCall(t, s, mem, name, params...); got != want || err != nil {
			t.Fatalf("%s = %v, %v; want %v", name, got, err, want)
		}
	}
	u32 := func(at int) uint32 { return binary.LittleEndian.Uint32(mem[at:]) }
	path := "dev/null"
	copy(mem[100:], path)
	must(errno.ESUCCESS, "path_open", 3, 0, 100, uint64(len(path)), 0, 1<<1|1<<2|1<<5|1<<6, 0, 0, 200)
	fd := uint64(u32(200))
	copy(mem[1000:], "discarded")
	binary.LittleEndian.PutUint32(mem[300:], 1000)
	binary.LittleEndian.PutUint32(mem[304:], 9)
	must(errno.ESUCCESS, "fd_write", fd, 300, 1, 400)
	if n := u32(400); n != 9 {
		t.Fatalf("wrote %d of 9", n)
	}
	must(errno.ESUCCESS, "fd_pwrite", fd, 300, 1, 1234, 400)
	if n := u32(400); n != 9 {
		t.Fatalf("pwrote %d of 9", n)
	}
	binary.LittleEndian.PutUint32(mem[400:], 77)
	must(errno.ESUCCESS, "fd_read", fd, 300, 1, 400)
	must(errno.ESUCCESS, "fd_pread", fd, 300, 1, 5, 404)
	if u32(400) != 0 || u32(404) != 0 {
		t.Fatalf("read %d and pread %d bytes, want end of file", u32(400), u32(404))
	}
	binary.LittleEndian.PutUint64(mem[600:], 99)
	must(errno.ESUCCESS, "fd_seek", fd, 4096, 0, 600)
	must(errno.ESUCCESS, "fd_seek", fd, 0, 2, 608)
	must(errno.ESUCCESS, "fd_tell", fd, 616)
	for _, at := range []int{600, 608, 616} {
		if off := binary.LittleEndian.Uint64(mem[at:]); off != 0 {
			t.Fatalf("offset %d, want 0", off)
		}
	}
	must(errno.EINVAL, "fd_seek", fd, 0, 3, 600)
	// Nothing written reached the filesystem.
	if data, err := s.FS().ReadFile(wasi.NullPath); err != nil || len(data) != 0 {
		t.Fatalf("/dev/null holds %q, %v", data, err)
	}
}
