// What an invoke_ costs: N calls of the same small function, plain (it is
// noexcept, so no invoke_), inside a try (each call an invoke_ round trip
// through the host), and throwing every time (an unwind through the host
// and a catch). Prints nanoseconds per call for each.
#include <chrono>
#include <cstdio>
#include <cstdlib>

static volatile int sink;

__attribute__((noinline)) static int plain_call(int x) noexcept { return x + sink; }
__attribute__((noinline)) static int may_throw(int x) {
	if (x < 0)
		throw x;
	return x + sink;
}

template <typename F> static double per_call(int n, F f) {
	auto start = std::chrono::steady_clock::now();
	f();
	std::chrono::duration<double, std::nano> d = std::chrono::steady_clock::now() - start;
	return d.count() / n;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? std::atoi(argv[1]) : 100000;
	int s = 0;
	double plain = per_call(n, [&] {
		for (int i = 0; i < n; i++)
			s += plain_call(i);
	});
	double invoke = per_call(n, [&] {
		for (int i = 0; i < n; i++) {
			try {
				s += may_throw(i);
			} catch (int) {
				s--;
			}
		}
	});
	double thrown = per_call(n, [&] {
		for (int i = 0; i < n; i++) {
			try {
				s += may_throw(-1 - i);
			} catch (int v) {
				s += v;
			}
		}
	});
	sink = s;
	std::printf("plain %.2f\ninvoke %.2f\nthrow %.2f\n", plain, invoke, thrown);
	return 0;
}
