package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// NativePeer runs each program as `python -c CODE`, a new process per run
// with no isolation at all: the baseline of what CPython itself costs on
// this machine, python resolved to the interpreter binary it runs. Its memory figure is the process's peak resident set. It
// returns a Skipped reason when python is not on PATH.
func NativePeer(ctx context.Context, python string) (Peer, *Skipped) {
	path, version, err := ResolvePython(ctx, python)
	if err != nil {
		return Peer{}, &Skipped{"native " + python, err.Error()}
	}
	return Peer{
		Name: "native " + python,
		Note: "CPython " + version + " (" + path + "), new process per run (`-c`), no isolation; memory: peak RSS",
		Run: func(ctx context.Context, code string) (int64, error) {
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, path, "-c", hwmPrefix+code)
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err != nil {
				return 0, fmt.Errorf("%w: %s", err, stderr.Bytes())
			}
			return ProcessPeak(stderr.Bytes(), cmd.ProcessState), nil
		},
	}, nil
}

// ResolvePython finds python on $PATH and returns the interpreter binary
// it runs, and its version. A launcher in front of the interpreter is
// measured past: pyenv's shim is a shell script that costs more than
// Python's own start (~130 ms a process here). A wrapper that runs Python
// elsewhere (a chroot, a container) is kept.
func ResolvePython(ctx context.Context, python string) (path, version string, err error) {
	path, err = exec.LookPath(python)
	if err != nil {
		return "", "", fmt.Errorf("bench: %s not found on PATH: %w", python, err)
	}
	out, err := exec.CommandContext(ctx, path, "-c", "import sys, platform; print(sys.executable); print(platform.python_version())").Output()
	if err != nil {
		return "", "", fmt.Errorf("bench: %s: %w", path, err)
	}
	exe, version, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if _, err := os.Stat(exe); err == nil {
		path = exe
	}
	return path, version, nil
}

// hwmPrefix makes the child report its own peak RSS (VmHWM) on stderr as
// it exits. The rusage of a child started from Go cannot tell it: the
// child begins as a vfork of this process, and Linux counts the parent's
// peak into the child's ru_maxrss. Where /proc is missing, nothing is
// printed and maxRSS is the fallback.
const hwmMark = "\n@airlock-vmhwm-kib "

var hwmPrefix = `import atexit as _airlock_atexit; _airlock_atexit.register(lambda: __import__("sys").stderr.write(` +
	`"".join(["` + strings.ReplaceAll(hwmMark, "\n", `\n`) + `" + l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")]) if __import__("os").path.exists("/proc/self/status") else ""))` + "\n"
