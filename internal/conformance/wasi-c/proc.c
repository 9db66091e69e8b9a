// proc_exit with a status (the harness expects 42 and this program's
// checks all passed), proc_raise, sched_yield.
//
// Each expected value is what wasmtime answers (measured 2026-12-01 with
// wasmtime-go v39; TestWASICWasmtime keeps it so); where Airlock answers
// otherwise by design, on_wasmtime() picks the expectation and a comment
// beside it says why.
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

// proc_raise is in the preview1 spec and Airlock's table, but wasi-libc's
// header no longer declares it.
__attribute__((import_module("wasi_snapshot_preview1"), import_name("proc_raise"))) int32_t raw_proc_raise(int32_t sig);

static int cleanup_ran;
static void cleanup(void) { cleanup_ran = 1; }

int main(void) {
	on_wasmtime();
	check_errno("sched_yield", __wasi_sched_yield(), __WASI_ERRNO_SUCCESS);
	// proc_raise: wasmtime answers ENOTSUP (to a signal and to 0 alike),
	// and the program goes on.
	check_errno("proc_raise SIGTERM", (__wasi_errno_t)raw_proc_raise(15), __WASI_ERRNO_NOTSUP);
	check_errno("proc_raise 0", (__wasi_errno_t)raw_proc_raise(0), __WASI_ERRNO_NOTSUP);
	// Output written before proc_exit reaches the host: the harness sees
	// these lines, and the PASS line, only if it does.
	atexit(cleanup);
	int status = finish();
	fflush(stdout);
	// proc_exit ends the program at once with the status: the harness
	// expects 42 (1 if a check failed). atexit handlers do not run.
	__wasi_proc_exit(status == 0 ? 42 : 1);
	printf("after proc_exit: the program went on (cleanup ran: %d)\n", cleanup_ran);
	return 3;
}
