package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// testRunner runs unittest discovery inside the sandbox and prints one
// summary line the host parses (on stdout, after the runner's report on
// stderr).
const testRunner = `import sys, unittest
suite = unittest.TestLoader().discover(".", pattern=sys.argv_pattern, top_level_dir=".")
r = unittest.TextTestRunner(stream=sys.stderr, verbosity=sys.argv_verbosity).run(suite)
print("AIRLOCK-TEST ran=%d failures=%d errors=%d skipped=%d expected_failures=%d unexpected_successes=%d" % (
    r.testsRun, len(r.failures), len(r.errors), len(r.skipped), len(r.expectedFailures), len(r.unexpectedSuccesses)))
sys.exit(0 if r.wasSuccessful() else 1)
`

var testSummary = regexp.MustCompile(`AIRLOCK-TEST ran=(\d+) failures=(\d+) errors=(\d+) skipped=(\d+) expected_failures=(\d+) unexpected_successes=(\d+)\n?`)

func cmdTest(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fset := flag.NewFlagSet("airlock test", flag.ContinueOnError)
	fset.SetOutput(io.Discard) // flagResult prints help and errors
	var (
		common  commonFlags
		pattern = fset.String("pattern", "test*.py", "unittest discovery pattern")
		verbose = fset.Bool("v", false, "list every test")
		timeout = fset.Duration("timeout", 60*time.Second, "wall-clock limit of the whole suite")
		memory  = &sizeFlag{airlock.DefaultLimits().Memory}
		watch   = fset.Bool("watch", false, "re-run on every change under DIR (Ctrl-C stops)")
		clear   = fset.Bool("clear", false, "with --watch, clear the screen before each run")
	)
	common.register(fset)
	fset.Var(memory, "memory", "memory limit (e.g. 256MiB)")
	fset.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock test [flags] DIR   (unittest discovery in the sandbox; DIR becomes /home/user)")
		fset.PrintDefaults()
	}
	positional, err := parseInterleaved(fset, args)
	if stop, code, err := flagResult(fset, stderr, err); stop {
		return code, err
	}
	if len(positional) != 1 {
		fset.Usage()
		return exitUsage, usageError{"give exactly one DIR"}
	}
	if *watch && !watching(ctx) {
		return watchRun(ctx, positional[0], *clear, true, &common, nil, stdout, stderr,
			func(ctx context.Context) (int, error) { return cmdTest(ctx, args, stdout, stderr) })
	}
	files, err := readTree(positional[0], airlock.DefaultLimits().FSBytes)
	if err != nil {
		return 1, err
	}
	sb, err := common.sandbox(ctx, stderr)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
	verbosity := 1
	if *verbose {
		verbosity = 2
	}
	code := strings.NewReplacer("sys.argv_pattern", strconv.Quote(*pattern), "sys.argv_verbosity", strconv.Itoa(verbosity)).Replace(testRunner)
	res, _ := sb.Run(ctx, airlock.Request{
		Code: code, Filename: "<airlock test>", Files: files,
		Limits: airlock.Limits{Timeout: *timeout, Memory: memory.n},
	})
	stderr.Write(res.Stderr)
	m := testSummary.FindSubmatch(res.Stdout)
	stdout.Write(testSummary.ReplaceAll(res.Stdout, nil))
	if res.Error != nil {
		fmt.Fprintln(stderr, "airlock:", res.Error)
		return exitStatus(res), nil
	}
	if m == nil {
		fmt.Fprintf(stdout, "no summary from the test runner (exit %d)\n", res.ExitCode)
		return max(processStatus(res.ExitCode), 1), nil
	}
	n := make([]int, 6)
	for i := range n {
		n[i], _ = strconv.Atoi(string(m[i+1]))
	}
	ran, failed, errs, skipped := n[0], n[1], n[2], n[3]
	passed := ran - failed - errs - skipped - n[5]
	fmt.Fprintf(stdout, "%d passed, %d failed, %d errors, %d skipped (%d tests) in %s\n",
		passed, failed+n[5], errs, skipped, ran, res.Duration.Round(time.Millisecond))
	if res.ExitCode != 0 || ran == 0 {
		return max(processStatus(res.ExitCode), 1), nil
	}
	return 0, nil
}

// readTree reads the regular files under dir, skipping hidden entries and
// __pycache__, keyed by slash path relative to dir.
func readTree(dir string, maxBytes int64) (map[string][]byte, error) {
	files := map[string][]byte{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != dir && (strings.HasPrefix(name, ".") || name == "__pycache__") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if total += int64(len(data)); total > maxBytes {
			return fmt.Errorf("%s holds more than %d bytes", dir, maxBytes)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = data
		return nil
	})
	return files, err
}
