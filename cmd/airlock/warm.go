//go:build linux

package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/bench"
	"github.com/airlock-sandbox/airlock/internal/filehash"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/server"
	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// A warm server is a background `airlock warm serve` that holds one
// Sandbox open, so that `airlock run` sends it the run instead of loading
// the build again: on wazero a process's Sandbox costs ~0.5 s and ~250 MB
// (wazero validates every function of the module even when its compiled
// code comes from the cache, and reads that code into the heap), a run
// ~1 ms. Each run still gets a fresh instance, as in `airlock serve`.
//
// Only runs that need nothing of the invoking process but its request go
// there: no --tools, --package, --index-url or --allow-net (the server has
// none of them; and so nothing a warm run does reaches outside it, which
// is what lets a client run the code itself when the server goes away
// mid-run). The server listens on a Unix socket in a directory only its
// user can enter, accepts only that user's connections, and exits after
// an idle time or when the build it loaded changes.

const (
	envWarm         = "AIRLOCK_WARM"
	defaultWarmIdle = 5 * time.Minute
)

// warmByDefault is set by main: commands the tests run in-process never
// start a warm server unless the test asks for one through $AIRLOCK_WARM.
var warmByDefault bool

// warmIdle is how long a warm server waits for a run before it exits, and
// whether runs use one at all, from $AIRLOCK_WARM: "off" (or 0), "on", or
// the idle time ("10m").
func warmIdle() (time.Duration, error) {
	switch v := strings.ToLower(os.Getenv(envWarm)); v {
	case "":
		if warmByDefault {
			return defaultWarmIdle, nil
		}
		return 0, nil
	case "off", "0", "false", "no":
		return 0, nil
	case "on", "1", "true", "yes":
		return defaultWarmIdle, nil
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, usageError{fmt.Sprintf("$%s=%q: want off, on, or how long a warm server waits idle, e.g. 10m", envWarm, v)}
		}
		return d, nil
	}
}

// warmTarget is the warm server for one process's Sandbox settings: its
// files share the path base, named by a key over the settings and the
// airlock executable, so a different binary or build gets its own server.
type warmTarget struct {
	base string // the socket is base.sock, the lock base.lock, the log base.log, the description base.json
	args []string
	idle time.Duration
	c    *client.Client
}

func (t *warmTarget) sock() string { return t.base + ".sock" }
func (t *warmTarget) lock() string { return t.base + ".lock" }

// present tells whether t's server may be there: its socket is.
func (t *warmTarget) present() bool {
	_, err := os.Stat(t.sock())
	return err == nil
}

// errNotWarm is a run that a warm server cannot take.
var errNotWarm = errors.New("not a warm run")

// newWarmTarget is the warm server for common's settings and the packages
// (host paths) and preimports its Sandbox loads, or errNotWarm where there
// is none to use: off, another engine than wazero (a wasmtime process maps
// its compiled code and starts in ~30 ms, no gain worth a resident
// process), or no private directory for the socket.
func newWarmTarget(common *commonFlags, packages, preimport []string) (*warmTarget, error) {
	idle, err := warmIdle()
	if err != nil {
		return nil, err
	}
	return warmTargetFor(common, idle, packages, preimport)
}

// warmTargetFor is newWarmTarget with the idle time given (0: off) rather
// than read from $AIRLOCK_WARM.
func warmTargetFor(common *commonFlags, idle time.Duration, packages, preimport []string) (*warmTarget, error) {
	engine := cmp.Or(common.engine, airlock.EngineWazero)
	if idle == 0 || engine != airlock.EngineWazero {
		return nil, errNotWarm
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, errNotWarm
	}
	exeID, err := filehash.Identity(exe)
	if err != nil || goRunBinary(exe) {
		return nil, errNotWarm
	}
	cacheDir := common.cacheDir
	if cacheDir == "" {
		cacheDir, err = python.CacheDir()
	} else {
		cacheDir, err = filepath.Abs(cacheDir)
	}
	if err != nil {
		return nil, errNotWarm
	}
	py := common.python
	if py != "" && py != python.SelectOwn && py != "npm" {
		// A path, as the server (started elsewhere) must find it.
		if py, err = filepath.Abs(py); err != nil {
			return nil, errNotWarm
		}
	}
	dir, err := warmDir()
	if err != nil {
		return nil, errNotWarm
	}
	args := []string{"--python", py, "--cache-dir", cacheDir, "--engine", engine,
		"--fuel-metering=" + strconv.FormatBool(common.fuelMetering)}
	key := []string{exe, exeID}
	for _, p := range packages {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, errNotWarm
		}
		id, err := filehash.Identity(abs)
		if err != nil {
			return nil, errNotWarm
		}
		args = append(args, "--package", abs)
		key = append(key, id) // a changed package is another server's
	}
	for _, m := range preimport {
		args = append(args, "--preimport", m)
	}
	sum := sha256.Sum256([]byte(strings.Join(append(key, args...), "\x00")))
	base := filepath.Join(dir, "warm-"+hex.EncodeToString(sum[:8]))
	if len(base)+len(".sock") >= 108 { // sun_path
		return nil, errNotWarm
	}
	return &warmTarget{base: base, args: args, idle: idle}, nil
}

