package bench

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A wheel whose bytes are not the pinned ones is refused, not read.
func TestLoadHumanEvalRefusesAnotherWheel(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadHumanEval(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no wheel: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, humanEvalWheel), []byte("PK\x05\x06not the wheel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadHumanEval(dir); !errors.Is(err, errWheelSum) {
		t.Fatalf("another wheel: %v", err)
	}
}
