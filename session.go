package airlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Sessions keep an interpreter's state from one call to the next, as a
// notebook does: globals, imports and files. Between calls a session is
// data, not a process: an image of the paused interpreter (memory and
// globals, as for snapshots) and its filesystem. Each call resumes a
// fresh instance from that image, runs the code in the same __main__,
// and pauses again at the prelude's next read of stdin, which becomes the
// session's new image. A call that ends any other way (a limit, a crash,
// a hard exit) leaves the session at its state before the call.

// Errors of sessions besides those of a call's run.
var (
	// ErrSessionsUnavailable: sessions resume images, so they need
	// snapshots (set-up's asyncified module).
	ErrSessionsUnavailable = errors.New("airlock: sessions need snapshots, which need the build prepared for them (python.Asyncify)")
	// ErrSessionClosed: the session was closed (or its Sandbox was).
	ErrSessionClosed = errors.New("airlock: session is closed")
	// ErrSessionExpired: the session sat idle longer than its TTL.
	ErrSessionExpired = errors.New("airlock: session expired")
	// ErrTooManySessions: the Sandbox's cap on live sessions is reached.
	ErrTooManySessions = errors.New("airlock: too many live sessions")
)

// Defaults for WithSessionTTL and WithMaxSessions.
const (
	DefaultSessionTTL  = 15 * time.Minute
	DefaultMaxSessions = 64
)

// WithSessionTTL sets how long a session may sit idle before it expires
// and its memory is freed; 0 keeps the default, negative disables expiry.
func WithSessionTTL(d time.Duration) Option { return func(c *config) { c.sessionTTL = d } }

// WithMaxSessions caps the live sessions of a Sandbox (each holds the
// pages its interpreter changed and its files: a few MB for a small
// session, up to its memory limit and filesystem quota); 0 keeps the
// default, negative allows none.
func WithMaxSessions(n int) Option { return func(c *config) { c.maxSessions = n } }

// SessionOptions configure NewSession.
type SessionOptions struct {
	// Limits are the defaults of each call (zero fields: the Sandbox's).
	// FSBytes and FSFiles bound the session's filesystem as a whole.
	Limits Limits
	// Files are placed in the session's filesystem before the first call.
	Files map[string][]byte
	// Env is applied over the default environment for every call. Start-up
	// variables (PYTHON*, LANG, LC_*) cannot be set: the interpreter has
	// started long before.
	Env map[string]string
	// HostFuncs and Values are as in Request, for every call.
	HostFuncs []string
	Values    map[string]any
	// Tools is HostFuncs' old name, used when HostFuncs is nil.
	//
	// Deprecated: use HostFuncs.
	Tools []string
}

// Session is an interpreter kept between calls. Its methods are safe for
// concurrent use; calls run one at a time, in order of arrival.
type Session struct {
	sb   *Sandbox
	id   string
	opts SessionOptions

	mu    sync.Mutex
	image *sharedImage // nil until the first call: the Sandbox's image
	// base is the image the session started from, chosen by its first
	// call's code (snapshotter.forCode); nil until then.
	base  *baseImage
	fs    *memfs.FS
	calls int
	ended error       // ErrSessionClosed or ErrSessionExpired once ended
	over  atomic.Bool // ended is set: Err answers without waiting for a running call
	timer *time.Timer
	// timerGen numbers the idle timers (startTimer), so one that fires
	// after being replaced knows it (a timer cannot read its own variable
	// without racing the assignment).
	timerGen uint64
	active   time.Time // end of the last call, or creation
	// reseed is set on a fork or a loaded session until a call advances
	// it: that call reseeds random, or two copies would draw the same
	// numbers from the image's generator.
	reseed bool
	// installed are the wheels calls installed from the package index
	// (packageindex.go): mounted in fs, on the image's sys.path, and
	// saved by sha256 so that LoadSession can mount them again.
	installed []InstalledPackage
}

