//go:build !airlock_embed

package python

// embeddedOwn is nil unless built with -tags airlock_embed (embed_on.go).
var embeddedOwn func() (*Artifact, error)
