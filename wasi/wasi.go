// Package wasi is Airlock's own implementation of wasi_snapshot_preview1: the
// only door between a guest and the world. Every function answers from
// per-run state (a memory-only filesystem, captured stdio, clocks, a random
// source) and never touches a host file, socket or process.
//
// The functions are engine-neutral: each one works on the guest's linear
// memory as a []byte and a stack of uint64 parameters, so the wazero adapter
// and any other engine register the same table (see [Functions]; the
// package example registers it on a bare wazero runtime). The filesystem
// is [github.com/airlock-sandbox/airlock/wasi/memfs]. Each reads
// its parameters into the names the WASI snapshot_preview1 spec gives them
// (WebAssembly/WASI, phases/snapshot/docs.md; pointers end in Ptr), and its
// doc line names the call and the errnos it can return.
//
// # Notes
//   - Guest pointers and lengths are bounds-checked on every access; a
//     hostile argument yields EFAULT (or EINVAL, EOVERFLOW), never a panic.
//   - Sockets answer ENOTSUP (sock_shutdown: ENOTSOCK): the sandbox grants none.
//   - A State is used by one run at a time, from the goroutine calling into
//     the guest.
package wasi

import (
	"context"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// ModuleName is the import module every function lives in.
const ModuleName = "wasi_snapshot_preview1"

// ValueType is a WebAssembly value type, numbered as in the binary format.
type ValueType byte

const (
	I32 ValueType = 0x7f
	I64 ValueType = 0x7e
	// Floats: no WASI function takes one, but invoke_ passes them through.
	F32 ValueType = 0x7d
	F64 ValueType = 0x7c
)

// HostFunc describes one imported function for an engine adapter.
type HostFunc struct {
	Name    string
	Params  []ValueType
	Results []ValueType
	// Call runs the function. Parameters arrive in stack; the errno result,
	// if any, is written to stack[0]. mem is the guest's whole linear memory
	// at the time of the call. A non-nil error is a trap: the engine aborts
	// the guest and the run ends with that error (proc_exit, an output
	// limit, a cancelled context).
	Call func(ctx context.Context, s *State, mem []byte, stack []uint64) error
}

type stateKey struct{}

// WithState attaches a run's State to the context the engine passes to host
// functions; adapters find it again with StateFrom.
func WithState(ctx context.Context, s *State) context.Context {
	return context.WithValue(ctx, stateKey{}, s)
}

// StateFrom returns the State attached by WithState, or nil.
func StateFrom(ctx context.Context) *State {
	s, _ := ctx.Value(stateKey{}).(*State)
	return s
}

// errnoFunc adapts the common shape: a function whose only result is an errno.
func errnoFunc(name string, params []ValueType, fn func(ctx context.Context, s *State, m memory, p []uint64) errno.Errno) HostFunc {
	return HostFunc{
		Name:    name,
		Params:  params,
		Results: []ValueType{I32},
		Call: func(ctx context.Context, s *State, mem []byte, stack []uint64) error {
			// A run whose context has ended gets no more service: the
			// guest may still be running until the engine notices, and it
			// must not finish as if nothing happened.
			if err := ctx.Err(); err != nil {
				return err
			}
			e := fn(ctx, s, memory(mem), stack)
			if s.trap != nil {
				err := s.trap
				s.trap = nil
				return err
			}
			stack[0] = uint64(e)
			return nil
		},
	}
}

func sig(types ...ValueType) []ValueType { return types }

// i32s is the signature of n i32 parameters, the most common shape.
func i32s(n int) []ValueType {
	out := make([]ValueType, n)
	for i := range out {
		out[i] = I32
	}
	return out
}

// Functions returns the full wasi_snapshot_preview1 table Airlock serves.
// The slice is shared; callers must not modify it.
func Functions() []HostFunc { return functions }

var functions = []HostFunc{
	errnoFunc("args_get", i32s(2), argsGet),
	errnoFunc("args_sizes_get", i32s(2), argsSizesGet),
	errnoFunc("environ_get", i32s(2), environGet),
	errnoFunc("environ_sizes_get", i32s(2), environSizesGet),
	errnoFunc("clock_res_get", i32s(2), clockResGet),
	errnoFunc("clock_time_get", sig(I32, I64, I32), clockTimeGet),
	errnoFunc("fd_advise", sig(I32, I64, I64, I32), fdAdvise),
	errnoFunc("fd_allocate", sig(I32, I64, I64), fdAllocate),
	errnoFunc("fd_close", i32s(1), fdClose),
	errnoFunc("fd_datasync", i32s(1), fdDatasync),
	errnoFunc("fd_fdstat_get", i32s(2), fdFdstatGet),
	errnoFunc("fd_fdstat_set_flags", i32s(2), fdFdstatSetFlags),
	errnoFunc("fd_fdstat_set_rights", sig(I32, I64, I64), fdFdstatSetRights),
	errnoFunc("fd_filestat_get", i32s(2), fdFilestatGet),
	errnoFunc("fd_filestat_set_size", sig(I32, I64), fdFilestatSetSize),
	errnoFunc("fd_filestat_set_times", sig(I32, I64, I64, I32), fdFilestatSetTimes),
	errnoFunc("fd_pread", sig(I32, I32, I32, I64, I32), fdPread),
	errnoFunc("fd_prestat_get", i32s(2), fdPrestatGet),
	errnoFunc("fd_prestat_dir_name", i32s(3), fdPrestatDirName),
	errnoFunc("fd_pwrite", sig(I32, I32, I32, I64, I32), fdPwrite),
	errnoFunc("fd_read", i32s(4), fdRead),
	errnoFunc("fd_readdir", sig(I32, I32, I32, I64, I32), fdReaddir),
	errnoFunc("fd_renumber", i32s(2), fdRenumber),
	errnoFunc("fd_seek", sig(I32, I64, I32, I32), fdSeek),
	errnoFunc("fd_sync", i32s(1), fdSync),
	errnoFunc("fd_tell", i32s(2), fdTell),
	errnoFunc("fd_write", i32s(4), fdWrite),
	errnoFunc("path_create_directory", i32s(3), pathCreateDirectory),
	errnoFunc("path_filestat_get", i32s(5), pathFilestatGet),
	errnoFunc("path_filestat_set_times", sig(I32, I32, I32, I32, I64, I64, I32), pathFilestatSetTimes),
	errnoFunc("path_link", i32s(7), pathLink),
	errnoFunc("path_open", sig(I32, I32, I32, I32, I32, I64, I64, I32, I32), pathOpen),
	errnoFunc("path_readlink", i32s(6), pathReadlink),
	errnoFunc("path_remove_directory", i32s(3), pathRemoveDirectory),
	errnoFunc("path_rename", i32s(6), pathRename),
	errnoFunc("path_symlink", i32s(5), pathSymlink),
	errnoFunc("path_unlink_file", i32s(3), pathUnlinkFile),
	errnoFunc("poll_oneoff", i32s(4), pollOneoff),
	{Name: "proc_exit", Params: i32s(1), Call: procExit},
	errnoFunc("proc_raise", i32s(1), procRaise),
	errnoFunc("sched_yield", nil, schedYield),
	errnoFunc("random_get", i32s(2), randomGet),
	errnoFunc("sock_accept", i32s(3), sockUnsupported),
	errnoFunc("sock_recv", i32s(6), sockUnsupported),
	errnoFunc("sock_send", i32s(5), sockUnsupported),
	errnoFunc("sock_shutdown", i32s(2), sockShutdown),
}
