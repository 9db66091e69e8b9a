// sock_accept, sock_recv, sock_send, sock_shutdown. The sandbox grants no
// sockets, so every descriptor a program has is not one; what each call
// answers for a bad descriptor and for a non-socket (a file, stdio, a
// directory).
//
// Each expected value is what wasmtime answers (measured 2026-12-01 with
// wasmtime-go v39; TestWASICWasmtime keeps it so); where Airlock answers
// otherwise by design, on_wasmtime() picks the expectation and a comment
// beside it says why.
#include <stdio.h>
#include <string.h>

#include "check.h"

#define BADFD 999

int main(void) {
	on_wasmtime();
	__wasi_fd_t dir = scratch("sock");
	write_file(dir, "f", "x");
	int64_t f = open_file(dir, "f", 0, 1, 1, 0);
	if (f < 0)
		fail_now("open f", (__wasi_errno_t)-f);
	struct {
		const char *what;
		__wasi_fd_t fd;
	} fds[] = {{"a bad fd", BADFD}, {"a file", (__wasi_fd_t)f}, {"stdin", 0}, {"stdout", 1}, {"a directory", dir}};
	char buf[8];
	__wasi_iovec_t iov = {(uint8_t *)buf, sizeof buf};
	__wasi_ciovec_t ciov = {(const uint8_t *)"x", 1};
	char name[96];
	for (unsigned i = 0; i < sizeof fds / sizeof fds[0]; i++) {
		int bad = fds[i].fd == BADFD;
		// sock_shutdown: wasmtime answers EBADF for a bad descriptor and
		// ENOTSOCK for one that is not a socket (issue 23).
		__wasi_errno_t want = bad ? __WASI_ERRNO_BADF : __WASI_ERRNO_NOTSOCK;
		snprintf(name, sizeof name, "sock_shutdown of %s", fds[i].what);
		check_errno(name, __wasi_sock_shutdown(fds[i].fd, __WASI_SDFLAGS_RD | __WASI_SDFLAGS_WR), want);
		// sock_accept, sock_recv, sock_send: wasmtime answers the same
		// (EBADF, ENOTSOCK). Airlock deliberately answers ENOTSUP to all
		// three, whatever the descriptor, as the README documents ("the
		// WASI socket calls answer ENOTSUP"): the sandbox grants no
		// sockets at all, and says so in the one errno a program reads as
		// "not in this environment".
		__wasi_errno_t want_io = on_wasmtime() ? want : __WASI_ERRNO_NOTSUP;
		__wasi_fd_t nfd;
		__wasi_size_t n;
		__wasi_roflags_t ro;
		snprintf(name, sizeof name, "sock_accept of %s", fds[i].what);
		check_errno(name, __wasi_sock_accept(fds[i].fd, 0, &nfd), want_io);
		snprintf(name, sizeof name, "sock_recv of %s", fds[i].what);
		check_errno(name, __wasi_sock_recv(fds[i].fd, &iov, 1, 0, &n, &ro), want_io);
		snprintf(name, sizeof name, "sock_send of %s", fds[i].what);
		check_errno(name, __wasi_sock_send(fds[i].fd, &ciov, 1, 0, &n), want_io);
	}
	return finish();
}
