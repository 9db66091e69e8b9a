#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks, failures;

static const char *const names[] = {
	"ESUCCESS", "E2BIG", "EACCES", "EADDRINUSE", "EADDRNOTAVAIL", "EAFNOSUPPORT", "EAGAIN", "EALREADY",
	"EBADF", "EBADMSG", "EBUSY", "ECANCELED", "ECHILD", "ECONNABORTED", "ECONNREFUSED", "ECONNRESET",
	"EDEADLK", "EDESTADDRREQ", "EDOM", "EDQUOT", "EEXIST", "EFAULT", "EFBIG", "EHOSTUNREACH", "EIDRM",
	"EILSEQ", "EINPROGRESS", "EINTR", "EINVAL", "EIO", "EISCONN", "EISDIR", "ELOOP", "EMFILE", "EMLINK",
	"EMSGSIZE", "EMULTIHOP", "ENAMETOOLONG", "ENETDOWN", "ENETRESET", "ENETUNREACH", "ENFILE", "ENOBUFS",
	"ENODEV", "ENOENT", "ENOEXEC", "ENOLCK", "ENOLINK", "ENOMEM", "ENOMSG", "ENOPROTOOPT", "ENOSPC",
	"ENOSYS", "ENOTCONN", "ENOTDIR", "ENOTEMPTY", "ENOTRECOVERABLE", "ENOTSOCK", "ENOTSUP", "ENOTTY",
	"ENXIO", "EOVERFLOW", "EOWNERDEAD", "EPERM", "EPIPE", "EPROTO", "EPROTONOSUPPORT", "EPROTOTYPE",
	"ERANGE", "EROFS", "ESPIPE", "ESRCH", "ESTALE", "ETIMEDOUT", "ETXTBSY", "EXDEV", "ENOTCAPABLE",
};

const char *errno_name(__wasi_errno_t e) {
	static char buf[16];
	if (e < sizeof names / sizeof names[0])
		return names[e];
	snprintf(buf, sizeof buf, "errno %u", (unsigned)e);
	return buf;
}

static void result(const char *name, int ok, const char *detail) {
	checks++;
	if (ok) {
		printf("%s: ok\n", name);
	} else {
		failures++;
		printf("%s: %s\n", name, detail);
	}
	fflush(stdout);
}

void check_errno(const char *name, __wasi_errno_t got, __wasi_errno_t want) {
	char d[96];
	snprintf(d, sizeof d, "got %s want %s", errno_name(got), errno_name(want));
	result(name, got == want, d);
}

void check_u64(const char *name, uint64_t got, uint64_t want) {
	char d[96];
	snprintf(d, sizeof d, "got %llu want %llu", (unsigned long long)got, (unsigned long long)want);
	result(name, got == want, d);
}

void check_i64(const char *name, int64_t got, int64_t want) {
	char d[96];
	snprintf(d, sizeof d, "got %lld want %lld", (long long)got, (long long)want);
	result(name, got == want, d);
}

void check_str(const char *name, const char *got, const char *want) {
	char d[512];
	snprintf(d, sizeof d, "got \"%s\" want \"%s\"", got ? got : "(null)", want);
	result(name, got && strcmp(got, want) == 0, d);
}

void check_mem(const char *name, const void *got, const void *want, uint32_t n) {
	char d[256];
	const unsigned char *g = got, *w = want;
	uint32_t i = 0;
	while (i < n && g[i] == w[i])
		i++;
	snprintf(d, sizeof d, "got byte %u = 0x%02x want 0x%02x", (unsigned)i, i < n ? g[i] : 0, i < n ? w[i] : 0);
	result(name, i == n, d);
}

void check_true(const char *name, int cond, const char *what) {
	char d[256];
	snprintf(d, sizeof d, "got not (%s)", what);
	result(name, cond, d);
}

