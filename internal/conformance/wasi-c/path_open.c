// path_open: every oflag (CREAT, DIRECTORY, EXCL, TRUNC), fdflags at open,
// rights against the file type, the EEXIST/ENOENT/ENOTDIR/EISDIR cases,
// paths that leave the directory descriptor; then the same through
// POSIX open(), as C programs call it.
//
// Each expected value is what wasmtime answers (measured 2026-12-01 with
// wasmtime-go v39; TestWASICWasmtime keeps it so); where Airlock answers
// otherwise by design, on_wasmtime() picks the expectation and a comment
// beside it says why.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define BADFD 999

static __wasi_filesize_t size_at(__wasi_fd_t dir, const char *path) {
	__wasi_filestat_t st;
	__wasi_errno_t e = __wasi_path_filestat_get(dir, 0, path, &st);
	return e ? (__wasi_filesize_t)-1 : st.size;
}

// opens returns the errno of opening path (closing what opened).
static __wasi_errno_t opens(__wasi_fd_t dir, __wasi_lookupflags_t lf, const char *path, __wasi_oflags_t of, __wasi_rights_t base, __wasi_fdflags_t ff) {
	__wasi_fd_t fd;
	__wasi_errno_t e = __wasi_path_open(dir, lf, path, of, base, 0, ff, &fd);
	if (e == 0)
		must("fd_close", __wasi_fd_close(fd));
	return e;
}

