package engine

// reserveImage reserves size bytes that start as img.Memory: mapped
// copy-on-write from the image's backing where the platform allows (see
// snapshot_unix.go), else copied.
func reserveImage(img *Image, size uint64) ([]byte, func([]byte)) {
	if img.backing != nil {
		if buf, free, ok := img.backing.reserve(size); ok {
			return buf, free
		}
	}
	buf, free := reserve(size)
	copy(buf, img.Memory)
	return buf, free
}
