package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental/table"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
	"github.com/airlock-sandbox/airlock/wasi"
)

// The exception imports on wazero (cxxeh.go): an unwind is a Go panic
// with errUnwind, which wazero recovers at the innermost guest call, the
// invoke_'s.

// registerEH serves compiled's exception imports, if it has any, as host
// modules of r (one runtime per module, so they fit its types exactly).
func registerEH(ctx context.Context, r wazero.Runtime, compiled wazero.CompiledModule) error {
	var imports []backend.EHFunc
	for _, def := range compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		imports = append(imports, backend.EHFunc{Module: mod, Name: name, Params: wasiTypes(def.ParamTypes()), Results: wasiTypes(def.ResultTypes())})
	}
	funcs, err := backend.EHFuncs(imports)
	if err != nil || len(funcs) == 0 {
		return err
	}
	// A table the budget rewrite made lazy starts empty: invoke_ fills a
	// slot before it looks it up.
	_, lazyTable := compiled.ExportedFunctions()[tableFillExport]
	builders := map[string]wazero.HostModuleBuilder{}
	for _, f := range funcs {
		b := builders[f.Module]
		if b == nil {
			b = r.NewHostModuleBuilder(f.Module)
			builders[f.Module] = b
		}
		fn := wzUnwind
		if !f.Unwind {
			fn = wzInvoke(&wzInvokeType{name: f.Name, params: valueTypes(f.Params[1:]), results: valueTypes(f.Results), lazyTable: lazyTable})
		}
		b.NewFunctionBuilder().WithGoModuleFunction(fn, valueTypes(f.Params), valueTypes(f.Results)).Export(f.Name)
	}
	for name, b := range builders {
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("engine: register %s: %w", name, err)
		}
	}
	return nil
}

func wasiTypes(ts []api.ValueType) []wasi.ValueType {
	out := make([]wasi.ValueType, len(ts))
	for i, t := range ts {
		out[i] = wasi.ValueType(t)
	}
	return out
}

// wzInvokeType is the type an invoke_ calls, and whether the module's
// table is lazy (its slots filled on first use).
type wzInvokeType struct {
	name            string
	params, results []api.ValueType
	lazyTable       bool
}

var wzUnwind = api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
	r := runFrom(ctx)
	if r == nil || !r.StartUnwind() {
		stack[0] = 0 // no invoke_ to catch it
		return
	}
	panic(errUnwind)
})

func wzInvoke(ty *wzInvokeType) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		r := runFrom(ctx)
		if r == nil {
			panic(errors.New("engine: invoke_ outside a run"))
		}
		if err := r.InvokeEnter(); err != nil {
			panic(err)
		}
		defer r.InvokeLeave()
		sp, ok := mod.ExportedGlobal(backend.StackPointerExport).(api.MutableGlobal)
		if !ok {
			panic(ErrEHExports)
		}
		saved := sp.Get()
		slot := uint32(stack[0])
		f := r.eh.wz.take(ctx, mod, slot, ty)
		copy(stack, stack[1:])
		narrow(stack, ty.params)
		err := f.CallWithStack(ctx, stack)
		if err == nil {
			r.eh.wz.give(slot, ty, f)
			narrow(stack, ty.results)
			return
		}
		if !r.TakeUnwind() || !errors.Is(err, errUnwind) {
			// A trap, an exit, an interruption: it goes on to the
			// guest's caller. The function's call context is not
			// reused after a failure.
			panic(err)
		}
		r.eh.wz.give(slot, ty, f)
		sp.Set(saved)
		setThrew := r.eh.wz.setThrew(mod)
		var args [2]uint64
		args[0], args[1] = 1, 0
		if err := setThrew.CallWithStack(ctx, args[:]); err != nil {
			panic(err)
		}
		for i := range ty.results {
			stack[i] = 0
		}
	}
}

