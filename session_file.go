package airlock

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/wasi/errno"
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
//	versions 4 and 5 only: the wheels calls installed from the package
//	  index, as counted strings (name, version, file name, sha256 each),
//	  mounted again from the host's cache on load
//	sha256 of everything above (versions 2 and 4), or its HMAC-SHA256
//	  under the Sandbox's WithSessionKey (versions 3 and 5: signed)
//
// Pages equal to the Sandbox's image are left out, so a session that
// built little state saves little. The blob resumes only where the same
// image is: the same python.wasm, prelude, layers and captured image.
// Request.Values and OnOutput are not saved (they are the host's).
//
// The checksum catches damage, not an attacker, who can recompute it: so
// a blob is never trusted for what it could raise. Its limits are capped
// by the loader's (LoadOptions.MaxLimits, by default the Sandbox's), its
// tools by LoadOptions.Tools, and it is read no larger than those limits
// allow. With WithSessionKey, only blobs signed with the key load.

const (
	sessionMagic   = "airlock-session\x00"
	sessionVersion = 2 // 2: the fuel limit is saved
	// sessionSigned is version 2's layout with an HMAC-SHA256 trailer.
	sessionSigned = 3
	// sessionInstalled and sessionInstalledSigned add the installed
	// wheels; written only by sessions that installed any, so that other
	// blobs stay readable by builds before them.
	sessionInstalled       = 4
	sessionInstalledSigned = 5
	// minSessionKey is the shortest key WithSessionKey takes: HMAC is only
	// as strong as its key.
	minSessionKey = 16
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
	// ErrSessionUnauthenticated: a Sandbox with WithSessionKey was given a
	// blob not signed with its key (unsigned, signed with another key, or
	// changed since), or a Sandbox without a key a signed one.
	ErrSessionUnauthenticated = errors.New("airlock: saved session is not signed with this sandbox's key")
	// ErrSessionOverLimits: a saved session whose memory or files do not
	// fit the limits it is loaded under (LoadOptions.MaxLimits).
	ErrSessionOverLimits = errors.New("airlock: saved session does not fit the loading limits")
)

// WithSessionKey signs saved sessions (Session.Save) with HMAC-SHA256
// under key, and has LoadSession refuse any blob not signed with it
// (ErrSessionUnauthenticated): then only blobs this program (or another
// holding the key) saved can be loaded. New fails for a key shorter than
// 16 bytes. Keep the key as secret as the blobs are to be trusted.
func WithSessionKey(key []byte) Option {
	return func(c *config) { c.sessionKey = bytes.Clone(key) }
}

// LoadOptions bound what a loaded session may do.
type LoadOptions struct {
	// MaxLimits cap the saved session's limits: each is the lower of the
	// blob's and this one (zero fields: the Sandbox's, Sandbox.Limits).
	// A session whose memory or files do not fit is refused with
	// ErrSessionOverLimits. Calls may still raise a limit in their
	// Request, as for any session: that is the host's choice, not the
	// blob's.
	MaxLimits Limits
	// HostFuncs, if non-nil, caps the host functions the session may
	// call: those it saved (all, if it saved none) that are also in
	// HostFuncs.
	HostFuncs []string
	// Tools is HostFuncs' old name, used when HostFuncs is nil.
	//
	// Deprecated: use HostFuncs.
	Tools []string
}

