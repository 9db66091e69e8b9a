package wasi

import (
	"context"
	"crypto/rand"
	"io"
	"math"
	"time"

	"github.com/airlock-sandbox/airlock/wasi/errno"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Config is what one run's WASI world consists of. Anything left zero is
// denied or empty: no args, no env, empty stdin, discarded output.
type Config struct {
	Args []string
	Env  []string // KEY=VALUE
	// Stdin is read by fd 0; nil reads as empty.
	Stdin io.Reader
	// Stdout and Stderr receive fds 1 and 2. A Write error ends the run with
	// that error (this is how output caps stop a flood at once).
	Stdout, Stderr io.Writer
	// FS is the only filesystem; it is preopened as "/". Nil means a fresh,
	// empty, unlimited one.
	FS *memfs.FS
	// NoPreopen leaves FS unreachable: fd 3 is not open and the guest has
	// no directory at all, as a WASI module run by wasmtime without --dir.
	NoPreopen bool
	// Clock answers clock_time_get and poll_oneoff; nil means the real one.
	Clock Clock
	// Random feeds random_get; nil means crypto/rand.
	Random io.Reader
	// MaxFDs caps open descriptors (EMFILE past it); 0 means 1024.
	MaxFDs int
	// Devices are host devices by absolute guest path (e.g. "/dev/airlock"),
	// each created in FS as an empty file; see Device.
	Devices map[string]Device
	// HiddenDevices are devices the guest reaches only by opening their
	// exact absolute path: they have no entry in FS, so listings do not
	// show them, stat does not find them and they take nothing of its
	// quota. For what the host's own guest code talks to in every run.
	HiddenDevices map[string]Device
	// Watch, if set, sees the paths the guest looks up: for the run's
	// audit trail.
	Watch Watcher
}

// Watcher sees what a run looks for in its filesystem. Paths are
// absolute when the lookup started at the root (as libc resolves every
// path), else relative to a directory the guest opened. Calls come from
// the run's goroutine; they must not keep the inode.
type Watcher interface {
	// Missing is a path the guest looked up (open, stat, readlink) that
	// does not exist.
	Missing(path string)
	// Opened is a file or directory the guest opened.
	Opened(path string, n *memfs.Inode, write bool)
}

// Clock is the guest's notion of time.
type Clock interface {
	// Realtime is nanoseconds since the Unix epoch.
	Realtime() int64
	// Monotonic is nanoseconds since an arbitrary start.
	Monotonic() int64
	// Sleep waits d, or less if ctx ends first (then it returns ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

// WithSleepAround returns ctx for a WASI call whose sleep (poll_oneoff's
// wait) around runs: around calls sleep, with ctx or one it may end
// sooner, and may do more before and after it. An engine running several
// guest threads in one instance lets the others run meanwhile; sleep
// touches neither the State nor memory.
func WithSleepAround(ctx context.Context, around func(sleep func(context.Context) error) error) context.Context {
	return context.WithValue(ctx, sleepAroundKey{}, around)
}

type sleepAroundKey struct{}

// Sleep is the guest's sleep of d on its clock, through ctx's
// WithSleepAround if any.
func (s *State) Sleep(ctx context.Context, d time.Duration) error {
	sleep := func(ctx context.Context) error { return s.clock.Sleep(ctx, d) }
	if around, ok := ctx.Value(sleepAroundKey{}).(func(func(context.Context) error) error); ok {
		return around(sleep)
	}
	return sleep(ctx)
}

// RealClock reads the host's clocks.
type RealClock struct{ start time.Time }

// NewRealClock returns a real clock whose monotonic origin is now.
func NewRealClock() *RealClock { return &RealClock{start: time.Now()} }

func (c *RealClock) Realtime() int64  { return time.Now().UnixNano() }
func (c *RealClock) Monotonic() int64 { return int64(time.Since(c.start)) }
func (c *RealClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// FakeClock is deterministic: it starts at a fixed instant, advances 1 µs
// per reading and jumps forward on Sleep without waiting, so the same
// program observes the same times on every run.
type FakeClock struct{ now int64 }

// FakeEpoch is where a FakeClock starts: 2000-01-01T00:00:00Z.
const FakeEpoch = int64(946684800) * int64(time.Second)

// NewFakeClock returns a clock at FakeEpoch.
func NewFakeClock() *FakeClock { return &FakeClock{now: FakeEpoch} }

func (c *FakeClock) Realtime() int64 { c.advance(int64(time.Microsecond)); return c.now }
func (c *FakeClock) Monotonic() int64 {
	c.advance(int64(time.Microsecond))
	return c.now - FakeEpoch
}
func (c *FakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if d > 0 {
		c.advance(int64(d))
	}
	return ctx.Err()
}

// advance moves the clock forward, stopping at the largest time rather
// than wrapping into the past (a guest's sleeps are its to choose).
func (c *FakeClock) advance(d int64) { c.now += min(d, math.MaxInt64-c.now) }

type fileKind uint8

const (
	kindStdin fileKind = iota
	kindStdout
	kindStderr
	kindDir
	kindFile
	kindDevice
)

type openFile struct {
	kind    fileKind
	node    *memfs.Inode
	preopen string // the guest-visible name when this is a preopened dir
	offset  int64
	fdflags uint16
	// base are the rights operations on this descriptor check;
	// inheriting bounds those of descriptors path_open makes from it.
	base, inheriting uint64
	// opened are the rights its kind and access mode gave it when opened
	// (rights.go: lacking one of these is EBADF, not ENOTCAPABLE).
	opened uint64
	// dev is the device behind a kindDevice descriptor.
	dev Device
	// dirents is the listing fd_readdir pages through; it is taken when a
	// read starts at cookie 0 so concurrent changes cannot shift the pages.
	dirents []memfs.DirEntry
}

// State is one run's WASI world: the Config plus open descriptors.
type State struct {
	cfg    Config
	fs     *memfs.FS
	clock  Clock
	random io.Reader
	files  []*openFile // index = fd; nil = free
	open   int
	maxFDs int
	// trap, when set by a function, aborts the guest with this error.
	trap error
	iov  [][]byte
	// devices maps the inodes of Config.Devices to their devices.
	devices map[*memfs.Inode]Device
	// listed counts the entries of descriptors' directory listings (hold).
	listed int
}

// maxListed bounds the directory entries open descriptors' listings keep
// alive in all (see hold): ~7 MB of names and inodes at most, and room to
// page through a directory at the default quota of 10000 files.
const maxListed = 1 << 14

// hold gives f the listing list. A listing keeps the names and inodes it
// saw alive, removed ones too, so a guest repeating create, list (keeping
// the descriptor), remove would hold host memory past its quota. Past
// maxListed entries in all, other descriptors' listings are let go: their
// next read continues at the same position in the directory's current
// listing (what an open directory shows after changes is unspecified).
func (s *State) hold(f *openFile, list []memfs.DirEntry) {
	s.listed += len(list) - len(f.dirents)
	f.dirents = list
	for _, g := range s.files {
		if s.listed <= maxListed {
			break
		}
		if g != nil && g != f && g.dirents != nil {
			s.listed -= len(g.dirents)
			g.dirents = nil
		}
	}
}

// NewState prepares a run's WASI world. Fds 0-2 are stdio and fd 3 is the
// preopened root of cfg.FS (unless cfg.NoPreopen).
func NewState(cfg Config) *State {
	s := &State{cfg: cfg, fs: cfg.FS, clock: cfg.Clock, random: cfg.Random, maxFDs: cfg.MaxFDs}
	if s.fs == nil {
		s.fs = memfs.New(memfs.Options{})
	}
	if s.clock == nil {
		s.clock = NewRealClock()
	}
	if s.random == nil {
		s.random = rand.Reader
	}
	if s.maxFDs <= 0 {
		s.maxFDs = 1024
	}
	if s.cfg.Stdin == nil {
		s.cfg.Stdin = eofReader{}
	}
	if s.cfg.Stdout == nil {
		s.cfg.Stdout = io.Discard
	}
	if s.cfg.Stderr == nil {
		s.cfg.Stderr = io.Discard
	}
	s.installDevices()
	s.files = []*openFile{
		{kind: kindStdin, base: stdinRights, opened: stdinRights},
		{kind: kindStdout, base: stdoutRights, opened: stdoutRights},
		{kind: kindStderr, base: stdoutRights, opened: stdoutRights},
	}
	if !cfg.NoPreopen {
		root := s.fs.Root()
		s.fs.Retain(root)
		s.files = append(s.files, &openFile{kind: kindDir, node: root, preopen: "/", base: dirRights, opened: dirRights, inheriting: dirRights | fileRights})
	}
	s.open = len(s.files)
	return s
}

// FS returns the run's filesystem.
func (s *State) FS() *memfs.FS { return s.fs }

// ReadRandom fills p from the source random_get reads (Config.Random),
// as the guest would have: a nil State reads crypto/rand.
func (s *State) ReadRandom(p []byte) error {
	src := io.Reader(rand.Reader)
	if s != nil {
		src = s.random
	}
	_, err := io.ReadFull(src, p)
	return err
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func (s *State) file(fd uint32) (*openFile, errno.Errno) {
	if uint64(fd) >= uint64(len(s.files)) || s.files[fd] == nil {
		return nil, errno.EBADF
	}
	return s.files[fd], errno.ESUCCESS
}

func (s *State) addFile(f *openFile) (uint32, errno.Errno) {
	if s.open >= s.maxFDs {
		return 0, errno.EMFILE
	}
	if f.node != nil {
		s.fs.Retain(f.node)
	}
	s.open++
	for i, slot := range s.files {
		if slot == nil {
			s.files[i] = f
			return uint32(i), errno.ESUCCESS
		}
	}
	s.files = append(s.files, f)
	return uint32(len(s.files) - 1), errno.ESUCCESS
}

func (s *State) closeFile(fd uint32) errno.Errno {
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	if f.node != nil {
		s.fs.Release(f.node)
	}
	s.listed -= len(f.dirents)
	s.files[fd] = nil
	s.open--
	return errno.ESUCCESS
}

// Close releases every descriptor still open, so the filesystem's accounting
// of unlinked-but-open files settles before the host reads it.
func (s *State) Close() {
	for fd := range s.files {
		if s.files[fd] != nil {
			s.closeFile(uint32(fd))
		}
	}
}
