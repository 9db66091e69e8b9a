//go:build !airlock_embed

package python

// embedded is empty unless built with -tags airlock_embed.
var embedded []byte
