// Sparse files, and the sandbox's limits as a WASI program meets them.
// The harness runs this program on Airlock with an 8 MiB filesystem quota,
// 64 files and 64 MiB of memory (wasic_test.go); wasmtime gets a plain host
// directory and no caps, so the limit checks differ by design: each says
// what wasmtime does.
//
// Each expected value is what wasmtime answers (measured 2026-12-01 with
// wasmtime-go v39; TestWASICWasmtime keeps it so); where Airlock answers
// otherwise by design, on_wasmtime() picks the expectation and a comment
// beside it says why.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define MiB (1024 * 1024)
#define GiB (1024ull * MiB)

int main(void) {
	on_wasmtime();
	__wasi_fd_t dir = scratch("limits");
	__wasi_size_t n;

	// --- sparse files: a write far past the end does not store the gap.
	// wasmtime: a host file, as sparse as the host makes it. Airlock's
	// quota counts a file's size, holes included (every file must be able
	// to leave the sandbox whole): within the 8 MiB quota a hole takes no
	// memory; past it, growth is ENOSPC, as on a small disk.
	uint64_t far = on_wasmtime() ? GiB : 4 * MiB;
	int64_t s = open_file(dir, "sparse", __WASI_OFLAGS_CREAT, 1, 1, 0);
	if (s < 0)
		fail_now("open sparse", (__wasi_errno_t)-s);
	__wasi_ciovec_t one = {(const uint8_t *)"!", 1};
	check_errno("pwrite 1 byte far past the end", __wasi_fd_pwrite((__wasi_fd_t)s, &one, 1, far, &n), __WASI_ERRNO_SUCCESS);
	check_u64("a sparse file's size", file_size((__wasi_fd_t)s), far + 1);
	uint8_t buf[8];
	memset(buf, 'x', sizeof buf);
	__wasi_iovec_t iov = {buf, sizeof buf};
	check_errno("pread in the gap", __wasi_fd_pread((__wasi_fd_t)s, &iov, 1, far / 2, &n), __WASI_ERRNO_SUCCESS);
	check_mem("the gap reads as zeros", buf, "\0\0\0\0\0\0\0\0", 8);
	check_errno("pread of the byte written", __wasi_fd_pread((__wasi_fd_t)s, &iov, 1, far, &n), __WASI_ERRNO_SUCCESS);
	check_u64("pread of the byte written: one byte", n, 1);
	check_u64("pread of the byte written: it", buf[0], '!');
	check_errno("set_size to twice as far (a sparse extension)", __wasi_fd_filestat_set_size((__wasi_fd_t)s, 2 * far), __WASI_ERRNO_SUCCESS);
	check_u64("set_size to twice as far: the size", file_size((__wasi_fd_t)s), 2 * far);
	if (on_wasmtime()) {
		check_errno("pwrite 1 byte at 4 GiB", __wasi_fd_pwrite((__wasi_fd_t)s, &one, 1, 4 * GiB, &n), __WASI_ERRNO_SUCCESS);
		check_errno("set_size to 1 TiB", __wasi_fd_filestat_set_size((__wasi_fd_t)s, 1024 * GiB), __WASI_ERRNO_SUCCESS);
	} else {
		check_errno("pwrite 1 byte at 4 GiB, past the quota", __wasi_fd_pwrite((__wasi_fd_t)s, &one, 1, 4 * GiB, &n), __WASI_ERRNO_NOSPC);
		check_errno("set_size to 1 TiB, past the quota", __wasi_fd_filestat_set_size((__wasi_fd_t)s, 1024 * GiB), __WASI_ERRNO_NOSPC);
		check_u64("a refused growth leaves the size", file_size((__wasi_fd_t)s), 2 * far);
	}
	must("fd_close", __wasi_fd_close((__wasi_fd_t)s));
	must("unlink sparse", __wasi_path_unlink_file(dir, "sparse"));

	// --- the byte quota: writes stop with ENOSPC at 8 MiB on Airlock
	// (wasmtime: no quota, all 12 MiB written).
	static uint8_t chunk[MiB];
	memset(chunk, 'a', sizeof chunk);
	int64_t big = open_file(dir, "big", __WASI_OFLAGS_CREAT, 0, 1, 0);
	if (big < 0)
		fail_now("open big", (__wasi_errno_t)-big);
	__wasi_errno_t e = 0;
	uint64_t written = 0;
	for (int i = 0; i < 12 && e == 0; i++) {
		__wasi_ciovec_t c = {chunk, sizeof chunk};
		e = __wasi_fd_write((__wasi_fd_t)big, &c, 1, &n);
		if (e == 0)
			written += n;
	}
	if (on_wasmtime()) {
		check_errno("12 MiB of writes", e, __WASI_ERRNO_SUCCESS);
		check_u64("12 MiB of writes: all written", written, 12 * MiB);
	} else {
		check_errno("12 MiB of writes under an 8 MiB quota", e, __WASI_ERRNO_NOSPC);
		check_true("under an 8 MiB quota: at most 8 MiB stored", written <= 8 * MiB && written >= 7 * MiB, "7 MiB <= written <= 8 MiB");
	}
	must("fd_close", __wasi_fd_close((__wasi_fd_t)big));
	// What is freed can be used again.
	must("unlink big", __wasi_path_unlink_file(dir, "big"));
	write_file(dir, "again", "room again");
	check_true("after the unlink, a file can be written", 1, "written");

	// --- the file quota: 64 names in all on Airlock (wasmtime: none).
	char name[32];
	int made = 0;
	e = 0;
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof name, "n%d", i);
		e = __wasi_path_create_directory(dir, name);
		if (e)
			break;
		made++;
	}
	if (on_wasmtime()) {
		check_i64("100 directories", made, 100);
	} else {
		check_errno("past the file quota: ENOSPC", e, __WASI_ERRNO_NOSPC);
		// The tree holds /, /limits and /limits/again already.
		check_i64("the directories made under a 64-file quota", made, 64 - 3);
		must("rmdir n0", __wasi_path_remove_directory(dir, "n0"));
		check_errno("a name freed can be used again", __wasi_path_create_directory(dir, "n0"), __WASI_ERRNO_SUCCESS);
	}
	for (int i = 0; i < made; i++) {
		snprintf(name, sizeof name, "n%d", i);
		must("rmdir", __wasi_path_remove_directory(dir, name));
	}

	// --- descriptors: Airlock caps a run at 1024 open descriptors (EMFILE
	// past it). wasmtime's cap is the host process's (RLIMIT_NOFILE), not
	// its own, so it is not checked there.
	if (!on_wasmtime()) {
		static __wasi_fd_t fds[1100];
		int opened = 0;
		e = 0;
		while (opened < 1100) {
			int64_t f = open_file(dir, "again", 0, 1, 0, 0);
			if (f < 0) {
				e = (__wasi_errno_t)-f;
				break;
			}
			fds[opened++] = (__wasi_fd_t)f;
		}
		check_errno("past 1024 descriptors: EMFILE", e, __WASI_ERRNO_MFILE);
		// 0-2, the root and this program's directory are open already.
		check_i64("descriptors opened", opened, 1024 - 5);
		for (int i = 0; i < opened; i++)
			must("fd_close", __wasi_fd_close(fds[i]));
		check_true("after closing them, a file opens", open_file(dir, "again", 0, 1, 0, 0) >= 0, "opened");
	}

	// --- memory: growing past the run's cap fails (memory.grow answers
	// -1, malloc NULL), and the program goes on. wasmtime: no cap here.
	// The memory is touched so the compiler cannot drop the allocation.
	volatile char *p = malloc(96 * MiB);
	if (p)
		p[0] = p[96 * MiB - 1] = 1;
	if (on_wasmtime())
		check_true("malloc 96 MiB", p != NULL, "a pointer");
	else
		check_true("malloc 96 MiB under a 64 MiB cap: NULL", p == NULL, "NULL");
	free((void *)p);
	volatile char *q = malloc(8 * MiB);
	if (q)
		q[0] = q[8 * MiB - 1] = 1;
	check_true("malloc 8 MiB", q != NULL, "a pointer");
	free((void *)q);
	// memory.grow itself: -1 past the cap, and the memory stays as it was.
	size_t before = __builtin_wasm_memory_size(0);
	size_t got = __builtin_wasm_memory_grow(0, 2048); // 128 MiB
	if (on_wasmtime()) {
		check_true("memory.grow by 128 MiB", got == before, "the old size in pages");
	} else {
		check_true("memory.grow by 128 MiB under a 64 MiB cap: -1", got == (size_t)-1, "-1");
		check_u64("memory.grow refused: the size is unchanged", __builtin_wasm_memory_size(0), before);
	}
	return finish();
}
