package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// registerThreads exports the airlock_threads module (threads.go) for
// python.wasm's pthreads. Each call runs on the calling thread's
// goroutine, which holds the baton.
func registerThreads(ctx context.Context, r wazero.Runtime) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	b := r.NewHostModuleBuilder(threadsModule)
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		run := runFrom(ctx)
		s := run.threadsOf(ctx, mod)
		res, err := s.spawn(uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3]), int32(stack[4]))
		if err != nil {
			trapThread(ctx, run, err)
		}
		stack[0] = uint64(res)
	}), []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}).Export("spawn")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		run := runFrom(ctx)
		addr, expected, timeout := uint32(stack[0]), uint32(stack[1]), time.Duration(int64(stack[2]))
		s := run.threads
		if s == nil || !s.others() {
			// One thread: nothing can change the word. A wait on a word
			// that differs returns at once; else a timed wait is a sleep,
			// an untimed one can never end.
			if v, ok := mod.Memory().ReadUint32Le(addr); !ok || v != expected {
				if !ok {
					trapThread(ctx, run, fmt.Errorf("engine: thread wait: address %#x out of memory", addr))
				}
				stack[0] = 0
				return
			}
			if timeout < 0 {
				trapThread(ctx, run, ErrDeadlock)
			}
			if err := run.wasi.Sleep(ctx, timeout); err != nil {
				trapThread(ctx, run, err)
			}
			stack[0] = 1
			return
		}
		timedOut, err := s.wait(ctx, addr, expected, timeout)
		if err != nil {
			trapThread(ctx, run, err)
		}
		stack[0] = 0
		if timedOut {
			stack[0] = 1
		}
	}), []api.ValueType{i32, i32, i64}, []api.ValueType{i32}).Export("wait")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		run := runFrom(ctx)
		n := int(int32(stack[1]))
		if n < 0 {
			n = 0
		}
		woken := 0
		if s := run.threads; s != nil {
			woken = s.wake(uint32(stack[0]), n)
		}
		stack[0] = uint64(woken)
	}), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export("wake")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		if ctx.Value(threadKey{}) == nil {
			// pthread_exit on the main thread exits in the guest: not here.
			runFrom(ctx).trapWazero(errors.New("engine: the main thread called the threads' exit"))
		}
		panic(&hostTrap{errThreadExit})
	}), nil, nil).Export("exit")
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("engine: register %s: %w", threadsModule, err)
	}
	return nil
}

// threadKey marks the context of a thread's calls other than the main
// one's: its value is the thread's id.
type threadKey struct{}

// trapThread ends the calling thread's guest call with err. The main
// thread's trap is the run's (runState.hostErr); another thread's only
// unwinds its own goroutine: the scheduler carries its error to the main
// thread, and several threads may unwind at once.
func trapThread(ctx context.Context, run *runState, err error) {
	if ctx.Value(threadKey{}) == nil {
		run.trapWazero(err)
	}
	panic(&hostTrap{err})
}

// threadsOf is the run's scheduler, made at its first spawn.
func (r *runState) threadsOf(ctx context.Context, mod api.Module) *threads {
	if r.threads == nil {
		sp, _ := mod.ExportedGlobal("__stack_pointer").(api.MutableGlobal)
		r.threads = newThreads(ctx, &wzThreads{mod: mod, sp: sp, run: r}, r.maxThreads)
	}
	return r.threads
}

// wzThreads is the scheduler's view of a wazero instance.
type wzThreads struct {
	mod api.Module
	sp  api.MutableGlobal
	run *runState
}

func (g *wzThreads) memory() []byte {
	mem := g.mod.Memory()
	buf, _ := mem.Read(0, mem.Size())
	return buf
}

func (g *wzThreads) stackPointer() uint32 {
	if g.sp == nil {
		return 0
	}
	return uint32(g.sp.Get())
}

func (g *wzThreads) setStackPointer(v uint32) {
	if g.sp != nil {
		g.sp.Set(uint64(v))
	}
}

func (g *wzThreads) start(ctx context.Context, t *gthread) error {
	f := g.mod.ExportedFunction("airlock_thread_entry")
	if f == nil {
		return errors.New("engine: the module spawned a thread but exports no airlock_thread_entry")
	}
	_, err := f.Call(context.WithValue(ctx, threadKey{}, t.id), uint64(t.desc))
	var ht *hostTrap
	if errors.As(err, &ht) && errors.Is(ht.err, errThreadExit) {
		return errThreadExit
	}
	if err != nil && !errors.As(err, &ht) {
		// A guest trap in a thread ends the run as one in the main
		// thread would.
		err = &TrapError{Err: err}
	}
	return err
}

func (g *wzThreads) preempt(ctx context.Context) {
	if f := g.mod.ExportedFunction("airlock_threads_preempt"); f != nil {
		_, _ = f.Call(ctx)
	}
}