// Save writes the session's state (interpreter image, files, options) for
// LoadSession, in this process or another. It waits for a running call.
// It streams: what it holds besides the session is a page and the files'
// encoding, so w may hold part of a blob when it fails.
//
// # Errors
// ErrSessionClosed or ErrSessionExpired for an ended session; w's errors.
func (s *Session) Save(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return s.ended
	}
	base := s.base
	if base == nil { // no call yet: any base will do; the lean one is always there
		base = s.sb.snap.lean
	}
	// Streamed to w through the seal's hash: the image is most of a
	// session, and a copy of it (with a buffer's growth) for every save
	// multiplied what a server spilling sessions held.
	key := s.sb.cfg.sessionKey
	sealer := newSealer(key)
	bw := bufio.NewWriterSize(io.MultiWriter(w, sealer), 64<<10)
	var b bytes.Buffer
	b.WriteString(sessionMagic)
	version := uint32(sessionVersion)
	switch {
	case key != nil && len(s.installed) > 0:
		version = sessionInstalledSigned
	case key != nil:
		version = sessionSigned
	case len(s.installed) > 0:
		version = sessionInstalled
	}
	binary.Write(&b, binary.LittleEndian, version)
	b.Write(base.key[:])
	sum := base.memorySum()
	b.Write(sum[:])
	binary.Write(&b, binary.LittleEndian, uint64(s.calls))
	l := s.opts.Limits
	for _, v := range []int64{int64(l.Timeout), l.Memory, l.Output, l.FSBytes, int64(l.FSFiles), int64(l.HostCalls), l.HostPayload, l.Fuel} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	putStrings(&b, flattenEnv(s.opts.Env), true)
	putStrings(&b, s.opts.HostFuncs, s.opts.HostFuncs != nil)
	fail := func(err error) error { return fmt.Errorf("airlock: save session: %w", err) }
	if s.image == nil {
		b.WriteByte(0)
		bw.Write(b.Bytes())
	} else {
		b.WriteByte(1)
		bw.Write(b.Bytes())
		if err := s.image.img.WriteDelta(bw, base.img); err != nil {
			return fail(err)
		}
	}
	b.Reset()
	var fsBytes bytes.Buffer
	if err := s.fs.Save(&fsBytes); err != nil {
		return fail(err)
	}
	binary.Write(&b, binary.LittleEndian, uint64(fsBytes.Len()))
	bw.Write(b.Bytes())
	bw.Write(fsBytes.Bytes())
	if len(s.installed) > 0 {
		b.Reset()
		var list []string
		for _, p := range s.installed {
			list = append(list, p.Name, p.Version, p.Filename, p.SHA256)
		}
		putStrings(&b, list, true)
		bw.Write(b.Bytes())
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if _, err := w.Write(sealer.Sum(nil)); err != nil {
		return fail(err)
	}
	return nil
}

// newSealer hashes a blob for its trailer (seal): HMAC-SHA256 under key,
// or sha256 without one.
func newSealer(key []byte) hash.Hash {
	if key == nil {
		return sha256.New()
	}
	return hmac.New(sha256.New, key)
}

