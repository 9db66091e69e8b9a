package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/server/wire"
)

func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	fs, f := newRunFlags(stderr)
	positional, err := parseInterleaved(fs, args)
	if stop, code, err := flagResult(fs, stderr, err); stop {
		return code, err
	}
	sbOpts, err := f.sandboxOptions()
	if err != nil {
		return exitUsage, err
	}
	if *f.watch != "" && !watching(ctx) {
		return watchRun(ctx, *f.watch, *f.clearScreen, *f.serverURL == "", &f.common, sbOpts, stdout, stderr,
			func(ctx context.Context) (int, error) { return cmdRun(ctx, args, stdin, stdout, stderr) })
	}
	req, status, err := f.request(fs, positional, stdin)
	if err != nil {
		return status, err
	}
	local := &localRunner{open: func() (*airlock.Sandbox, error) { return f.common.sandbox(ctx, stderr, sbOpts...) }}
	defer local.close()
	runners, warm, err := f.runners(ctx, local, len(sbOpts) > 0, req)
	if err != nil {
		return exitUsage, err
	}
	// The output as the program writes it, not when it ends (but inside
	// the one object of --json).
	res, err := runFirst(ctx, runners, req, streamOrNil(*f.asJSON, stdout, stderr))
	switch {
	case errors.Is(err, errRunCancelled):
		return exitTimeout, err
	case err != nil:
		return 1, err
	}
	status = report(*res, resultFiles(res), outFiles{*f.outDir, python.Home}, *f.asJSON, !*f.asJSON, stdout, stderr)
	if warm != nil && local.opened() {
		warm.start() // for the next run
	}
	return status, nil
}

// runFlags are airlock run's flags.
type runFlags struct {
	common   commonFlags
	limits   limitFlags
	files    fileFlags
	packages multiFlag
	network  netFlags
	index    indexFlags
	env      envFlags
	canaries canaryFlags

	code, outDir, stdinFile, tools, watch, serverURL *string
	asJSON, deterministic, clearScreen, showValue    *bool
	seed                                             *uint64
}

func newRunFlags(stderr io.Writer) (*flag.FlagSet, *runFlags) {
	fs := flag.NewFlagSet("airlock run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // flagResult prints help and errors
	f := &runFlags{
		code:          fs.String("c", "", "program passed in as a string"),
		outDir:        fs.String("out", "", "write files created or changed under /home/user to this directory"),
		stdinFile:     fs.String("stdin", "", "file to feed as the program's stdin ('-' for this process's stdin)"),
		asJSON:        fs.Bool("json", false, "print one JSON object instead of the program's output"),
		deterministic: fs.Bool("deterministic", false, "fake clocks, seeded randomness, fixed hash seed"),
		seed:          fs.Uint64("seed", 0, "seed for --deterministic"),
		tools:         hostFuncsFlag(fs, "expose built-in host functions to Python (import airlock): demo"),
		watch:         fs.String("watch", "", "re-run on every change to this file or directory (Ctrl-C stops)"),
		clearScreen:   fs.Bool("clear", false, "with --watch, clear the screen before each run"),
		showValue:     fs.Bool("value", false, "as a notebook: print the last expression's value after the output, and what airlock.display() shows (with --json: \"value\", \"displays\")"),
		serverURL:     fs.String("server", os.Getenv("AIRLOCK_SERVER"), "send the run to an `airlock serve` at this URL (default $AIRLOCK_SERVER; token: $AIRLOCK_TOKEN)"),
	}
	f.common.register(fs)
	f.limits.register(fs)
	f.files.register(fs)
	fs.Var(&f.packages, "package", "pure-Python package to make importable: a wheel, a zip or a directory (repeatable)")
	f.network.register(fs)
	f.index.register(fs)
	f.env.register(fs)
	f.canaries.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock run [flags] FILE.py | -c CODE")
		fmt.Fprintln(stderr, "  on wazero, later runs go to a warm server the first one leaves ($AIRLOCK_WARM: off, on, or its idle time; airlock warm status|stop)")
		printDefaults(fs)
	}
	return fs, f
}

// sandboxOptions are the options of a Sandbox of this process's, after
// refusing the flags a remote server sets for itself.
func (f *runFlags) sandboxOptions() ([]airlock.Option, error) {
	if *f.serverURL != "" {
		switch {
		case *f.tools != "":
			return nil, usageError{"--host-funcs: with --server, the server's host functions apply"}
		case len(f.packages) > 0:
			// A remote client must not name the server's host paths.
			return nil, usageError{"--package: with --server, start the server with --package instead"}
		case f.index.url != "":
			return nil, usageError{"--index-url: with --server, the server's own --index-url applies"}
		case len(f.canaries.inline) > 0 || f.canaries.file != "":
			return nil, usageError{"--canary: with --server, start the server with --canary or --canaries-file instead"}
		}
	}
	var sbOpts []airlock.Option
	canaryOpts, err := f.canaries.options()
	if err != nil {
		return nil, err
	}
	sbOpts = append(sbOpts, canaryOpts...)
	indexOpts, err := f.index.options()
	if err != nil {
		return nil, err
	}
	sbOpts = append(sbOpts, indexOpts...)
	if *f.tools != "" {
		opt, err := toolsOption(*f.tools)
		if err != nil {
			return nil, err
		}
		sbOpts = append(sbOpts, opt)
	}
	return sbOpts, nil
}

