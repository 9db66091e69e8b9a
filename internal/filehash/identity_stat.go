//go:build linux || darwin || freebsd || netbsd

package filehash

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// settleTime is how long a file must be unchanged before it is stamped
// (a variable for tests).
var settleTime = 2 * time.Second

func identity(st os.FileInfo) (string, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok || !st.Mode().IsRegular() {
		return "", false
	}
	mtime, ctime := statTimes(s)
	return fmt.Sprintf("dev=%d ino=%d size=%d mtime=%d ctime=%d", s.Dev, s.Ino, s.Size, mtime, ctime), true
}

func settled(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mtime, ctime := statTimes(s)
	newest := time.Unix(0, max(mtime, ctime))
	return time.Since(newest) > settleTime
}
