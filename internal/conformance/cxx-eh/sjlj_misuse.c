// A guest that misuses setjmp/longjmp on purpose, one way per argv[1]:
// each must end as a trap, an abort or a clean exit of that run, never a
// host panic or hang (internal/conformance/cxxeh_test.go says which).
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jmp_buf stale;

// Arms stale and returns: its activation is gone.
__attribute__((noinline)) static void arm_and_return(void) {
	if (setjmp(stale) != 0)
		puts("resumed a returned function");
}
__attribute__((noinline)) static void jump_stale(void) { longjmp(stale, 1); }

__attribute__((noinline)) static void jump_to(void *env) { longjmp(*(jmp_buf *)env, 1); }

// Recursion whose every level has a setjmp, so every call down is an
// invoke_: as deep as the guest likes, unless the host stops it.
static volatile int deepest, nest_limit = 1 << 30;
__attribute__((noinline)) static int nest(int n) {
	jmp_buf env;
	deepest = n;
	if (n >= nest_limit)
		return 0;
	if (setjmp(env) != 0)
		return -1;
	return nest(n + 1) + 1;
}

__attribute__((noinline)) static void exit_inside(int code) { exit(code); }

int main(int argc, char **argv) {
	setvbuf(stdout, NULL, _IONBF, 0);
	const char *mode = argc > 1 ? argv[1] : "";
	if (strcmp(mode, "no-setjmp") == 0) {
		// No setjmp active anywhere: the runtime says so and aborts.
		jmp_buf never_armed;
		memset(never_armed, 0, sizeof never_armed);
		puts("before");
		longjmp(never_armed, 1);
	}
	if (strcmp(mode, "stale") == 0) {
		// The setjmp's function returned; main's own setjmp is active but
		// is not the one named, so the longjmp goes past it and finds
		// nothing: an abort, not a jump into a dead frame.
		jmp_buf mine;
		arm_and_return();
		if (setjmp(mine) == 0)
			jump_stale();
		puts("caught by the wrong setjmp");
		return 0;
	}
	if (strcmp(mode, "garbage-env") == 0) {
		// A jmp_buf pointer past memory: the guest's own load traps.
		jmp_buf mine;
		if (setjmp(mine) == 0)
			jump_to((void *)(uintptr_t)0xfffffff0u);
		puts("caught a garbage jmp_buf");
		return 0;
	}
	if (strcmp(mode, "nest") == 0) {
		if (argc > 2)
			nest_limit = atoi(argv[2]);
		nest(0);
		printf("nest %d\nreturned\n", deepest);
		return 0;
	}
	if (strcmp(mode, "forever") == 0) {
		// Jumps back forever: only the run's deadline ends it.
		jmp_buf env;
		volatile unsigned long i = 0;
		setjmp(env);
		i++;
		jump_to(env);
	}
	if (strcmp(mode, "exit-in-invoke") == 0) {
		jmp_buf env;
		if (setjmp(env) == 0)
			exit_inside(7);
		return 0;
	}
	fprintf(stderr, "sjlj_misuse: unknown mode %s\n", mode);
	return 2;
}