// request is the run the flags and the one program (FILE.py or -c) ask
// for, and on an error the exit status to answer it with.
func (f *runFlags) request(fs *flag.FlagSet, positional []string, stdin io.Reader) (airlock.Request, int, error) {
	req := airlock.Request{
		Limits:        f.limits.limits(),
		Deterministic: *f.deterministic,
		Seed:          *f.seed,
		Packages:      f.packages,
		RichOutput:    *f.showValue,
	}
	switch {
	case *f.code != "" && len(positional) == 0:
		req.Code, req.Filename = *f.code, "<string>"
	case *f.code == "" && len(positional) == 1:
		src, err := os.ReadFile(positional[0])
		if err != nil {
			return req, exitUsage, argFileError("", err)
		}
		req.Code, req.Filename = string(src), filepath.Base(positional[0])
	default:
		fs.Usage()
		return req, exitUsage, usageError{"give exactly one of FILE.py or -c CODE"}
	}
	var err error
	if req.Files, err = f.files.read(); err != nil {
		return req, exitUsage, err
	}
	if req.Env, err = f.env.env(); err != nil {
		return req, exitUsage, err
	}
	if req.Network, err = f.network.policy(); err != nil {
		return req, exitUsage, err
	}
	if *f.serverURL != "" && hasHeaders(req.Network) {
		return req, exitUsage, usageError{"--allow-net: with --server, rules cannot add headers; the server's own --allow-net rules carry them"}
	}
	if req.Stdin, err = readStdinFlag(*f.stdinFile, stdin); err != nil {
		return req, stdinFlagStatus(err), err
	}
	return req, 0, nil
}

// runners are where req goes, in order: --server; else the warm server
// where there is one (a run with Sandbox options of its own, packages or
// network has none), then local, a Sandbox of this process's. warm is
// the warm server to start for the next run, or nil.
func (f *runFlags) runners(ctx context.Context, local *localRunner, ownOptions bool, req airlock.Request) (runners []runner, warm *warmTarget, err error) {
	if *f.serverURL != "" {
		return []runner{newRemoteRunner(*f.serverURL)}, nil, nil
	}
	if !ownOptions && len(req.Packages) == 0 && req.Network == nil {
		if warm, err = warmFor(ctx, &f.common, req.Limits.Timeout, nil, nil); err != nil {
			return nil, nil, err
		}
	}
	if warm != nil {
		runners = append(runners, warmRunner{warm})
	}
	return append(runners, local), warm, nil
}

// resultFiles are res's files, with their data, as --out writes them.
func resultFiles(res *wire.Result) []airlock.File {
	files := make([]airlock.File, len(res.Files))
	for i, f := range res.Files {
		files[i] = airlock.File{Path: f.Path, Size: f.Size, Data: f.Data}
	}
	return files
}

// warmFor is the warm server for a command's runs with timeout and its
// Sandbox's packages and preimports, nil where they get none (see
// newWarmTarget; nor under --watch, which holds a Sandbox, nor for a
// timeout the API cannot carry, in whole milliseconds). The one error is
// a malformed $AIRLOCK_WARM.
func warmFor(ctx context.Context, common *commonFlags, timeout time.Duration, packages, preimport []string) (*warmTarget, error) {
	if watching(ctx) || timeout <= 0 || timeout%time.Millisecond != 0 {
		return nil, nil
	}
	t, err := newWarmTarget(common, packages, preimport)
	if errors.Is(err, errNotWarm) {
		return nil, nil
	}
	return t, err
}

// streamTo writes a run's output chunks to stdout and stderr as they come.
func streamTo(stdout, stderr io.Writer) func(string, []byte) {
	return func(stream string, p []byte) {
		if stream == "stderr" {
			stderr.Write(p)
		} else {
			stdout.Write(p)
		}
	}
}