// sharedImage is a session image and the sessions (forks) resuming it.
type sharedImage struct {
	img  *engine.Snapshot
	refs atomic.Int32
}

// HeldMemory is what the session holds of its own between calls: the
// bytes of its interpreter's memory that differ from the snapshot image
// (shared with its forks until either calls again), and the bytes of
// its files. Before its first call it holds no memory of its own; its
// files (SessionOptions.Files) count from its creation.
func (s *Session) HeldMemory() (image, files int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.image != nil {
		image = s.image.img.OwnBytes()
	}
	if s.fs != nil {
		files, _ = s.fs.Usage()
	}
	return image, files
}

func newShared(img *engine.Snapshot) *sharedImage {
	s := &sharedImage{img: img}
	s.refs.Store(1)
	return s
}

func (s *sharedImage) retain() *sharedImage {
	if s != nil {
		s.refs.Add(1)
	}
	return s
}

func (s *sharedImage) release() {
	if s != nil && s.refs.Add(-1) == 0 {
		s.img.Close()
	}
}

// NewSession starts a session. No interpreter runs until the first call:
// a new session is the Sandbox's snapshot image plus a filesystem.
//
// # Errors
// ErrSessionsUnavailable without snapshots; ErrTooManySessions at the
// cap; an *Error of kind invalid_request for bad options.
func (sb *Sandbox) NewSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	if sb.snap == nil {
		return nil, ErrSessionsUnavailable
	}
	probe := Request{Env: opts.Env, Limits: opts.Limits}
	limits, verr := sb.validate(&probe)
	if verr != nil {
		return nil, verr
	}
	if verr := checkSessionEnv(opts.Env); verr != nil {
		return nil, verr
	}
	// Tools are checked now, not at the first call: a session that no
	// call could use would still count against a server's cap.
	opts.HostFuncs, opts.Tools = orOld(opts.HostFuncs, opts.Tools), nil
	if _, verr := sb.hostDevices(&Request{HostFuncs: opts.HostFuncs}, limits, nil); verr != nil {
		return nil, verr
	}
	fs, _, verr := sb.newFS(limits, opts.Files, nil)
	if verr != nil {
		return nil, verr
	}
	s := &Session{sb: sb, opts: opts, fs: fs}
	if err := sb.addSession(s); err != nil {
		return nil, err
	}
	return s, nil
}

func checkSessionEnv(env map[string]string) *Error {
	for k := range env {
		if k == "LANG" || strings.HasPrefix(k, "PYTHON") || strings.HasPrefix(k, "LC_") {
			return newError(KindInvalidRequest, nil, "env variable %q: start-up variables cannot be set in a session", k)
		}
	}
	return nil
}

// ID names the session uniquely within the process (for servers).
func (s *Session) ID() string { return s.id }

