// C++ exceptions lowered to invoke_ calls (scripts/build-cxx-eh.sh), every
// shape a library like pybind11 relies on. Each check prints "NAME: ok" or
// "NAME: FAIL ..." on its first round; later rounds (argv[1] of them in
// all, default 1) only count failures, and the last line is
// "PASS: N rounds" when every round passed. Counters check that every
// exception object and every RAII guard was destroyed, and the stack
// pointer and memory size that nothing leaked across the rounds.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>

static int round_no, failures;
static int live_objects;   // exception objects alive (Base's constructors/destructor)
static int guards_destroyed;

static void check(const char *name, bool ok, const char *detail = "") {
	if (!ok) {
		failures++;
		std::printf("%s: FAIL %s (round %d)\n", name, detail, round_no);
	} else if (round_no == 0) {
		std::printf("%s: ok\n", name);
	}
}

struct Base {
	int code;
	explicit Base(int c) : code(c) { live_objects++; }
	Base(const Base &o) : code(o.code) { live_objects++; }
	virtual ~Base() { live_objects--; }
	virtual const char *kind() const { return "Base"; }
};
struct Derived : Base {
	explicit Derived(int c) : Base(c) {}
	const char *kind() const override { return "Derived"; }
};
struct Other : Base {  // a sibling: a catch of Derived must not take it
	explicit Other(int c) : Base(c) {}
};
// Python-like errors a translator makes, as pybind11 does.
struct PyError {
	std::string type, message;
};

struct Guard {
	~Guard() { guards_destroyed++; }
};

// Thrown by pointer; main does not count it as an exception object.
static Derived pointer_target(3);

// Non-inlined so every throw crosses real calls.
__attribute__((noinline)) static void throw_derived(int c) {
	Guard g;
	throw Derived(c);
}
__attribute__((noinline)) static void deep(int depth, int c) {
	Guard g;
	if (depth == 0)
		throw_derived(c);
	else
		deep(depth - 1, c);
}
__attribute__((noinline)) static int may_throw_int(int v) {
	if (v > 0)
		throw v;
	return -v;
}

static void by_exact_type() {
	int got = 0;
	try {
		throw_derived(7);
	} catch (Other &) {
		got = -1;
	} catch (Derived &d) {
		got = d.code;
	}
	check("catch by exact type", got == 7);
}

static void by_base_class() {
	const char *kind = "";
	int code = 0;
	try {
		throw_derived(11);
	} catch (const Base &b) {
		kind = b.kind();
		code = b.code;
	}
	check("catch by base class", std::strcmp(kind, "Derived") == 0 && code == 11);

	Base *caught = nullptr;
	try {
		throw &pointer_target;
	} catch (Base *b) {
		caught = b;
	}
	check("catch a pointer by base pointer", caught == &pointer_target);
}

static void catch_all() {
	bool caught = false;
	try {
		may_throw_int(5);
	} catch (double) {
	} catch (...) {
		caught = true;
	}
	check("catch (...)", caught);
	check("no throw returns", may_throw_int(-4) == 4);
}

static void rethrow() {
	const void *inner = nullptr, *outer = nullptr;
	int code = 0;
	try {
		try {
			throw_derived(21);
		} catch (Base &b) {
			inner = &b;
			throw;
		}
	} catch (Derived &d) {
		outer = &d;
		code = d.code;
	}
	check("rethrow (throw;) keeps the object", inner != nullptr && inner == outer && code == 21);
}

static void throw_inside_catch() {
	int outer_code = 0, inner_code = 0, uncaught_inside = -1;
	try {
		throw_derived(1);
	} catch (Derived &first) {
		try {
			throw Other(2);
		} catch (Other &second) {
			inner_code = second.code;
			// Two exception objects live at once.
			uncaught_inside = live_objects;
		}
		outer_code = first.code;  // still intact after the second died
	}
	check("throw inside a catch block", outer_code == 1 && inner_code == 2 && uncaught_inside == 2);

	// A second exception escaping a catch block replaces the first.
	int code = 0;
	try {
		try {
			throw_derived(30);
		} catch (Derived &) {
			throw Other(31);
		}
	} catch (Other &o) {
		code = o.code;
	}
	check("a throw escaping a catch block replaces the first", code == 31);
}

