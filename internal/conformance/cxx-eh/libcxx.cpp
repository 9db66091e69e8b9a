// Exceptions thrown by libc++'s own compiled code (libc++.a, built with
// exceptions by scripts/build-cxx-eh.sh), not by a header's inline code
// alone: each is caught as its type with libc++'s message. Same output
// protocol as exceptions.cpp: "NAME: ok" lines on the first round, then
// "PASS: N rounds".
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

static int round_no, failures;

static void check(const char *name, bool ok, const std::string &detail = "") {
	if (!ok) {
		failures++;
		std::printf("%s: FAIL %s (round %d)\n", name, detail.c_str(), round_no);
	} else if (round_no == 0) {
		std::printf("%s: ok\n", name);
	}
}

// Runs f and names what it threw: the dynamic type's family and what().
template <typename F> static std::string thrown(F f) {
	try {
		f();
	} catch (const std::invalid_argument &e) {
		return std::string("invalid_argument: ") + e.what();
	} catch (const std::out_of_range &e) {
		return std::string("out_of_range: ") + e.what();
	} catch (const std::length_error &e) {
		return std::string("length_error: ") + e.what();
	} catch (const std::regex_error &e) {
		return std::string("regex_error: ") + std::to_string(e.code());
	} catch (const std::ios_base::failure &e) {
		return "ios_base::failure";
	} catch (const std::system_error &e) {
		return std::string("system_error: ") + e.what();
	} catch (const std::bad_alloc &) {
		return "bad_alloc";
	} catch (const std::bad_function_call &) {
		return "bad_function_call";
	} catch (const std::exception &e) {
		return std::string("exception: ") + e.what();
	} catch (...) {
		return "something else";
	}
	return "nothing";
}

static volatile int sink;
static const char *volatile digits = "12x";

int main(int argc, char **argv) {
	int rounds = argc > 1 ? std::atoi(argv[1]) : 1;
	size_t pages_before = 0;
	for (round_no = 0; round_no < rounds; round_no++) {
		std::string got;
		got = thrown([] { sink = std::stoi("not a number"); });
		check("std::stoi throws invalid_argument", got == "invalid_argument: stoi: no conversion", got);
		got = thrown([] { sink = std::stoi("99999999999999"); });
		check("std::stoi throws out_of_range", got == "out_of_range: stoi: out of range", got);
		got = thrown([] { sink = (int)std::stod("x"); });
		check("std::stod throws invalid_argument", got == "invalid_argument: stod: no conversion", got);
		check("std::stoi parses what it can", std::stoi(digits) == 12);
		got = thrown([] { sink = std::string("abc").at(5); });
		check("std::string::at throws out_of_range", got == "out_of_range: basic_string", got);
		got = thrown([] { sink = (int)std::string("abc").substr(9).size(); });
		check("std::string::substr throws out_of_range", got == "out_of_range: basic_string", got);
		got = thrown([] { sink = std::vector<int>(3).at(3); });
		check("std::vector::at throws out_of_range", got == "out_of_range: vector", got);
		got = thrown([] {
			std::vector<int> v;
			v.reserve(v.max_size() + 1);
		});
		check("std::vector::reserve throws length_error", got == "length_error: vector", got);
		got = thrown([] { std::regex r("(unclosed"); });
		check("std::regex throws regex_error", got == "regex_error: " + std::to_string(std::regex_constants::error_paren), got);
		got = thrown([] {
			std::istringstream in("x");
			in.exceptions(std::ios::failbit);
			int n;
			in >> n;
			sink = n;
		});
		check("a stream with exceptions() throws ios_base::failure", got == "ios_base::failure", got);
		got = thrown([] { throw std::system_error(std::make_error_code(std::errc::invalid_argument), "open"); });
		check("std::system_error's what() names its code", got.rfind("system_error: open: ", 0) == 0, got);
		got = thrown([] {
			std::string s;
			s.resize(1500u * 1000 * 1000);
			sink = s[0];
		});
		check("std::string's allocation throws bad_alloc", got == "bad_alloc", got);
		got = thrown([] {
			std::function<void()> f;
			f();
		});
		check("an empty std::function throws bad_function_call", got == "bad_function_call", got);
		// call_once's implementation (libc++.a) catches the callable's
		// exception, resets the flag, and rethrows it.
		std::once_flag flag;
		int calls = 0;
		got = thrown([&] { std::call_once(flag, [&] { calls++; throw std::runtime_error("first"); }); });
		std::call_once(flag, [&] { calls++; });
		check("std::call_once rethrows and runs again", got == "exception: first" && calls == 2, got);
		// pybind11's shape: a low-level error wrapped in a higher-level
		// one (libc++'s nested_exception holds the first as an
		// exception_ptr while the second is thrown: two live at once),
		// then unwrapped by a translator.
		std::string outer, inner;
		try {
			try {
				sink = std::stoi("bad");
			} catch (...) {
				std::throw_with_nested(std::runtime_error("while parsing"));
			}
		} catch (const std::exception &e) {
			outer = e.what();
			try {
				std::rethrow_if_nested(e);
			} catch (const std::invalid_argument &n) {
				inner = n.what();
			}
		}
		check("throw_with_nested and rethrow_if_nested", outer == "while parsing" && inner == "stoi: no conversion", outer + " / " + inner);
		if (round_no == 0)
			pages_before = __builtin_wasm_memory_size(0);
	}
	round_no = 0;
	check("memory did not grow after the first round", __builtin_wasm_memory_size(0) == pages_before);
	if (failures == 0)
		std::printf("PASS: %d rounds\n", rounds);
	return failures == 0 ? 0 : 1;
}