// seal is a blob's trailer: the HMAC-SHA256 of body under key, or its
// sha256 without one.
func seal(key, body []byte) []byte {
	if key == nil {
		sum := sha256.Sum256(body)
		return sum[:]
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return mac.Sum(nil)
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

// readBlob reads r, up to limit bytes, into a buffer of its size when r
// tells it (a file, a bytes.Reader): io.ReadAll's doubling left up to
// twice a large session's blob as garbage for every load.
func readBlob(r io.Reader, limit int64) ([]byte, error) {
	size := int64(-1)
	switch v := r.(type) {
	case interface{ Len() int }:
		size = int64(v.Len())
	case *os.File:
		if st, err := v.Stat(); err == nil && st.Mode().IsRegular() {
			if off, err := v.Seek(0, io.SeekCurrent); err == nil {
				size = st.Size() - off
			}
		}
	}
	if size < 0 || size >= limit {
		return io.ReadAll(io.LimitReader(r, limit))
	}
	// One byte more, to see the end (a file may have grown meanwhile).
	buf := make([]byte, size+1)
	n, err := io.ReadFull(r, buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return buf[:n], nil
	}
	if err != nil {
		return nil, err
	}
	rest, err := io.ReadAll(io.LimitReader(r, limit-int64(n)))
	return append(buf, rest...), err
}

// LoadSessionWith is LoadSession.
//
// Deprecated: LoadSession takes the options now.
func (sb *Sandbox) LoadSessionWith(ctx context.Context, r io.Reader, opts LoadOptions) (*Session, error) {
	return sb.LoadSession(ctx, r, opts)
}

// LoadSession resumes a session saved by Session.Save as a new live
// session of this Sandbox (counted against its cap, with a new ID), under
// opts: its limits are the lower of the blob's and opts.MaxLimits (or the
// Sandbox's, for LoadOptions{}), its tools those opts.Tools allow. A blob cannot raise what it was saved with, nor
// above what the loader allows; it only ever becomes guest memory, files
// and limits within those. r is read up to what opts allow (the memory
// cap, the filesystem quota and a margin), not further.
//
// # Errors
// ErrSessionsUnavailable without snapshots; ErrSessionUnauthenticated
// for a blob not signed with WithSessionKey's key (or a signed one
// without a key); ErrSessionCorrupt for bytes that are not an intact saved
// session; ErrSessionMismatch for one made with another image;
// ErrSessionOverLimits for one that does not fit the limits;
// ErrTooManySessions at the cap; r's errors.
func (sb *Sandbox) LoadSession(ctx context.Context, r io.Reader, opts LoadOptions) (*Session, error) {
	if sb.snap == nil {
		return nil, ErrSessionsUnavailable
	}
	caps := opts.MaxLimits.withDefaults(sb.cfg.limits)
	readCap := blobCap(caps)
	blob, err := readBlob(r, readCap+1)
	if err != nil {
		return nil, fmt.Errorf("airlock: load session: %w", err)
	}
	if int64(len(blob)) > readCap {
		if readCap < maxSessionBlob {
			return nil, fmt.Errorf("%w: larger than the %d bytes a session within these limits saves to", ErrSessionOverLimits, readCap)
		}
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrSessionCorrupt, int64(maxSessionBlob))
	}
	if len(blob) < len(sessionMagic)+4+64+sha256.Size || string(blob[:len(sessionMagic)]) != sessionMagic {
		return nil, fmt.Errorf("%w: not a saved session", ErrSessionCorrupt)
	}
	body, trailer := blob[:len(blob)-sha256.Size], blob[len(blob)-sha256.Size:]
	version := binary.LittleEndian.Uint32(body[len(sessionMagic):])
	key := sb.cfg.sessionKey
	signed := version == sessionSigned || version == sessionInstalledSigned
	switch {
	case key != nil && !signed:
		return nil, fmt.Errorf("%w: it is not signed (format version %d)", ErrSessionUnauthenticated, version)
	case key != nil && !hmac.Equal(seal(key, body), trailer):
		return nil, fmt.Errorf("%w: signed with another key, or changed since", ErrSessionUnauthenticated)
	case key == nil && signed:
		return nil, fmt.Errorf("%w: it is signed, and this sandbox has no key to check it (WithSessionKey)", ErrSessionUnauthenticated)
	case key == nil && !bytes.Equal(seal(nil, body), trailer):
		return nil, fmt.Errorf("%w: checksum mismatch", ErrSessionCorrupt)
	}
	d := &decoder{buf: body[len(sessionMagic):]}
	if v := d.u32(); v < sessionVersion || v > sessionInstalledSigned {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d to %d", ErrSessionCorrupt, v, sessionVersion, sessionInstalledSigned)
	}
	key2, memSum := d.bytes(32), d.bytes(32)
	var base *baseImage
	if d.err == nil {
		if base = sb.snap.byKey(ctx, key2); base == nil {
			return nil, fmt.Errorf("%w (python.wasm, prelude, layers or snapshot environment differ)", ErrSessionMismatch)
		}
		if want := base.memorySum(); !bytes.Equal(memSum, want[:]) {
			return nil, fmt.Errorf("%w (the snapshot image was captured separately)", ErrSessionMismatch)
		}
	}
	s := &Session{sb: sb, calls: int(d.u64()), reseed: true} // a file can be loaded twice
	var lim [8]int64
	for i := range lim {
		lim[i] = int64(d.u64())
	}
	saved := Limits{Timeout: time.Duration(lim[0]), Memory: lim[1], Output: lim[2], FSBytes: lim[3], FSFiles: int(lim[4]), HostCalls: int(lim[5]), HostPayload: lim[6], Fuel: lim[7]}
	s.opts.Limits = capLimits(saved, caps)
	if env, ok := d.strings(); ok {
		if len(env)%2 != 0 {
			d.fail("odd environment")
		}
		s.opts.Env = map[string]string{}
		for i := 0; i+1 < len(env); i += 2 {
			s.opts.Env[env[i]] = env[i+1]
		}
	}
	if funcs, ok := d.strings(); ok {
		s.opts.HostFuncs = funcs
	}
	if allow := orOld(opts.HostFuncs, opts.Tools); allow != nil {
		s.opts.HostFuncs = capTools(s.opts.HostFuncs, allow)
	}
	// What NewSession refuses, a file cannot bring in. (Negative limits
	// are refused here: capLimits keeps them, as they are below any cap.)
	probe := Request{Env: s.opts.Env, Limits: s.opts.Limits}
	limits, verr := sb.validate(&probe)
	if verr == nil {
		verr = checkSessionEnv(s.opts.Env)
	}
	if d.err == nil && verr != nil {
		d.fail(verr.Error())
	}
	var img *engine.Snapshot
	switch d.byte1() {
	case 0:
	case 1:
		if base != nil { // else d.err is set already
			d.base, s.base = base.img, base
			// Against the loader's cap, not the session's own limit: a
			// call may ask for more memory than its session's default
			// (up to the cap), and what it built is the session's.
			img = d.image(caps.Memory)
		}
	default:
		d.fail("image marker")
	}
	fsBlob := d.bytes(int(min(d.u64(), uint64(len(body)))))
	if version >= sessionInstalled {
		list, ok := d.strings()
		if !ok || len(list) == 0 || len(list)%4 != 0 {
			d.fail("installed packages")
		}
		for i := 0; d.err == nil && i+3 < len(list); i += 4 {
			s.installed = append(s.installed, InstalledPackage{Name: list[i], Version: list[i+1], Filename: list[i+2], SHA256: list[i+3]})
		}
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		if img != nil {
			img.Close()
		}
		if errors.Is(d.err, ErrSessionOverLimits) {
			return nil, d.err
		}
		return nil, fmt.Errorf("%w: %v", ErrSessionCorrupt, d.err)
	}
	fs, err := memfs.Load(bytes.NewReader(fsBlob), memfs.Options{Quota: memfs.Quota{MaxBytes: limits.FSBytes, MaxInodes: limits.FSFiles}}, sb.layers...)
	if err != nil {
		if img != nil {
			img.Close()
		}
		if errors.Is(err, errno.ENOSPC) {
			return nil, fmt.Errorf("%w: its files exceed the quota of %d bytes and %d files: %w", ErrSessionOverLimits, limits.FSBytes, limits.FSFiles, err)
		}
		return nil, fmt.Errorf("%w: filesystem: %w", ErrSessionCorrupt, err)
	}
	// The installed wheels are the host's cache's, by sha256: a blob names
	// them, it cannot bring them (nor anything else) in.
	if err := sb.mountInstalled(fs, s.installed); err != nil {
		if img != nil {
			img.Close()
		}
		return nil, err
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

// capLimits is l with each limit no higher than max's: zero (the
// default) takes max's; Fuel, where max has none, stays the blob's.
func capLimits(l, max Limits) Limits {
	low := func(v, m int64) int64 {
		if v == 0 || v > m {
			return m
		}
		return v
	}
	out := Limits{
		Timeout:     time.Duration(low(int64(l.Timeout), int64(max.Timeout))),
		Memory:      low(l.Memory, max.Memory),
		Output:      low(l.Output, max.Output),
		FSBytes:     low(l.FSBytes, max.FSBytes),
		FSFiles:     int(low(int64(l.FSFiles), int64(max.FSFiles))),
		HostCalls:   int(low(int64(l.HostCalls), int64(max.HostCalls))),
		HostPayload: low(l.HostPayload, max.HostPayload),
		Fuel:        l.Fuel,
	}
	if max.Fuel > 0 {
		out.Fuel = low(l.Fuel, max.Fuel)
	}
	return out
}

// capTools is the saved allow-list (nil: every tool) narrowed to allow.
func capTools(saved, allow []string) []string {
	if saved == nil {
		return slices.Clone(allow)
	}
	out := []string{}
	for _, t := range saved {
		if slices.Contains(allow, t) {
			out = append(out, t)
		}
	}
	return out
}

// blobCap is the largest blob a session within l saves to: its memory and
// the bitmap of its pages, its files with a generous allowance per file
// for names, links and times, and a margin for the header, env and tools.
func blobCap(l Limits) int64 {
	n := max(l.Memory, 0) + max(l.Memory, 0)/engine.PageSize/8 + max(l.FSBytes, 0) + int64(max(l.FSFiles, 0))*4096 + 64<<20
	return min(n, maxSessionBlob)
}

// decoder reads a saved session's fields, remembering the first error so
// the caller checks once.
type decoder struct {
	buf  []byte
	err  error
	base *engine.Snapshot // what a loaded image is a delta over
}

func (d *decoder) fail(what string) { d.failWith(errors.New(what)) }

func (d *decoder) failWith(err error) {
	if d.err == nil {
		d.err = err
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

// image reads a delta record (engine.ReadDelta) over d.base whose
// memory is at most maxMemory bytes: the session's own cap.
func (d *decoder) image(maxMemory int64) *engine.Snapshot {
	if d.err != nil {
		return nil
	}
	img, n, err := engine.ReadDelta(d.buf, d.base, uint64(max(maxMemory, 0)))
	switch {
	case errors.Is(err, engine.ErrImageOverLimit):
		d.failWith(fmt.Errorf("%w: %w", ErrSessionOverLimits, err))
		return nil
	case err != nil:
		d.failWith(err)
		return nil
	}
	d.buf = d.buf[n:]
	return img
}
