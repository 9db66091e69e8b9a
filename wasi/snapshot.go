package wasi

// OpenFDs lists the descriptors open now, in ascending order. A host that
// snapshots a guest checks it: a fresh State opens exactly 0-3, so an image
// taken with more open would refer to descriptors a restored run lacks.
func (s *State) OpenFDs() []uint32 {
	var out []uint32
	for fd, f := range s.files {
		if f != nil {
			out = append(out, uint32(fd))
		}
	}
	return out
}
