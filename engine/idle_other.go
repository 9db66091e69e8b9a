//go:build !linux

package engine

// PrivateBytes cannot tell a region's private memory outside Linux.
func PrivateBytes(regions [][]byte) ([]int64, bool) { return nil, false }
