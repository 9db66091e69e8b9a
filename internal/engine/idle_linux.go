package engine

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"unsafe"
)

// PrivateBytes returns, for each region, the bytes of it that the process
// holds privately (Private_Clean + Private_Dirty in /proc/self/smaps: its
// own copies of pages, not the image's shared ones); ok is false where the
// kernel does not say.
func PrivateBytes(regions [][]byte) (private []int64, ok bool) {
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, false
	}
	type span struct{ start, end uintptr }
	spans := make([]span, len(regions))
	for i, r := range regions {
		if len(r) > 0 {
			s := uintptr(unsafe.Pointer(unsafe.SliceData(r)))
			spans[i] = span{s, s + uintptr(len(r))}
		}
	}
	private = make([]int64, len(regions))
	in := -1 // the region the current mapping starts in
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Bytes()
		if lo, hi, isMapping := mappingRange(line); isMapping {
			in = -1
			for i, s := range spans {
				if lo >= s.start && hi <= s.end && s.end > s.start {
					in = i
					break
				}
			}
			continue
		}
		if in < 0 {
			continue
		}
		for _, field := range [][]byte{[]byte("Private_Clean:"), []byte("Private_Dirty:")} {
			if rest, found := bytes.CutPrefix(line, field); found {
				kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
				if err == nil {
					private[in] += kb << 10
				}
			}
		}
	}
	return private, sc.Err() == nil
}

// mappingRange parses a mapping's header line of smaps ("START-END perms
// offset dev inode path").
func mappingRange(line []byte) (lo, hi uintptr, ok bool) {
	addr, _, found := bytes.Cut(line, []byte(" "))
	if !found {
		return 0, 0, false
	}
	a, b, found := bytes.Cut(addr, []byte("-"))
	if !found {
		return 0, 0, false
	}
	l, err1 := strconv.ParseUint(string(a), 16, 64)
	h, err2 := strconv.ParseUint(string(b), 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(l), uintptr(h), true
}
