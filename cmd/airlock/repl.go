package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/atomicfile"
)

// cmdRepl is an interactive session: each input runs in the same
// interpreter, as at Python's prompt, and an input that hits a limit is
// rolled back instead of ending the session.
func cmdRepl(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int, err error) {
	fs, f := newReplFlags(stderr)
	if stop, code, err := flagResult(fs, stderr, parseFlags(fs, args)); stop {
		return code, err
	}
	if fs.NArg() > 0 {
		return exitUsage, usageError{"repl takes no arguments"}
	}
	sbOpts, err := f.sandboxOptions()
	if err != nil {
		return exitUsage, err
	}
	seed, err := f.files.read()
	if err != nil {
		return exitUsage, err
	}
	vars, err := f.env.env()
	if err != nil {
		return exitUsage, err
	}
	sb, err := f.common.sandbox(ctx, stderr, sbOpts...)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
	r := &repl{stdout: stdout, stderr: stderr}
	if *f.tools != "" {
		// The demo store lasts the session, not one input.
		r.values = map[string]any{kvValuesKey: newKVStore()}
	}
	if err := r.open(ctx, sb, fs, f, seed, vars); err != nil {
		return 1, err
	}
	defer r.sess.Close(ctx)
	if *f.save != "" {
		defer func() {
			if serr := saveSession(r.sess, *f.save); serr != nil && err == nil {
				code, err = 1, serr
			}
		}()
	}

	// Once the session is up, Ctrl-C interrupts the input being typed or
	// run, as in Python's REPL, not the REPL: it takes SIGINT over.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	r.sigs = sigs
	in := newLineReader(stdin, stdout, stderr, sigs)
	defer in.close()
	if in.interactive() {
		fmt.Fprintf(stdout, "Airlock %s: Python in a sandbox session; an input that hits a limit is rolled back. Ctrl-D exits.\n", airlock.Version)
	}
	return r.loop(context.WithoutCancel(ctx), in)
}

// replFlags are airlock repl's flags.
type replFlags struct {
	common   commonFlags
	limits   limitFlags
	files    fileFlags
	pkgs     packageFlags
	env      envFlags
	canaries canaryFlags

	tools, save, load *string
}

func newReplFlags(stderr io.Writer) (*flag.FlagSet, *replFlags) {
	fs := flag.NewFlagSet("airlock repl", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // flagResult prints help and errors
	f := &replFlags{
		tools: hostFuncsFlag(fs, "expose built-in host functions to Python (import airlock): demo"),
		save:  fs.String("save", "", "on exit, save the session to this file (for --load)"),
		load:  fs.String("load", "", "start from a session saved with --save (limit flags given here apply to each input)"),
	}
	f.common.register(fs)
	f.limits.register(fs)
	f.files.register(fs)
	f.pkgs.register(fs)
	f.env.register(fs)
	f.canaries.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock repl [flags]   (limits apply to each input; Ctrl-D exits)")
		printDefaults(fs)
	}
	return fs, f
}

// sandboxOptions are the Sandbox's options from --host-funcs, --package and
// the canary flags.
func (f *replFlags) sandboxOptions() ([]airlock.Option, error) {
	var sbOpts []airlock.Option
	if *f.tools != "" {
		opt, err := toolsOption(*f.tools)
		if err != nil {
			return nil, err
		}
		sbOpts = append(sbOpts, opt)
	}
	pkgOpts, err := f.pkgs.options()
	if err != nil {
		return nil, err
	}
	canaryOpts, err := f.canaries.options()
	if err != nil {
		return nil, err
	}
	return slices.Concat(sbOpts, pkgOpts, canaryOpts), nil
}