// goRunBinary tells whether exe is one `go run` built ($WORK/bNNN/exe/NAME),
// which it removes as it exits: a server of it would be stale before its
// first run.
func goRunBinary(exe string) bool {
	dir := filepath.Dir(exe)
	return filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build")
}

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

// client is a server.Client over t's socket, one for all of t's runs so
// that they share its connection.
func (t *warmTarget) client() *client.Client {
	if t.c != nil {
		return t.c
	}
	sock := t.sock()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableCompression: true,
	}
	t.c = &client.Client{URL: "http://airlock-warm", HTTP: &http.Client{Transport: tr}}
	return t.c
}

// run sends req to t's server and reports the result as a local run
// would; served is false when no server took it and nothing was printed,
// so the caller runs it itself. A server that went away mid-run counts as
// not served: a warm run reaches nothing outside the sandbox, so running
// it again here repeats nothing anyone else saw.
func (t *warmTarget) run(ctx context.Context, req airlock.Request, outDir string, asJSON bool, stdout, stderr io.Writer) (code int, served bool, err error) {
	if !t.present() {
		return 0, false, nil
	}
	var printed bool
	onOutput := func(stream string, p []byte) {
		printed = true
		streamTo(stdout, stderr)(stream, p)
	}
	code, err = sendRun(ctx, t.client(), req, outDir, asJSON, onOutput, stdout, stderr)
	var apiErr *client.APIError
	switch {
	case err == nil:
		return code, true, nil
	case ctx.Err() != nil:
		// Interrupted: as a run in this process reports it (the server
		// ends the run when its client goes).
		return exitTimeout, true, errors.New("timeout: the run was cancelled")
	case printed, errors.As(err, &apiErr) && ranThere(apiErr):
		return code, true, err
	}
	return 0, false, nil
}

// ranThere tells whether a server's refusal may come after the run began:
// not an overloaded server's (its retries spent), nor an answer that is
// no result, where the caller had better run the code itself.
func ranThere(e *client.APIError) bool {
	return e.Kind != "bad_response" && e.Kind != "overloaded" && e.Status != http.StatusServiceUnavailable
}

// runRequest runs req on t's server for a command that reads the result
// rather than printing it as it comes (airlock test); served as for run.
func (t *warmTarget) runRequest(ctx context.Context, req airlock.Request) (res *airlock.Result, served bool) {
	if !t.present() {
		return nil, false
	}
	out, err := t.client().Run(ctx, apiRequest(req))
	var apiErr *client.APIError
	switch {
	case err == nil:
		return fromResult(out), true
	case ctx.Err() != nil:
		return &airlock.Result{ExitCode: -1, Error: &airlock.Error{Kind: airlock.KindTimeout, Message: "the run was cancelled"}}, true
	case errors.As(err, &apiErr) && ranThere(apiErr):
		return &airlock.Result{ExitCode: -1, Error: &airlock.Error{Kind: airlock.Kind(apiErr.Kind), Message: apiErr.Message}}, true
	}
	return nil, false
}

// fromResult is the part of an airlock.Result that the API's Result
// carries.
func fromResult(r *wire.Result) *airlock.Result {
	res := &airlock.Result{ExitCode: r.ExitCode, Stdout: []byte(r.Stdout), Stderr: []byte(r.Stderr),
		Duration: time.Duration(r.DurationMS * float64(time.Millisecond))}
	if r.Error != nil {
		res.Error = &airlock.Error{Kind: airlock.Kind(r.Error.Kind), Message: r.Error.Message}
	}
	for _, f := range r.Files {
		res.Files = append(res.Files, airlock.File{Path: f.Path, Size: f.Size, Data: f.Data})
	}
	return res
}

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

func cmdWarm(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	const use = "usage: airlock warm status | stop   (serve: started by run)"
	if len(args) == 0 {
		return exitUsage, usageError{use}
	}
	switch args[0] {
	case "serve":
		return cmdWarmServe(ctx, args[1:], stderr)
	case "status":
		return warmStatus(ctx, stdout)
	case "stop":
		return warmStop(ctx, stdout)
	case "-h", "--help":
		fmt.Fprintln(stdout, use)
		fmt.Fprintf(stdout, "\n`airlock run` on wazero leaves a warm server that holds the loaded build and takes\nlater runs (each still in a fresh instance); it exits after %v idle.\n$%s: off, on, or the idle time (e.g. 10m).\n", defaultWarmIdle, envWarm)
		return 0, nil
	}
	return exitUsage, usageError{use}
}

