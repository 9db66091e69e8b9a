//go:build airlock_embed

package python

import (
	_ "embed"
	"fmt"
	"sync"
)

// embeddedBundle is the own build as a bundle (ExportBundle), written next
// to this file by `make embed` (scripts/embed.sh) and git-ignored: one
// binary for the edge, which needs no cache to start and no wasm-opt for
// snapshots.
//
//go:embed embedded_bundle.tar
var embeddedBundle []byte

// embeddedCompiled is the compiled code for the bundle's asyncified module
// on the machine that ran scripts/embed.sh (an engine precompiled pack,
// git-ignored too): on a host of the same OS, architecture and CPU
// features, the first run then loads code instead of compiling ~10 MB of
// it (5-10 s on two cores). Elsewhere it is not used.
//
//go:embed embedded_compiled.gz
var embeddedCompiled []byte

// embeddedOwn is the embedded build, checked once per process (~50 ms of
// sha256); its files are slices of the binary's data, not copies.
var embeddedOwn = sync.OnceValues(func() (*Artifact, error) {
	art, err := LoadBundle(embeddedBundle)
	if err != nil {
		return nil, fmt.Errorf("python: the embedded build: %w", err)
	}
	art.precompiled = embeddedCompiled
	return art, nil
})