// Calls is how many calls advanced the session's state.
func (s *Session) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Err is nil while the session is live, then ErrSessionClosed or
// ErrSessionExpired: a server holding sessions by ID forgets ended ones.
// It does not wait for a running call.
func (s *Session) Err() error {
	if !s.over.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// Exec runs req in the session.
//
// Deprecated: Exec is Run, under the name it had when Run took only code.
func (s *Session) Exec(ctx context.Context, req Request) (*Result, error) { return s.Run(ctx, req) }

// Run runs req in the session, as Sandbox.Run runs it in a fresh one. Code, Filename, Stdin, Files (added to
// the session's filesystem), Env (over the session's), Limits (over the
// session's), Tools, Values and OnOutput apply as for Sandbox.Run; a
// deterministic request is refused (a session's clock and hash seed were
// fixed when it started).
//
// The result is as for Sandbox.Run, with RolledBack set when the call did
// not advance the session: it hit a limit, crashed, or exited the
// interpreter (os._exit). A Python exception does not roll back: as in a
// notebook, what ran before it stays done.
func (s *Session) Run(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return failed(start, newError(KindInvalidRequest, s.ended, "%v", s.ended))
	}
	if req.Deterministic {
		return failed(start, newError(KindInvalidRequest, nil, "a session call cannot be deterministic"))
	}
	if len(req.Packages) > 0 {
		// Its filesystem and sys.path are the session's: WithPackages'.
		return failed(start, newError(KindInvalidRequest, nil, "a session call cannot add packages (a session has the Sandbox's, WithPackages)"))
	}
	if e := checkSessionEnv(req.Env); e != nil {
		return failed(start, e)
	}
	if req.Env == nil {
		req.Env = s.opts.Env
	} else {
		merged := maps.Clone(s.opts.Env)
		if merged == nil {
			merged = map[string]string{}
		}
		maps.Copy(merged, req.Env)
		req.Env = merged
	}
	if req.HostFuncs, req.Tools = orOld(req.HostFuncs, req.Tools), nil; req.HostFuncs == nil {
		req.HostFuncs = s.opts.HostFuncs
	}
	if req.Values == nil {
		req.Values = s.opts.Values
	}
	req.Limits = req.Limits.withDefaults(s.opts.Limits)
	limits, verr := s.sb.validate(&req)
	if verr != nil {
		return failed(start, verr)
	}
	s.stopTimer()
	defer s.startTimer()

	// The call runs on a copy, kept only if the call succeeds.
	fs := s.fs.Clone(memfs.Quota{MaxBytes: limits.FSBytes, MaxInodes: limits.FSFiles})
	if _, verr := placeFiles(fs, req.Files); verr != nil {
		return failed(start, verr)
	}
	base := s.base
	if base == nil {
		base = s.sb.snap.forCode(ctx, req.Code, limits.Memory)
	}
	from := base.img
	if s.image != nil {
		from = s.image.img
	}
	call := &sessionCall{from: from, reseed: s.reseed, installed: s.installed}
	old := s.fs
	before := func(p string) ([]byte, bool) {
		data, err := old.View(p)
		return data, err == nil
	}
	res, err := s.sb.resumeCall(ctx, start, &req, limits, fs, before, call)
	if call.next != nil {
		s.image.release()
		s.image = newShared(call.next)
		s.base = base
		s.fs = fs
		s.calls++
		s.reseed = false
		for _, in := range res.Installs {
			s.installed = append(s.installed, in.Packages...)
		}
	}
	s.active = time.Now()
	return res, err
}

// resumeCall runs a session's call: resumed from the session's image, paused
// again once the prelude has reported the call's status.
func (sb *Sandbox) resumeCall(ctx context.Context, start time.Time, req *Request, limits Limits, fs *memfs.FS, before func(string) ([]byte, bool), call *sessionCall) (*Result, error) {
	ctx, exit, ok := sb.enter(ctx)
	if !ok {
		return failed(start, newError(KindInvalidRequest, ErrClosed, "%v", ErrClosed))
	}
	defer exit()
	r, e := sb.prepare(ctx, start, req, limits, fs, before, sb.pkgs)
	if e == nil {
		call.prepare(&r.wcfg, &r.spec)
		if r.pipDev != nil {
			r.pipDev.addInstalled(call.installed)
		}
		e = r.open(sb.snap.enters(call.from))
	}
	if e != nil {
		return r.done(&Result{}, e)
	}
	out, runErr := r.execute(ctx, func(ctx context.Context) (engine.Outcome, error) {
		return sb.snap.module.Resume(ctx, call.from, r.spec)
	})
	if out.Image != nil {
		out.ExitCode = uint32(call.status.code) // paused, not exited
	}
	res, e := r.result(out, runErr)
	noteStoppedThreads(res, out)
	return r.done(res, call.finish(res, out, e))
}

// sessionCall is what a session's call adds to a run.
type sessionCall struct {
	from   *engine.Snapshot // resumed
	reseed bool             // the call reseeds random (Session.reseed)
	// installed are the session's wheels so far, present for the call's
	// installs.
	installed []InstalledPackage
	status    statusDevice
	next      *engine.Snapshot // the session's new state, when the call advanced it
}

