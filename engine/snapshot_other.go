//go:build !linux

package engine

// backing is the copy-on-write source of an image; there is none off
// Linux, and images are copied into each run.
type backing struct{}

func newBacking([]byte) (*backing, error)                    { return nil, nil }
func (*backing) close()                                      {}
func (*backing) reserve(uint64) ([]byte, func([]byte), bool) { return nil, nil, false }
func (*backing) restore(_, _ []byte) bool                    { return false }

func canRestore() bool { return false }

func writtenPages([]byte, int) ([]int, bool) { return nil, false }
