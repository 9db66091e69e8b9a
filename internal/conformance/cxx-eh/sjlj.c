// setjmp/longjmp lowered to invoke_ calls (-mllvm -enable-emscripten-sjlj,
// scripts/build-cxx-eh.sh), every shape libpng, libjpeg and FreeType use
// for their errors. Each check prints "NAME: ok" or "NAME: FAIL ..." on its
// first round; later rounds (argv[1] of them in all, default 1) only count
// failures, and the last line is "PASS: N rounds" when every round passed.
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int round_no, failures;

static void check(const char *name, int ok, const char *detail) {
	if (!ok) {
		failures++;
		printf("%s: FAIL %s (round %d)\n", name, detail, round_no);
	} else if (round_no == 0) {
		printf("%s: ok\n", name);
	}
}

// Non-inlined so every longjmp crosses real calls.
__attribute__((noinline)) static void jump(jmp_buf env, int val) { longjmp(env, val); }
__attribute__((noinline)) static int deep(jmp_buf env, int depth, int val) {
	volatile char pad[64];  // a frame with stack of its own
	pad[0] = (char)depth;
	if (depth > 0)
		return deep(env, depth - 1, val) + pad[0];
	if (depth == 0)
		jump(env, val);
	return 0;
}

static void returns_value(void) {
	jmp_buf env;
	volatile int calls = 0;
	int r = setjmp(env);
	calls++;
	if (r == 0)
		jump(env, 42);
	check("setjmp returns longjmp's value", r == 42 && calls == 2, "");
}

static void zero_becomes_one(void) {
	jmp_buf env;
	int r = setjmp(env);
	if (r == 0)
		jump(env, 0);
	check("longjmp(env, 0) makes setjmp return 1", r == 1, "");
}

static void across_frames(void) {
	jmp_buf env;
	int r = setjmp(env);
	if (r == 0)
		deep(env, 50, 7);
	check("longjmp across 50 frames", r == 7, "");
}

// A loop that longjmps back to its own setjmp, as a retry loop would;
// volatile locals keep what was written after setjmp.
static void loop_back(void) {
	jmp_buf env;
	volatile int count = 0;
	int r = setjmp(env);
	if (count < 10) {
		count++;
		jump(env, count);
	}
	check("longjmp back to the same setjmp ten times", count == 10 && r == 10, "");
}

// The inner setjmp's region ends by a longjmp to the outer one, as a
// library's error handler inside an application's would.
__attribute__((noinline)) static int inner_region(jmp_buf outer, int target) {
	jmp_buf inner;
	int r = setjmp(inner);
	if (r == 0) {
		if (target == 0)
			deep(inner, 3, 11);
		deep(outer, 3, 22);
	}
	return r;
}
static void nested(void) {
	jmp_buf outer;
	volatile int inner_result = -1;
	int r = setjmp(outer);
	if (r == 0) {
		inner_result = inner_region(outer, 0);
		check("nested: longjmp to the inner setjmp", inner_result == 11, "");
		inner_region(outer, 1);
		check("nested: not reached", 0, "inner_region returned");
	}
	check("nested: longjmp past the inner to the outer setjmp", r == 22 && inner_result == 11, "");
}

// Two setjmps in one function, each its own label.
static void two_sites(void) {
	jmp_buf a, b;
	volatile int seen = 0;
	int ra = setjmp(a);
	if (ra == 0) {
		int rb = setjmp(b);
		if (rb == 0)
			jump(b, 2);
		seen = rb;
		jump(a, 1);
	}
	check("two setjmps in one function", ra == 1 && seen == 2, "");
}

// The error callback of a library: longjmp out of qsort's comparator,
// through wasi-libc's frames, which the pass did not lower.
static jmp_buf *compare_env;
static int compares;
static int compare_or_bail(const void *x, const void *y) {
	if (++compares == 5)
		longjmp(*compare_env, 99);
	return *(const int *)x - *(const int *)y;
}
static void from_callback(void) {
	jmp_buf env;
	int values[64];
	for (int i = 0; i < 64; i++)
		values[i] = 64 - i;
	compare_env = &env;
	compares = 0;
	int r = setjmp(env);
	if (r == 0)
		qsort(values, 64, sizeof values[0], compare_or_bail);
	check("longjmp from a callback through libc's qsort", r == 99 && compares == 5, "");
}

// longjmp through a pointer, as libpng keeps it (png_set_longjmp_fn).
typedef void (*longjmp_fn)(jmp_buf, int);
static volatile longjmp_fn stored_longjmp = longjmp;
__attribute__((noinline)) static void error_through_pointer(jmp_buf env) { stored_longjmp(env, 5); }
static void via_pointer(void) {
	jmp_buf env;
	int r = setjmp(env);
	if (r == 0)
		error_through_pointer(env);
	check("longjmp called through a function pointer", r == 5, "");
}

// The other spellings (setjmp.h maps them to setjmp and longjmp).
static void other_spellings(void) {
	sigjmp_buf env;
	int r = sigsetjmp(env, 1);
	if (r == 0)
		siglongjmp(env, 3);
	jmp_buf env2;
	int r2 = _setjmp(env2);
	if (r2 == 0)
		_longjmp(env2, 4);
	check("sigsetjmp/siglongjmp and _setjmp/_longjmp", r == 3 && r2 == 4, "");
}

// A setjmp never jumped to costs nothing but its calls.
static void never_jumped(void) {
	jmp_buf env;
	volatile int sum = 0;
	if (setjmp(env) == 0) {
		for (int i = 0; i < 10; i++)
			sum += i;
	} else {
		sum = -1;
	}
	check("setjmp never jumped to", sum == 45, "");
}

// Memory malloc'd between setjmp and longjmp is the program's to free:
// nothing in the runtime keeps or leaks it.
static void heap_survives(void) {
	jmp_buf env;
	char *volatile buf = NULL;
	int r = setjmp(env);
	if (r == 0) {
		buf = malloc(1000);
		memset(buf, 'x', 1000);
		jump(env, 1);
	}
	int ok = buf != NULL && buf[999] == 'x';
	free(buf);
	check("the heap is untouched by a longjmp", ok, "");
}

// The stack pointer as a callee sees it: the same before and after the
// rounds only if every longjmp put it back.
static volatile uintptr_t probed;
__attribute__((noinline)) static uintptr_t stack_probe(void) {
	volatile int local = 0;
	probed = (uintptr_t)&local;
	return probed;
}

int main(int argc, char **argv) {
	int rounds = argc > 1 ? atoi(argv[1]) : 1;
	uintptr_t stack_before = stack_probe();
	size_t pages_before = 0;
	for (round_no = 0; round_no < rounds; round_no++) {
		returns_value();
		zero_becomes_one();
		across_frames();
		loop_back();
		nested();
		two_sites();
		from_callback();
		via_pointer();
		other_spellings();
		never_jumped();
		heap_survives();
		if (round_no == 0)
			pages_before = __builtin_wasm_memory_size(0);
	}
	round_no = 0;  // the checks after the rounds print
	check("the stack pointer is back", stack_probe() == stack_before, "");
	check("memory did not grow after the first round", __builtin_wasm_memory_size(0) == pages_before, "");
	if (failures == 0)
		printf("PASS: %d rounds\n", rounds);
	return failures == 0 ? 0 : 1;
}
