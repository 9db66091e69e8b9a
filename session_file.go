package airlock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// A saved session is one blob:
//
//	magic "airlock-session\0", version (u32)
//	the Sandbox image's key and the sha256 of its memory (64 bytes)
//	calls (u64), limits (7 x i64), env and tools (counted strings)
//	the image, if the session has run: memory size (u64), a bitmap of the
//	  64 KiB pages that differ from the Sandbox's image, those pages,
//	  globals (counted u64s), the unwind buffer's address (u32)
//	the writable filesystem (memfs.Save), prefixed by its size (u64)
//	sha256 of everything above
//
// Pages equal to the Sandbox's image are left out, so a session that
// built little state saves little. The blob resumes only where the same
// image is: the same python.wasm, prelude, layers and captured image.
// Request.Values and OnOutput are not saved (they are the host's).

const (
	sessionMagic   = "airlock-session\x00"
	sessionVersion = 2 // 2: the fuel limit is saved
	pageSize       = 65536
	// maxSessionBlob bounds what LoadSession reads: a full 4 GiB memory
	// plus a filesystem at its largest sensible quota.
	maxSessionBlob = 4<<30 + 1<<30
)

var (
	// ErrSessionCorrupt: a saved session that does not decode or whose
	// checksum does not match.
	ErrSessionCorrupt = errors.New("airlock: saved session is corrupt")
	// ErrSessionMismatch: a saved session from another python.wasm,
	// prelude, package set or snapshot image than this Sandbox's.
	ErrSessionMismatch = errors.New("airlock: saved session was made by a different sandbox image")
)

// Save writes the session's state (interpreter image, files, options) for
// LoadSession, in this process or another. It waits for a running call.
//
// # Errors
// ErrSessionClosed or ErrSessionExpired for an ended session; w's errors.
func (s *Session) Save(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return s.ended
	}
	snap := s.sb.snap
	var b bytes.Buffer
	b.WriteString(sessionMagic)
	binary.Write(&b, binary.LittleEndian, uint32(sessionVersion))
	b.Write(snap.key[:])
	sum := snap.memorySum()
	b.Write(sum[:])
	binary.Write(&b, binary.LittleEndian, uint64(s.calls))
	l := s.opts.Limits
	for _, v := range []int64{int64(l.Timeout), l.Memory, l.Output, l.FSBytes, int64(l.FSFiles), int64(l.HostCalls), l.HostPayload, l.Fuel} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	putStrings(&b, flattenEnv(s.opts.Env), true)
	putStrings(&b, s.opts.Tools, s.opts.Tools != nil)
	if s.image == nil {
		b.WriteByte(0)
	} else {
		b.WriteByte(1)
		putImage(&b, s.image.img, snap.image.Memory)
	}
	var fsBytes bytes.Buffer
	if err := s.fs.Save(&fsBytes); err != nil {
		return fmt.Errorf("airlock: save session: %w", err)
	}
	binary.Write(&b, binary.LittleEndian, uint64(fsBytes.Len()))
	b.Write(fsBytes.Bytes())
	check := sha256.Sum256(b.Bytes())
	b.Write(check[:])
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("airlock: save session: %w", err)
	}
	return nil
}

func flattenEnv(env map[string]string) []string {
	out := make([]string, 0, 2*len(env))
	for k, v := range env {
		out = append(out, k, v)
	}
	return out
}

// putStrings writes a count (0xffffffff for nil) and counted strings.
func putStrings(b *bytes.Buffer, ss []string, present bool) {
	if !present {
		binary.Write(b, binary.LittleEndian, uint32(0xffffffff))
		return
	}
	binary.Write(b, binary.LittleEndian, uint32(len(ss)))
	for _, s := range ss {
		binary.Write(b, binary.LittleEndian, uint32(len(s)))
		b.WriteString(s)
	}
}

func putImage(b *bytes.Buffer, img *engine.Image, base []byte) {
	mem := img.Bytes()
	pages := len(mem) / pageSize
	binary.Write(b, binary.LittleEndian, uint64(len(mem)))
	bitmap := make([]byte, (pages+7)/8)
	var changed [][]byte
	for p := range pages {
		page := mem[p*pageSize : (p+1)*pageSize]
		if (p+1)*pageSize <= len(base) && bytes.Equal(page, base[p*pageSize:(p+1)*pageSize]) {
			continue
		}
		bitmap[p/8] |= 1 << (p % 8)
		changed = append(changed, page)
	}
	b.Write(bitmap)
	for _, page := range changed {
		b.Write(page)
	}
	binary.Write(b, binary.LittleEndian, uint32(len(img.Globals)))
	for _, g := range img.Globals {
		binary.Write(b, binary.LittleEndian, g)
	}
	binary.Write(b, binary.LittleEndian, img.UnwindBuffer)
}