int main(void) {
	on_wasmtime();
	__wasi_fd_t dir = scratch("path_open");
	const __wasi_rights_t R = RIGHTS_FILE_READ, W = RIGHTS_FILE_WRITE | RIGHTS_FILE_READ;
	__wasi_fd_t fd;

	// --- CREAT
	check_errno("CREAT of a new file", opens(dir, 0, "new", __WASI_OFLAGS_CREAT, W, 0), __WASI_ERRNO_SUCCESS);
	check_u64("CREAT: the file exists, empty", size_at(dir, "new"), 0);
	write_file(dir, "f", "content");
	check_errno("CREAT of an existing file", opens(dir, 0, "f", __WASI_OFLAGS_CREAT, W, 0), __WASI_ERRNO_SUCCESS);
	check_u64("CREAT of an existing file keeps it", size_at(dir, "f"), 7);
	// --- EXCL
	check_errno("CREAT|EXCL of an existing file", opens(dir, 0, "f", __WASI_OFLAGS_CREAT | __WASI_OFLAGS_EXCL, W, 0), __WASI_ERRNO_EXIST);
	check_errno("CREAT|EXCL of a new file", opens(dir, 0, "excl", __WASI_OFLAGS_CREAT | __WASI_OFLAGS_EXCL, W, 0), __WASI_ERRNO_SUCCESS);
	must("mkdir d", __wasi_path_create_directory(dir, "d"));
	// The issue 23 case (tempfile.mkstemp retries only on EEXIST):
	// wasmtime answers EEXIST with write rights too, as Linux does.
	check_errno("CREAT|EXCL of an existing directory, read-only", opens(dir, 0, "d", __WASI_OFLAGS_CREAT | __WASI_OFLAGS_EXCL, R, 0), __WASI_ERRNO_EXIST);
	check_errno("CREAT|EXCL of an existing directory, with write rights", opens(dir, 0, "d", __WASI_OFLAGS_CREAT | __WASI_OFLAGS_EXCL, W, 0), __WASI_ERRNO_EXIST);
	check_errno("EXCL without CREAT of an existing file", opens(dir, 0, "f", __WASI_OFLAGS_EXCL, R, 0), __WASI_ERRNO_SUCCESS);
	// --- TRUNC
	check_errno("TRUNC of an existing file", opens(dir, 0, "f", __WASI_OFLAGS_TRUNC, W, 0), __WASI_ERRNO_SUCCESS);
	check_u64("TRUNC empties it", size_at(dir, "f"), 0);
	check_errno("TRUNC of a missing file", opens(dir, 0, "missing", __WASI_OFLAGS_TRUNC, W, 0), __WASI_ERRNO_NOENT);
	check_errno("CREAT|TRUNC of a new file", opens(dir, 0, "ct", __WASI_OFLAGS_CREAT | __WASI_OFLAGS_TRUNC, W, 0), __WASI_ERRNO_SUCCESS);
	check_errno("TRUNC of a directory", opens(dir, 0, "d", __WASI_OFLAGS_TRUNC, W, 0), __WASI_ERRNO_ISDIR);
	// --- DIRECTORY
	check_errno("DIRECTORY of a directory", opens(dir, 0, "d", __WASI_OFLAGS_DIRECTORY, 0, 0), __WASI_ERRNO_SUCCESS);
	check_errno("DIRECTORY of a file", opens(dir, 0, "f", __WASI_OFLAGS_DIRECTORY, 0, 0), __WASI_ERRNO_NOTDIR);
	check_errno("DIRECTORY of a missing path", opens(dir, 0, "missing", __WASI_OFLAGS_DIRECTORY, 0, 0), __WASI_ERRNO_NOENT);
	check_errno("CREAT|DIRECTORY of a new path", opens(dir, 0, "newdir", __WASI_OFLAGS_CREAT | __WASI_OFLAGS_DIRECTORY, 0, 0), __WASI_ERRNO_INVAL);
	check_u64("CREAT|DIRECTORY created nothing", size_at(dir, "newdir"), (__wasi_filesize_t)-1);
	check_errno("a directory without DIRECTORY, no rights", opens(dir, 0, "d", 0, 0, 0), __WASI_ERRNO_SUCCESS);
	// A directory with the rights to write it as a file: wasmtime answers
	// EISDIR, as Linux's open(O_RDWR) of a directory.
	check_errno("a directory with FD_WRITE", opens(dir, 0, "d", 0, __WASI_RIGHTS_FD_WRITE, 0), __WASI_ERRNO_ISDIR);
	check_errno("a directory with FD_READ", opens(dir, 0, "d", 0, __WASI_RIGHTS_FD_READ, 0), __WASI_ERRNO_SUCCESS);
	// The rights a directory gets: what was asked, FD_READDIR included.
	must("open d", __wasi_path_open(dir, 0, "d", __WASI_OFLAGS_DIRECTORY, __WASI_RIGHTS_FD_READDIR | __WASI_RIGHTS_PATH_OPEN, 0, 0, &fd));
	__wasi_fdstat_t fs;
	must("fdstat", __wasi_fd_fdstat_get(fd, &fs));
	check_u64("an opened directory is a directory", fs.fs_filetype, __WASI_FILETYPE_DIRECTORY);
	must("fd_close", __wasi_fd_close(fd));

	// --- missing paths and files in the way
	check_errno("a missing file", opens(dir, 0, "missing", 0, R, 0), __WASI_ERRNO_NOENT);
	check_errno("under a missing directory", opens(dir, 0, "nodir/x", __WASI_OFLAGS_CREAT, W, 0), __WASI_ERRNO_NOENT);
	check_errno("under a file", opens(dir, 0, "f/x", 0, R, 0), __WASI_ERRNO_NOTDIR);
	check_errno("CREAT under a file", opens(dir, 0, "f/x", __WASI_OFLAGS_CREAT, W, 0), __WASI_ERRNO_NOTDIR);
	check_errno("the empty path", opens(dir, 0, "", 0, R, 0), __WASI_ERRNO_NOENT);
	// --- trailing slashes
	check_errno("a file with a trailing slash", opens(dir, 0, "f/", 0, R, 0), __WASI_ERRNO_NOTDIR);
	check_errno("a file with trailing slashes", opens(dir, 0, "f///", 0, R, 0), __WASI_ERRNO_NOTDIR);
	check_errno("a directory with a trailing slash", opens(dir, 0, "d/", 0, 0, 0), __WASI_ERRNO_SUCCESS);
	check_errno("a directory with trailing slashes", opens(dir, 0, "d///", __WASI_OFLAGS_DIRECTORY, 0, 0), __WASI_ERRNO_SUCCESS);
	check_errno("CREAT of a new name with a trailing slash", opens(dir, 0, "nf/", __WASI_OFLAGS_CREAT, W, 0), __WASI_ERRNO_ISDIR);
	// --- . and .., inside the descriptor's tree and out of it
	check_errno("a path through . and ..", opens(dir, 0, "d/.//../d/./../f", 0, R, 0), __WASI_ERRNO_SUCCESS);
	check_errno(".", opens(dir, 0, ".", __WASI_OFLAGS_DIRECTORY, 0, 0), __WASI_ERRNO_SUCCESS);
	// Leaving the directory descriptor is refused: wasmtime answers EPERM
	// (the official suite accepts EPERM or ENOTCAPABLE) for .. above it
	// and for an absolute path, even one that names a file under it, even
	// from the preopened "/" (wasi-libc strips the leading / itself).
	check_errno("..", opens(dir, 0, "..", __WASI_OFLAGS_DIRECTORY, 0, 0), __WASI_ERRNO_PERM);
	check_errno("d/../../path_open/f (out and back in)", opens(dir, 0, "d/../../path_open/f", 0, R, 0), __WASI_ERRNO_PERM);
	check_errno("an absolute path", opens(dir, 0, "/path_open/f", 0, R, 0), __WASI_ERRNO_PERM);
	check_errno("an absolute path from the root fd", opens(root_fd(), 0, "/path_open/f", 0, R, 0), __WASI_ERRNO_PERM);
	// .. from the preopened "/" itself: wasmtime refuses it too (EPERM).
	// Airlock deliberately resolves it to "/" (README: "`..` at `/` stays
	// at `/`"), as Linux's /.. is /: Python code that climbs above its
	// root gets the root, never an error or anything outside.
	check_errno(".. from the root fd", opens(root_fd(), 0, "..", __WASI_OFLAGS_DIRECTORY, 0, 0), on_wasmtime() ? __WASI_ERRNO_PERM : __WASI_ERRNO_SUCCESS);
	// --- bad directory descriptors
	check_errno("a bad dirfd", opens(BADFD, 0, "f", 0, R, 0), __WASI_ERRNO_BADF);
	int64_t file = open_file(dir, "f", 0, 1, 0, 0);
	// wasmtime: ENOTDIR when the dirfd is a file.
	check_errno("a file as the dirfd", opens((__wasi_fd_t)file, 0, "x", 0, R, 0), __WASI_ERRNO_NOTDIR);

	// --- fdflags at open
	write_file(dir, "ap", "abc");
	int64_t a = open_file(dir, "ap", 0, 0, 1, __WASI_FDFLAGS_APPEND);
	check_true("open with APPEND", a >= 0, "opened");
	if (a >= 0) {
		__wasi_ciovec_t iov = {(const uint8_t *)"de", 2};
		__wasi_size_t n;
		must("fd_write", __wasi_fd_write((__wasi_fd_t)a, &iov, 1, &n));
		check_u64("APPEND: the write went to the end", size_at(dir, "ap"), 5);
		must("fdstat", __wasi_fd_fdstat_get((__wasi_fd_t)a, &fs));
		check_u64("APPEND: fdstat shows it", fs.fs_flags, __WASI_FDFLAGS_APPEND);
		must("fd_close", __wasi_fd_close((__wasi_fd_t)a));
	}
	check_errno("open with NONBLOCK", opens(dir, 0, "f", 0, R, __WASI_FDFLAGS_NONBLOCK), __WASI_ERRNO_SUCCESS);
	// The sync flags: wasmtime answers ENOTSUP (it cannot promise them).
	// Airlock deliberately accepts them: its files are memory, every write
	// is as durable as it will ever be once fd_write returns.
	__wasi_errno_t sync = on_wasmtime() ? __WASI_ERRNO_NOTSUP : __WASI_ERRNO_SUCCESS;
	check_errno("open with DSYNC", opens(dir, 0, "f", 0, W, __WASI_FDFLAGS_DSYNC), sync);
	check_errno("open with SYNC", opens(dir, 0, "f", 0, W, __WASI_FDFLAGS_SYNC), sync);
	check_errno("open with RSYNC", opens(dir, 0, "f", 0, R, __WASI_FDFLAGS_RSYNC), sync);

	// --- POSIX open(), as C programs write it (wasi-libc over path_open)
	int p = open("/path_open/posix", O_WRONLY | O_CREAT | O_EXCL, 0644);
	check_true("open(O_CREAT|O_EXCL) of a new file", p >= 0, "a descriptor");
	if (p >= 0) {
		check_i64("write()", write(p, "posix", 5), 5);
		close(p);
	}
	errno = 0;
	check_i64("open(O_CREAT|O_EXCL) of an existing file", open("/path_open/posix", O_WRONLY | O_CREAT | O_EXCL, 0644), -1);
	check_i64("...errno EEXIST", errno, EEXIST);
	errno = 0;
	check_i64("open(O_RDWR|O_CREAT|O_EXCL) of a directory", open("/path_open/d", O_RDWR | O_CREAT | O_EXCL, 0644), -1);
	check_i64("...errno EEXIST", errno, EEXIST);
	errno = 0;
	check_i64("open(O_RDONLY) of a missing file", open("/path_open/missing", O_RDONLY), -1);
	check_i64("...errno ENOENT", errno, ENOENT);
	errno = 0;
	check_i64("open(O_DIRECTORY) of a file", open("/path_open/posix", O_RDONLY | O_DIRECTORY), -1);
	check_i64("...errno ENOTDIR", errno, ENOTDIR);
	errno = 0;
	check_i64("open(O_WRONLY) of a directory", open("/path_open/d", O_WRONLY), -1);
	check_i64("...errno EISDIR", errno, EISDIR);
	p = open("/path_open/posix", O_RDWR | O_TRUNC);
	check_true("open(O_RDWR|O_TRUNC)", p >= 0, "a descriptor");
	check_u64("O_TRUNC emptied it", size_at(dir, "posix"), 0);
	if (p >= 0)
		close(p);
	p = open("/path_open/d", O_RDONLY | O_DIRECTORY);
	check_true("open(O_DIRECTORY) of a directory", p >= 0, "a descriptor");
	if (p >= 0)
		close(p);
	return finish();
}
