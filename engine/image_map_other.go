//go:build !linux

package engine

// mapInto: no memfd images here; runs copy the image.
func (img *Image) mapInto([]byte) bool { return false }
