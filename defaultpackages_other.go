//go:build !unix

package airlock

import "os"

// mapFile reads a prepared zip whole where there is no mmap.
func mapFile(path string) ([]byte, error) { return os.ReadFile(path) }

func unmapFile([]byte) {}
