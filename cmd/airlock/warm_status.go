//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-sandbox/airlock/bench"
)

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
