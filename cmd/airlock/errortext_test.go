package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// The library's set-up errors name Go calls; the command adds its own
// commands and flags, once, after the message.
func TestErrorTextAddsTheCommand(t *testing.T) {
	err := fmt.Errorf("airlock: load: %w (looked in /x)", airlock.ErrNoOwnBuild)
	got := errorText(err)
	if !strings.HasPrefix(got, "load: python: the own CPython 3.13 build") || strings.Count(got, "scripts/setup.sh") != 1 || !strings.Contains(got, "--python npm") {
		t.Fatalf("errorText = %q", got)
	}
	if got := errorText(fmt.Errorf("airlock: other")); got != "other" {
		t.Fatalf("an error with no hint: %q", got)
	}
}
