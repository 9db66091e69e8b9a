//go:build airlock_embed

package python

import _ "embed"

// embedded is the default python.wasm, copied next to this file by
// `make embed` (scripts/embed.sh) and git-ignored: one binary for the edge.
//
//go:embed embedded_python.wasm
var embedded []byte
