package python

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"sort"
	"strings"
)

//go:embed prelude.py
var prelude string

// Home is the guest's working directory and home, as in e2b.
const Home = "/home/user"

// Args is the guest's argv: the prelude, run with -c, after the finder
// that makes the guest module `airlock` importable (see guest.go); -i then
// hands over to CPython's interactive loop, which reads callStatement.
func Args() []string { return []string{"python", "-i", "-c", command} }

// LoopRead tells whether a read of stdin that passes buffers is the
// interactive loop's, where a session pauses: C stdio reads into two (the
// caller's, here empty, and the stream's own), Python's os.read and file
// objects into one. (os.readv could pass two from elsewhere: the engine
// then refuses the pause, see engine.ErrPausedElsewhere.)
func LoopRead(buffers uint32) bool { return buffers == 2 }

// callStatement is what the interactive loop reads ahead of each run's
// frame: the prelude's entry point (see prelude.py).
const callStatement = "__import__(\"_airlock_prelude\").call()\n"

// DefaultEnv is the environment every run starts from; a request's own
// variables are applied over it.
func DefaultEnv() []string {
	return []string{
		"HOME=" + Home,
		"PWD=" + Home,
		"LANG=C.UTF-8",
		"PYTHONDONTWRITEBYTECODE=1",
		// Unbuffered stdio: a run stopped by its timeout or a crash still
		// shows everything it printed, and a host call per write is cheap.
		"PYTHONUNBUFFERED=1",
	}
}

// MergeEnv applies overrides (KEY=VALUE) over base, keeping base's order.
func MergeEnv(base []string, overrides map[string]string) []string {
	out := make([]string, 0, len(base)+len(overrides))
	seen := map[string]bool{}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := overrides[k]; ok {
			kv = k + "=" + v
			seen[k] = true
		}
		out = append(out, kv)
	}
	extra := make([]string, 0, len(overrides))
	for k := range overrides {
		if !seen[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra) // a stable environment, run after run
	for _, k := range extra {
		out = append(out, k+"="+overrides[k])
	}
	return out
}

// Stdin is what fd 0 delivers: the statement that calls the prelude
// (unless entered, for a run that calls it at the image's entry point,
// see Capture), the frame it reads (see prelude.py), then the program's
// own stdin. The statement is a reader of its own so that the loop's
// buffered read (C stdio) receives it alone and never takes in part of
// the frame.
func Stdin(filename string, env []string, code []byte, stdin io.Reader, entered bool) io.Reader {
	envBlock := strings.Join(env, "\x00")
	header := fmt.Sprintf("%08x%08x%08x%s%s", len(filename), len(envBlock), len(code), filename, envBlock)
	frame := io.MultiReader(strings.NewReader(header), bytes.NewReader(code))
	if !entered {
		frame = io.MultiReader(strings.NewReader(callStatement), frame)
	}
	if stdin == nil {
		return frame
	}
	return io.MultiReader(frame, stdin)
}
