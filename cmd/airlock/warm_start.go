//go:build linux

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// start starts t's server in the background, unless one holds its lock
// (serving, or still loading). It is called after a run this process
// made itself, once its Sandbox loaded, so the server finds the caches
// warm, and the run did not wait for it.
func (t *warmTarget) start() {
	if held, err := lockHeld(t.lock()); err != nil || held {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	logFile, err := os.OpenFile(t.base+".log", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	defer logFile.Close()
	args := append([]string{"warm", "serve", "--socket", t.sock(), "--idle", t.idle.String()}, t.args...)
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = "/" // it outlives this process; it must hold no directory of the user's
	// Its own session: the terminal's Ctrl-C is for the command in front.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		cmd.Process.Release()
	}
}

// lockHeld tells whether another process holds path's lock.
func lockHeld(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK), nil
	}
	return false, nil // closing the file releases it
}

// awaitUnlocked waits until no process holds lock, and tells whether that
// came before deadline and ctx's end.
func awaitUnlocked(ctx context.Context, lock string, deadline time.Time) bool {
	for {
		if held, _ := lockHeld(lock); !held {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
