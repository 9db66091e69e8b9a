package main

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

func TestReplInputRules(t *testing.T) {
	for _, tc := range []struct {
		input string
		more  bool
	}{
		{"x = 1", false},
		{"print('a:')", false},
		{"if x:", true},
		{"if x:  # a comment", true},
		{"if x:\n    y = 1", true},
		{"if x:\n    y = 1\n", false},
		{"f(1,", true},
		{"f(1,\n  2)", false},
		{"d = {1:", true},
		{"s = '''one", true},
		{"s = '''one\ntwo'''", false},
		{`s = "a\"b("`, false},
		{"s = 'it''s'", false},
		{"x = 1 + \\", true},
		{"x = 1 + \\\n  2", false},
		{"@decorator", true},
		{"# just a comment (", false},
		{"while True: pass", false},
		{"def f():\n    return '''\n\n'''", true}, // the blank line is inside the string
	} {
		if got := needsMore(strings.Split(tc.input, "\n")); got != tc.more {
			t.Errorf("needsMore(%q) = %v, want %v", tc.input, got, tc.more)
		}
	}
	for _, tc := range []struct {
		pending []string
		line    string
		want    bool
	}{
		{[]string{"for i in x:", "    f(i)"}, "print(1)", true},
		{[]string{"for i in x:", "    f(i)"}, "    g(i)", false},
		{[]string{"if x:", "    f()"}, "else:", false},
		{[]string{"try:", "    f()"}, "except E:", false},
		{[]string{"if x:", "    f()"}, "elsewhere = 1", true},
		{[]string{"f(1,"}, "2)", false}, // not a block: inside brackets
		{nil, "x = 1", false},
	} {
		if got := startsNewStatement(tc.pending, tc.line); got != tc.want {
			t.Errorf("startsNewStatement(%q, %q) = %v, want %v", tc.pending, tc.line, got, tc.want)
		}
	}
}

// The REPL driven through a pipe: multi-line input, state kept between
// inputs, expression values echoed, a timed-out input rolled back, an
// exception that keeps the session, exit().
func TestReplSession(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "seed.txt")
	if err := os.WriteFile(seed, []byte("seeded"), 0o644); err != nil {
		t.Fatal(err)
	}
	input := strings.Join([]string{
		"x = 40",
		"def add(a,",
		"        b):",
		"    return a + b",
		"",
		"add(x, 2)",
		"for i in range(2):",
		"    print(i)",
		"print('after the block')", // ends the block without a blank line
		`data = """a`,
		`b"""`,
		"len(data), open('in.txt').read()",
		// Never ends and never allocates (the filter drops every item), so it
		// meets the timeout, not the memory limit, however fast the engine.
		"x = -1; [0 for _ in iter(int, 1) if 0]", // rolled back at the timeout
		"x",
		"1/0",
		"x = x + 1",
		"x",
		"exit()",
		"print('not reached')",
	}, "\n") + "\n"
	code, stdout, stderr := cli(t, input, "repl", "--timeout", "2s", "--file", seed+":in.txt")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	want := "42\n0\n1\nafter the block\n(3, 'seeded')\n40\n41\n"
	if stdout != want {
		t.Errorf("stdout %q, want %q\nstderr:\n%s", stdout, want, stderr)
	}
	for _, w := range []string{
		"airlock: timeout: the run exceeded its 2s time limit; the session is as it was before this input\n",
		"File \"<stdin>\", line 1, in <module>\n", "ZeroDivisionError: division by zero\n",
		">>> ", "... ",
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}

	// A block still open at the end of input runs; EOF exits with 0.
	code, stdout, stderr = cli(t, "for c in 'ab':\n    print(c * 2)", "repl")
	if code != 0 || stdout != "aa\nbb\n" {
		t.Errorf("open block at EOF: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if code, _, _ := cli(t, "", "repl", "extra"); code != exitUsage {
		t.Errorf("repl with an argument: exit %d, want %d", code, exitUsage)
	}
}

