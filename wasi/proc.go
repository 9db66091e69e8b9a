package wasi

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// ExitError is the trap proc_exit raises: the guest asked to end with Code.
type ExitError struct{ Code uint32 }

func (e *ExitError) Error() string { return fmt.Sprintf("wasi: exit status %d", e.Code) }

// procExit is proc_exit(rval): it traps with *ExitError, which ends the run
// with that status.
func procExit(_ context.Context, _ *State, _ []byte, stack []uint64) error {
	rval := uint32(stack[0])
	return &ExitError{Code: rval}
}

// procRaise is proc_raise(sig). Errors: ENOTSUP.
//
// procRaise refuses, as wasmtime does: there are no signals to deliver in
// the sandbox.
func procRaise(context.Context, *State, memory, []uint64) errno.Errno { return errno.ENOTSUP }

// schedYield is sched_yield(). It never fails.
//
// schedYield lets other goroutines run: the engine's loop budget calls it
// periodically from guests that never call the host otherwise.
func schedYield(context.Context, *State, memory, []uint64) errno.Errno {
	runtime.Gosched()
	return errno.ESUCCESS
}

// sockUnsupported is sock_accept, sock_recv and sock_send: a run has no
// sockets. Errors: ENOTSUP.
func sockUnsupported(context.Context, *State, memory, []uint64) errno.Errno {
	return errno.ENOTSUP
}

// sockShutdown is sock_shutdown(fd, how). No descriptor is a socket, so it
// answers for the descriptor, as shutdown(2) does. Errors: EBADF, ENOTSOCK.
func sockShutdown(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	if _, e := s.file(uint32(p[0])); e != errno.ESUCCESS {
		return e
	}
	return errno.ENOTSOCK
}

// listSizes answers args_sizes_get and environ_sizes_get.
func listSizes(m memory, list []string, countPtr, sizePtr uint32) errno.Errno {
	size := 0
	for _, a := range list {
		size += len(a) + 1
	}
	// Check both before writing either, so a failure leaves no half result.
	if _, ok := m.slice(countPtr, 4); !ok {
		return errno.EFAULT
	}
	if !m.putU32(sizePtr, uint32(size)) {
		return errno.EFAULT
	}
	m.putU32(countPtr, uint32(len(list)))
	return errno.ESUCCESS
}

// listGet answers args_get and environ_get: an array of pointers into a
// buffer of NUL-terminated strings. Both regions are checked before writing.
func listGet(m memory, list []string, ptrsPtr, bufPtr uint32) errno.Errno {
	size := uint32(0)
	for _, a := range list {
		size += uint32(len(a)) + 1
	}
	ptrs, ok1 := m.slice(ptrsPtr, uint32(len(list))*4)
	buf, ok2 := m.slice(bufPtr, size)
	if !ok1 || !ok2 {
		return errno.EFAULT
	}
	off := uint32(0)
	for i, a := range list {
		binary.LittleEndian.PutUint32(ptrs[i*4:], bufPtr+off)
		copy(buf[off:], a)
		buf[off+uint32(len(a))] = 0
		off += uint32(len(a)) + 1
	}
	return errno.ESUCCESS
}

// argsSizesGet is args_sizes_get(argcPtr, argvBufSizePtr). Errors: EFAULT.
func argsSizesGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	argcPtr, argvBufSizePtr := uint32(p[0]), uint32(p[1])
	return listSizes(m, s.cfg.Args, argcPtr, argvBufSizePtr)
}

// argsGet is args_get(argvPtr, argvBufPtr). Errors: EFAULT.
func argsGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	argvPtr, argvBufPtr := uint32(p[0]), uint32(p[1])
	return listGet(m, s.cfg.Args, argvPtr, argvBufPtr)
}

// environSizesGet is environ_sizes_get(countPtr, bufSizePtr). Errors: EFAULT.
func environSizesGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	countPtr, bufSizePtr := uint32(p[0]), uint32(p[1])
	return listSizes(m, s.cfg.Env, countPtr, bufSizePtr)
}

// environGet is environ_get(environPtr, environBufPtr). Errors: EFAULT.
func environGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	environPtr, environBufPtr := uint32(p[0]), uint32(p[1])
	return listGet(m, s.cfg.Env, environPtr, environBufPtr)
}

const (
	clockRealtime = iota
	clockMonotonic
	clockProcessCPU
	clockThreadCPU
)

// clockResGet is clock_res_get(id, resolutionPtr). Errors: EFAULT, EINVAL.
func clockResGet(_ context.Context, _ *State, m memory, p []uint64) errno.Errno {
	id, resolutionPtr := uint32(p[0]), uint32(p[1])
	if id > clockThreadCPU {
		return errno.EINVAL
	}
	if !m.putU64(resolutionPtr, uint64(time.Microsecond)) {
		return errno.EFAULT
	}
	return errno.ESUCCESS
}