// open starts r's session: a new one with the flags' limits, files and
// environment, or the one --load names.
func (r *repl) open(ctx context.Context, sb *airlock.Sandbox, fs *flag.FlagSet, f *replFlags, seed map[string][]byte, vars map[string]string) error {
	var err error
	if *f.load == "" {
		r.sess, err = sb.NewSession(ctx, airlock.SessionOptions{Limits: f.limits.limits(), Files: seed, Env: vars})
		return err
	}
	// The saved session keeps its own limits where they are lower than
	// those of this invocation (its flags, or their defaults): a file
	// cannot raise them. Those given now override them for each input.
	if r.sess, err = loadSession(ctx, sb, *f.load, f.limits.limits()); err != nil {
		return err
	}
	r.files, r.env = seed, vars
	all := f.limits.limits()
	fs.Visit(func(fl *flag.Flag) { r.limits = setLimit(r.limits, all, fl.Name) })
	return nil
}

// loop reads inputs as Python's prompt does and runs each complete one,
// until the input ends or asks to exit.
func (r *repl) loop(ctx context.Context, in lineReader) (int, error) {
	var pending []string
	for {
		prompt := ">>> "
		if len(pending) > 0 {
			prompt = "... "
		}
		line, err := in.readLine(prompt)
		switch {
		case errors.Is(err, errInterrupt):
			fmt.Fprintln(r.stderr, "KeyboardInterrupt")
			pending = nil
			continue
		case errors.Is(err, io.EOF):
			if len(pending) > 0 {
				// Input that ends mid-block runs as it stands, as python -i does.
				r.run(ctx, strings.Join(pending, "\n"))
			}
			if in.interactive() {
				fmt.Fprintln(r.stdout)
			}
			return 0, nil
		case err != nil:
			return 1, err
		}
		if startsNewStatement(pending, line) {
			r.run(ctx, strings.Join(pending, "\n"))
			pending = nil
		}
		if len(pending) == 0 && strings.TrimSpace(line) == "" {
			continue
		}
		pending = append(pending, line)
		if needsMore(pending) {
			continue
		}
		src := strings.Join(pending, "\n")
		pending = nil
		switch strings.TrimSpace(src) {
		case "exit", "exit()", "quit", "quit()":
			// In a session, SystemExit ends the call, not the REPL.
			return 0, nil
		}
		r.run(ctx, src)
	}
}

type repl struct {
	sess           *airlock.Session
	limits         airlock.Limits    // over the session's, for each input
	files          map[string][]byte // --file with --load: added by the first input that is kept
	values         map[string]any    // Request.Values of every input (the demo tools' store)
	env            map[string]string // --env with --load: over the loaded session's, for each input
	stdout, stderr io.Writer
	sigs           <-chan os.Signal
}

// run runs one input, streaming its output, and reports an error or a
// roll-back after it.
func (r *repl) run(ctx context.Context, src string) {
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	interrupted := make(chan struct{})
	go func() {
		select {
		case <-r.sigs:
			close(interrupted)
			cancel()
		case <-done:
		}
	}()
	var streamedErr int
	res, err := r.sess.Run(callCtx, airlock.Request{
		Code: src + "\n", Filename: "<stdin>", Interactive: true, Limits: r.limits, Files: r.files, Values: r.values, Env: r.env,
		OnOutput: func(stream string, p []byte) {
			if stream == "stdout" {
				r.stdout.Write(p)
				return
			}
			streamedErr += len(p)
			r.stderr.Write(p)
		},
	})
	if !res.RolledBack && res.Error == nil {
		r.files = nil
	}
	// Host notes (an interpreter that exited) come after the streamed part.
	if streamedErr < len(res.Stderr) {
		r.stderr.Write(res.Stderr[streamedErr:])
	}
	close(done)
	select {
	case <-interrupted:
		fmt.Fprintln(r.stderr, "KeyboardInterrupt (the session is as it was before this input)")
		return
	default:
	}
	if err != nil {
		if res.RolledBack {
			fmt.Fprintf(r.stderr, "airlock: %v; the session is as it was before this input\n", err)
		} else {
			fmt.Fprintln(r.stderr, "airlock:", err)
		}
	}
}

