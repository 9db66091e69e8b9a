// What setjmp/longjmp cost: N calls of a small function, plain (no setjmp
// in the caller), as an invoke_ round trip through the host (the caller
// has called setjmp, so every call that may longjmp is one), and with a
// longjmp every time back to the caller's setjmp (an unwind through the
// host). Prints nanoseconds per call for each.
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile int sink;

__attribute__((noinline)) static int callee(int x) { return x + sink; }
__attribute__((noinline)) static void jumper(jmp_buf env, int x) { longjmp(env, x | 1); }

static double now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

__attribute__((noinline)) static double plain(int n) {
	int s = 0;
	double start = now_ns();
	for (int i = 0; i < n; i++)
		s += callee(i);
	sink = s;
	return (now_ns() - start) / n;
}

__attribute__((noinline)) static double invoke(int n) {
	jmp_buf env;
	volatile int s = 0;
	double start = now_ns();
	if (setjmp(env) == 0)
		for (int i = 0; i < n; i++)
			s += callee(i);
	sink = s;
	return (now_ns() - start) / n;
}

__attribute__((noinline)) static double jumped(int n) {
	jmp_buf env;
	volatile int i = 0, s = 0;
	double start = now_ns();
	s += setjmp(env);
	if (i < n) {
		i++;
		jumper(env, i);
	}
	sink = s;
	return (now_ns() - start) / n;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 100000;
	double p = plain(n), v = invoke(n), j = jumped(n);
	printf("plain %.2f\ninvoke %.2f\nlongjmp %.2f\n", p, v, j);
	return 0;
}