// narrow clears the upper half of each i32 and f32 value in stack.
// wazero's compiled code passes a host function an i32 argument, and
// takes a guest call's i32 result, as a 4-byte store into an 8-byte slot
// that keeps in its upper half what the stack held there before; and it
// loads a host function's first integer result into the guest's register
// whole. A host function decoding its arguments and encoding its results
// never sees this, but invoke_ passes values through: returned as they
// were, they gave the guest an i32 whose register had garbage upper bits,
// which compiled code used whole as a memory offset past its bounds
// check (a fault that killed the host process, or a write outside the
// guest's memory). The results are what matters; the arguments are
// cleared too, so that the guest function is never entered with them.
func narrow(stack []uint64, types []api.ValueType) {
	for i, t := range types {
		if t == api.ValueTypeI32 || t == api.ValueTypeF32 {
			stack[i] = uint64(uint32(stack[i]))
		}
	}
}

// wzEHCache keeps a run's wazero functions for invoke_: making one costs a
// call context with a 10 KiB stack (wazero's NewFunction), too much for
// every call. A function is taken out while it runs (a call context is not
// re-entrant, and invoke_ recurses), and up to wzIdlePerSlot per slot and
// wzIdleMax in all wait for the next call.
//
// A guest that rewrites its table (table.set, which no C or C++ code
// does) may have a later invoke_ of the slot reach the function the slot
// held before: its own, of the call's type, checked when taken.
type wzEHCache struct {
	idle  map[wzSlotKey][]api.Function
	count int
	set   api.Function
	fill  api.Function // the lazy table's fill, found at its first use
}

type wzSlotKey struct {
	slot uint32
	ty   *wzInvokeType
}

const (
	wzIdlePerSlot = 4
	wzIdleMax     = 256
)

// take is the function in slot of type ty, or a panic with
// ErrInvokeTarget, which ends the run as a trap. In a lazy table the slot
// is filled first, as the guest's own call_indirect would fill it: fill
// stores what the module's segments put there, and leaves a slot they do
// not fill, or one past them, as it is (the lookup then refuses it).
func (c *wzEHCache) take(ctx context.Context, mod api.Module, slot uint32, ty *wzInvokeType) api.Function {
	k := wzSlotKey{slot, ty}
	if fs := c.idle[k]; len(fs) > 0 {
		f := fs[len(fs)-1]
		c.idle[k] = fs[:len(fs)-1]
		c.count--
		return f
	}
	if ty.lazyTable {
		c.fillSlot(ctx, mod, slot)
	}
	return lookupSlot(mod, slot, ty)
}

// fillSlot calls the lazy table's fill(slot). fill calls nothing, so one
// function (one call context) serves every level of nested invoke_.
func (c *wzEHCache) fillSlot(ctx context.Context, mod api.Module, slot uint32) {
	if c.fill == nil {
		if c.fill = mod.ExportedFunction(tableFillExport); c.fill == nil {
			panic(fmt.Errorf("engine: invoke_: the lazy table's %s is not exported", tableFillExport))
		}
	}
	stack := [1]uint64{uint64(slot)}
	if err := c.fill.CallWithStack(ctx, stack[:]); err != nil {
		panic(err) // an interruption or a stack overflow: the guest's caller sees it
	}
}

func (c *wzEHCache) give(slot uint32, ty *wzInvokeType, f api.Function) {
	k := wzSlotKey{slot, ty}
	if c.count >= wzIdleMax || len(c.idle[k]) >= wzIdlePerSlot {
		return
	}
	if c.idle == nil {
		c.idle = map[wzSlotKey][]api.Function{}
	}
	c.idle[k] = append(c.idle[k], f)
	c.count++
}

func (c *wzEHCache) setThrew(mod api.Module) api.Function {
	if c.set == nil {
		c.set = mod.ExportedFunction(backend.SetThrewExport)
		if c.set == nil {
			panic(ErrEHExports)
		}
	}
	return c.set
}

// lookupSlot asks wazero for the slot's function: it panics with its own
// runtime error for a slot out of the table, null, or of another type,
// turned here into ErrInvokeTarget naming the slot.
func lookupSlot(mod api.Module, slot uint32, ty *wzInvokeType) (f api.Function) {
	defer func() {
		if v := recover(); v != nil {
			panic(fmt.Errorf("%w: %s(%d): %v", ErrInvokeTarget, ty.name, slot, v))
		}
	}()
	return table.LookupFunction(mod, 0, slot, ty.params, ty.results)
}