// scanInput reads lines by the rules of Python's prompt: open is an open
// bracket, triple-quoted string or trailing backslash; block is a
// compound statement (a line ending in ':', or a decorator), which goes on
// until a blank line. A host-side scan, so exotic syntax (nested quotes in
// 3.12 f-strings) can fool it; the guest's compiler then says what is wrong.
func scanInput(lines []string) (open, block bool) {
	depth := 0
	quote := "" // the open string's delimiter: ' " ''' or """
	block = strings.HasPrefix(strings.TrimSpace(lines[0]), "@")
	continued := false
	for _, line := range lines {
		last := byte(0) // last significant character outside strings and comments
		continued = false
		for i := 0; i < len(line); i++ {
			c := line[i]
			if quote != "" {
				switch {
				case c == '\\':
					i++
				case strings.HasPrefix(line[i:], quote):
					i += len(quote) - 1
					quote = ""
					last = c
				}
				continue
			}
			switch c {
			case '#':
				i = len(line)
				continue
			case '\'', '"':
				quote = string(c)
				if strings.HasPrefix(line[i:], strings.Repeat(string(c), 3)) {
					quote = strings.Repeat(string(c), 3)
					i += 2
				}
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth = max(depth-1, 0)
			case '\\':
				continued = i == len(line)-1
			}
			if c != ' ' && c != '\t' {
				last = c
			}
		}
		if len(quote) == 1 {
			quote = "" // an unterminated one-line string: the compiler says so
		}
		if last == ':' && depth == 0 && quote == "" {
			block = true
		}
	}
	return quote != "" || depth > 0 || continued, block
}

// needsMore tells whether lines are an incomplete input.
func needsMore(lines []string) bool {
	open, block := scanInput(lines)
	return open || block && strings.TrimSpace(lines[len(lines)-1]) != ""
}

// startsNewStatement tells whether line, typed after a block, begins a new
// statement rather than continuing the block: it is not indented and not
// an else, elif, except or finally. Python's prompt wants a blank line
// there; ending the block instead lets pasted and piped scripts run.
func startsNewStatement(pending []string, line string) bool {
	if len(pending) == 0 || line == "" || strings.ContainsRune(" \t#", rune(line[0])) {
		return false
	}
	if open, block := scanInput(pending); open || !block {
		return false
	}
	for _, kw := range []string{"else", "elif", "except", "finally"} {
		if rest, ok := strings.CutPrefix(line, kw); ok && (rest == "" || !isIdentByte(rest[0])) {
			return false
		}
	}
	return true
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// errInterrupt is Ctrl-C at the prompt.
var errInterrupt = errors.New("interrupt")

// lineReader reads the REPL's input lines.
type lineReader interface {
	// readLine returns a line without its newline, errInterrupt for
	// Ctrl-C, io.EOF at the end of input.
	readLine(prompt string) (string, error)
	// interactive tells whether a person is typing (a terminal).
	interactive() bool
	// close stops reading.
	close()
}

// newLineReader edits lines on a terminal (raw mode, x/term's editor:
// arrows, Home/End, history) and reads plain lines otherwise, with the
// prompts on stderr as python -i writes them.
func newLineReader(stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) lineReader {
	in, inOK := stdin.(*os.File)
	out, outOK := stdout.(*os.File)
	if inOK && outOK && term.IsTerminal(int(in.Fd())) && term.IsTerminal(int(out.Fd())) {
		return newEditor(in, out, int(in.Fd()))
	}
	p := &plainReader{lines: make(chan lineResult), done: make(chan struct{}), prompts: stderr, sigs: sigs}
	go p.scan(stdin)
	return p
}

type lineResult struct {
	line string
	err  error
}

// plainReader reads lines in a goroutine so that Ctrl-C at the prompt can
// interrupt a read that blocks.
type plainReader struct {
	lines   chan lineResult
	done    chan struct{} // closed when the REPL stops reading
	prompts io.Writer
	sigs    <-chan os.Signal
}

func (p *plainReader) scan(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" && !p.send(lineResult{line: strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")}) {
			return
		}
		if err != nil {
			p.send(lineResult{err: err})
			return
		}
	}
}

func (p *plainReader) send(r lineResult) bool {
	select {
	case p.lines <- r:
		return true
	case <-p.done:
		return false
	}
}