// warmInfo describes a serving warm server, in base.json.
type warmInfo struct {
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	Idle     string    `json:"idle"`
	Python   string    `json:"python"`
	SHA256   string    `json:"sha256"`
	CacheDir string    `json:"cache_dir"`
	Socket   string    `json:"socket"`
}

// target is the warm server w describes, by its socket's path.
func (w warmInfo) target() *warmTarget {
	return &warmTarget{base: strings.TrimSuffix(w.Socket, ".sock")}
}

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
	lock, err := os.OpenFile(base+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 1, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
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
	os.Remove(*sock)
	ln, err := net.Listen("unix", *sock)
	if err != nil {
		return 1, err
	}
	defer os.Remove(*sock)
	defer os.Remove(base + ".json")
	if err := os.Chmod(*sock, 0o600); err != nil { // the directory is private too; this says so again
		return 1, err
	}
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
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(wl) }()
	tick := time.NewTicker(min(*idle/4, 5*time.Second))
	defer tick.Stop()
	why := ""
	for why == "" {
		select {
		case err := <-errc:
			return 1, err
		case <-ctx.Done():
			why = "signalled"
		case why = <-wl.done:
		case <-tick.C:
			// A changed build or binary ends it now, not after an idle
			// time no client of it would end (theirs is a new server).
			switch {
			case srv.Idle() >= *idle:
				why = "idle"
			case stale():
				why = "stale"
			}
		}
	}
	// No new client may find the socket once it is decided; those already
	// connected are answered.
	os.Remove(*sock)
	fmt.Fprintf(stderr, "airlock warm server %d exits: %s\n", os.Getpid(), why)
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return 0, srv.Shutdown(dctx)
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

// warmServers lists the warm servers serving now (their lock held).
func warmServers() ([]warmInfo, error) {
	dir, err := warmDir()
	if err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(dir, "warm-*.json"))
	if err != nil {
		return nil, err
	}
	var out []warmInfo
	for _, name := range names {
		w, ok := readWarmInfo(name)
		if !ok {
			continue
		}
		if held, _ := lockHeld(strings.TrimSuffix(name, ".json") + ".lock"); held {
			out = append(out, w)
		}
	}
	return out, nil
}

// readWarmInfo reads a server's description (base.json).
func readWarmInfo(path string) (warmInfo, bool) {
	var w warmInfo
	b, err := os.ReadFile(path)
	return w, err == nil && json.Unmarshal(b, &w) == nil
}

// terminate asks w's server to exit (it answers the runs in progress first).
func (w warmInfo) terminate() {
	if p, err := os.FindProcess(w.PID); err == nil {
		p.Signal(syscall.SIGTERM)
	}
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

func warmStatus(ctx context.Context, stdout io.Writer) (int, error) {
	servers, err := warmServers()
	if err != nil {
		return 1, err
	}
	if len(servers) == 0 {
		fmt.Fprintln(stdout, "no warm servers")
	}
	for _, w := range servers {
		runs := "?"
		if n, err := w.target().runsServed(ctx); err == nil {
			runs = strconv.Itoa(n)
		}
		fmt.Fprintf(stdout, "pid %d: %s build (%.12s), runs %s, RSS %s, up %v, exits after %s idle\n  %s\n",
			w.PID, w.Python, w.SHA256, runs, rssOf(w.PID), time.Since(w.Started).Round(time.Second), w.Idle, w.Socket)
	}
	return 0, nil
}

// runsServed is the count of runs t's server answered, from its status.
func (t *warmTarget) runsServed(ctx context.Context) (int, error) {
	st, err := t.client().Status(ctx)
	if err != nil {
		return 0, err
	}
	return int(st.Runs), nil
}

// rssOf is pid's resident memory as /proc says it.
func rssOf(pid int) string {
	if v, ok := bench.ProcStatus(strconv.Itoa(pid), "VmRSS"); ok {
		return v
	}
	return "?"
}

// stop stops t's server, if one serves, and waits for it to go.
func (t *warmTarget) stop() {
	if w, ok := readWarmInfo(t.base + ".json"); ok {
		w.terminate()
		awaitUnlocked(context.Background(), t.lock(), time.Now().Add(time.Minute))
	}
}

// warmStop stops every warm server of this user and waits for them to go.
func warmStop(ctx context.Context, stdout io.Writer) (int, error) {
	servers, err := warmServers()
	if err != nil {
		return 1, err
	}
	for _, w := range servers {
		w.terminate()
	}
	deadline := time.Now().Add(time.Minute)
	for _, w := range servers {
		if !awaitUnlocked(ctx, w.target().lock(), deadline) {
			return 1, fmt.Errorf("warm server %d did not stop", w.PID)
		}
		fmt.Fprintf(stdout, "stopped %d\n", w.PID)
	}
	return 0, sweepWarmDir()
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
