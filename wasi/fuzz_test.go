package wasi_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// The fuzz run's limits: a small quota so sparse writes and fd_allocate
// stay cheap, and few descriptors so EMFILE is reachable.
var fuzzQuota = memfs.Quota{MaxBytes: 8 << 10, MaxInodes: 24}

const (
	fuzzMaxFDs = 12
	fuzzCalls  = 256 // per input
	fuzzOutCap = 4 << 10
)

// fuzzValues are what a 0b01xxxxxx selector picks: the template's
// structures, edges of memory and of the integer types.
var fuzzValues = []uint64{
	0x100, 0x110, 0x120, 0x130, 0x140, 0x150, 0x160, 0x170, // paths
	0x200, 0x208, 0x210, 0x218, // iovecs
	subPtr, subPtr + subSize, subPtr + 2*subSize, evPtr,
	bufPtr, bufPtr + 0x100, 0x2000, 0x3000, resPtr, res2Ptr, statPtr,
	memSize - 1, memSize - 4, memSize - 8, memSize - 24, memSize - 48, memSize - 64, memSize, memSize + 1,
	0x7fffffff, 0x80000000, 0xfffffff0, 0xfffffffc, 0xffffffff,
	rightsRW, 1<<29 - 1, 4096, 4097,
	1 << 32, 1 << 40, 1<<40 - 1, 1 << 62, math.MaxInt64, 1 << 63, math.MaxUint64,
	uint64(time.Millisecond), uint64(time.Second),
}

// fuzzTemplate is guest memory before the input's pokes: paths, iovecs
// and subscriptions at the addresses fuzzValues name, over a pattern.
func fuzzTemplate() []byte {
	mem := make([]byte, memSize)
	for i := range mem {
		mem[i] = byte(i*13 + 1)
	}
	for i, p := range []string{"f", "d", "d/x", "g", ".", "..", "/", "d/"} {
		copy(mem[0x100+0x10*i:], p+"\x00")
	}
	le := binary.LittleEndian
	for i, v := range []iov{{bufPtr, 16}, {bufPtr + 0x10, 0}, {bufPtr + 0x20, 64}, {bufPtr + 0x100, 256}} {
		le.PutUint32(mem[0x200+8*i:], v.base)
		le.PutUint32(mem[0x204+8*i:], v.n)
	}
	clear(mem[subPtr : subPtr+3*subSize])
	// A relative 1 ms clock, fd_read on stdin, an absolute clock deadline.
	le.PutUint64(mem[subPtr:], 1)
	le.PutUint32(mem[subPtr+16:], 1)
	le.PutUint64(mem[subPtr+24:], uint64(time.Millisecond))
	le.PutUint64(mem[subPtr+subSize:], 2)
	mem[subPtr+subSize+8] = eventFdRead
	le.PutUint64(mem[subPtr+2*subSize:], 3)
	le.PutUint64(mem[subPtr+2*subSize+24:], uint64(wasi.FakeEpoch)+uint64(time.Second))
	le.PutUint16(mem[subPtr+2*subSize+40:], 1)
	return mem
}

type fuzzReader struct{ data []byte }

