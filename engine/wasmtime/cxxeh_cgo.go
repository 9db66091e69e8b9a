//go:build airlock_wasmtime && cgo && unix

package wasmtime

// invoke_'s call, through wasmtime's C API directly. Func.Call asks
// wasmtime for the function's type at every call and converts each value
// through Go: a dozen cgo calls and a finalizer per call. Here the table
// lookup, the stack pointer's read and the call are one cgo call, and the
// type check is made once per slot (RATIONALE, "C++ exceptions").
//
// The declarations below match the pinned v39 headers, and Go reads the
// C values wasmtime-go keeps as the first field of its Caller, Table,
// Global, Func, Trap and Error (TestInvokeSeesTableSet and
// internal/conformance's TestCXX* fail on another layout).

/*
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct wasmtime_caller wasmtime_caller_t;
typedef struct wasmtime_context wasmtime_context_t;
typedef struct wasmtime_error wasmtime_error_t;
typedef struct wasm_trap_t wasm_trap_t;
typedef struct wasm_functype_t wasm_functype_t;
typedef struct wasm_valtype_t wasm_valtype_t;
typedef struct wasm_valtype_vec_t {
	size_t size;
	wasm_valtype_t **data;
} wasm_valtype_vec_t;

typedef struct wasmtime_func {
	uint64_t store_id;
	void *__private;
} wasmtime_func_t;
typedef struct wasmtime_table {
	struct {
		uint64_t store_id;
		uint32_t __private1;
	};
	uint32_t __private2;
} wasmtime_table_t;
typedef struct wasmtime_global {
	uint64_t store_id;
	uint32_t __private1;
	uint32_t __private2;
	uint32_t __private3;
} wasmtime_global_t;
typedef struct wasmtime_anyref {
	uint64_t store_id;
	uint32_t __private1;
	uint32_t __private2;
	void *__private3;
} wasmtime_anyref_t;
typedef union wasmtime_valunion {
	int32_t i32;
	int64_t i64;
	float f32;
	double f64;
	wasmtime_anyref_t anyref;
	wasmtime_anyref_t externref;
	wasmtime_func_t funcref;
	uint8_t v128[16];
} wasmtime_valunion_t;
typedef struct wasmtime_val {
	uint8_t kind;
	wasmtime_valunion_t of;
} wasmtime_val_t;
typedef union wasmtime_val_raw {
	int32_t i32;
	int64_t i64;
	float f32;
	double f64;
	uint8_t v128[16];
	uint32_t anyref;
	uint32_t externref;
	void *funcref;
} wasmtime_val_raw_t;

#define AIRLOCK_FUNCREF 5 // WASMTIME_FUNCREF

extern wasmtime_context_t *wasmtime_caller_context(wasmtime_caller_t *);
extern bool wasmtime_table_get(wasmtime_context_t *, const wasmtime_table_t *, uint64_t, wasmtime_val_t *);
extern uint64_t wasmtime_table_size(const wasmtime_context_t *, const wasmtime_table_t *);
extern void wasmtime_global_get(wasmtime_context_t *, const wasmtime_global_t *, wasmtime_val_t *);
extern wasmtime_error_t *wasmtime_global_set(wasmtime_context_t *, const wasmtime_global_t *, const wasmtime_val_t *);
extern wasm_functype_t *wasmtime_func_type(const wasmtime_context_t *, const wasmtime_func_t *);
extern wasmtime_error_t *wasmtime_func_call_unchecked(wasmtime_context_t *, const wasmtime_func_t *,
	wasmtime_val_raw_t *, size_t, wasm_trap_t **);
extern const wasm_valtype_vec_t *wasm_functype_params(const wasm_functype_t *);
extern const wasm_valtype_vec_t *wasm_functype_results(const wasm_functype_t *);
extern void wasm_functype_delete(wasm_functype_t *);
extern void wasmtime_error_delete(wasmtime_error_t *);
extern uint8_t wasm_valtype_kind(const wasm_valtype_t *);

// An instance's exports invoke_ uses, and the values of one invoke_:
// Go writes the arguments to args and calls airlock_invoke, which copies
// them before it calls the guest (a nested invoke_ reuses args) and
// writes its outcome after.
typedef struct {
	wasmtime_table_t table;
	wasmtime_global_t sp;
	wasmtime_func_t set_threw;
	// The outcome of the last airlock_invoke.
	wasmtime_func_t found;    // the slot's function
	wasmtime_val_t saved_sp;  // the stack pointer before the call
	wasm_trap_t *trap;
	wasmtime_error_t *error;
	size_t cap;               // args' length
	uint64_t args[];          // in: the arguments; out: the result
} airlock_eh;

enum {
	AIRLOCK_CALLED,      // the call returned; its result is in args[0]
	AIRLOCK_FAILED,      // the call ended in trap or error
	AIRLOCK_UNCHECKED,   // the slot holds found, not the function given
	AIRLOCK_OUT_OF_TABLE,
	AIRLOCK_NULL_SLOT,
	AIRLOCK_SP_NOT_SET,  // the stack pointer's set failed (error)
};

static bool airlock_same_func(const wasmtime_func_t *a, const wasmtime_func_t *b) {
	return a->store_id == b->store_id && a->__private == b->__private;
}

// airlock_invoke calls the function in the table's slot, if it is
// checked, the function Go found of the call's type before: the table is
// read at every call, so a slot the guest changed is never called before
// its new function is checked. The values are bits, as Go encodes them:
// an i32 or f32 in the low half of a uint64.
static int airlock_invoke(wasmtime_caller_t *caller, airlock_eh *eh, uint32_t slot, wasmtime_func_t checked,
		size_t nparams, size_t nresults) {
	wasmtime_context_t *ctx = wasmtime_caller_context(caller);
	wasmtime_val_t v;
	if (!wasmtime_table_get(ctx, &eh->table, slot, &v)) {
		return AIRLOCK_OUT_OF_TABLE;
	}
	if (v.kind != AIRLOCK_FUNCREF || v.of.funcref.store_id == 0) {
		return AIRLOCK_NULL_SLOT;
	}
	if (!airlock_same_func(&v.of.funcref, &checked)) {
		eh->found = v.of.funcref;
		return AIRLOCK_UNCHECKED;
	}
	size_t n = nparams > nresults ? nparams : nresults;
	wasmtime_val_raw_t raw[n > 0 ? n : 1];
	memset(raw, 0, sizeof(raw));
	for (size_t i = 0; i < nparams; i++) {
		raw[i].i64 = (int64_t)eh->args[i];
	}
	wasmtime_val_t saved;
	wasmtime_global_get(ctx, &eh->sp, &saved);
	wasm_trap_t *trap = NULL;
	wasmtime_error_t *err = wasmtime_func_call_unchecked(ctx, &checked, raw, n, &trap);
	eh->saved_sp = saved;
	eh->trap = trap;
	eh->error = err;
	if (trap != NULL || err != NULL) {
		return AIRLOCK_FAILED;
	}
	if (nresults > 0) {
		eh->args[0] = (uint64_t)raw[0].i64;
	}
	return AIRLOCK_CALLED;
}

// airlock_unwound is what invoke_ does after its call unwound: the stack
// pointer put back, then the guest's setThrew(1, 0) (its type checked
// when the exports were found).
static int airlock_unwound(wasmtime_caller_t *caller, airlock_eh *eh, wasmtime_val_t saved) {
	wasmtime_context_t *ctx = wasmtime_caller_context(caller);
	eh->trap = NULL;
	eh->error = wasmtime_global_set(ctx, &eh->sp, &saved);
	if (eh->error != NULL) {
		return AIRLOCK_SP_NOT_SET;
	}
	wasmtime_val_raw_t raw[2];
	memset(raw, 0, sizeof(raw));
	raw[0].i32 = 1;
	wasm_trap_t *trap = NULL;
	eh->error = wasmtime_func_call_unchecked(ctx, &eh->set_threw, raw, 2, &trap);
	eh->trap = trap;
	return trap != NULL || eh->error != NULL ? AIRLOCK_FAILED : AIRLOCK_CALLED;
}

static bool airlock_same_kinds(const wasm_valtype_vec_t *types, const uint8_t *kinds, size_t n) {
	if (types->size != n) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		if (wasm_valtype_kind(types->data[i]) != kinds[i]) {
			return false;
		}
	}
	return true;
}

// airlock_func_has_type tells whether f's type is kinds[:nparams] ->
// kinds[nparams:nparams+nresults] (wasm_valkind_t codes).
static bool airlock_func_has_type(wasmtime_caller_t *caller, wasmtime_func_t f, const uint8_t *kinds,
		size_t nparams, size_t nresults) {
	wasm_functype_t *ty = wasmtime_func_type(wasmtime_caller_context(caller), &f);
	bool ok = airlock_same_kinds(wasm_functype_params(ty), kinds, nparams) &&
		airlock_same_kinds(wasm_functype_results(ty), kinds + nparams, nresults);
	wasm_functype_delete(ty);
	return ok;
}

static airlock_eh *airlock_eh_new(size_t cap) {
	airlock_eh *eh = calloc(1, sizeof(airlock_eh) + (cap > 0 ? cap : 1) * sizeof(uint64_t));
	if (eh != NULL) {
		eh->cap = cap;
	}
	return eh;
}

static uint64_t *airlock_eh_args(airlock_eh *eh) { return eh->args; }

static uint64_t airlock_table_size(wasmtime_caller_t *caller, const airlock_eh *eh) {
	return wasmtime_table_size(wasmtime_caller_context(caller), &eh->table);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	wasmtime "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/backend"
)

// wtEH is an instance's exports invoke_ uses, found at its first call,
// and the functions it found in table slots of the types asked for.
type wtEH struct {
	c       *C.airlock_eh
	args    []uint64 // c's args
	checked *[wtCheckedSlots]wtChecked
}

// wtChecked is a table slot's function, checked to be of type ty. Slots
// share entries (slot % wtCheckedSlots): a slot that lost its entry is
// checked again.
type wtChecked struct {
	slot uint32
	ty   *wtInvokeType
	fn   C.wasmtime_func_t
}

const wtCheckedSlots = 512

func (i *wtInstance) ehExports(c *wasmtime.Caller) (*wtEH, error) {
	if i.eh != nil {
		return i.eh, nil
	}
	var (
		sp       *wasmtime.Global
		setThrew *wasmtime.Func
		table    *wasmtime.Table
	)
	for _, e := range []struct {
		name string
		set  func(*wasmtime.Extern) bool
	}{
		{backend.StackPointerExport, func(x *wasmtime.Extern) bool { sp = x.Global(); return sp != nil }},
		{backend.SetThrewExport, func(x *wasmtime.Extern) bool { setThrew = x.Func(); return setThrew != nil }},
		{backend.TableExport, func(x *wasmtime.Extern) bool { table = x.Table(); return table != nil }},
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
	// The C side reads and writes the values as plain bits: a table of
	// functions, a stack pointer of integers.
	tt, gt := table.Type(c), sp.Type(c)
	spKind := gt.Content().Kind()
	fit := tt.Element().Kind() == wasmtime.KindFuncref && (spKind == wasmtime.KindI32 || spKind == wasmtime.KindI64)
	tt.Close()
	gt.Close()
	if !fit {
		return nil, engine.ErrEHExports
	}
	eh := &wtEH{c: C.airlock_eh_new(C.size_t(i.ehValues)), checked: new([wtCheckedSlots]wtChecked)}
	if eh.c == nil {
		return nil, errors.New("engine: invoke_: out of memory")
	}
	eh.args = unsafe.Slice((*uint64)(unsafe.Pointer(C.airlock_eh_args(eh.c))), max(i.ehValues, 1))
	eh.c.table = *(*C.wasmtime_table_t)(unsafe.Pointer(table))
	eh.c.sp = *(*C.wasmtime_global_t)(unsafe.Pointer(sp))
	eh.c.set_threw = *(*C.wasmtime_func_t)(unsafe.Pointer(setThrew))
	if !hasType(c, eh.c.set_threw, []byte{byte(wasmtime.KindI32), byte(wasmtime.KindI32)}, 2, 0) {
		eh.free()
		return nil, engine.ErrEHExports
	}
	i.eh = eh
	return eh, nil
}

// free releases the C side, once the store is closed.
func (eh *wtEH) free() {
	C.free(unsafe.Pointer(eh.c))
	eh.c, eh.args = nil, nil
}

// callerPtr reads the C pointer wasmtime-go keeps as the first field of
// Caller, as storePtr does Store's.
func callerPtr(c *wasmtime.Caller) *C.wasmtime_caller_t {
	return *(**C.wasmtime_caller_t)(unsafe.Pointer(c))
}

// hasType tells whether f's type is kinds[:nparams] -> kinds[nparams:]
// (wasm_valkind_t codes, as wasmtime.ValKind is).
func hasType(c *wasmtime.Caller, f C.wasmtime_func_t, kinds []byte, nparams, nresults int) bool {
	var p *C.uint8_t
	if len(kinds) > 0 {
		p = (*C.uint8_t)(unsafe.Pointer(&kinds[0]))
	}
	ok := C.airlock_func_has_type(callerPtr(c), f, p, C.size_t(nparams), C.size_t(nresults))
	runtime.KeepAlive(kinds)
	return bool(ok)
}

// call calls the function in the table's slot with args, if it has type
// ty: wasmtime checks the bounds, and hasType the type, before anything
// is called, as call_indirect would; a slot holding no function of type
// ty is ErrInvokeTarget. It returns the result's bits (wtBits), and the
// stack pointer before the call, for unwound.
func (eh *wtEH) call(c *wasmtime.Caller, slot uint32, ty *wtInvokeType, args []wasmtime.Val) (uint64, C.wasmtime_val_t, error) {
	var saved C.wasmtime_val_t
	for n, a := range args {
		eh.args[n] = wtBits(a)
	}
	e := &eh.checked[slot%wtCheckedSlots]
	var fn C.wasmtime_func_t // a null function: none checked yet
	if e.slot == slot && e.ty == ty {
		fn = e.fn
	}
	caller := callerPtr(c)
	for checked := false; ; checked = true {
		switch C.airlock_invoke(caller, eh.c, C.uint32_t(slot), fn, C.size_t(len(ty.params)), C.size_t(len(ty.results))) {
		case C.AIRLOCK_CALLED:
			return eh.args[0], saved, nil
		case C.AIRLOCK_FAILED:
			return 0, eh.c.saved_sp, eh.failure()
		case C.AIRLOCK_UNCHECKED:
			if checked {
				// The slot read back as another function than the one
				// checked, with no guest code between: refused rather
				// than checked forever.
				return 0, saved, fmt.Errorf("%w: %s(%d): the slot's function changed", engine.ErrInvokeTarget, ty.name, slot)
			}
			fn = eh.c.found
			if !hasType(c, fn, ty.kinds, len(ty.params), len(ty.results)) {
				return 0, saved, fmt.Errorf("%w: %s(%d): a function of another type", engine.ErrInvokeTarget, ty.name, slot)
			}
			*e = wtChecked{slot: slot, ty: ty, fn: fn}
		case C.AIRLOCK_OUT_OF_TABLE:
			return 0, saved, fmt.Errorf("%w: %s(%d): out of the table's %d slots", engine.ErrInvokeTarget, ty.name, slot, uint64(C.airlock_table_size(caller, eh.c)))
		default:
			return 0, saved, fmt.Errorf("%w: %s(%d): null slot", engine.ErrInvokeTarget, ty.name, slot)
		}
	}
}

// unwound puts the stack pointer back to saved and calls the guest's
// setThrew(1, 0). A failure to set the stack pointer is errSPNotSet;
// setThrew's, its trap or error.
func (eh *wtEH) unwound(c *wasmtime.Caller, saved C.wasmtime_val_t) error {
	switch C.airlock_unwound(callerPtr(c), eh.c, saved) {
	case C.AIRLOCK_CALLED:
		return nil
	case C.AIRLOCK_SP_NOT_SET:
		return fmt.Errorf("%w: %w", errSPNotSet, plainError(eh.failure()))
	}
	return eh.failure()
}

var errSPNotSet = errors.New("engine: invoke_: restore the stack pointer")

// failure is the trap or error the C side's last call ended in, as the
// wasmtime-go value Func.Call would have returned: whoever takes it
// closes it, or hands it on to wasmtime.
func (eh *wtEH) failure() error {
	t, e := eh.c.trap, eh.c.error
	eh.c.trap, eh.c.error = nil, nil
	if t != nil {
		if e != nil {
			C.wasmtime_error_delete(e) // wasmtime sets one of the two
		}
		w := new(wasmtime.Trap)
		*(**C.wasm_trap_t)(unsafe.Pointer(w)) = t
		return w
	}
	w := new(wasmtime.Error)
	*(**C.wasmtime_error_t)(unsafe.Pointer(w)) = e
	return w
}
