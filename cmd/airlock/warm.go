//go:build linux

package main

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/filehash"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/server/client"
)

// A warm server is a background `airlock warm serve` that holds one
// Sandbox open, so that `airlock run` sends it the run instead of loading
// the build again: on wazero a process's Sandbox costs ~0.5 s and ~250 MB
// (wazero validates every function of the module even when its compiled
// code comes from the cache, and reads that code into the heap), a run
// ~1 ms. Each run still gets a fresh instance, as in `airlock serve`.
//
// Only runs that need nothing of the invoking process but its request go
// there: no --host-funcs, --package, --index-url or --allow-net (the server has
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
