// Package wasmbin reads and rewrites the section structure of a WebAssembly
// binary: just enough to drop or replace whole sections without decoding
// their contents.
package wasmbin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

var magic = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// ErrMalformed reports bytes that are not a well-formed module at the section level.
var ErrMalformed = errors.New("wasmbin: malformed module")

// Section is one section of a module; Body excludes the id and size.
type Section struct {
	ID   byte
	Body []byte
}

// CustomID is the id of custom sections (name, DWARF, producers, ...).
const CustomID = 0

// Name is a custom section's name ("" for other sections or a malformed name).
func (s Section) Name() string {
	if s.ID != CustomID {
		return ""
	}
	n, k := binary.Uvarint(s.Body)
	if k <= 0 || uint64(len(s.Body)-k) < n {
		return ""
	}
	return string(s.Body[k : k+int(n)])
}

// Sections splits a module into its sections. The bodies alias b.
//
// # Errors
// ErrMalformed for a bad header or a section running past the end.
func Sections(b []byte) ([]Section, error) {
	if !bytes.HasPrefix(b, magic) {
		return nil, fmt.Errorf("%w: bad header", ErrMalformed)
	}
	var out []Section
	for i := len(magic); i < len(b); {
		id := b[i]
		size, k := binary.Uvarint(b[i+1:])
		if k <= 0 || size > uint64(len(b)-(i+1+k)) {
			return nil, fmt.Errorf("%w: section at offset %d", ErrMalformed, i)
		}
		start := i + 1 + k
		out = append(out, Section{ID: id, Body: b[start : start+int(size)]})
		i = start + int(size)
	}
	return out, nil
}

// Encode assembles sections into a module.
func Encode(sections []Section) []byte {
	size := len(magic)
	for _, s := range sections {
		size += 1 + binary.MaxVarintLen32 + len(s.Body)
	}
	out := make([]byte, 0, size)
	out = append(out, magic...)
	for _, s := range sections {
		out = append(out, s.ID)
		out = binary.AppendUvarint(out, uint64(len(s.Body)))
		out = append(out, s.Body...)
	}
	return out
}

// IsDebug tells DWARF sections, which engines turn into per-call-site
// source maps: for CPython that is ~750k entries the on-disk compile cache
// then reads back 8 bytes per syscall, seconds per process.
func (s Section) IsDebug() bool {
	return s.ID == CustomID && len(s.Name()) > 7 && s.Name()[:7] == ".debug_"
}

// StripDebug returns b without its DWARF sections, or b itself when it has
// none.
//
// # Errors
// ErrMalformed, as Sections.
func StripDebug(b []byte) ([]byte, error) { return Strip(b, Section.IsDebug) }

// IsNames tells the name section (function, local and other names).
func (s Section) IsNames() bool { return s.ID == CustomID && s.Name() == "name" }

// Strip returns b without the sections drop picks, or b itself when it
// picks none.
//
// # Errors
// ErrMalformed, as Sections.
func Strip(b []byte, drop func(Section) bool) ([]byte, error) {
	secs, err := Sections(b)
	if err != nil {
		return nil, err
	}
	kept := secs[:0:0]
	for _, s := range secs {
		if !drop(s) {
			kept = append(kept, s)
		}
	}
	if len(kept) == len(secs) {
		return b, nil
	}
	return Encode(kept), nil
}
