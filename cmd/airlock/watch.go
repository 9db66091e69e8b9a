package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchDebounce is how long the tree must stay quiet before a re-run:
// editors write a file in several steps.
const watchDebounce = 150 * time.Millisecond

type watchingKey struct{}

// watching tells a command it runs inside watchLoop (and must not watch).
func watching(ctx context.Context) bool { return ctx.Value(watchingKey{}) != nil }

// watchLoop runs once, then again after every change under target (a file
// or a directory, watched recursively), debounced, until ctx ends
// (Ctrl-C), which ends the loop cleanly with status 0.
func watchLoop(ctx context.Context, target string, clear bool, stdout, stderr io.Writer, once func(context.Context) int) (int, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return 1, fmt.Errorf("--watch: %w", err)
	}
	defer w.Close()
	info, err := os.Stat(target)
	if err != nil {
		return 1, fmt.Errorf("--watch: %w", err)
	}
	onlyFile := ""
	if info.IsDir() {
		if err := addTree(w, target); err != nil {
			return 1, fmt.Errorf("--watch: %w", err)
		}
	} else {
		// Watch the directory: editors often replace a file by renaming.
		onlyFile = filepath.Clean(target)
		if err := w.Add(filepath.Dir(onlyFile)); err != nil {
			return 1, fmt.Errorf("--watch: %w", err)
		}
	}
	ctx = context.WithValue(ctx, watchingKey{}, true)
	run := func() {
		if clear {
			io.WriteString(stdout, "\033[H\033[2J")
		}
		code := once(ctx)
		if ctx.Err() == nil {
			fmt.Fprintf(stderr, "airlock: exit status %d; watching %s (Ctrl-C to stop)\n", code, target)
		}
	}
	run()
	var rerun <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return 0, nil
		case ev, ok := <-w.Events:
			if !ok {
				return 0, nil
			}
			if ignored(ev.Name) || ev.Op == fsnotify.Chmod || onlyFile != "" && filepath.Clean(ev.Name) != onlyFile {
				continue
			}
			if onlyFile == "" && ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					_ = addTree(w, ev.Name)
				}
			}
			rerun = time.After(watchDebounce)
		case err, ok := <-w.Errors:
			if !ok {
				return 0, nil
			}
			fmt.Fprintln(stderr, "airlock: --watch:", err)
		case <-rerun:
			rerun = nil
			run()
		}
	}
}

// ignored skips hidden files and directories and Python's byte-code cache.
func ignored(path string) bool {
	name := filepath.Base(path)
	return strings.HasPrefix(name, ".") || name == "__pycache__" || strings.HasSuffix(name, ".pyc") || strings.HasSuffix(name, "~")
}

func addTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if p != root && ignored(p) {
			return filepath.SkipDir
		}
		return w.Add(p)
	})
}