// The terminal line editor, driven through a pipe with the bytes a
// terminal sends: arrows, Home/End, backspace, history, Ctrl-C, Ctrl-D.
func TestReplEditor(t *testing.T) {
	pr, pw := io.Pipe()
	var out strings.Builder
	e := newEditor(pr, &out, -1)
	keys := []string{
		"ab\x1b[D\x1b[DX\r",  // left, left, insert at the start
		"\x1b[A\r",           // up: the previous line again
		"cd\x1b[HY\x1b[FZ\r", // Home, End
		"abc\x7f\r",          // backspace
		"zz", "\x03",         // Ctrl-C drops the line being typed
		"q\r",
		"\x04", // Ctrl-D on an empty line
	}
	go func() {
		for _, k := range keys {
			pw.Write([]byte(k))
		}
		pw.Close()
	}()
	for i, want := range []string{"Xab", "Xab", "YcdZ", "ab", "", "q", ""} {
		line, err := e.readLine(">>> ")
		var wantErr error
		switch i {
		case 4:
			wantErr = errInterrupt
		case 6:
			wantErr = io.EOF
		}
		if line != want || !errors.Is(err, wantErr) {
			t.Fatalf("line %d: %q, %v; want %q, %v", i, line, err, want, wantErr)
		}
	}
	if !strings.Contains(out.String(), ">>> ") {
		t.Errorf("no prompt written: %q", out.String())
	}
}

// --save on exit and --load at start carry a session across processes'
// worth of REPLs: globals, imports and files; limit flags given with
// --load apply to each input.
func TestReplSaveLoad(t *testing.T) {
	dir := t.TempDir()
	saved := filepath.Join(dir, "s.airlock")
	extra := filepath.Join(dir, "extra.txt")
	if err := os.WriteFile(extra, []byte("later"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, "import fractions\nq = fractions.Fraction(1, 3)\nopen('kept.txt', 'w').write('kept')\n", "repl", "--save", saved)
	if code != 0 || stdout != "4\n" { // write() returns 4, echoed
		t.Fatalf("first REPL: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	in := "q * 3, open('kept.txt').read(), open('extra.txt').read()\nwhile True: pass\nq\n"
	code, stdout, stderr = cli(t, in, "repl", "--load", saved, "--file", extra, "--timeout", "1s")
	if code != 0 || stdout != "(Fraction(1, 1), 'kept', 'later')\nFraction(1, 3)\n" ||
		!strings.Contains(stderr, "exceeded its 1s time limit") {
		t.Fatalf("loaded REPL: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if err := os.WriteFile(saved, []byte("not a session"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr = cli(t, "", "repl", "--load", saved); code != exitAirlock || !strings.Contains(stderr, "corrupt") {
		t.Errorf("damaged --load: exit %d, stderr:\n%s", code, stderr)
	}
}

// Every limit flag given with --load overrides the saved limit: setLimit
// must know each flag limitFlags defines.
func TestSetLimitCoversEveryLimitFlag(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var lf limitFlags
	lf.register(fs)
	for name, v := range map[string]string{"timeout": "3s", "memory": "7MiB", "output-limit": "5KiB", "fs-bytes": "9MiB", "fs-files": "11", "fuel": "13", "threads": "17"} {
		if err := fs.Set(name, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	all := lf.limits()
	fs.VisitAll(func(f *flag.Flag) {
		if setLimit(airlock.Limits{}, all, f.Name) == (airlock.Limits{}) {
			t.Errorf("--%s with --load is ignored", f.Name)
		}
	})
}

// A saved session rewritten to raise its own limits (its checksum is no
// MAC: anyone can recompute it) loads with this invocation's: writing
// 80 MiB of files stops at the default 64 MiB quota, as in the untouched
// session. (Before, the blob's 1 TiB quota was honoured.)
func TestReplLoadCannotRaiseLimits(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "s.airlock")
	if code, _, stderr := cli(t, "x = 1\n", "repl", "--save", saved); code != 0 {
		t.Fatalf("save: exit %d\n%s", code, stderr)
	}
	b, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	const limitsAt = 16 + 4 + 32 + 32 + 8 // magic, version, image key, memory sum, calls
	binary.LittleEndian.PutUint64(b[limitsAt:], uint64(time.Hour))
	binary.LittleEndian.PutUint64(b[limitsAt+3*8:], 1<<40) // fs bytes
	sum := sha256.Sum256(b[:len(b)-32])
	copy(b[len(b)-32:], sum[:])
	if err := os.WriteFile(saved, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, "for i in range(80):\n    _ = open(f'f{i}', 'wb').write(b'x' * (1 << 20))\n\nprint(x)\n", "repl", "--load", saved)
	if code != 0 || stdout != "1\n" || !strings.Contains(stderr, "filesystem quota (67108864 bytes") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}