// LoadSession resumes a session saved by Session.Save as a new live
// session of this Sandbox (counted against its cap, with a new ID).
//
// # Errors
// ErrSessionsUnavailable without snapshots; ErrSessionCorrupt for bytes
// that are not an intact saved session; ErrSessionMismatch for one made
// with another image; ErrTooManySessions at the cap; r's errors.
func (sb *Sandbox) LoadSession(ctx context.Context, r io.Reader) (*Session, error) {
	if sb.snap == nil {
		return nil, ErrSessionsUnavailable
	}
	blob, err := io.ReadAll(io.LimitReader(r, maxSessionBlob+1))
	if err != nil {
		return nil, fmt.Errorf("airlock: load session: %w", err)
	}
	if len(blob) > maxSessionBlob {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrSessionCorrupt, int64(maxSessionBlob))
	}
	if len(blob) < len(sessionMagic)+4+64+sha256.Size || string(blob[:len(sessionMagic)]) != sessionMagic {
		return nil, fmt.Errorf("%w: not a saved session", ErrSessionCorrupt)
	}
	body, trailer := blob[:len(blob)-sha256.Size], blob[len(blob)-sha256.Size:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], trailer) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrSessionCorrupt)
	}
	d := &decoder{buf: body[len(sessionMagic):]}
	if v := d.u32(); v != sessionVersion {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrSessionCorrupt, v, sessionVersion)
	}
	key, memSum := d.bytes(32), d.bytes(32)
	if d.err == nil && !bytes.Equal(key, sb.snap.key[:]) {
		return nil, fmt.Errorf("%w (python.wasm, prelude, layers or snapshot environment differ)", ErrSessionMismatch)
	}
	if want := sb.snap.memorySum(); d.err == nil && !bytes.Equal(memSum, want[:]) {
		return nil, fmt.Errorf("%w (the snapshot image was captured separately)", ErrSessionMismatch)
	}
	s := &Session{sb: sb, calls: int(d.u64()), reseed: true} // a file can be loaded twice
	var lim [8]int64
	for i := range lim {
		lim[i] = int64(d.u64())
	}
	s.opts.Limits = Limits{Timeout: time.Duration(lim[0]), Memory: lim[1], Output: lim[2], FSBytes: lim[3], FSFiles: int(lim[4]), HostCalls: int(lim[5]), HostPayload: lim[6], Fuel: lim[7]}
	if env, ok := d.strings(); ok {
		if len(env)%2 != 0 {
			d.fail("odd environment")
		}
		s.opts.Env = map[string]string{}
		for i := 0; i+1 < len(env); i += 2 {
			s.opts.Env[env[i]] = env[i+1]
		}
	}
	if tools, ok := d.strings(); ok {
		s.opts.Tools = tools
	}
	// What NewSession refuses, a file cannot bring in.
	probe := Request{Env: s.opts.Env, Limits: s.opts.Limits}
	limits, verr := sb.validate(&probe)
	if verr == nil {
		verr = checkSessionEnv(s.opts.Env)
	}
	if d.err == nil && verr != nil {
		d.fail(verr.Error())
	}
	var img *engine.Image
	switch d.byte1() {
	case 0:
	case 1:
		d.base = sb.snap.image
		img = d.image(limits.Memory)
	default:
		d.fail("image marker")
	}
	fsBlob := d.bytes(int(min(d.u64(), uint64(len(body)))))
	if d.err == nil && len(d.buf) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		if img != nil {
			img.Close()
		}
		return nil, fmt.Errorf("%w: %v", ErrSessionCorrupt, d.err)
	}
	fs, err := memfs.Load(bytes.NewReader(fsBlob), memfs.Options{Quota: memfs.Quota{MaxBytes: limits.FSBytes, MaxInodes: limits.FSFiles}}, sb.layers...)
	if err != nil {
		if img != nil {
			img.Close()
		}
		return nil, fmt.Errorf("%w: filesystem: %w", ErrSessionCorrupt, err)
	}
	s.fs = fs
	if img != nil {
		s.image = newShared(img)
	}
	if err := sb.addSession(s); err != nil {
		s.image.release()
		return nil, err
	}
	return s, nil
}

// decoder reads a saved session's fields, remembering the first error so
// the caller checks once.
type decoder struct {
	buf  []byte
	err  error
	base *engine.Image // what a loaded image is a delta over
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = errors.New(what)
	}
	d.buf = nil
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.buf) {
		d.fail("truncated")
		return nil
	}
	out := d.buf[:n:n]
	d.buf = d.buf[n:]
	return out
}

func (d *decoder) byte1() byte {
	if b := d.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// strings reads putStrings' form; ok is false for the nil marker.
func (d *decoder) strings() ([]string, bool) {
	n := d.u32()
	if n == 0xffffffff || d.err != nil {
		return nil, false
	}
	if uint64(n)*4 > uint64(len(d.buf)) {
		d.fail("string count")
		return nil, false
	}
	out := make([]string, n)
	for i := range out {
		out[i] = string(d.bytes(int(d.u32())))
	}
	return out, true
}

// image reads a delta over d.base whose memory is at most maxMemory
// bytes: the session's own cap, checked before memory of that size is
// made (a few bytes of file could otherwise declare 4 GiB).
func (d *decoder) image(maxMemory int64) *engine.Image {
	base := d.base.Memory
	size := d.u64()
	if d.err != nil || size%pageSize != 0 || size > 1<<32 || size > uint64(max(maxMemory, 0)) || size < uint64(len(base)) {
		d.fail("memory size")
		return nil
	}
	pages := int(size / pageSize)
	bitmap := d.bytes((pages + 7) / 8)
	if d.err != nil {
		return nil
	}
	changed := 0
	for p := range pages {
		if bitmap[p/8]&(1<<(p%8)) != 0 {
			changed++
		}
	}
	if uint64(changed)*pageSize > uint64(len(d.buf)) {
		d.fail("pages")
		return nil
	}
	mem := make([]byte, size)
	copy(mem, base)
	for p := range pages {
		if bitmap[p/8]&(1<<(p%8)) != 0 {
			copy(mem[p*pageSize:], d.bytes(pageSize))
		}
	}
	n := d.u32()
	if uint64(n)*8 > uint64(len(d.buf)) || int(n) != len(d.base.Globals) {
		d.fail("globals")
		return nil
	}
	globals := make([]uint64, n)
	for i := range globals {
		globals[i] = d.u64()
	}
	unwind := d.u32()
	if d.err != nil || uint64(unwind) >= size {
		d.fail("unwind buffer")
		return nil
	}
	return engine.NewDeltaImage(d.base, mem, globals, unwind)
}
