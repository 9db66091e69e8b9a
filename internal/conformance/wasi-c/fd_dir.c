// fd_* on directory descriptors: fd_readdir with cookies, and what the
// calls for files answer on a directory (seek and tell included).
//
// Each expected value is what wasmtime answers (measured 2026-12-01 with
// wasmtime-go v39; TestWASICWasmtime keeps it so); where Airlock answers
// otherwise by design, on_wasmtime() picks the expectation and a comment
// beside it says why.
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define BADFD 999

// One directory entry as fd_readdir lays them out: a header, then the name.
struct ent {
	char name[32];
	__wasi_dircookie_t next;
	__wasi_filetype_t type;
	__wasi_inode_t ino;
};

// parse reads the whole entries in buf[0:used]; a cut-off last one is left.
static int parse(const uint8_t *buf, __wasi_size_t used, struct ent *out, int max) {
	int n = 0;
	__wasi_size_t off = 0;
	while (off + sizeof(__wasi_dirent_t) <= used && n < max) {
		__wasi_dirent_t d;
		memcpy(&d, buf + off, sizeof d);
		if (off + sizeof d + d.d_namlen > used)
			break;
		memset(out[n].name, 0, sizeof out[n].name);
		memcpy(out[n].name, buf + off + sizeof d, d.d_namlen < 31 ? d.d_namlen : 31);
		out[n].next = d.d_next;
		out[n].type = d.d_type;
		out[n].ino = d.d_ino;
		n++;
		off += sizeof d + d.d_namlen;
	}
	return n;
}

static int find(struct ent *e, int n, const char *name) {
	for (int i = 0; i < n; i++)
		if (strcmp(e[i].name, name) == 0)
			return i;
	return -1;
}

