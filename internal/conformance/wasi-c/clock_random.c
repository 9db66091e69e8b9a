// clock_res_get, clock_time_get, random_get, sched_yield.
//
// Each expected value is what wasmtime answers (measured 2026-12-01 with
// wasmtime-go v39; TestWASICWasmtime keeps it so); where Airlock answers
// otherwise by design, on_wasmtime() picks the expectation and a comment
// beside it says why.
#include <string.h>
#include <time.h>

#include "check.h"

int main(void) {
	on_wasmtime();
	__wasi_timestamp_t res, t1, t2;

	// Resolutions: wasmtime answers 1 ns, Airlock 1 us; a program may rely
	// only on a positive one.
	check_errno("clock_res_get realtime", __wasi_clock_res_get(__WASI_CLOCKID_REALTIME, &res), __WASI_ERRNO_SUCCESS);
	check_u64("clock_res_get realtime: the host's resolution", res, on_wasmtime() ? 1 : 1000);
	check_true("clock_res_get realtime: within 1 ns..1 ms", res >= 1 && res <= 1000000, "1 <= res <= 1e6");
	check_errno("clock_res_get monotonic", __wasi_clock_res_get(__WASI_CLOCKID_MONOTONIC, &res), __WASI_ERRNO_SUCCESS);
	check_true("clock_res_get monotonic: within 1 ns..1 ms", res >= 1 && res <= 1000000, "1 <= res <= 1e6");
	// The CPU-time clocks: wasmtime answers EBADF (it has none). Airlock
	// deliberately serves them, as the run's elapsed time (its guest is the
	// only thread of its process), so C's clock() and Python's
	// time.process_time() work.
	__wasi_errno_t cpu = on_wasmtime() ? __WASI_ERRNO_BADF : __WASI_ERRNO_SUCCESS;
	check_errno("clock_res_get process cputime", __wasi_clock_res_get(__WASI_CLOCKID_PROCESS_CPUTIME_ID, &res), cpu);
	check_errno("clock_res_get thread cputime", __wasi_clock_res_get(__WASI_CLOCKID_THREAD_CPUTIME_ID, &res), cpu);
	check_errno("clock_time_get process cputime", __wasi_clock_time_get(__WASI_CLOCKID_PROCESS_CPUTIME_ID, 0, &t1), cpu);
	check_errno("clock_time_get thread cputime", __wasi_clock_time_get(__WASI_CLOCKID_THREAD_CPUTIME_ID, 0, &t1), cpu);
	// An id the spec does not define: wasmtime traps ("Invalid enum value
	// Clockid"), ending the program; Airlock deliberately answers EINVAL,
	// as the spec's errno for a bad argument (an errno, never a crash).
	if (!on_wasmtime())
		check_errno("clock_res_get of clock id 99", __wasi_clock_res_get(99, &res), __WASI_ERRNO_INVAL);

	check_errno("clock_time_get realtime", __wasi_clock_time_get(__WASI_CLOCKID_REALTIME, 1, &t1), __WASI_ERRNO_SUCCESS);
	// 2020-01-01 < now < 2100-01-01, in ns since the epoch.
	check_true("clock_time_get realtime: a date this century", t1 > 1577836800ull * 1000000000 && t1 < 4102444800ull * 1000000000, "2020 < t < 2100");
	check_errno("clock_time_get monotonic", __wasi_clock_time_get(__WASI_CLOCKID_MONOTONIC, 1, &t1), __WASI_ERRNO_SUCCESS);
	for (volatile int i = 0; i < 100000; i++)
		;
	check_errno("clock_time_get monotonic again", __wasi_clock_time_get(__WASI_CLOCKID_MONOTONIC, 0, &t2), __WASI_ERRNO_SUCCESS);
	check_true("clock_time_get monotonic: never goes back", t2 >= t1, "t2 >= t1");
	// The precision argument is a hint: any value is accepted.
	check_errno("clock_time_get with precision 2^64-1", __wasi_clock_time_get(__WASI_CLOCKID_MONOTONIC, UINT64_MAX, &t2), __WASI_ERRNO_SUCCESS);
	if (!on_wasmtime()) // wasmtime traps (above)
		check_errno("clock_time_get of clock id 99", __wasi_clock_time_get(99, 0, &t1), __WASI_ERRNO_INVAL);
	// What C programs call: clock_gettime over clock_time_get.
	struct timespec ts;
	check_i64("clock_gettime CLOCK_REALTIME", clock_gettime(CLOCK_REALTIME, &ts), 0);
	check_true("clock_gettime: seconds this century", ts.tv_sec > 1577836800 && ts.tv_sec < 4102444800, "2020 < t < 2100");
	check_true("clock_gettime: nanoseconds below 1e9", ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000, "0 <= ns < 1e9");

	uint8_t a[64], b[64], zero[64] = {0};
	memset(a, 0, sizeof a);
	memset(b, 0, sizeof b);
	check_errno("random_get 0 bytes", __wasi_random_get(a, 0), __WASI_ERRNO_SUCCESS);
	check_mem("random_get 0 bytes: nothing written", a, zero, sizeof a);
	check_errno("random_get 64 bytes", __wasi_random_get(a, sizeof a), __WASI_ERRNO_SUCCESS);
	check_errno("random_get 64 more", __wasi_random_get(b, sizeof b), __WASI_ERRNO_SUCCESS);
	// 2^-512 odds of a false failure.
	check_true("random_get: not all zero", memcmp(a, zero, sizeof a) != 0, "some byte set");
	check_true("random_get: two reads differ", memcmp(a, b, sizeof a) != 0, "a != b");
	static uint8_t big[1 << 20];
	check_errno("random_get 1 MiB", __wasi_random_get(big, sizeof big), __WASI_ERRNO_SUCCESS);
	check_true("random_get 1 MiB: the last 64 bytes are filled too", memcmp(big + sizeof big - 64, zero, 64) != 0, "filled to the end");

	// wasmtime: ESUCCESS.
	check_errno("sched_yield", __wasi_sched_yield(), __WASI_ERRNO_SUCCESS);
	return finish();
}