func (r *fuzzReader) byte() byte {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

func (r *fuzzReader) uint(n int) uint64 {
	var b [8]byte
	k := copy(b[:n], r.data)
	r.data = r.data[k:]
	return binary.LittleEndian.Uint64(b[:])
}

// param decodes one parameter: 00xxxxxx is x itself (fds, flags, short
// lengths); 01xxxxxx is fuzzValues[x]; 10xxxxxx is the next 4 (i32) or 8
// (i64) bytes; 11xxxxxx is x<<10 | next<<2, an aligned address anywhere in
// memory.
func (r *fuzzReader) param(t wasi.ValueType) uint64 {
	sel := r.byte()
	x := uint64(sel & 0x3f)
	switch sel >> 6 {
	case 0:
		return x
	case 1:
		return fuzzValues[int(x)%len(fuzzValues)]
	case 2:
		if t == wasi.I64 {
			return r.uint(8)
		}
		return r.uint(4)
	}
	return x<<10 | uint64(r.byte())<<2
}

// FuzzHostCalls runs a sequence of host calls decoded from the input
// against one State: each step is a function index and its parameters, or
// (index == len(Functions())) a poke of input bytes into guest memory.
// After every call: no panic, a valid errno, no trap but proc_exit's and
// the output cap's, no memory written outside what the spec allows, and
// filesystem usage within quota; at the end, with every fd closed, the
// quota's accounting matches the tree.
func FuzzHostCalls(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	template := fuzzTemplate()
	fns := wasi.Functions()
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{data}
		fs := newFS(fuzzQuota)
		out := &capWriter{max: fuzzOutCap}
		cfg := wasi.Config{
			Args:   []string{"python", "-c", "import os"},
			Env:    []string{"PYTHONHASHSEED=0", "HOME=/"},
			Stdin:  bytes.NewReader(bytes.Repeat([]byte("stdin\n"), 50)),
			Stdout: out,
			Stderr: io.Discard,
			FS:     fs,
			Clock:  wasi.NewFakeClock(),
			Random: rand.NewChaCha8([32]byte{1}),
			MaxFDs: fuzzMaxFDs,
		}
		s := wasi.NewState(cfg)
		mem := slices.Clone(template)
		before := make([]byte, memSize)
		ctx := context.Background()
		for step := 0; step < fuzzCalls && len(r.data) > 0; step++ {
			op := int(r.byte()) % (len(fns) + 1)
			if op == len(fns) {
				off := int(r.uint(2))
				n := int(r.byte())
				k := copy(mem[off:], r.data[:min(n, len(r.data))])
				r.data = r.data[k:]
				continue
			}
			fn := fns[op]
			params := make([]uint64, len(fn.Params))
			for i, typ := range fn.Params {
				params[i] = r.param(typ)
			}
			copy(before, mem)
			var raw uint64
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("step %d: %s%#x panicked: %v", step, fn.Name, params, p)
					}
				}()
				raw, err = invoke(ctx, s, mem, fn, params)
			}()
			if raw > maxErrno {
				t.Fatalf("step %d: %s%#x returned invalid errno %d", step, fn.Name, params, raw)
			}
			var exit *wasi.ExitError
			if err != nil && !errors.Is(err, errCap) && !(fn.Name == "proc_exit" && errors.As(err, &exit)) {
				t.Fatalf("step %d: %s%#x trapped: %v", step, fn.Name, params, err)
			}
			if werr := checkWrites(&cfg, fn.Name, params, raw != 0 || err != nil, before, mem); werr != nil {
				t.Fatalf("step %d: %v", step, werr)
			}
			if b, n := fs.Usage(); b > fuzzQuota.MaxBytes || n > fuzzQuota.MaxInodes {
				t.Fatalf("step %d: %s%#x: usage %d bytes, %d inodes past quota %+v", step, fn.Name, params, b, n, fuzzQuota)
			}
		}
		s.Close()
		checkUsage(t, fs)
	})
}

