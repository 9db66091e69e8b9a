// A guest that misuses the exception runtime on purpose, one way per
// argv[1]: each must end as a trap or a clean error of that run, never a
// host panic or hang (internal/conformance/cxxeh_test.go says which).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
__attribute__((import_module("env"), import_name("invoke_vi"))) void invoke_vi(uintptr_t slot, int arg);
__attribute__((import_module("airlock_eh"), import_name("unwind"))) int airlock_eh_unwind(void);
// Not _2 or _3, which this file's own landing pads use: LLVM would rename
// its declaration beside these, and import it instead.
void *__cxa_find_matching_catch_4(void *type1, void *type2);
void *__cxa_find_matching_catch_5(void *type1, void *type2, void *type3);
extern uintptr_t __THREW__;
}

__attribute__((noinline)) static void thrower(int v) { throw v; }
__attribute__((noinline)) static void bare_unwind(int) { airlock_eh_unwind(); }
__attribute__((noinline)) static int not_vi(void) { return 1; }

// Recursion whose every level is an invoke_ with a handler: as deep as the
// guest likes, unless the host stops it.
static volatile int deepest, nest_limit = 1 << 30;
__attribute__((noinline)) static int nest(int n) {
	deepest = n;
	if (n >= nest_limit)
		return 0;
	try {
		return nest(n + 1) + 1;
	} catch (...) {
		return -1;
	}
}

// Catches forever: only the run's deadline ends it.
__attribute__((noinline)) static void catch_forever() {
	for (unsigned long i = 0;; i++) {
		try {
			thrower((int)i);
		} catch (int) {
		}
	}
}

// exit() beneath an invoke_: the run ends with this status, not as a
// caught exception.
struct Noisy {
	~Noisy() { std::printf("not destroyed: exit unwinds nothing\n"); }
};
__attribute__((noinline)) static void exit_inside(int code) {
	Noisy n;
	std::exit(code);
}

static uintptr_t slot_of(void (*f)(int)) { return (uintptr_t)f; }

int main(int argc, char **argv) {
	std::setvbuf(stdout, nullptr, _IONBF, 0);
	const char *mode = argc > 1 ? argv[1] : "";
	if (!std::strcmp(mode, "bad-slot")) {
		invoke_vi(0x7fffff, 1);
	} else if (!std::strcmp(mode, "null-slot")) {
		invoke_vi(0, 1);
	} else if (!std::strcmp(mode, "wrong-type")) {
		invoke_vi((uintptr_t)&not_vi, 1);
	} else if (!std::strcmp(mode, "unwind-outside-invoke")) {
		std::printf("unwind returned %d\n", airlock_eh_unwind());
		return 0;
	} else if (!std::strcmp(mode, "unwind-without-exception")) {
		__THREW__ = 0;
		invoke_vi(slot_of(bare_unwind), 0);
		std::printf("threw %d\n", (int)__THREW__);
		__THREW__ = 0;
		// Nothing is in flight: a landing pad would get null.
		std::printf("match %p\n", __cxa_find_matching_catch_4(nullptr, nullptr));
		return 0;
	} else if (!std::strcmp(mode, "garbage-catch")) {
		std::printf("idle match %p\n", __cxa_find_matching_catch_4((void *)0x1234, (void *)-8));
		__THREW__ = 0;
		invoke_vi(slot_of(thrower), 5);
		std::printf("threw %d\n", (int)__THREW__);
		__THREW__ = 0;
		// A real exception in flight, compared with a "type" at the top of
		// the address space: the guest's own load traps.
		__cxa_find_matching_catch_5((void *)0xfffffff0, nullptr, nullptr);
		std::printf("not reached\n");
	} else if (!std::strcmp(mode, "throw-outside-invoke")) {
		throw 42;
	} else if (!std::strcmp(mode, "nest")) {
		if (argc > 2)
			nest_limit = std::atoi(argv[2]);
		std::printf("nest %d\n", nest(0));
	} else if (!std::strcmp(mode, "exit-in-invoke")) {
		try {
			exit_inside(7);
		} catch (...) {
			std::printf("caught an exit\n");
		}
	} else if (!std::strcmp(mode, "forever")) {
		catch_forever();
	} else {
		std::printf("unknown mode %s\n", mode);
		return 2;
	}
	std::printf("returned\n");
	return 0;
}
