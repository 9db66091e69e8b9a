// Shared helpers of Airlock's WASI conformance programs. Each program
// prints one line per check, "name: ok" or "name: got X want Y", and
// exits 1 if any check failed (finish), so a failing check names itself.
//
// The harness (internal/conformance/wasic_test.go, and
// wasic_wasmtime_test.go under wasmtime's own WASI) preopens one empty
// directory as "/" and sets CONFORMANCE_HOST to "airlock" or "wasmtime":
// the few checks where Airlock deliberately answers otherwise than
// wasmtime look at it, and say why beside them.
#ifndef CHECK_H
#define CHECK_H

#include <stdint.h>
#include <wasi/api.h>

// check_errno: a __wasi_* call answered want.
void check_errno(const char *name, __wasi_errno_t got, __wasi_errno_t want);
// check_u64 / check_i64: a number is what it should be.
void check_u64(const char *name, uint64_t got, uint64_t want);
void check_i64(const char *name, int64_t got, int64_t want);
// check_str: a NUL-terminated string is want.
void check_str(const char *name, const char *got, const char *want);
// check_mem: n bytes at got equal want's.
void check_mem(const char *name, const void *got, const void *want, uint32_t n);
// check_true: cond holds; what describes the fact when it does not.
void check_true(const char *name, int cond, const char *what);
// fail_now: a step a later check depends on failed; the program stops
// with that step named.
_Noreturn void fail_now(const char *name, __wasi_errno_t e);
// must: the call succeeded, else fail_now.
void must(const char *name, __wasi_errno_t e);

// finish prints the tally and returns the exit status: 0 if every check
// passed.
int finish(void);

// on_wasmtime: the harness runs this under wasmtime's WASI.
int on_wasmtime(void);

// errno_name is the spec's name of a WASI errno ("ENOENT").
const char *errno_name(__wasi_errno_t e);

// root_fd is the preopened "/" (found by its prestat name, not assumed).
__wasi_fd_t root_fd(void);
// scratch creates directory name under the root and opens it with the
// root's inheriting rights: each program works in its own directory.
__wasi_fd_t scratch(const char *name);
// open_file opens path under dir with oflags and the rights read/write ask
// for (wasi-libc's open() asks the same way); the fd or -errno.
int64_t open_file(__wasi_fd_t dir, const char *path, __wasi_oflags_t oflags, int read, int write, __wasi_fdflags_t fdflags);
// write_file creates path under dir holding s.
void write_file(__wasi_fd_t dir, const char *path, const char *s);
// file_size is fd's size (fd_filestat_get, else fail_now).
__wasi_filesize_t file_size(__wasi_fd_t fd);

// Rights a regular file opened for reading and writing asks for.
#define RIGHTS_FILE_READ                                                                                   \
	(__WASI_RIGHTS_FD_READ | __WASI_RIGHTS_FD_SEEK | __WASI_RIGHTS_FD_TELL | __WASI_RIGHTS_FD_FILESTAT_GET | \
	 __WASI_RIGHTS_FD_ADVISE | __WASI_RIGHTS_FD_FDSTAT_SET_FLAGS | __WASI_RIGHTS_POLL_FD_READWRITE |       \
	 __WASI_RIGHTS_FD_SYNC | __WASI_RIGHTS_FD_DATASYNC)
#define RIGHTS_FILE_WRITE                                                                                  \
	(__WASI_RIGHTS_FD_WRITE | __WASI_RIGHTS_FD_ALLOCATE | __WASI_RIGHTS_FD_FILESTAT_SET_SIZE |              \
	 __WASI_RIGHTS_FD_FILESTAT_SET_TIMES)

// Rights that write to a descriptor as a file; a directory opened with
// any of them is EISDIR.
#define RIGHTS_WRITE_AS_FILE                                                                                \
	(__WASI_RIGHTS_FD_WRITE | __WASI_RIGHTS_FD_DATASYNC | __WASI_RIGHTS_FD_ALLOCATE | __WASI_RIGHTS_FD_FILESTAT_SET_SIZE)

#endif