_Noreturn void fail_now(const char *name, __wasi_errno_t e) {
	printf("%s: got %s, and the checks after it depend on it: stopped\n", name, errno_name(e));
	printf("FAIL: %d of %d checks failed, then stopped\n", failures + 1, checks + 1);
	fflush(stdout);
	exit(1);
}

void must(const char *name, __wasi_errno_t e) {
	if (e != __WASI_ERRNO_SUCCESS)
		fail_now(name, e);
}

int finish(void) {
	if (failures) {
		printf("FAIL: %d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("PASS: %d checks\n", checks);
	return 0;
}

int on_wasmtime(void) {
	static int host = -1;
	if (host < 0) {
		const char *h = getenv("CONFORMANCE_HOST");
		if (!h || (strcmp(h, "wasmtime") != 0 && strcmp(h, "airlock") != 0)) {
			printf("CONFORMANCE_HOST is \"%s\": the harness sets it to airlock or wasmtime\n", h ? h : "");
			exit(2);
		}
		host = strcmp(h, "wasmtime") == 0;
	}
	return host;
}

__wasi_fd_t root_fd(void) {
	for (__wasi_fd_t fd = 3; fd < 64; fd++) {
		__wasi_prestat_t ps;
		if (__wasi_fd_prestat_get(fd, &ps) != 0)
			break;
		char name[8] = {0};
		if (ps.tag == __WASI_PREOPENTYPE_DIR && ps.u.dir.pr_name_len == 1 &&
		    __wasi_fd_prestat_dir_name(fd, (uint8_t *)name, 1) == 0 && name[0] == '/')
			return fd;
	}
	printf("root_fd: no preopened \"/\"\n");
	exit(2);
}

__wasi_fd_t scratch(const char *name) {
	__wasi_fd_t root = root_fd();
	__wasi_fdstat_t st;
	must("scratch: fdstat of the root", __wasi_fd_fdstat_get(root, &st));
	must("scratch: create the directory", __wasi_path_create_directory(root, name));
	// A directory is opened without the rights to write to it as a file
	// (wasmtime answers EISDIR to FD_WRITE, as Linux to O_RDWR), as
	// wasi-libc's open(O_DIRECTORY) asks.
	__wasi_fd_t fd;
	must("scratch: open the directory",
	     __wasi_path_open(root, 0, name, __WASI_OFLAGS_DIRECTORY, st.fs_rights_inheriting & ~RIGHTS_WRITE_AS_FILE, st.fs_rights_inheriting, 0, &fd));
	return fd;
}

int64_t open_file(__wasi_fd_t dir, const char *path, __wasi_oflags_t oflags, int read, int write, __wasi_fdflags_t fdflags) {
	__wasi_rights_t r = 0;
	if (read)
		r |= RIGHTS_FILE_READ;
	if (write)
		r |= RIGHTS_FILE_WRITE | (RIGHTS_FILE_READ & ~__WASI_RIGHTS_FD_READ);
	__wasi_fd_t fd;
	__wasi_errno_t e = __wasi_path_open(dir, 0, path, oflags, r, 0, fdflags, &fd);
	return e ? -(int64_t)e : (int64_t)fd;
}

void write_file(__wasi_fd_t dir, const char *path, const char *s) {
	int64_t fd = open_file(dir, path, __WASI_OFLAGS_CREAT | __WASI_OFLAGS_TRUNC, 0, 1, 0);
	if (fd < 0)
		fail_now(path, (__wasi_errno_t)-fd);
	__wasi_ciovec_t iov = {(const uint8_t *)s, strlen(s)};
	__wasi_size_t n;
	must(path, __wasi_fd_write((__wasi_fd_t)fd, &iov, 1, &n));
	must(path, __wasi_fd_close((__wasi_fd_t)fd));
}

__wasi_filesize_t file_size(__wasi_fd_t fd) {
	__wasi_filestat_t st;
	must("fd_filestat_get", __wasi_fd_filestat_get(fd, &st));
	return st.size;
}