// sessionDevice is where the prelude reports a call's status before it
// pauses (see prelude.py).
const sessionDevice = "/dev/airlock-session"

func (c *sessionCall) prepare(cfg *wasi.Config, spec *engine.RunSpec) {
	cfg.Env = append(cfg.Env, "AIRLOCK_SESSION=1")
	if c.reseed {
		cfg.Env = append(cfg.Env, "AIRLOCK_RESEED=1") // read by prelude.py
	}
	devices := make(map[string]wasi.Device, len(cfg.Devices)+1)
	for p, d := range cfg.Devices {
		devices[p] = d
	}
	devices[sessionDevice] = &c.status
	cfg.Devices = devices
	spec.PauseWhen = func(buffers uint32) bool { return c.status.reported && python.LoopRead(buffers) }
}

// finish decides whether the call advanced the session and says so.
func (c *sessionCall) finish(res *Result, out engine.Outcome, e *Error) *Error {
	switch {
	case out.Image != nil && e == nil:
		c.next = out.Image
		return nil
	case out.Image != nil:
		out.Image.Close()
	case e != nil && errors.Is(e, engine.ErrPausedElsewhere):
		e = newError(KindInvalidRequest, e, "the call read stdin after reporting its status on %s: a session pauses only between calls", sessionDevice)
	case e != nil && errors.Is(e, engine.ErrPausedWithOpenFiles):
		e = newError(KindInvalidRequest, e, "the call left files open; a session keeps no open file between calls: close them (with open(...) as f: ...)")
	case e == nil:
		// The interpreter exited instead of pausing: nothing to keep.
		res.Stderr = fmt.Appendf(res.Stderr, "airlock: the interpreter exited (status %d); the session keeps its state from before this call\n", res.ExitCode)
	}
	res.RolledBack = true
	return e
}

// noteStoppedThreads tells a session call's caller that threads it left
// running were stopped: a session keeps no threads between calls.
func noteStoppedThreads(res *Result, out engine.Outcome) {
	if out.ThreadsStopped > 0 {
		res.Stderr = fmt.Appendf(res.Stderr, "airlock: %d thread(s) still running when this call ended were stopped; a session keeps no threads between calls (join them within the call)\n", out.ThreadsStopped)
	}
}

// statusDevice receives the call's exit status from the prelude; after
// that, the next read of stdin pauses the interpreter.
type statusDevice struct {
	reported bool
	code     int
}

func (d *statusDevice) Write(_ context.Context, p []byte) (int, error) {
	code, err := strconv.Atoi(string(p))
	if err != nil || code < 0 || code > 255 {
		code = 1
	}
	d.code, d.reported = code, true
	return len(p), nil
}

func (d *statusDevice) Read(context.Context, []byte) (int, error) { return 0, nil }

// Fork returns a new session with this one's state; the two then evolve
// independently. The image is shared (it is never written to), the
// filesystem copied.
//
// # Errors
// ErrSessionClosed or ErrSessionExpired for an ended session;
// ErrTooManySessions at the Sandbox's cap.
func (s *Session) Fork() (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return nil, s.ended
	}
	f := &Session{sb: s.sb, opts: s.opts, image: s.image.retain(), base: s.base, fs: s.fs.Clone(s.fs.Quota()), calls: s.calls, reseed: true,
		installed: slices.Clone(s.installed)}
	if err := s.sb.addSession(f); err != nil {
		f.image.release()
		return nil, err
	}
	return f, nil
}

// Close ends the session and frees its image and files, once a running
// call has returned (a call is not cut short: cancel its context for
// that). If ctx ends first, Close returns its error and the session ends
// when the call returns. Closing twice is harmless.
func (s *Session) Close(ctx context.Context) error {
	if s.mu.TryLock() { // no call running: no goroutine to wait with
		s.endHeld(ErrSessionClosed, nil)
		return nil
	}
	ended := make(chan struct{})
	go func() {
		s.end(ErrSessionClosed)
		close(ended)
	}()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		select {
		case <-ended:
			return nil
		default:
		}
		return fmt.Errorf("airlock: close session: a call is still running and the session ends when it returns: %w", ctx.Err())
	}
}

