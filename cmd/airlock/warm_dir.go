//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// warmDir is the directory of warm servers' sockets: $XDG_RUNTIME_DIR/airlock,
// else airlock-UID in the temporary directory. It must be this user's
// alone, or another user could put a socket of theirs where the runs go.
func warmDir() (string, error) {
	uid := os.Getuid()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("airlock-%d", uid))
	if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
		dir = filepath.Join(rt, "airlock")
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("warm servers: %w", err)
	}
	return dir, privateDir(dir, uid)
}

// privateDir checks that dir is a directory (not a link to one), owned by
// uid, that no one else may enter or write.
func privateDir(dir string, uid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("warm servers: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != uid || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("warm servers: %s is not a directory private to user %d (mode %v)", dir, uid, fi.Mode())
	}
	return nil
}

// sweepWarmDir removes what servers no longer running left: a lock and a
// log each (the lock stays while its server lives, and a server's end
// does not remove it, or one starting then could lock a file no longer
// at the path while another locks the new one).
func sweepWarmDir() error {
	dir, err := warmDir()
	if err != nil {
		return err
	}
	locks, err := filepath.Glob(filepath.Join(dir, "warm-*.lock"))
	if err != nil {
		return err
	}
	for _, lock := range locks {
		if held, err := lockHeld(lock); err != nil || held {
			continue
		}
		base := strings.TrimSuffix(lock, ".lock")
		for _, ext := range []string{".log", ".json", ".sock", ".lock"} {
			os.Remove(base + ext)
		}
	}
	return nil
}
