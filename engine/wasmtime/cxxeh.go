//go:build airlock_wasmtime && cgo && unix

package wasmtime

import (
	"fmt"

	wasmtime "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/backend"
	"github.com/airlock-sandbox/airlock/wasi"
)

// The exception imports on wasmtime (engine/cxxeh.go): an unwind is a
// trap, which ends the guest frames down to the innermost host call, the
// invoke_'s Func.Call; the run's flag tells it from a real trap.

// defineEH adds mod's exception imports, if it has any, to the linker.
func defineEH(l *wasmtime.Linker, mod *wasmtime.Module) error {
	var imports []backend.EHFunc
	for _, im := range mod.Imports() {
		ft := im.Type().FuncType()
		if ft == nil || im.Name() == nil {
			continue
		}
		imports = append(imports, backend.EHFunc{Module: im.Module(), Name: *im.Name(), Params: wtKinds(ft.Params()), Results: wtKinds(ft.Results())})
	}
	funcs, err := backend.EHFuncs(imports)
	if err != nil {
		return err
	}
	for _, f := range funcs {
		ty := wasmtime.NewFuncType(wtValTypes(f.Params), wtValTypes(f.Results))
		fn := wtUnwind
		if !f.Unwind {
			fn = wtInvoke(f.Name, f.Params[1:], f.Results)
		}
		if err := l.FuncNew(f.Module, f.Name, ty, fn); err != nil {
			return fmt.Errorf("engine: register %s.%s: %w", f.Module, f.Name, err)
		}
	}
	return nil
}

func wtKinds(ts []*wasmtime.ValType) []wasi.ValueType {
	out := make([]wasi.ValueType, len(ts))
	for i, t := range ts {
		switch t.Kind() {
		case wasmtime.KindI64:
			out[i] = wasi.I64
		case wasmtime.KindF32:
			out[i] = wasi.F32
		case wasmtime.KindF64:
			out[i] = wasi.F64
		default:
			out[i] = wasi.I32
		}
	}
	return out
}

func wtUnwind(c *wasmtime.Caller, _ []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
	inst, _ := c.Data().(*wtInstance)
	if inst == nil || !inst.run.StartUnwind() {
		return []wasmtime.Val{wasmtime.ValI32(0)}, nil // no invoke_ to catch it
	}
	return nil, wasmtime.NewTrap("airlock_eh: unwinding to invoke_")
}

func wtInvoke(name string, params, results []wasi.ValueType) func(*wasmtime.Caller, []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
	return func(c *wasmtime.Caller, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
		inst, _ := c.Data().(*wtInstance)
		if inst == nil {
			return nil, wasmtime.NewTrap("engine: invoke_ outside a run")
		}
		r := inst.run
		// The guest's faults end the run as its crash, as on wazero.
		if err := r.InvokeEnter(); err != nil {
			return nil, trap(r, &engine.TrapError{Err: err})
		}
		defer r.InvokeLeave()
		eh, err := inst.ehExports(c)
		if err != nil {
			return nil, trap(r, &engine.TrapError{Err: err})
		}
		slot := uint32(args[0].I32())
		f, err := eh.lookup(c, slot, params, results)
		if err != nil {
			return nil, trap(r, &engine.TrapError{Err: fmt.Errorf("%w: %s(%d): %v", engine.ErrInvokeTarget, name, slot, err)})
		}
		saved := eh.sp.Get(c)
		callArgs := make([]any, len(args)-1)
		for i, a := range args[1:] {
			callArgs[i] = a
		}
		ret, err := f.Call(c, callArgs...)
		if err == nil {
			if len(results) == 0 {
				return nil, nil
			}
			return []wasmtime.Val{wtResult(results[0], ret)}, nil
		}
		if !r.TakeUnwind() {
			// A trap, an exit, an interruption: it goes on to the guest's
			// caller (a host function's error stays recorded in the run).
			if t, ok := err.(*wasmtime.Trap); ok {
				return nil, t
			}
			if r.HostTrapped() {
				// Its cause is recorded: pass on a short trap. wasmtime's
				// message adds a backtrace at every level, so carrying it
				// on grew with the square of the nesting (GBs at 1,000).
				closeError(err)
				return nil, wasmtime.NewTrap("airlock_eh: a host function trapped beneath invoke_")
			}
			return nil, wasmtime.NewTrap(plainError(err).Error())
		}
		closeError(err)
		if err := eh.sp.Set(c, saved); err != nil {
			return nil, trap(r, &engine.TrapError{Err: fmt.Errorf("engine: invoke_: restore the stack pointer: %w", plainError(err))})
		}
		if _, err := eh.setThrew.Call(c, int32(1), int32(0)); err != nil {
			if t, ok := err.(*wasmtime.Trap); ok {
				return nil, t
			}
			return nil, wasmtime.NewTrap(plainError(err).Error())
		}
		if len(results) == 0 {
			return nil, nil
		}
		return []wasmtime.Val{wtZero(results[0])}, nil
	}
}

// wtEH is an instance's exports invoke_ uses, found at its first call.
type wtEH struct {
	sp       *wasmtime.Global
	setThrew *wasmtime.Func
	table    *wasmtime.Table
}

func (i *wtInstance) ehExports(c *wasmtime.Caller) (*wtEH, error) {
	if i.eh != nil {
		return i.eh, nil
	}
	eh := &wtEH{}
	for _, e := range []struct {
		name string
		set  func(*wasmtime.Extern) bool
	}{
		{backend.StackPointerExport, func(x *wasmtime.Extern) bool { eh.sp = x.Global(); return eh.sp != nil }},
		{backend.SetThrewExport, func(x *wasmtime.Extern) bool { eh.setThrew = x.Func(); return eh.setThrew != nil }},
		{backend.TableExport, func(x *wasmtime.Extern) bool { eh.table = x.Table(); return eh.table != nil }},
	} {
		x := c.GetExport(e.name)
		if x == nil {
			return nil, engine.ErrEHExports
		}
		ok := e.set(x)
		x.Close()
		if !ok {
			return nil, engine.ErrEHExports
		}
	}
	i.eh = eh
	return eh, nil
}

// lookup is the function in the table's slot, if it has the type
// params -> results: wasmtime checks the bounds, this the type, before
// anything is called.
func (eh *wtEH) lookup(c *wasmtime.Caller, slot uint32, params, results []wasi.ValueType) (*wasmtime.Func, error) {
	v, err := eh.table.Get(c, uint64(slot))
	if err != nil {
		return nil, plainError(err)
	}
	f := v.Funcref()
	if f == nil {
		return nil, fmt.Errorf("null slot")
	}
	ty := f.Type(c)
	defer ty.Close()
	if !sameKinds(wtKinds(ty.Params()), params) || !sameKinds(wtKinds(ty.Results()), results) {
		return nil, fmt.Errorf("a function of another type")
	}
	return f, nil
}

func sameKinds(a, b []wasi.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func wtResult(t wasi.ValueType, v any) wasmtime.Val {
	switch x := v.(type) {
	case int32:
		return wasmtime.ValI32(x)
	case int64:
		return wasmtime.ValI64(x)
	case float32:
		return wasmtime.ValF32(x)
	case float64:
		return wasmtime.ValF64(x)
	}
	return wtZero(t)
}

func wtZero(t wasi.ValueType) wasmtime.Val {
	switch t {
	case wasi.I64:
		return wasmtime.ValI64(0)
	case wasi.F32:
		return wasmtime.ValF32(0)
	case wasi.F64:
		return wasmtime.ValF64(0)
	}
	return wasmtime.ValI32(0)
}
