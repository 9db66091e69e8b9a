package bench

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// PyodideVersion is the npm pyodide release the comparison installs: its
// CPython is 3.12, like Airlock's default build.
const PyodideVersion = "0.27.7"

// ErrPeerUnavailable is returned when a peer cannot run on this machine
// (a tool it needs is missing); the comparison reports it as skipped.
var ErrPeerUnavailable = errors.New("bench: peer unavailable")

//go:embed pyodide_driver.mjs
var pyodideDriver []byte

// PyodideDir is where SetupPyodide installs Pyodide under an Airlock cache
// directory (never inside the repository's tracked files).
func PyodideDir(cacheDir string) string {
	return filepath.Join(cacheDir, "peers", "pyodide-"+PyodideVersion)
}

// PyodideInstalled tells whether dir holds the pinned Pyodide release.
func PyodideInstalled(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", "pyodide", "package.json"))
	if err != nil {
		return false
	}
	var pkg struct{ Version string }
	return json.Unmarshal(data, &pkg) == nil && pkg.Version == PyodideVersion
}

// SetupPyodide installs the pinned Pyodide release into dir with npm,
// unless it is there already. It fails with ErrPeerUnavailable when node
// or npm is not on PATH.
func SetupPyodide(ctx context.Context, dir string, notice io.Writer) error {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s not found on PATH", ErrPeerUnavailable, tool)
		}
	}
	if PyodideInstalled(dir) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: pyodide: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true}`+"\n"), 0o644); err != nil {
		return fmt.Errorf("bench: pyodide: %w", err)
	}
	fmt.Fprintf(notice, "airlock: installing pyodide@%s with npm into %s\n", PyodideVersion, dir)
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--save-exact", "pyodide@"+PyodideVersion)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bench: npm install pyodide@%s: %w\n%s", PyodideVersion, err, out)
	}
	if !PyodideInstalled(dir) {
		return fmt.Errorf("bench: npm install did not leave pyodide@%s in %s", PyodideVersion, dir)
	}
	return nil
}

// PyodidePeers starts one Node process on the Pyodide installed in dir
// (see SetupPyodide) and returns two peers on it: fresh, which calls
// loadPyodide() for every run (a new instance, as Airlock gives), and
// warm, which runs every program in one instance loaded once (each run
// gets new globals, but modules and interpreter state carry over: no
// isolation between runs). Their memory figure is the instance's wasm
// memory. Close either to stop the process.
func PyodidePeers(ctx context.Context, dir string) (fresh, warm Peer, err error) {
	if _, err := exec.LookPath("node"); err != nil {
		return Peer{}, Peer{}, fmt.Errorf("%w: node not found on PATH", ErrPeerUnavailable)
	}
	if !PyodideInstalled(dir) {
		return Peer{}, Peer{}, fmt.Errorf("%w: pyodide@%s is not installed in %s", ErrPeerUnavailable, PyodideVersion, dir)
	}
	driver := filepath.Join(dir, "airlock_driver.mjs")
	if err := os.WriteFile(driver, pyodideDriver, 0o644); err != nil {
		return Peer{}, Peer{}, fmt.Errorf("bench: pyodide: %w", err)
	}
	version, _ := exec.CommandContext(ctx, "node", "--version").Output()
	cmd := exec.CommandContext(ctx, "node", driver)
	cmd.Env = append(os.Environ(), "PYODIDE_DIR="+dir)
	cmd.Stderr = os.Stderr
	d, err := startDriver(cmd)
	if err != nil {
		return Peer{}, Peer{}, fmt.Errorf("bench: pyodide: %w", err)
	}
	run := func(fresh bool, code string) (int64, error) {
		return d.call(map[string]any{"fresh": fresh, "code": code})
	}
	// Load the warm instance now, so that its runs measure only the run.
	if _, err := run(false, "pass"); err != nil {
		d.close()
		return Peer{}, Peer{}, fmt.Errorf("bench: pyodide: %w", err)
	}
	node := string(bytesTrim(version))
	fresh = Peer{
		Name:    "pyodide fresh",
		Note:    fmt.Sprintf("Pyodide %s on Node %s, loadPyodide() per run; memory: wasm memory", PyodideVersion, node),
		Run:     func(ctx context.Context, code string) (int64, error) { return run(true, code) },
		Close:   d.close,
		MaxRuns: 3, // each load takes seconds
	}
	warm = Peer{
		Name:  "pyodide warm",
		Note:  fmt.Sprintf("Pyodide %s on Node %s, one instance reused by every run (no isolation); memory: wasm memory", PyodideVersion, node),
		Run:   func(ctx context.Context, code string) (int64, error) { return run(false, code) },
		Close: d.close,
	}
	return fresh, warm, nil
}

func bytesTrim(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
