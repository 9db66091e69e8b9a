// Airlock's guest half of C++ exceptions lowered by LLVM's Emscripten-style
// pass (-fexceptions -mllvm -enable-emscripten-cxx-exceptions), for
// wasm32-wasi modules run without the exception-handling proposal.
//
// The pass turns every call that may throw into an imported
// env.invoke_SIG(table_slot, args...) followed by a read of __THREW__, and
// every landing pad into calls of __cxa_find_matching_catch_N,
// getTempRet0, llvm_eh_typeid_for and __resumeException. The host defines
// only the invoke_ functions and one more import, airlock_eh.unwind
// (internal/engine/cxxeh.go): invoke_ calls the table slot, and when
// airlock_eh.unwind is called beneath it, drops the guest frames in
// between, puts the stack pointer back and sets __THREW__ (through the
// exported setThrew). Everything that knows what an exception is lives
// here, in the guest's own memory: the host never reads a guest pointer.
//
// libc++abi's own cxa_exception.cpp (built from the same release's sources
// by scripts/build-cxx-eh.sh) keeps its exception objects, handler counts,
// the caught-exceptions stack, rethrow and std::exception_ptr; this file
// stands where libunwind and the personality routine stand in a native
// build: _Unwind_RaiseException hands the exception to the nearest
// invoke_, and __cxa_find_matching_catch_N does the personality's type
// matching (with libc++abi's can_catch), so that the value a landing pad
// passes to __cxa_begin_catch is, as on every Itanium target, the
// _Unwind_Exception.
//
// Built with -fno-exceptions: nothing here unwinds through C++ landing
// pads of its own.

#include <stddef.h>
#include <stdint.h>
#include <exception>

#include "cxa_exception.h"
#include "private_typeinfo.h"

using namespace __cxxabiv1;

// The host's unwind: raises the guest's unwinding to the innermost
// invoke_ on the stack and does not return; with no invoke_ on the stack
// it returns 0 and the exception has no handler.
extern "C" __attribute__((import_module("airlock_eh"), import_name("unwind"))) int32_t
airlock_eh_unwind(void);

extern "C" {

// sjlj_runtime.c's, shared with setjmp/longjmp: __THREW__ and setThrew,
// and the landing pad's selector (the second value of LLVM's landingpad).
void setTempRet0(uint32_t v);

// A catch clause's selector is its type_info's address: unique per type
// in a statically linked module.
uintptr_t llvm_eh_typeid_for(void *type_info) { return (uintptr_t)type_info; }

}  // extern "C"

// The exception on its way to a landing pad: set just before each unwind,
// taken by the landing pad's first call. One is enough: the pad takes it
// before any other throw can start.
static _Unwind_Exception *in_flight;

static __cxa_exception *header_of(_Unwind_Exception *e) {
	return reinterpret_cast<__cxa_exception *>(e + 1) - 1;
}

// The thrown object's address as the personality finds it (a dependent
// exception, from std::rethrow_exception, points at its primary's).
static void *thrown_object(_Unwind_Exception *e) {
	void *obj = e + 1;
	if (__getExceptionClass(e) == kOurDependentExceptionClass)
		obj = (reinterpret_cast<__cxa_dependent_exception *>(obj) - 1)->primaryException;
	return obj;
}

// Picks the first of the landing pad's n catch types that catches the
// exception in flight (0 is catch (...)), records the adjusted object
// address __cxa_begin_catch gives the handler, and returns the exception
// with the selector in tempRet0: the matching type's, or, for catch (...)
// and no match at all, the thrown type's, which no typed clause compares
// equal to (the clauses before it did not match).
static void *find_matching_catch(void *const *types, size_t n) {
	_Unwind_Exception *e = in_flight;
	// Taken: the pad owns it now (and resumes it if it does not catch),
	// so a later stray call finds nothing rather than a freed object.
	in_flight = nullptr;
	if (e == nullptr) {  // called outside a landing pad
		setTempRet0(0);
		return nullptr;
	}
	if (!__isOurExceptionClass(e)) {  // foreign: only catch (...) takes it
		setTempRet0(0);
		return e;
	}
	__cxa_exception *h = header_of(e);
	auto *thrown_type = static_cast<const __shim_type_info *>(h->exceptionType);
	for (size_t i = 0; i < n; i++) {
		auto *catch_type = static_cast<const __shim_type_info *>(types[i]);
		void *adjusted = thrown_object(e);
		if (catch_type == nullptr) {
			h->adjustedPtr = adjusted;
			break;
		}
		if (catch_type->can_catch(thrown_type, adjusted)) {
			h->adjustedPtr = adjusted;
			setTempRet0((uint32_t)(uintptr_t)catch_type);
			return e;
		}
	}
	setTempRet0((uint32_t)(uintptr_t)thrown_type);
	return e;
}

