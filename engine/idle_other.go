//go:build !linux

package engine

// privateBytes cannot tell a region's private memory outside Linux.
func privateBytes(regions [][]byte) ([]int64, bool) { return nil, false }
