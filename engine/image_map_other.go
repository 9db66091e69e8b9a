//go:build !linux

package engine

// mapInto: no memfd images here; runs copy the image.
func (img *Snapshot) mapInto([]byte) bool { return false }