// __cxa_find_matching_catch_N takes N-2 catch types (the pass counts two
// more). Emscripten makes each N on demand in JavaScript; here they are
// made for up to 16 clauses in one landing pad, and a module needing more
// fails to instantiate, naming the import it lacks.
#define TYPES_0
#define TYPES_1 void *t0
#define TYPES_2 TYPES_1, void *t1
#define TYPES_3 TYPES_2, void *t2
#define TYPES_4 TYPES_3, void *t3
#define TYPES_5 TYPES_4, void *t4
#define TYPES_6 TYPES_5, void *t5
#define TYPES_7 TYPES_6, void *t6
#define TYPES_8 TYPES_7, void *t7
#define TYPES_9 TYPES_8, void *t8
#define TYPES_10 TYPES_9, void *t9
#define TYPES_11 TYPES_10, void *t10
#define TYPES_12 TYPES_11, void *t11
#define TYPES_13 TYPES_12, void *t12
#define TYPES_14 TYPES_13, void *t13
#define TYPES_15 TYPES_14, void *t14
#define TYPES_16 TYPES_15, void *t15
#define NAMES_1 t0
#define NAMES_2 NAMES_1, t1
#define NAMES_3 NAMES_2, t2
#define NAMES_4 NAMES_3, t3
#define NAMES_5 NAMES_4, t4
#define NAMES_6 NAMES_5, t5
#define NAMES_7 NAMES_6, t6
#define NAMES_8 NAMES_7, t7
#define NAMES_9 NAMES_8, t8
#define NAMES_10 NAMES_9, t9
#define NAMES_11 NAMES_10, t10
#define NAMES_12 NAMES_11, t11
#define NAMES_13 NAMES_12, t12
#define NAMES_14 NAMES_13, t13
#define NAMES_15 NAMES_14, t14
#define NAMES_16 NAMES_15, t15
#define FIND_MATCHING_CATCH(n, total)                                  \
	extern "C" void *__cxa_find_matching_catch_##total(TYPES_##n) { \
		void *const types[] = {NAMES_##n};                         \
		return find_matching_catch(types, n);                      \
	}

extern "C" void *__cxa_find_matching_catch_2(void) { return find_matching_catch(nullptr, 0); }
FIND_MATCHING_CATCH(1, 3)
FIND_MATCHING_CATCH(2, 4)
FIND_MATCHING_CATCH(3, 5)
FIND_MATCHING_CATCH(4, 6)
FIND_MATCHING_CATCH(5, 7)
FIND_MATCHING_CATCH(6, 8)
FIND_MATCHING_CATCH(7, 9)
FIND_MATCHING_CATCH(8, 10)
FIND_MATCHING_CATCH(9, 11)
FIND_MATCHING_CATCH(10, 12)
FIND_MATCHING_CATCH(11, 13)
FIND_MATCHING_CATCH(12, 14)
FIND_MATCHING_CATCH(13, 15)
FIND_MATCHING_CATCH(14, 16)
FIND_MATCHING_CATCH(15, 17)
FIND_MATCHING_CATCH(16, 18)

extern "C" {

// libc++abi's __cxa_throw and __cxa_rethrow end here: the exception goes
// to the nearest invoke_. Returning means no invoke_ is on the stack, so
// nothing can catch it: the caller (failed_throw) calls std::terminate,
// whose handler names the exception's type.
_Unwind_Reason_Code _Unwind_RaiseException(_Unwind_Exception *e) {
	in_flight = e;
	airlock_eh_unwind();
	in_flight = nullptr;
	return _URC_END_OF_STACK;
}

// A landing pad that only cleaned up (ran destructors) sends the
// exception on. With no invoke_ above, it is uncaught: terminate as
// __cxa_throw would, with the exception current so the message names it.
void __resumeException(void *exn) {
	auto *e = static_cast<_Unwind_Exception *>(exn);
	if (e == nullptr)
		std::terminate();
	in_flight = e;
	airlock_eh_unwind();
	in_flight = nullptr;
	__cxa_begin_catch(e);
	std::terminate();
}

void _Unwind_Resume(_Unwind_Exception *e) { __resumeException(e); }

void _Unwind_DeleteException(_Unwind_Exception *e) {
	if (e->exception_cleanup != nullptr)
		e->exception_cleanup(_URC_FOREIGN_EXCEPTION_CAUGHT, e);
}

}  // extern "C"
