// args_get, args_sizes_get, environ_get, environ_sizes_get. The harness
// passes argv "args_environ.wasm" "alpha" "two words" "" and the
// environment CONFORMANCE_HOST, GREETING="hello world", EMPTY="" (in no
// fixed order: Airlock's Env is a map).
//
// Each expected value is what wasmtime answers (measured 2026-12-01 with
// wasmtime-go v39; TestWASICWasmtime keeps it so); where Airlock answers
// otherwise by design, on_wasmtime() picks the expectation and a comment
// beside it says why.
#include <stdlib.h>
#include <string.h>

#include "check.h"

int main(void) {
	on_wasmtime();
	__wasi_size_t argc = 0, argv_size = 0;
	// wasmtime: ESUCCESS, 4 arguments, 35 bytes with their NULs.
	check_errno("args_sizes_get", __wasi_args_sizes_get(&argc, &argv_size), __WASI_ERRNO_SUCCESS);
	check_u64("args_sizes_get: count", argc, 4);
	check_u64("args_sizes_get: bytes", argv_size, sizeof "args_environ.wasm" + sizeof "alpha" + sizeof "two words" + sizeof "");
	uint8_t *argv_buf = malloc(argv_size + 1);
	uint8_t **argv = malloc((argc + 1) * sizeof *argv);
	check_errno("args_get", __wasi_args_get(argv, argv_buf), __WASI_ERRNO_SUCCESS);
	if (argc == 4) {
		check_str("args_get: argv[0] is the program's name", (char *)argv[0], "args_environ.wasm");
		check_str("args_get: argv[1]", (char *)argv[1], "alpha");
		check_str("args_get: argv[2] keeps its space", (char *)argv[2], "two words");
		check_str("args_get: argv[3] is empty", (char *)argv[3], "");
		// The strings are packed back to back, each with its NUL.
		check_true("args_get: argv[1] follows argv[0]'s NUL", argv[1] == argv[0] + sizeof "args_environ.wasm", "packed");
	}
	// Buffers past the end of linear memory: wasmtime traps ("Pointer out
	// of bounds"), ending the program. Airlock deliberately answers EFAULT
	// and lets the guest go on (a hostile argument gets an errno: README),
	// so these run on Airlock only.
	if (!on_wasmtime()) {
		check_errno("args_get: argv past the end of memory", __wasi_args_get((uint8_t **)0xfffffff0, argv_buf), __WASI_ERRNO_FAULT);
		check_errno("args_sizes_get: result past the end of memory", __wasi_args_sizes_get((__wasi_size_t *)0xfffffffe, &argv_size), __WASI_ERRNO_FAULT);
	}

	__wasi_size_t envc = 0, env_size = 0;
	check_errno("environ_sizes_get", __wasi_environ_sizes_get(&envc, &env_size), __WASI_ERRNO_SUCCESS);
	check_u64("environ_sizes_get: count", envc, 3);
	const char *want[] = {"GREETING=hello world", "EMPTY=", NULL};
	size_t host_len = strlen("CONFORMANCE_HOST=") + strlen(getenv("CONFORMANCE_HOST")) + 1;
	check_u64("environ_sizes_get: bytes", env_size, host_len + sizeof "GREETING=hello world" + sizeof "EMPTY=");
	uint8_t *env_buf = malloc(env_size + 1);
	uint8_t **env = malloc((envc + 1) * sizeof *env);
	check_errno("environ_get", __wasi_environ_get(env, env_buf), __WASI_ERRNO_SUCCESS);
	if (!on_wasmtime()) // wasmtime traps (above)
		check_errno("environ_get: strings past the end of memory", __wasi_environ_get(env, (uint8_t *)0xfffffff8), __WASI_ERRNO_FAULT);
	for (int i = 0; want[i]; i++) {
		int found = 0;
		for (__wasi_size_t j = 0; j < envc; j++)
			found |= strcmp((char *)env[j], want[i]) == 0;
		check_true(want[i], found, "in the environment");
	}
	// What C programs read: libc's getenv over environ_get.
	check_str("getenv GREETING", getenv("GREETING"), "hello world");
	check_str("getenv EMPTY", getenv("EMPTY"), "");
	check_true("getenv of an unset name", getenv("HOME") == NULL, "NULL: nothing is inherited");
	return finish();
}