// report prints a run's result the same way whether it ran here or on a
// server (res is the JSON contract, without file data; files carry it)
// and returns the exit status.
func report(res wire.Result, files []airlock.File, out outFiles, asJSON, streamed bool, stdout, stderr io.Writer) int {
	if asJSON {
		for i := range res.Files {
			res.Files[i].Data = nil
		}
		printJSON(stdout, res)
	} else {
		if !streamed {
			io.WriteString(stdout, res.Stdout)
			io.WriteString(stderr, res.Stderr)
		}
		printRich(stdout, res)
		if res.FilesOmitted > 0 {
			fmt.Fprintf(stderr, "airlock: %d files not returned: their paths are longer than 4096 bytes\n", res.FilesOmitted)
		}
		if res.Error != nil {
			e := &airlock.Error{Kind: airlock.Kind(res.Error.Kind), Message: res.Error.Message}
			fmt.Fprintln(stderr, "airlock:", e)
		}
		if len(res.Suspicious) > 0 {
			// As MCP's text says it: a canary tripped, or the code probed
			// the host (--json has them as "suspicious", with the audit).
			var why []string
			for _, s := range res.Suspicious {
				why = append(why, s.Reason+" ("+s.Detail+")")
			}
			fmt.Fprintln(stderr, "airlock: suspicious:", strings.Join(why, "; "))
		}
	}
	status := processStatus(res.ExitCode)
	if res.Error != nil {
		status = kindStatus(airlock.Kind(res.Error.Kind))
	}
	// After the report: a file the host cannot write (the guest names
	// them) must not cost the run's output or exit status; it only keeps
	// a successful run from exiting 0.
	if out.dir != "" && !out.write(files, stderr) && status == 0 {
		status = 1
	}
	return status
}

// printRich prints, after a run's output (--value), each display's text
// form and the other forms it has, then the last expression's value.
func printRich(w io.Writer, res wire.Result) {
	for _, d := range res.Displays {
		if d.Value {
			continue // its text is the value, below
		}
		var other []string
		for mime := range d.Data {
			if mime != "text/plain" {
				other = append(other, mime)
			}
		}
		slices.Sort(other)
		fmt.Fprintln(w, d.Data["text/plain"])
		if len(other) > 0 {
			fmt.Fprintf(w, "  (also %s: see --json)\n", strings.Join(other, ", "))
		}
	}
	if res.Value != "" {
		fmt.Fprintln(w, res.Value)
	}
}

// exitStatus maps a Result to the CLI's exit status contract.
func exitStatus(res *airlock.Result) int {
	if res.Error == nil {
		return processStatus(res.ExitCode)
	}
	return kindStatus(res.Error.Kind)
}

// processStatus is code as a process exit status: the OS keeps 8 bits, so
// a failure whose low byte is 0 (os._exit(256)) would read as success.
func processStatus(code int) int {
	if code < 0 || code > 255 {
		return 1
	}
	return code
}

func kindStatus(kind airlock.Kind) int {
	switch kind {
	case airlock.KindTimeout:
		return exitTimeout
	case airlock.KindInvalidRequest:
		return exitUsage
	}
	return exitLimit
}

// printJSON prints the --json contract (server.Result, without file data).
func printJSON(w io.Writer, out wire.Result) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(out)
}

// outFiles is where --out writes a run's files: dir on the host, for the
// guest's files below root.
type outFiles struct{ dir, root string }

// write saves result files under dir, by their path below root, and tells
// whether all were written. One that cannot be (a name too long for the
// host, say) is reported on stderr, its guest-chosen path quoted, and the
// others are still written.
func (o outFiles) write(files []airlock.File, stderr io.Writer) bool {
	ok := true
	for _, f := range files {
		rel, below := strings.CutPrefix(f.Path, strings.TrimSuffix(o.root, "/")+"/")
		if !below || !filepath.IsLocal(rel) {
			continue
		}
		dst := filepath.Join(o.dir, filepath.FromSlash(rel))
		err := os.MkdirAll(filepath.Dir(dst), 0o755)
		if err == nil {
			err = os.WriteFile(dst, f.Data, 0o644)
		}
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // its path is the guest's name, quoted below
			}
			fmt.Fprintf(stderr, "airlock: --out: %q not written: %v\n", f.Path, err)
			ok = false
		}
	}
	return ok
}

// watchRun runs cmd under watchLoop, holding a Sandbox open meanwhile so
// that each run's own Sandbox reuses the compiled module (when local).
func watchRun(ctx context.Context, target string, clear, local bool, common *commonFlags, opts []airlock.Option,
	stdout, stderr io.Writer, cmd func(context.Context) (int, error)) (int, error) {
	if local {
		holder, err := common.sandbox(ctx, stderr, opts...)
		if err != nil {
			return 1, err
		}
		defer holder.Close(context.Background())
	}
	return watchLoop(ctx, target, clear, stdout, stderr, func(ctx context.Context) int {
		code, err := cmd(ctx)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(stderr, "airlock:", err)
		}
		return code
	})
}
