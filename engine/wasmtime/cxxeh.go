//go:build airlock_wasmtime && cgo && unix

package wasmtime

import (
	"errors"
	"fmt"

	wasmtime "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/backend"
	"github.com/airlock-sandbox/airlock/wasi"
)

// The exception imports on wasmtime (engine/cxxeh.go): an unwind is a
// trap, which ends the guest frames down to the innermost host call, the
// invoke_'s call of the guest (cxxeh_cgo.go); the run's flag tells it
// from a real trap.

// defineEH adds mod's exception imports, if it has any, to the linker,
// and tells how many values the largest invoke_'s call passes or returns.
func defineEH(l *wasmtime.Linker, mod *wasmtime.Module) (int, error) {
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
		return 0, err
	}
	values := 0
	for _, f := range funcs {
		ty := wasmtime.NewFuncType(wtValTypes(f.Params), wtValTypes(f.Results))
		fn := wtUnwind
		if !f.Unwind {
			fn = wtInvoke(newInvokeType(f.Name, f.Params[1:], f.Results))
			values = max(values, len(f.Params)-1, len(f.Results))
		}
		if err := l.FuncNew(f.Module, f.Name, ty, fn); err != nil {
			return 0, fmt.Errorf("engine: register %s.%s: %w", f.Module, f.Name, err)
		}
	}
	return values, nil
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

// wtInvokeType is the type an invoke_ calls, as wasm_valkind_t codes for
// the C side: params, then results.
type wtInvokeType struct {
	name            string
	params, results []wasi.ValueType
	kinds           []byte
}

func newInvokeType(name string, params, results []wasi.ValueType) *wtInvokeType {
	ty := &wtInvokeType{name: name, params: params, results: results}
	for _, t := range append(append([]wasi.ValueType(nil), params...), results...) {
		ty.kinds = append(ty.kinds, byte(wtKind(t))) // a ValKind is its wasm_valkind_t
	}
	return ty
}

func wtInvoke(ty *wtInvokeType) func(*wasmtime.Caller, []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
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
		ret, saved, err := eh.call(c, slot, ty, args[1:])
		if err == nil {
			if len(ty.results) == 0 {
				return nil, nil
			}
			return []wasmtime.Val{wtFromBits(wtKind(ty.results[0]), ret)}, nil
		}
		if errors.Is(err, engine.ErrInvokeTarget) {
			return nil, trap(r, &engine.TrapError{Err: err})
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
		if err := eh.unwound(c, saved); err != nil {
			if errors.Is(err, errSPNotSet) {
				return nil, trap(r, &engine.TrapError{Err: err})
			}
			if t, ok := err.(*wasmtime.Trap); ok {
				return nil, t
			}
			return nil, wasmtime.NewTrap(plainError(err).Error())
		}
		if len(ty.results) == 0 {
			return nil, nil
		}
		return []wasmtime.Val{wtFromBits(wtKind(ty.results[0]), 0)}, nil
	}
}
