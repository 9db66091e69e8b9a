// Airlock's guest half of setjmp/longjmp lowered by LLVM's Emscripten-style
// pass (-mllvm -enable-emscripten-sjlj), for wasm32-wasi modules run
// without the exception-handling proposal, and the state that pass and the
// C++ exception lowering share (eh_runtime.cpp is the C++ half).
//
// The pass turns setjmp(env) into __wasm_setjmp(env, label, id), where id
// is an address unique to the calling function's activation and label one
// of its setjmp call sites; every call in that function that may longjmp
// into an imported env.invoke_SIG(table_slot, args...) followed by a read
// of __THREW__ and __threwValue; and longjmp(env, val) into
// emscripten_longjmp(env, val). emscripten_longjmp records env and val in
// __THREW__ and __threwValue and calls the host's airlock_eh.unwind, which
// drops the guest frames down to the innermost invoke_ (as for a C++
// throw, internal/engine/cxxeh.go); the code after it asks
// __wasm_setjmp_test whether env was armed by this activation, and either
// goes to that setjmp's label, with val as setjmp's result, or calls
// emscripten_longjmp again to go on to the next invoke_ down. Frames
// without a setjmp are not lowered and are dropped whole.
//
// Nothing here is new to the host: longjmp is an unwind like a throw, and
// every jmp_buf lives in the guest's memory.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// The host's unwind: raises the guest's unwinding to the innermost
// invoke_ on the stack and does not return; with no invoke_ on the stack
// it returns 0.
__attribute__((import_module("airlock_eh"), import_name("unwind"))) int32_t airlock_eh_unwind(void);

// Read by the code after every invoke_ (the passes declare them): 0 when
// the call returned, 1 when it unwound for a C++ exception, otherwise the
// jmp_buf of a longjmp, whose value is __threwValue.
uintptr_t __THREW__;
int __threwValue;

// The invoke_ functions call this when their call unwound: emscripten's
// contract. A longjmp has set __THREW__ first, so the host's setThrew(1,
// 0) leaves it; a C++ exception finds it 0 and sets it to 1.
__attribute__((export_name("setThrew"))) void setThrew(uintptr_t threw, int value) {
	if (__THREW__ == 0) {
		__THREW__ = threw;
		__threwValue = value;
	}
}

// A landing pad's selector (C++), or a longjmp's value (setjmp's result).
static uint32_t temp_ret0;
uint32_t getTempRet0(void) { return temp_ret0; }
void setTempRet0(uint32_t v) { temp_ret0 = v; }

// What __wasm_setjmp keeps in a jmp_buf (setjmp.h makes jmp_buf larger):
// the activation that armed it and the call site to resume at.
struct armed_jmp_buf {
	void *activation;
	uint32_t label;
};

_Static_assert(sizeof(struct armed_jmp_buf) <= 8 * sizeof(unsigned long), "setjmp.h's jmp_buf holds an armed_jmp_buf");

void __wasm_setjmp(void *env, uint32_t label, void *activation) {
	struct armed_jmp_buf *jb = env;
	jb->activation = activation;
	jb->label = label;
}

// The label of env's setjmp when this activation armed it, else 0 (the
// longjmp goes on to the caller).
uint32_t __wasm_setjmp_test(void *env, void *activation) {
	struct armed_jmp_buf *jb = env;
	return jb->activation == activation ? jb->label : 0;
}

__attribute__((noreturn)) void emscripten_longjmp(uintptr_t env, int val) {
	// C: "if val is 0, the setjmp macro returns the value 1"; and the
	// lowered code takes a __threwValue of 0 for no longjmp at all.
	if (val == 0)
		val = 1;
	// Set outright, not through setThrew: a stale __THREW__ must not turn
	// this longjmp into something else.
	__THREW__ = env;
	__threwValue = val;
	airlock_eh_unwind();
	// No invoke_ on the stack: no function that called setjmp is active
	// (its jmp_buf's frame has returned), or the call came from code the
	// pass did not lower. C calls this undefined; here it ends the run.
	__THREW__ = 0;
	__threwValue = 0;
	fputs("longjmp: no active setjmp to return to (the function that called setjmp has returned, "
	      "or setjmp's caller was compiled without -mllvm -enable-emscripten-sjlj)\n",
	      stderr);
	abort();
}

// longjmp for objects the pass did not lower (they reach it by name; the
// pass rewrites the calls and the address-taken uses in the ones it
// lowers): the same unwind.
__attribute__((noreturn)) void longjmp(void *env, int val) { emscripten_longjmp((uintptr_t)env, val); }
__attribute__((noreturn)) void _longjmp(void *env, int val) { emscripten_longjmp((uintptr_t)env, val); }
__attribute__((noreturn)) void siglongjmp(void *env, int val) { emscripten_longjmp((uintptr_t)env, val); }