// pybind11's shape: in a catch (...), rethrow and translate to another
// type, both by throw; and through std::exception_ptr.
static void translate_current() {
	try {
		throw;
	} catch (const std::out_of_range &e) {
		throw PyError{"IndexError", e.what()};
	} catch (const std::exception &e) {
		throw PyError{"RuntimeError", e.what()};
	}
}
static void translate_ptr(std::exception_ptr p) {
	try {
		std::rethrow_exception(p);
	} catch (const std::invalid_argument &e) {
		throw PyError{"ValueError", e.what()};
	}
}

static void nested_translation() {
	PyError got;
	try {
		try {
			throw std::out_of_range("index 9 out of range");
		} catch (...) {
			translate_current();
		}
	} catch (const PyError &e) {
		got = e;
	}
	check("translate in catch (...) and rethrow", got.type == "IndexError" && got.message == "index 9 out of range");

	got = PyError{};
	try {
		try {
			throw std::runtime_error("bad state");
		} catch (...) {
			translate_current();
		}
	} catch (const PyError &e) {
		got = e;
	}
	check("translate falls to the base translator", got.type == "RuntimeError" && got.message == "bad state");

	got = PyError{};
	try {
		std::exception_ptr p;
		try {
			throw std::invalid_argument("not a number");
		} catch (...) {
			p = std::current_exception();
		}
		translate_ptr(p);
	} catch (const PyError &e) {
		got = e;
	}
	check("translate through exception_ptr", got.type == "ValueError" && got.message == "not a number");
}

static void destructors_run() {
	int before = guards_destroyed, code = 0;
	try {
		Guard here;
		deep(4, 5);
	} catch (Derived &d) {
		code = d.code;
	}
	// deep: 5 guards, throw_derived: 1, here: 1.
	check("destructors run while unwinding", code == 5 && guards_destroyed - before == 7);
}

static char *volatile kept;

static void library_exceptions() {
	bool bad_alloc = false;
	try {
		// More than wasm32 can address: malloc refuses without growing.
		volatile size_t huge = (size_t)-1 - 4096;
		kept = new char[huge];  // kept: an unused allocation may be elided
	} catch (const std::bad_alloc &) {
		bad_alloc = true;
	}
	check("operator new throws std::bad_alloc", bad_alloc);

	std::string what;
	try {
		throw std::runtime_error(std::string("built ") + "at run time");
	} catch (const std::exception &e) {
		what = e.what();
	}
	check("std::runtime_error's what()", what == "built at run time");
}

static void catch_by_value() {
	int copies_before = live_objects, code = 0;
	try {
		throw_derived(40);
	} catch (Base b) {  // a copy of the Base part
		code = b.code;
		check("catch by value copies", live_objects == copies_before + 2);
	}
	check("caught by value", code == 40);
}

static void uncaught_count() {
	struct Probe {
		int *seen;
		~Probe() { *seen = std::uncaught_exceptions(); }
	};
	int seen = -1;
	try {
		Probe p{&seen};
		throw_derived(0);
	} catch (...) {
	}
	check("uncaught_exceptions during unwinding", seen == 1 && std::uncaught_exceptions() == 0);
}

// The stack pointer as a callee sees it: the same before and after the
// rounds only if every unwind put it back.
static volatile uintptr_t probed;
__attribute__((noinline)) static uintptr_t stack_probe() {
	volatile int local = 0;
	probed = (uintptr_t)&local;
	return probed;
}

int main(int argc, char **argv) {
	int rounds = argc > 1 ? std::atoi(argv[1]) : 1;
	uintptr_t stack_before = stack_probe();
	live_objects = 0;  // pointer_target's
	size_t pages_before = 0;
	for (round_no = 0; round_no < rounds; round_no++) {
		by_exact_type();
		by_base_class();
		catch_all();
		rethrow();
		throw_inside_catch();
		nested_translation();
		destructors_run();
		library_exceptions();
		catch_by_value();
		uncaught_count();
		check("every exception object destroyed", live_objects == 0);
		if (round_no == 0)
			pages_before = __builtin_wasm_memory_size(0);
	}
	round_no = 0;  // the checks after the rounds print
	check("the stack pointer is back", stack_probe() == stack_before);
	check("memory did not grow after the first round", __builtin_wasm_memory_size(0) == pages_before);
	if (failures == 0)
		std::printf("PASS: %d rounds\n", rounds);
	return failures == 0 ? 0 : 1;
}