func (s *State) now(id uint32) (int64, errno.Errno) {
	switch id {
	case clockRealtime:
		return s.clock.Realtime(), errno.ESUCCESS
	case clockMonotonic, clockProcessCPU, clockThreadCPU:
		// The guest is the only thread of its process: CPU time is
		// approximated by the run's elapsed time.
		return s.clock.Monotonic(), errno.ESUCCESS
	}
	return 0, errno.EINVAL
}

// clockTimeGet is clock_time_get(id, precision, timePtr). Errors: EFAULT, EINVAL.
func clockTimeGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	id, timePtr := uint32(p[0]), uint32(p[2])
	t, e := s.now(id)
	if e != errno.ESUCCESS {
		return e
	}
	if !m.putU64(timePtr, uint64(t)) {
		return errno.EFAULT
	}
	return errno.ESUCCESS
}

// randomGet is random_get(bufPtr, bufLen). Errors: EFAULT, EIO.
func randomGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	bufPtr, bufLen := uint32(p[0]), uint32(p[1])
	buf, ok := m.slice(bufPtr, bufLen)
	if !ok {
		return errno.EFAULT
	}
	if _, err := io.ReadFull(s.random, buf); err != nil {
		return errno.EIO
	}
	return errno.ESUCCESS
}

const (
	eventClock   = 0
	eventFdRead  = 1
	eventFdWrite = 2

	subscriptionSize = 48
	eventSize        = 32
	subClockAbstime  = 1
)

// pollOneoff is poll_oneoff(in, out, nsubscriptions, neventsPtr).
//
// pollOneoff serves the guest's sleeps and readiness checks. Descriptors
// are memory-backed and never block, so fd subscriptions are ready at once;
// otherwise the call sleeps until the earliest clock subscription, cut short
// by the run's context.
//
// Errors: EBADF, EFAULT, EINTR, EINVAL.
func pollOneoff(ctx context.Context, s *State, m memory, p []uint64) errno.Errno {
	in, out, n, neventsPtr := uint32(p[0]), uint32(p[1]), uint32(p[2]), uint32(p[3])
	if n == 0 {
		return errno.EINVAL
	}
	if uint64(n)*subscriptionSize > uint64(len(m)) {
		return errno.EFAULT
	}
	subs, ok1 := m.slice(in, n*subscriptionSize)
	events, ok2 := m.slice(out, n*eventSize)
	if !ok1 || !ok2 {
		return errno.EFAULT
	}
	if _, ok := m.slice(neventsPtr, 4); !ok {
		return errno.EFAULT
	}
	fdReady := false
	var wait int64 = -1
	for i := uint32(0); i < n; i++ {
		sub := subs[i*subscriptionSize:]
		switch sub[8] {
		case eventFdRead, eventFdWrite:
			fdReady = true
		case eventClock:
			d, e := s.clockDelay(sub)
			if e == errno.ESUCCESS && (wait < 0 || d < wait) {
				wait = d
			}
		}
	}
	if !fdReady && wait > 0 {
		if err := s.Sleep(ctx, time.Duration(wait)); err != nil {
			s.trap = err
			return errno.EINTR
		}
	}
	count := uint32(0)
	for i := uint32(0); i < n; i++ {
		sub := subs[i*subscriptionSize:]
		ev := events[count*eventSize : (count+1)*eventSize]
		clear(ev)
		copy(ev[0:8], sub[0:8]) // userdata
		ev[10] = sub[8]
		switch sub[8] {
		case eventFdRead, eventFdWrite:
			fd := binary.LittleEndian.Uint32(sub[16:])
			f, e := s.file(fd)
			if e == errno.ESUCCESS {
				e = f.has(rightPollFdReadwrite) // a directory: EBADF, as wasmtime answers
			}
			if e != errno.ESUCCESS {
				binary.LittleEndian.PutUint16(ev[8:], uint16(e))
			} else {
				binary.LittleEndian.PutUint64(ev[16:], 1)
			}
		case eventClock:
			d, e := s.clockDelay(sub)
			if e != errno.ESUCCESS {
				binary.LittleEndian.PutUint16(ev[8:], uint16(e))
			} else if fdReady && d > 0 {
				continue // not yet expired: an fd event answered first
			} else if d > wait {
				continue // a later timer; only the earliest has fired
			}
		default:
			binary.LittleEndian.PutUint16(ev[8:], uint16(errno.EINVAL))
		}
		count++
	}
	m.putU32(neventsPtr, count)
	return errno.ESUCCESS
}

// clockDelay is how long until a clock subscription fires, never negative.
func (s *State) clockDelay(sub []byte) (int64, errno.Errno) {
	id := binary.LittleEndian.Uint32(sub[16:])
	timeout := binary.LittleEndian.Uint64(sub[24:])
	flags := binary.LittleEndian.Uint16(sub[40:])
	if timeout > 1<<62 {
		timeout = 1 << 62
	}
	d := int64(timeout)
	if flags&subClockAbstime != 0 {
		now, e := s.now(id)
		if e != errno.ESUCCESS {
			return 0, e
		}
		d -= now
	} else if id > clockThreadCPU {
		return 0, errno.EINVAL
	}
	return max(d, 0), errno.ESUCCESS
}
