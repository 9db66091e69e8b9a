//go:build !unix

package bench

import "testing"

func reportRusage(_ *testing.B, f func()) { f() }