func (s *Session) end(why error) { s.endIf(why, nil) }

// endIf ends the session when still (under its lock, so no call can slip
// in between the check and the end) returns true, or is nil.
func (s *Session) endIf(why error, still func() bool) {
	s.mu.Lock()
	s.endHeld(why, still)
}

// endHeld is endIf with s.mu held; it unlocks it.
func (s *Session) endHeld(why error, still func() bool) {
	if s.ended != nil || still != nil && !still() {
		s.mu.Unlock()
		return
	}
	s.ended = why
	s.over.Store(true)
	s.stopTimer()
	s.image.release()
	s.image, s.fs = nil, nil
	s.mu.Unlock()
	s.sb.removeSession(s)
}

// startTimer arms the idle timeout; the session holds no goroutine while
// it waits.
func (s *Session) startTimer() {
	ttl := s.sb.cfg.sessionTTL
	if ttl < 0 {
		return
	}
	if ttl == 0 {
		ttl = DefaultSessionTTL
	}
	s.timerGen++
	gen := s.timerGen
	s.timer = time.AfterFunc(ttl, func() { s.expire(gen) })
}

// expire ends the session if timer gen is still its idle timer: a call
// that started as it fired has stopped it, and maybe started another.
func (s *Session) expire(gen uint64) {
	s.endIf(ErrSessionExpired, func() bool { return s.timer != nil && s.timerGen == gen })
}

func (s *Session) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// addSession registers a live session, within the cap, and starts its TTL.
func (sb *Sandbox) addSession(s *Session) error {
	var id [12]byte
	rand.Read(id[:])
	s.id = hex.EncodeToString(id[:])
	s.active = time.Now()
	max := sb.cfg.maxSessions
	if max == 0 {
		max = DefaultMaxSessions
	}
	sb.sessMu.Lock()
	defer sb.sessMu.Unlock()
	if sb.sessionsClosed {
		return ErrSessionClosed
	}
	if len(sb.sessions) >= max {
		return fmt.Errorf("%w (%d)", ErrTooManySessions, max)
	}
	if sb.sessions == nil {
		sb.sessions = map[*Session]struct{}{}
	}
	sb.sessions[s] = struct{}{}
	s.mu.Lock()
	s.startTimer()
	s.mu.Unlock()
	return nil
}

func (sb *Sandbox) removeSession(s *Session) {
	sb.sessMu.Lock()
	delete(sb.sessions, s)
	sb.sessMu.Unlock()
}

// SessionTTL is how long a session may sit idle (WithSessionTTL's,
// DefaultSessionTTL for 0); negative: no expiry.
func (sb *Sandbox) SessionTTL() time.Duration {
	if sb.cfg.sessionTTL == 0 {
		return DefaultSessionTTL
	}
	return sb.cfg.sessionTTL
}

// MaxSessions is the cap on live sessions (WithMaxSessions',
// DefaultMaxSessions for 0).
func (sb *Sandbox) MaxSessions() int {
	if sb.cfg.maxSessions == 0 {
		return DefaultMaxSessions
	}
	return sb.cfg.maxSessions
}

// Sessions is the number of live sessions.
func (sb *Sandbox) Sessions() int {
	sb.sessMu.Lock()
	defer sb.sessMu.Unlock()
	return len(sb.sessions)
}

// closeSessions ends every session (Sandbox.Close).
func (sb *Sandbox) closeSessions() {
	sb.sessMu.Lock()
	sb.sessionsClosed = true
	live := make([]*Session, 0, len(sb.sessions))
	for s := range sb.sessions {
		live = append(live, s)
	}
	sb.sessMu.Unlock()
	for _, s := range live {
		s.end(ErrSessionClosed)
	}
}