// checkUsage compares the quota's accounting with the tree once no fd
// holds an unlinked inode: every charged inode and byte must be reachable.
func checkUsage(t *testing.T, fs *memfs.FS) {
	t.Helper()
	seen := map[*memfs.Inode]bool{}
	var bytes int64
	err := fs.Walk("/", func(_ string, n *memfs.Inode) error {
		if !seen[n] {
			seen[n] = true
			bytes += n.Charged()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	if b, n := fs.Usage(); b != bytes || n != len(seen) {
		t.Fatalf("after Close: usage %d bytes, %d inodes; tree holds %d bytes, %d inodes", b, n, bytes, len(seen))
	}
}

// fuzzCall encodes one call with every parameter raw.
func fuzzCall(name string, params ...uint64) []byte {
	fns := wasi.Functions()
	i := slices.IndexFunc(fns, func(f wasi.HostFunc) bool { return f.Name == name })
	if i < 0 || len(params) != len(fns[i].Params) {
		panic("bad seed call " + name)
	}
	out := []byte{byte(i)}
	for j, p := range params {
		out = append(out, 0x80)
		if fns[i].Params[j] == wasi.I64 {
			out = binary.LittleEndian.AppendUint64(out, p)
		} else {
			out = binary.LittleEndian.AppendUint32(out, uint32(p))
		}
	}
	return out
}

// fuzzPoke encodes writing data at off.
func fuzzPoke(off uint16, data []byte) []byte {
	out := []byte{byte(len(wasi.Functions())), byte(off), byte(off >> 8), byte(len(data))}
	return append(out, data...)
}

func fuzzSeeds() [][]byte {
	const rw = rightsRW
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	return [][]byte{
		// Create, write through four iovecs, seek back, read, list, close.
		cat(
			fuzzCall("path_open", 3, 0, 0x130, 1, oflagCreat, rw, 0, 0, resPtr),
			fuzzCall("fd_write", 4, 0x200, 4, resPtr),
			fuzzCall("fd_seek", 4, 0, whenceSet, resPtr),
			fuzzCall("fd_read", 4, 0x200, 4, resPtr),
			fuzzCall("fd_readdir", 3, 0x2000, 40, 0, resPtr),
			fuzzCall("fd_readdir", 3, 0x2000, 40, 1, resPtr),
			fuzzCall("fd_close", 4),
		),
		// A directory with a file in it, listed through a small buffer,
		// then renamed, renumbered and removed.
		cat(
			fuzzCall("path_create_directory", 3, 0x110, 1),
			fuzzCall("path_open", 3, 0, 0x120, 3, oflagCreat|oflagTrunc, rw, 0, fdflagAppend, resPtr),
			fuzzCall("fd_write", 4, 0x200, 4, resPtr),
			fuzzCall("fd_write", 4, 0x210, 2, resPtr),
			fuzzCall("path_open", 3, 0, 0x110, 1, oflagDirectory, rightsRO, 0, 0, res2Ptr),
			fuzzCall("fd_readdir", 5, 0x2000, 26, 0, resPtr),
			fuzzCall("fd_readdir", 5, 0x2000, 26, 1, resPtr),
			fuzzCall("fd_readdir", 5, 0x2000, 26, 2, resPtr),
			fuzzCall("path_rename", 3, 0x120, 3, 3, 0x130, 1),
			fuzzCall("fd_renumber", 4, 5),
			fuzzCall("path_unlink_file", 3, 0x130, 1),
			fuzzCall("fd_pwrite", 5, 0x200, 4, 100, resPtr),
			fuzzCall("path_remove_directory", 3, 0x110, 1),
			fuzzCall("fd_filestat_get", 5, statPtr),
		),
		// Fill the quota: sparse pwrite, allocate, truncate, link.
		cat(
			fuzzCall("path_open", 3, 0, 0x100, 1, oflagCreat, rw, 0, 0, resPtr),
			fuzzCall("fd_pwrite", 4, 0x218, 1, 7000, resPtr),
			fuzzCall("fd_allocate", 4, 0, 9000),
			fuzzCall("fd_filestat_set_size", 4, 10),
			fuzzCall("path_link", 3, 0, 0x100, 1, 3, 0x130, 1),
			fuzzCall("path_unlink_file", 3, 0x100, 1),
			fuzzCall("fd_write", 4, 0x200, 4, resPtr),
			fuzzCall("path_filestat_get", 3, 0, 0x130, 1, statPtr),
			fuzzCall("path_filestat_set_times", 3, 0, 0x130, 1, 5, 6, fstAtim|fstMtimNow),
		),
		// Stdio, clocks, randomness, polling and exit.
		cat(
			fuzzCall("args_sizes_get", resPtr, res2Ptr),
			fuzzCall("args_get", 0x3000, 0x3100),
			fuzzCall("environ_get", 0x3000, 0x3100),
			fuzzCall("fd_read", 0, 0x200, 4, resPtr),
			fuzzCall("fd_write", 1, 0x200, 4, resPtr),
			fuzzCall("clock_time_get", 1, 0, resPtr),
			fuzzCall("random_get", 0x3000, 64),
			fuzzCall("poll_oneoff", subPtr, evPtr, 3, resPtr),
			fuzzCall("fd_fdstat_get", 1, statPtr),
			fuzzCall("proc_exit", 3),
		),
		// Pokes: a path and an iovec the fuzzer can build on.
		cat(
			fuzzPoke(0x3000, []byte("./../g")),
			fuzzPoke(0x3010, []byte{0x00, 0x10, 0, 0, 0x20, 0, 0, 0}),
			fuzzCall("path_open", 3, 0, 0x3000, 6, oflagCreat|oflagExcl, rw, 0, 0, resPtr),
			fuzzCall("fd_write", 4, 0x3010, 1, resPtr),
			fuzzCall("fd_readdir", 3, 0x2000, 0xffffffff, 0, resPtr),
		),
		// Links: to a directory, through it, a loop, out of a descriptor,
		// read back; rights dropped and a reopen with what is left.
		cat(
			fuzzCall("path_create_directory", 3, 0x110, 1),
			fuzzCall("path_symlink", 0x110, 1, 3, 0x130, 1),
			fuzzCall("path_open", 3, 1, 0x130, 1, oflagDirectory, rightsRO, rightsRW, 0, resPtr),
			fuzzCall("path_symlink", 0x150, 2, 4, 0x100, 1),
			fuzzCall("path_open", 4, 1, 0x100, 1, 0, rightsRO, 0, 0, resPtr),
			fuzzCall("path_symlink", 0x130, 1, 3, 0x130, 1),
			fuzzCall("path_readlink", 3, 0x130, 1, 0x3000, 3, resPtr),
			fuzzCall("path_filestat_get", 3, 0, 0x130, 1, statPtr),
			fuzzCall("fd_fdstat_set_rights", 4, rightsRO&^(1<<13), 0),
			fuzzCall("path_open", 4, 0, 0x140, 1, oflagDirectory, rightsRO, 0, 0, resPtr),
			fuzzCall("path_unlink_file", 3, 0x130, 1),
			fuzzCall("fd_pwrite", 5, 0x200, 1, 1<<39, resPtr),
		),
		// Compact selectors: small values, table entries, addresses.
		{0x1c, 0x03, 0x40 | 3, 0x01, 0x01, 0x47, 0x04, 0x00, 0x00, 0x40 | 20},
	}
}
