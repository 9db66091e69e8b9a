//go:build !unix

package engine

func reserve(size uint64) ([]byte, func([]byte)) { return reserveHeap(size) }