int main(void) {
	on_wasmtime();
	__wasi_fd_t dir = scratch("fd_dir");
	write_file(dir, "a", "1");
	write_file(dir, "bb", "22");
	write_file(dir, "ccc", "333");
	must("mkdir sub", __wasi_path_create_directory(dir, "sub"));

	// --- the whole listing at once
	static uint8_t buf[4096];
	__wasi_size_t used;
	struct ent e[16];
	check_errno("fd_readdir from cookie 0", __wasi_fd_readdir(dir, buf, sizeof buf, 0, &used), __WASI_ERRNO_SUCCESS);
	check_true("fd_readdir: the buffer was not filled (all of it)", used < sizeof buf, "used < len");
	int n = parse(buf, used, e, 16);
	// wasmtime lists "." and ".." first, then the entries.
	check_i64("fd_readdir: entries, . and .. included", n, 6);
	check_true("fd_readdir: . is there", find(e, n, ".") >= 0, "found");
	check_true("fd_readdir: .. is there", find(e, n, "..") >= 0, "found");
	int ia = find(e, n, "a"), ib = find(e, n, "bb"), ic = find(e, n, "ccc"), is = find(e, n, "sub");
	check_true("fd_readdir: a, bb, ccc, sub are there", ia >= 0 && ib >= 0 && ic >= 0 && is >= 0, "all found");
	if (ia >= 0 && is >= 0) {
		check_u64("fd_readdir: a is a regular file", e[ia].type, __WASI_FILETYPE_REGULAR_FILE);
		check_u64("fd_readdir: sub is a directory", e[is].type, __WASI_FILETYPE_DIRECTORY);
		check_u64("fd_readdir: . is a directory", e[find(e, n, ".")].type, __WASI_FILETYPE_DIRECTORY);
		__wasi_filestat_t st;
		must("stat a", __wasi_path_filestat_get(dir, 0, "a", &st));
		check_u64("fd_readdir: a's d_ino is its filestat ino", e[ia].ino, st.ino);
	}
	// wasmtime numbers the cookies 1, 2, 3...; only resuming from them is
	// promised, which the next checks do.
	int first_off = n;
	for (int i = n - 1; i >= 0; i--)
		if (e[i].next != (__wasi_dircookie_t)(i + 1))
			first_off = i;
	check_u64("fd_readdir: cookies count up from 1", first_off < n ? e[first_off].next : (uint64_t)n, first_off < n ? (uint64_t)first_off + 1 : (uint64_t)n);

	// --- resuming from each entry's cookie gives the entries after it
	int resumed_ok = 1;
	for (int i = 0; i < n; i++) {
		struct ent r[16];
		__wasi_size_t u;
		if (__wasi_fd_readdir(dir, buf, sizeof buf, e[i].next, &u) != 0) {
			resumed_ok = 0;
			break;
		}
		int m = parse(buf, u, r, 16);
		if (m != n - i - 1 || (m > 0 && strcmp(r[0].name, e[i + 1].name) != 0))
			resumed_ok = 0;
	}
	check_true("fd_readdir: from each d_next, the entries after it", resumed_ok, "every resumed listing is the rest");
	check_errno("fd_readdir from the last cookie", __wasi_fd_readdir(dir, buf, sizeof buf, e[n - 1].next, &used), __WASI_ERRNO_SUCCESS);
	check_u64("fd_readdir from the last cookie: nothing", used, 0);

	// --- a buffer too small: it is filled to the brim, the last entry cut
	// off, and the caller reads on from the last whole entry's cookie.
	__wasi_size_t small = sizeof(__wasi_dirent_t) * 2 + 3;
	check_errno("fd_readdir into a small buffer", __wasi_fd_readdir(dir, buf, small, 0, &used), __WASI_ERRNO_SUCCESS);
	check_u64("fd_readdir into a small buffer: filled", used, small);
	struct ent part[4];
	int got = parse(buf, used, part, 4);
	check_true("fd_readdir into a small buffer: at least one whole entry", got >= 1, "one entry");
	int total = got;
	__wasi_dircookie_t cookie = got ? part[got - 1].next : 0;
	for (int guard = 0; guard < 32; guard++) {
		if (__wasi_fd_readdir(dir, buf, small, cookie, &used) != 0) break;
		int k = parse(buf, used, part, 4);
		total += k;
		if (used < small || k == 0)
			break;
		cookie = part[k - 1].next;
	}
	check_i64("fd_readdir paging through a small buffer: every entry once", total, n);
	// A header fits but not the name: nothing whole.
	check_errno("fd_readdir into a buffer of one header", __wasi_fd_readdir(dir, buf, sizeof(__wasi_dirent_t), 0, &used), __WASI_ERRNO_SUCCESS);
	check_u64("fd_readdir into a buffer of one header: filled", used, sizeof(__wasi_dirent_t));

	// --- entries removed and added show on a listing from cookie 0
	must("unlink bb", __wasi_path_unlink_file(dir, "bb"));
	write_file(dir, "dd", "4");
	must("readdir", __wasi_fd_readdir(dir, buf, sizeof buf, 0, &used));
	n = parse(buf, used, e, 16);
	check_true("fd_readdir after changes: bb gone, dd there", find(e, n, "bb") < 0 && find(e, n, "dd") >= 0, "bb gone, dd listed");

	// --- errors
	int64_t f = open_file(dir, "a", 0, 1, 0, 0);
	if (f < 0)
		fail_now("open a", (__wasi_errno_t)-f);
	// wasmtime: EBADF for a file (it lacks FD_READDIR), not ENOTDIR.
	check_errno("fd_readdir of a file", __wasi_fd_readdir((__wasi_fd_t)f, buf, sizeof buf, 0, &used), __WASI_ERRNO_BADF);
	check_errno("fd_readdir of a bad fd", __wasi_fd_readdir(BADFD, buf, sizeof buf, 0, &used), __WASI_ERRNO_BADF);

	// --- a directory is not a file. wasmtime answers EBADF to every call
	// that treats it as one (read, write, seek, tell, allocate, set_size,
	// datasync, sync, advise, set_flags), the same errno for seek and for
	// tell; it lets
	// set_times change the directory's times. Its rights lack FD_WRITE and
	// FD_SEEK (the official suite's directory_seek checks this).
	__wasi_filestat_t st;
	check_errno("fd_filestat_get of a directory", __wasi_fd_filestat_get(dir, &st), __WASI_ERRNO_SUCCESS);
	check_u64("fd_filestat_get: a directory", st.filetype, __WASI_FILETYPE_DIRECTORY);
	__wasi_fdstat_t fs;
	check_errno("fd_fdstat_get of a directory", __wasi_fd_fdstat_get(dir, &fs), __WASI_ERRNO_SUCCESS);
	check_u64("fd_fdstat_get: a directory", fs.fs_filetype, __WASI_FILETYPE_DIRECTORY);
	check_true("fd_fdstat_get: no FD_WRITE in a directory's rights", !(fs.fs_rights_base & __WASI_RIGHTS_FD_WRITE), "FD_WRITE clear");
	check_true("fd_fdstat_get: no FD_SEEK in a directory's rights", !(fs.fs_rights_base & __WASI_RIGHTS_FD_SEEK), "FD_SEEK clear");
	check_true("fd_fdstat_get: FD_READDIR in a directory's rights", fs.fs_rights_base & __WASI_RIGHTS_FD_READDIR, "FD_READDIR set");
	char b[8];
	__wasi_iovec_t iov = {(uint8_t *)b, sizeof b};
	__wasi_ciovec_t ciov = {(const uint8_t *)"x", 1};
	__wasi_size_t nn;
	__wasi_filesize_t pos;
	check_errno("fd_read of a directory", __wasi_fd_read(dir, &iov, 1, &nn), __WASI_ERRNO_BADF);
	check_errno("fd_pread of a directory", __wasi_fd_pread(dir, &iov, 1, 0, &nn), __WASI_ERRNO_BADF);
	check_errno("fd_write to a directory", __wasi_fd_write(dir, &ciov, 1, &nn), __WASI_ERRNO_BADF);
	check_errno("fd_pwrite to a directory", __wasi_fd_pwrite(dir, &ciov, 1, 0, &nn), __WASI_ERRNO_BADF);
	check_errno("fd_seek of a directory (CUR)", __wasi_fd_seek(dir, 0, __WASI_WHENCE_CUR, &pos), __WASI_ERRNO_BADF);
	check_errno("fd_seek of a directory (SET)", __wasi_fd_seek(dir, 0, __WASI_WHENCE_SET, &pos), __WASI_ERRNO_BADF);
	check_errno("fd_seek of a directory (END)", __wasi_fd_seek(dir, 0, __WASI_WHENCE_END, &pos), __WASI_ERRNO_BADF);
	check_errno("fd_tell of a directory", __wasi_fd_tell(dir, &pos), __WASI_ERRNO_BADF);
	check_errno("fd_allocate of a directory", __wasi_fd_allocate(dir, 0, 1), __WASI_ERRNO_BADF);
	check_errno("fd_filestat_set_size of a directory", __wasi_fd_filestat_set_size(dir, 0), __WASI_ERRNO_BADF);
	check_errno("fd_filestat_set_times of a directory", __wasi_fd_filestat_set_times(dir, 5000000000ull, 6000000000ull, __WASI_FSTFLAGS_ATIM | __WASI_FSTFLAGS_MTIM), __WASI_ERRNO_SUCCESS);
	must("fstat", __wasi_fd_filestat_get(dir, &st));
	check_u64("a directory's mtim as set", st.mtim, 6000000000ull);
	check_errno("fd_sync of a directory", __wasi_fd_sync(dir), __WASI_ERRNO_BADF);
	check_errno("fd_datasync of a directory", __wasi_fd_datasync(dir), __WASI_ERRNO_BADF);
	check_errno("fd_advise of a directory", __wasi_fd_advise(dir, 0, 0, __WASI_ADVICE_NORMAL), __WASI_ERRNO_BADF);
	check_errno("fd_fdstat_set_flags of a directory", __wasi_fd_fdstat_set_flags(dir, 0), __WASI_ERRNO_BADF);
	check_errno("fd_close of a directory", __wasi_fd_close(dir), __WASI_ERRNO_SUCCESS);
	check_errno("fd_readdir of a closed directory", __wasi_fd_readdir(dir, buf, sizeof buf, 0, &used), __WASI_ERRNO_BADF);
	return finish();
}
