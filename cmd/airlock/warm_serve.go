//go:build linux

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/filehash"
	"github.com/airlock-sandbox/airlock/server"
)

// warmMaxLimits caps nothing a local run could ask for: the server's
// client is the user who could run the code in-process instead. (A zero
// maximum is no cap; the timeout's keeps the struct from reading as
// "unset", which would mean the server defaults.)
var warmMaxLimits = airlock.Limits{Timeout: math.MaxInt64}

func cmdWarmServe(ctx context.Context, args []string, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock warm serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var common commonFlags
	common.register(fs)
	var pkgs packageFlags
	fs.Var(&pkgs.packages, "package", "pure-Python package every run can import (repeatable)")
	fs.Var(&pkgs.preimport, "preimport", "module to import into the snapshot (repeatable)")
	sock := fs.String("socket", "", "Unix socket to listen on (its directory private to this user)")
	idle := fs.Duration("idle", defaultWarmIdle, "exit after this long without a run")
	if stop, code, err := flagResult(fs, stderr, parseFlags(fs, args)); stop {
		return code, err
	}
	if *sock == "" || *idle <= 0 {
		return exitUsage, usageError{"warm serve: --socket and a positive --idle are needed"}
	}
	if err := privateDir(filepath.Dir(*sock), os.Getuid()); err != nil {
		return 1, err
	}
	base := strings.TrimSuffix(*sock, ".sock")
	lock, held, err := warmLock(base)
	if err != nil {
		return 1, err
	}
	defer lock.Close()
	if !held {
		return 0, nil // another one serves, or is loading
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	pkgOpts, err := pkgs.options()
	if err != nil {
		return exitUsage, err
	}
	sb, err := common.sandbox(ctx, stderr, pkgOpts...)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
	info := sb.Info()
	stale, err := staleCheck(append([]string{info.Path}, pkgs.packages...))
	if err != nil {
		return 1, err
	}
	// What the files say is ours only while the lock is held: a stale
	// socket from a server that died is removed before listening.
	ln, err := listenWarm(*sock)
	if err != nil {
		return 1, err
	}
	defer os.Remove(*sock)
	defer os.Remove(base + ".json")
	// Errors only: the log is on the runtime directory (memory, usually),
	// and a local run reports everything else to its own client.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// Local commands rather wait their turn than be refused: a deep queue
	// (past it, a client runs the code itself).
	srv, err := server.New(server.Config{Sandbox: sb, MaxLimits: warmMaxLimits, MaxBody: 1 << 30, Logger: logger, Queue: 64})
	if err != nil {
		return 1, err
	}
	desc, _ := json.Marshal(warmInfo{PID: os.Getpid(), Started: time.Now().UTC(), Idle: idle.String(),
		Python: info.Build, SHA256: info.SHA256, CacheDir: common.cacheDir, Socket: *sock})
	if err := os.WriteFile(base+".json", desc, 0o600); err != nil {
		return 1, err
	}
	wl := &warmListener{Listener: ln, uid: os.Getuid(), stale: stale, done: make(chan string, 1)}
	why, err := serveWarm(ctx, srv, wl, *idle, stale)
	if err != nil {
		return 1, err
	}
	// No new client may find the socket once it is decided; those already
	// connected are answered.
	os.Remove(*sock)
	fmt.Fprintf(stderr, "airlock warm server %d exits: %s\n", os.Getpid(), why)
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return 0, srv.Shutdown(dctx)
}

// warmLock opens the lock file at base and tries to take it: held is
// false when another process holds it (another server serves, or is
// loading). The caller closes the file, which releases the lock.
func warmLock(base string) (lock *os.File, held bool, err error) {
	lock, err = os.OpenFile(base+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	return lock, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil, nil
}

// listenWarm listens on the Unix socket sock, replacing a stale one (from
// a server that died), readable and writable by this user only.
func listenWarm(sock string) (net.Listener, error) {
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(sock, 0o600); err != nil { // the directory is private too; this says so again
		ln.Close()
		os.Remove(sock)
		return nil, err
	}
	return ln, nil
}

// serveWarm serves wl until the server fails, a signal, idle time without
// a run, a client's word (wl.done) or a changed build or binary (stale)
// ends it, and says which.
func serveWarm(ctx context.Context, srv *server.Server, wl *warmListener, idle time.Duration, stale func() bool) (string, error) {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(wl) }()
	tick := time.NewTicker(min(idle/4, 5*time.Second))
	defer tick.Stop()
	why := ""
	for why == "" {
		select {
		case err := <-errc:
			return "", err
		case <-ctx.Done():
			why = "signalled"
		case why = <-wl.done:
		case <-tick.C:
			// A changed build or binary ends it now, not after an idle
			// time no client of it would end (theirs is a new server).
			switch {
			case srv.Idle() >= idle:
				why = "idle"
			case stale():
				why = "stale"
			}
		}
	}
	return why, nil
}

// staleCheck tells, each time it is called, whether the airlock executable
// or any of files (python.wasm, "" for an embedded one; packages) changed
// since it was made: a rebuilt build is for new servers to load.
func staleCheck(files []string) (func() bool, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	paths := []string{exe}
	for _, f := range files {
		if f != "" {
			paths = append(paths, f)
		}
	}
	ids := make([]string, len(paths))
	for i, p := range paths {
		if ids[i], err = filehash.Identity(p); err != nil {
			return nil, err
		}
	}
	return func() bool {
		for i, p := range paths {
			if id, err := filehash.Identity(p); err != nil || id != ids[i] {
				return true
			}
		}
		return false
	}, nil
}

// warmListener accepts only its user's connections, and none once the
// build went stale (the client then runs the code itself).
type warmListener struct {
	net.Listener
	uid   int
	stale func() bool
	done  chan string // why the server should exit
}

func (l *warmListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if peerUID(c) != l.uid {
			c.Close()
			continue
		}
		if l.stale() {
			c.Close()
			select {
			case l.done <- "stale":
			default:
			}
			continue
		}
		return c, nil
	}
}

// peerUID is the user of the process at c's other end, -1 if unknown.
func peerUID(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1
	}
	uid := -1
	raw.Control(func(fd uintptr) {
		if cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED); err == nil {
			uid = int(cred.Uid)
		}
	})
	return uid
}
