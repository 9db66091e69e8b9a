// setjmp/longjmp and C++ exceptions in one program, compiled with both
// lowerings: each passes the other's handlers by. A longjmp is not an
// exception (catch (...) does not see it) and an exception is not a
// longjmp (a setjmp's function lets it through to the catch above).
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

static int round_no, failures;

static void check(const char *name, bool ok) {
	if (!ok) {
		failures++;
		std::printf("%s: FAIL (round %d)\n", name, round_no);
	} else if (round_no == 0) {
		std::printf("%s: ok\n", name);
	}
}

__attribute__((noinline)) static void jump(std::jmp_buf env, int v) { std::longjmp(env, v); }
__attribute__((noinline)) static void thrower(int v) { throw std::runtime_error(std::to_string(v)); }

static int caught_all;
__attribute__((noinline)) static void catch_all_around_jump(std::jmp_buf env) {
	try {
		jump(env, 8);
	} catch (...) {
		caught_all++;
	}
}

static void longjmp_through_catch_all() {
	std::jmp_buf env;
	caught_all = 0;
	int r = setjmp(env);
	if (r == 0)
		catch_all_around_jump(env);
	check("a longjmp passes catch (...) by", r == 8 && caught_all == 0);
}

__attribute__((noinline)) static int setjmp_then_throw(int v) {
	std::jmp_buf env;
	if (setjmp(env) != 0)
		return -1;
	thrower(v);
	return 0;
}

static void throw_through_setjmp_function() {
	bool caught = false;
	try {
		setjmp_then_throw(3);
	} catch (const std::runtime_error &e) {
		caught = std::string(e.what()) == "3";
	}
	check("an exception passes a setjmp's function by", caught);
}

static void both_in_one_function() {
	std::jmp_buf env;
	volatile int jumps = 0;
	volatile bool caught = false;
	int r = setjmp(env);
	if (r == 0) {
		try {
			thrower(1);
		} catch (const std::exception &) {
			caught = true;
		}
		jumps = jumps + 1;
		jump(env, 2);
	}
	check("catch and setjmp in one function", r == 2 && caught && jumps == 1);
}

int main(int argc, char **argv) {
	int rounds = argc > 1 ? std::atoi(argv[1]) : 1;
	for (round_no = 0; round_no < rounds; round_no++) {
		longjmp_through_catch_all();
		throw_through_setjmp_function();
		both_in_one_function();
	}
	if (failures == 0)
		std::printf("PASS: %d rounds\n", rounds);
	return failures == 0 ? 0 : 1;
}
