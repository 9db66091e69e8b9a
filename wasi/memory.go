package wasi

import (
	"encoding/binary"
	"math"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// memory is a bounds-checked view of guest linear memory. Offsets and
// lengths come from the guest and are untrusted: every accessor checks them
// in 64-bit arithmetic, so no sum can wrap around.
type memory []byte

func (m memory) slice(off, n uint32) ([]byte, bool) {
	end := uint64(off) + uint64(n)
	if end > uint64(len(m)) {
		return nil, false
	}
	return m[off:end], true
}

func (m memory) u32(off uint32) (uint32, bool) {
	b, ok := m.slice(off, 4)
	if !ok {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b), true
}

func (m memory) putU32(off, v uint32) bool {
	b, ok := m.slice(off, 4)
	if ok {
		binary.LittleEndian.PutUint32(b, v)
	}
	return ok
}

func (m memory) putU64(off uint32, v uint64) bool {
	b, ok := m.slice(off, 8)
	if ok {
		binary.LittleEndian.PutUint64(b, v)
	}
	return ok
}

func (m memory) putU8(off uint32, v byte) bool {
	b, ok := m.slice(off, 1)
	if ok {
		b[0] = v
	}
	return ok
}

// str reads a guest string; paths are capped far below memory size by the
// filesystem, so no copy limit is needed here.
func (m memory) str(off, n uint32) (string, bool) {
	b, ok := m.slice(off, n)
	return string(b), ok
}

// maxIovecs bounds the iovec count as Linux's IOV_MAX does, so a guest cannot
// make the host walk a huge array for one call.
const maxIovecs = 1024

// maxIOBytes bounds the bytes one call may move: wasm32's ssize_t, in which
// wasi-libc returns the count. Vectors may overlap, so their lengths can
// sum past what a u32 result can report; as readv(2) does for a sum that
// overflows ssize_t, such a call fails with EINVAL.
const maxIOBytes = math.MaxInt32

// iovecs resolves a guest iovec array into host slices of guest memory. A
// vector outside memory fails the whole call with EFAULT, and lengths
// summing past maxIOBytes with EINVAL, before any byte moves, so a
// partially valid request has no effect.
func (m memory) iovecs(ptr, count uint32, buf [][]byte) ([][]byte, errno.Errno) {
	if count > maxIovecs {
		return nil, errno.EINVAL
	}
	arr, ok := m.slice(ptr, count*8)
	if !ok {
		return nil, errno.EFAULT
	}
	buf = buf[:0]
	total := uint64(0)
	for i := uint32(0); i < count; i++ {
		base := binary.LittleEndian.Uint32(arr[i*8:])
		n := binary.LittleEndian.Uint32(arr[i*8+4:])
		b, ok := m.slice(base, n)
		if !ok {
			return nil, errno.EFAULT
		}
		if total += uint64(n); total > maxIOBytes {
			return nil, errno.EINVAL
		}
		buf = append(buf, b)
	}
	return buf, errno.ESUCCESS
}
