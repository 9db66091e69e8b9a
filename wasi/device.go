package wasi

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/airlock-sandbox/airlock/wasi/errno"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Device is a host-implemented character device the guest reaches by
// opening its path (see Config.Devices), e.g. "/dev/airlock". fd_read and
// fd_write on such a descriptor call Read and Write; seeking and positioned
// I/O answer ESPIPE.
//
// ctx is the context the engine passes to host functions: the run's, so it
// ends at the run's deadline.
//
// # Errors
// An errno.Errno goes to the guest as the call's result (after any bytes
// already moved, the call reports those instead). Any other error is a
// trap: the run ends with it.
//
// # Notes
// A Device is used by one run, from the goroutine calling into the guest.
// Read returning 0 and no error reads as end of file.
type Device interface {
	Write(ctx context.Context, p []byte) (int, error)
	Read(ctx context.Context, p []byte) (int, error)
}

// A MemoryDevice is a Device whose writes also get the guest's whole
// linear memory, for a host that must change the guest's heap in step
// with the guest: a snapshot capture marking the image's objects
// immortal (python) cannot do it after the capture, when some of
// those objects may have been freed and their memory reused. p aliases
// mem.
type MemoryDevice interface {
	Device
	WriteMemory(ctx context.Context, mem, p []byte) (int, error)
}

// A SeekableDevice is a Device that takes seeks and positioned I/O as
// Linux's /dev/null does: its offset is always 0, and pread and pwrite
// read and write as plain read and write. Other devices are streams,
// answering ESPIPE.
type SeekableDevice interface {
	Device
	// Positionless marks the device; it is never called.
	Positionless()
}

// NullPath is where programs expect Null (os.devnull).
const NullPath = "/dev/null"

// Null is the device Linux has at /dev/null: a write is taken whole and
// discarded, a read is at end of file. Code opens it to throw output away
// (pytest's logging plugin, a figure saved to os.devnull as a dry run).
var Null SeekableDevice = nullDevice{}

type nullDevice struct{}

func (nullDevice) Write(_ context.Context, p []byte) (int, error) { return len(p), nil }
func (nullDevice) Read(context.Context, []byte) (int, error)      { return 0, nil }
func (nullDevice) Positionless()                                  {}

// positionless reports whether f is a device that takes seeks.
func (f *openFile) positionless() bool {
	_, ok := f.dev.(SeekableDevice)
	return f.kind == kindDevice && ok
}

// installDevices creates each configured device path as an empty regular
// file (so stat and exists work) and remembers its inode. A path that
// cannot be created is skipped: opening it then fails as for any missing
// file.
func (s *State) installDevices() {
	if len(s.cfg.Devices) == 0 {
		return
	}
	s.devices = make(map[*memfs.Inode]Device, len(s.cfg.Devices))
	for p, d := range s.cfg.Devices {
		if d == nil || !path.IsAbs(p) {
			continue
		}
		p = path.Clean(p)
		if err := s.fs.WriteFile(p, nil); err != nil {
			continue
		}
		if n, err := s.fs.Lookup(s.fs.Root(), p); err == nil {
			s.devices[n] = d
		}
	}
}

// deviceFor returns the device behind inode n, if any.
func (s *State) deviceFor(n *memfs.Inode) Device {
	if s.devices == nil {
		return nil
	}
	return s.devices[n]
}

// deviceWrite is f's device's Write, or its WriteMemory over m.
func (f *openFile) deviceWrite(m memory) func(context.Context, []byte) (int, error) {
	if md, ok := f.dev.(MemoryDevice); ok {
		return func(ctx context.Context, p []byte) (int, error) { return md.WriteMemory(ctx, m, p) }
	}
	return f.dev.Write
}

// deviceIO moves bufs through one of a device's methods, stopping at the
// first short transfer. A device error that is not an Errno becomes the
// run's trap.
func (s *State) deviceIO(ctx context.Context, op func(context.Context, []byte) (int, error), bufs [][]byte) (int, errno.Errno) {
	total := 0
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		n, err := op(ctx, b)
		if n < 0 || n > len(b) {
			s.trap = fmt.Errorf("wasi: device transferred %d bytes of %d", n, len(b))
			return 0, errno.EIO
		}
		total += n
		if err != nil {
			var e errno.Errno
			if !errors.As(err, &e) {
				s.trap = err
				return 0, errno.EIO
			}
			if total > 0 {
				return total, errno.ESUCCESS
			}
			if e == errno.ESUCCESS {
				e = errno.EIO
			}
			return 0, e
		}
		if n < len(b) {
			break
		}
	}
	return total, errno.ESUCCESS
}
