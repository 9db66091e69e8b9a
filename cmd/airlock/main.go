// Command airlock runs untrusted Python in a WASI sandbox.
//
//	airlock setup [--export|--import FILE]  prepare the own build (asyncify, compile, snapshot); bundle it for another host, or install a bundle
//	airlock run [flags] FILE.py | -c CODE
//	airlock repl [flags]               interactive session
//	airlock serve [--addr HOST:PORT]   HTTP API
//	airlock mcp                        Model Context Protocol server over stdio
//	airlock test DIR                   unittest discovery in the sandbox
//	airlock version
//	airlock bench [--runs N] [--json]
//	airlock warm status|stop           the background servers run leaves for later runs
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/bench"
	"github.com/airlock-sandbox/airlock/python"
)

// Exit statuses beyond the program's own (the CLI contract): a usage
// error (as python3's), the run's timeout and other limits, and Airlock's
// own failure (no build, a damaged bundle, a server that refused or could
// not be reached), so that a script's own exit 1 is never taken for one.
const (
	exitUsage   = 2
	exitTimeout = 124
	exitLimit   = 125
	exitAirlock = 126
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	warmByDefault = true
	code := command(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is dispatch as a process of its own runs it (main, and tests
// that run their binary as the airlock command): it reports its peak RSS
// at the end when bench --cli asks.
func command(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	code := dispatch(ctx, args, stdin, stdout, stderr)
	if os.Getenv(bench.EnvReportPeak) == "1" {
		bench.WritePeak(stderr)
	}
	return code
}

const usage = `usage: airlock <command> [flags]

commands:
  setup     prepare the build (asyncify, compile, snapshot); --export FILE bundles it, --import FILE installs a bundle
  run       run a Python file or -c CODE in a fresh sandbox
  repl      an interactive Python session in the sandbox
  wasm      run any WASI preview1 module (FILE.wasm) under the same isolation
  serve     serve the HTTP API (POST /v1/run, GET /healthz, GET /metrics)
  mcp       serve run_python over the Model Context Protocol on stdio
  test      run a directory's unittest suite inside the sandbox
  version   print the Python version and the artifact's sha256 (also --version)
  bench     measure per-run latency and throughput of the standard workloads
  warm      status or stop the background servers that take later runs (wazero; $AIRLOCK_WARM)

Run 'airlock <command> -h' for a command's flags. Exit status: the program's own, or
2 usage error, 124 timeout, 125 another limit, 126 Airlock itself failed.
`

// usageError marks errors that exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// fileArgError is a file named on the command line that cannot be read: a
// usage error too (python3 exits 2 for it), so the status cannot be taken
// for one the program exited with, as it never ran.
type fileArgError struct {
	flag string // "" for the script
	err  error
}

func (e fileArgError) Error() string {
	if e.flag == "" {
		return e.err.Error()
	}
	return e.flag + ": " + e.err.Error()
}

func (e fileArgError) Unwrap() error { return e.err }

func argFileError(flag string, err error) error { return fileArgError{flag, err} }

// flagResult tells whether a command stops after parsing its flags with
// err, and with what: -h prints the command's help and succeeds; any other
// error is a usage error of one line with a hint, not the whole flag list
// (flag sets write to io.Discard while parsing).
var badValue = regexp.MustCompile(`^invalid value ".*" for flag -([\w-]+): `)

func flagResult(fs *flag.FlagSet, stderr io.Writer, err error) (stop bool, code int, _ error) {
	switch {
	case err == nil:
		return false, 0, nil
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stderr)
		fs.Usage()
		return true, 0, nil
	}
	msg := err.Error()
	if m := badValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[1]); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, isDuration := g.Get().(time.Duration); isDuration {
					msg += ": a duration takes a unit, e.g. 5s, 500ms, 2m"
				}
			}
		}
	}
	return true, exitUsage, usageError{fmt.Sprintf("%s: %s (see '%s -h')", strings.TrimPrefix(fs.Name(), "airlock "), msg, fs.Name())}
}

func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var (
		code int
		err  error
	)
	switch args[0] {
	case "setup":
		code, err = cmdSetup(ctx, args[1:], stdout, stderr)
	case "run":
		code, err = cmdRun(ctx, args[1:], stdin, stdout, stderr)
	case "wasm":
		code, err = cmdWasm(ctx, args[1:], stdin, stdout, stderr)
	case "repl":
		code, err = cmdRepl(ctx, args[1:], stdin, stdout, stderr)
	case "serve":
		code, err = cmdServe(ctx, args[1:], stdout, stderr)
	case "mcp":
		code, err = cmdMCP(ctx, args[1:], stdin, stdout, stderr)
	case "test":
		code, err = cmdTest(ctx, args[1:], stdout, stderr)
	case "version":
		code, err = cmdVersion(ctx, args[1:], stdout, stderr)
	case "bench":
		code, err = cmdBench(ctx, args[1:], stdout, stderr)
	case "warm":
		code, err = cmdWarm(ctx, args[1:], stdout, stderr)
	case "--version", "-V":
		// The program's own version, which needs no build (`airlock
		// version` says which Python it runs).
		fmt.Fprintf(stdout, "airlock %s\n", airlock.Version)
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "airlock: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintln(stderr, "airlock:", errorText(err))
		var ue usageError
		var fe fileArgError
		if errors.As(err, &ue) || errors.As(err, &fe) {
			return exitUsage
		}
		if code == 0 || code == 1 {
			code = exitAirlock
		}
	}
	return code
}

// errorText is err's message without the "airlock: " its layers each put
// in front (the line already starts with one), and what to do about it at
// the command line: the library's errors name Go calls, not commands.
func errorText(err error) string {
	msg := err.Error()
	for strings.HasPrefix(msg, "airlock: ") {
		msg = strings.TrimPrefix(msg, "airlock: ")
	}
	for _, h := range cliHints {
		if errors.Is(err, h.err) {
			return msg + "\n  " + h.hint
		}
	}
	return msg
}

// cliHints say which command or flag answers a library error.
var cliHints = []struct {
	err  error
	hint string
}{
	{airlock.ErrNoOwnBuild, "run scripts/setup.sh (builds it: root and apt-get, ~10 min once), `airlock setup --fetch URL` or " +
		"`airlock setup --import BUNDLE` with a bundle another host exported, or choose the npm fallback with " +
		python.EnvPython + "=" + python.SelectNPM + " (--python npm)"},
	{airlock.ErrNotFetched, "run `airlock setup --python npm` (scripts/setup.sh --python npm)"},
	{airlock.ErrNoWasmOpt, "scripts/setup.sh installs it; or set " + python.EnvWasmOpt},
	{airlock.ErrNotAsyncified, "run `airlock setup` (needs Binaryen's wasm-opt)"},
	{airlock.ErrSessionsUnavailable, "run `airlock setup` (scripts/setup.sh)"},
	{airlock.ErrBundleNotPinned, "pass --bundle-sha256 (`airlock setup --export` prints it)"},
}
