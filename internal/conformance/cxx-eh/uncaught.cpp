// An exception nothing catches: libc++abi's terminate handler names it on
// stderr and aborts, after the guards on the way ran (unwinding here is
// one phase: each cleanup runs before the next frame is looked at).
#include <cstdio>
#include <stdexcept>

struct Guard {
	const char *name;
	~Guard() { std::printf("guard %s destroyed\n", name); }
};

__attribute__((noinline)) static void fail(const char *why) {
	Guard g{"inner"};
	throw std::runtime_error(why);
}

int main() {
	// Unbuffered: abort() flushes nothing.
	std::setvbuf(stdout, nullptr, _IONBF, 0);
	std::printf("before\n");
	{
		Guard g{"outer"};
		fail("nobody catches this");
	}
	std::printf("not reached\n");
	return 0;
}