// close lets the scanner end at its next line (a read in progress stays
// blocked until then: nothing interrupts a read of stdin portably).
func (p *plainReader) close() { close(p.done) }

func (p *plainReader) readLine(prompt string) (string, error) {
	io.WriteString(p.prompts, prompt)
	select {
	case r := <-p.lines:
		if r.err != nil {
			p.lines = nil // the scanner has stopped; every later read is EOF
			return "", io.EOF
		}
		return r.line, nil
	case <-p.sigs:
		io.WriteString(p.prompts, "\n")
		return "", errInterrupt
	}
}

func (p *plainReader) interactive() bool { return false }

// editor is a line editor on a terminal. The terminal is in raw mode only
// while a line is edited, so a running input gets Ctrl-C as SIGINT.
type editor struct {
	fd      int // -1: not a terminal (tests drive the editor through pipes)
	in      *ctrlCReader
	out     io.Writer
	t       *term.Terminal
	history term.History
}

func newEditor(in io.Reader, out io.Writer, fd int) *editor {
	e := &editor{fd: fd, in: &ctrlCReader{r: in}, out: out}
	e.reset()
	return e
}

// reset starts a new terminal state (x/term keeps the interrupted line
// otherwise), keeping the history.
func (e *editor) reset() {
	e.t = term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{e.in, e.out}, "")
	if e.history != nil {
		e.t.History = e.history
	}
	e.history = e.t.History
}

func (e *editor) readLine(prompt string) (string, error) {
	if e.fd >= 0 {
		old, err := term.MakeRaw(e.fd)
		if err != nil {
			return "", fmt.Errorf("terminal: %w", err)
		}
		defer term.Restore(e.fd, old)
		if w, h, err := term.GetSize(e.fd); err == nil && w > 0 && h > 0 {
			e.t.SetSize(w, h)
		}
	}
	e.t.SetPrompt(prompt)
	line, err := e.t.ReadLine()
	if errors.Is(err, io.EOF) && e.in.hit {
		e.in.hit = false
		io.WriteString(e.out, "^C\r\n")
		e.reset()
		return "", errInterrupt
	}
	if errors.Is(err, term.ErrPasteIndicator) {
		err = nil // a pasted line is a line
	}
	return line, err
}

func (e *editor) interactive() bool { return e.fd >= 0 }

func (e *editor) close() {}

// ctrlCReader notes a Ctrl-C byte: x/term answers both Ctrl-C and Ctrl-D
// with io.EOF, and only Ctrl-D ends the REPL.
type ctrlCReader struct {
	r   io.Reader
	hit bool
}

func (c *ctrlCReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if strings.IndexByte(string(p[:n]), 3) >= 0 {
		c.hit = true
	}
	return n, err
}

// setLimit copies the limit flag name from all into l.
func setLimit(l, all airlock.Limits, name string) airlock.Limits {
	switch name {
	case "timeout":
		l.Timeout = all.Timeout
	case "memory":
		l.Memory = all.Memory
	case "output-limit":
		l.Output = all.Output
	case "fs-bytes":
		l.FSBytes = all.FSBytes
	case "fs-files":
		l.FSFiles = all.FSFiles
	case "fuel":
		l.Fuel = all.Fuel
	case "threads":
		l.Threads = all.Threads
	}
	return l
}

func loadSession(ctx context.Context, sb *airlock.Sandbox, path string, max airlock.Limits) (*airlock.Session, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, argFileError("--load", err)
	}
	defer f.Close()
	sess, err := sb.LoadSession(ctx, bufio.NewReader(f), airlock.LoadOptions{MaxLimits: max})
	if err != nil {
		return nil, fmt.Errorf("--load %s: %w", path, err)
	}
	return sess, nil
}

// saveSession writes through a temporary file, so a failed save leaves an
// earlier one whole.
func saveSession(sess *airlock.Session, path string) error {
	if err := atomicfile.Write(path, 0o600, sess.Save); err != nil {
		return fmt.Errorf("--save: %w", err)
	}
	return nil
}
