//go:build !unix

package engine

// Without mmap there is no pool: every run copies the image.
func reservePoolable(uint64) ([]byte, bool) { return nil, false }
func resetRegion([]byte, int) bool          { return false }
func unreserve([]byte)                      {}
func openRegion([]byte) bool                { return true }
