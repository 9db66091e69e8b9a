package python

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/airlock-sandbox/airlock/engine"
)

// CompiledDir is where, under cacheDir, engines keep compiled code.
func CompiledDir(cacheDir string) string { return filepath.Join(cacheDir, "compiled") }

// WritePrecompiled writes this machine's compiled code for art's
// asyncified module (the one every snapshot run uses) as an engine
// precompiled pack: what scripts/embed.sh puts into the edge binary
// beside the bundle, so that its first run on an empty cache does not
// spend seconds compiling. The module is compiled anew into a scratch
// cache, where the one file that appears is surely its code (in a shared
// cache, code found there has no record of which file it is).
//
// # Errors
// ErrNotAsyncified (wrapped) before set-up; a compile or write error.
func WritePrecompiled(ctx context.Context, w io.Writer, art *Artifact, cacheDir string) error {
	wasm, _, err := LoadAsyncified(art, cacheDir)
	if err != nil {
		return fmt.Errorf("python: precompiled code: %w", err)
	}
	scratch, err := os.MkdirTemp("", "airlock-precompile-")
	if err != nil {
		return fmt.Errorf("python: precompiled code: %w", err)
	}
	defer os.RemoveAll(scratch)
	mod, err := engine.LoadResumable(ctx, wasm, engine.Options{CacheDir: scratch, Entry: EntryFuncs})
	if err != nil {
		return fmt.Errorf("python: precompiled code: %w", err)
	}
	defer mod.Close(ctx)
	return mod.WritePrecompiled(w)
}

// InstallPrecompiled puts the compiled code art carries (the embedded
// build's, when the binary was built with it) into the compile cache
// compiledDir, unless code for the module is there already, and tells
// whether it did. A build carrying none installs nothing.
//
// # Errors
// engine.ErrPrecompiled for a damaged pack; a file system error.
func (a *Artifact) InstallPrecompiled(compiledDir string) (bool, error) {
	if len(a.precompiled) == 0 || compiledDir == "" {
		return false, nil
	}
	return engine.InstallPrecompiled(bytes.NewReader(a.precompiled), compiledDir)
}
