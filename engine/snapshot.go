package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
	"github.com/airlock-sandbox/airlock/wasi"
)

// Snapshots. A module transformed by Binaryen's asyncify (with fd_read as
// the one import that may pause) can stop at its first read of stdin and be
// resumed there later, in another instance:
//
//   - Capture runs _start until the guest first calls fd_read on fd 0. The
//     host grows memory by a few pages the guest has never seen, points
//     asyncify's buffer there and starts an unwind; the guest's call stack
//     unwinds into the buffer and _start returns. Memory and the mutable
//     globals (the stack pointer, asyncify's own) are the Snapshot.
//   - Resume instantiates afresh, puts the image's memory and globals in
//     place, starts a rewind and calls _start: the guest re-enters the same
//     fd_read, where the host stops the rewind and serves the read as usual.
//   - Or, for an image with an entry point (Snapshot.Entry), Resume calls the
//     module's entry functions (Options.Entry) on the image's empty stack
//     instead: no rewind, and a return from them is the next pause.
//
// The module compiled for this has its active data segments emptied (the
// image holds memory as it was, segments applied) and every mutable global
// exported, so the compiled code never depends on an image.

// Errors of snapshot capture and restore.
var (
	// ErrNotResumable: the module lacks asyncify's exports.
	ErrNotResumable = errors.New("engine: module is not asyncified (no asyncify_start_unwind export)")
	// ErrNoPausePoint: the guest ended before it first read stdin.
	ErrNoPausePoint = errors.New("engine: the guest ended before its snapshot point (the first read of stdin)")
	// ErrPausedWithOpenFiles: at the snapshot point the guest had open
	// descriptors beyond 0-3, which a restored run would not have.
	ErrPausedWithOpenFiles = errors.New("engine: descriptors beyond stdio and the root were open at the snapshot point")
	// ErrPausedElsewhere: a resumed guest paused in a read of stdin other
	// than the one its image was paused in (its unwound stack differs), so
	// its stack may hold functions asyncify did not instrument and could
	// not be resumed.
	ErrPausedElsewhere = errors.New("engine: the guest paused in a read of stdin other than its image's")
	// ErrBadImage: a resumed guest never arrived back at the read its
	// image was paused in.
	ErrBadImage = errors.New("engine: the image did not resume at its pause point")
	// ErrNoEntry: the image has an entry point (Snapshot.Entry) and the
	// module does not export Options.Entry's functions.
	ErrNoEntry = errors.New("engine: the image resumes at an entry point the module does not export")
	// ErrEntryReturned: a run resumed at its image's entry point returned
	// from it with 0 (the callee's failure), in a run that does not pause.
	ErrEntryReturned = errors.New("engine: the guest returned from its entry point without exiting")
)

const (
	// globalPrefix names the exports added for mutable globals.
	globalPrefix = "airlock.global."
	// unwindPages is the size of asyncify's buffer for the paused call
	// stack: CPython's at the prelude's os.read needs a few KiB.
	unwindPages = 2
)

// resumable is what a Compiled loaded by LoadResumable knows besides its code.
type resumable struct {
	// segments returns the emptied active data segments: read again from
	// the module only for a Capture, which few processes make.
	segments func() ([]wasmbin.Segment, error)
	globals  []string // exported mutable globals, by index order
	entry    []string // exported Options.Entry functions, or none
}

// resumableRewrite exports the mutable globals, and the functions entry
// names (Options.Entry) where the module's name section has them all, and
// empties the active data segments (what they held is in every image),
// removing them where the code cannot refer to them.
func resumableRewrite(entry []string) rewrite[resumableMeta] {
	name := "resumable-4"
	if len(entry) > 0 {
		sum := sha256.Sum256([]byte(strings.Join(entry, "\x00")))
		name += fmt.Sprintf("-entry%x", sum[:4])
	}
	return rewrite[resumableMeta]{
		name: name,
		apply: func(wasm []byte) ([]byte, resumableMeta, error) {
			return prepareResumable(wasm, entry)
		},
	}
}

type resumableMeta struct {
	Globals []string `json:"globals"`
	// Entry are the exports of Options.Entry's functions, in its order;
	// empty when the module does not name them all.
	Entry []string `json:"entry,omitempty"`
}

// entryPrefix names the exports added for Options.Entry's functions.
const entryPrefix = "airlock.entry."

func prepareResumable(wasm []byte, entry []string) ([]byte, resumableMeta, error) {
	var meta resumableMeta
	found, err := wasmbin.FuncIndexes(wasm, entry)
	if err != nil {
		return nil, meta, fmt.Errorf("entry functions: %w", err)
	}
	// The names have served (the own build's are ~1 MB), as has DWARF.
	wasm, err = wasmbin.Strip(wasm, func(s wasmbin.Section) bool { return s.IsDebug() || s.IsNames() })
	if err != nil {
		return nil, meta, err
	}
	if len(entry) > 0 && len(found) == len(entry) {
		exports := make([]wasmbin.Export, len(entry))
		for i, name := range entry {
			exports[i] = wasmbin.Export{Name: entryPrefix + name, Kind: wasmbin.KindFunc, Index: found[name]}
			meta.Entry = append(meta.Entry, exports[i].Name)
		}
		if wasm, err = wasmbin.AddExports(wasm, exports); err != nil {
			return nil, meta, fmt.Errorf("export entry functions: %w", err)
		}
	}
	prepared, globals, err := wasmbin.ExportMutableGlobals(wasm, globalPrefix)
	if err != nil {
		return nil, meta, fmt.Errorf("export globals: %w", err)
	}
	meta.Globals = globals
	prepared, _, err = wasmbin.DropActiveData(prepared)
	if err != nil {
		return nil, meta, fmt.Errorf("move data segments: %w", err)
	}
	return prepared, meta, nil
}

// LoadResumable prepares an asyncified module for Capture and Resume
// (mutable globals exported, data segments moved out) and loads it as Load
// does. The preparation is deterministic, so the compile cache hits, and
// kept in opts.CacheDir (prepared.go).
//
// # Errors
// As Load; ErrNotResumable for a module without asyncify's exports.
func LoadResumable(ctx context.Context, wasm []byte, opts Options) (*Compiled, error) {
	in := sourceOf(wasm)
	return LoadResumableFrom(ctx, in.digest, in.bytes, opts)
}

// LoadResumableFrom is LoadResumable of the module whose sha256 is digest
// (checked by the caller's record), its bytes read only if the process
// needs them: to rewrite or compile it, or to Capture an image. With the
// rewrites, the compiled code and the image in the cache it needs none.
func LoadResumableFrom(ctx context.Context, digest string, read func() ([]byte, error), opts Options) (*Compiled, error) {
	in := source{digest: digest, bytes: read}
	prepared, meta, err := resumableRewrite(opts.Entry).run(opts.CacheDir, in)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	m, err := load(ctx, prepared, opts)
	if err != nil {
		return nil, err
	}
	for _, name := range append([]string{"_start", "asyncify_start_unwind", "asyncify_stop_unwind", "asyncify_start_rewind", "asyncify_stop_rewind"}, meta.Entry...) {
		if !m.exportsFunction(name) {
			m.Close(ctx)
			return nil, fmt.Errorf("%w: missing %s", ErrNotResumable, name)
		}
	}
	segments := sync.OnceValues(func() ([]wasmbin.Segment, error) {
		wasm, err := read()
		if err != nil {
			return nil, err
		}
		// The data section is as the rewrite found it: its segments
		// need none of the rest of the rewrite.
		return wasmbin.ActiveData(wasm)
	})
	loadedMu.Lock()
	if m.snap == nil {
		m.snap = &resumable{segments: segments, globals: meta.Globals, entry: meta.Entry}
	}
	loadedMu.Unlock()
	return m, nil
}

// Snapshot is an instance paused at a read of stdin: its linear memory and
// mutable globals. It is immutable once captured and shared by every run
// resumed from it. Its memory, the pools of regions runs from it use and
// its file and delta formats stay inside the package: callers hold it,
// resume from it, save it (WriteSnapshotFile, WriteDelta) and read it
// back.
type Snapshot struct {
	// memory is the whole linear memory, a multiple of 64 KiB; nil for a
	// delta image (see Len, CopyTo).
	memory []byte
	// globals are the exported mutable globals' values, in the module's order.
	globals []uint64
	// unwindBuffer is the address of asyncify's buffer inside memory.
	unwindBuffer uint32
	// entry, when not 0, is the guest's entry point: a resume calls the
	// module's entry functions (Options.Entry) with it on an empty stack
	// instead of rewinding into the read the image paused in, and a
	// return from them pauses the guest again (RunSpec.PauseWhen). The
	// caller of Capture sets it before the image is shared; an image
	// made from another (a session's) keeps its base's.
	entry uint32
	// fresh, when its Len is not 0, is a range of memory that a resume
	// from this very image overwrites with bytes from the run's random
	// source (wasi.State.ReadRandom) before the guest runs: for Python,
	// the state of random's shared generator, which every run would
	// otherwise start from the image's and so draw the same numbers, and
	// which reseeding in the guest took a third of a run of `pass` to
	// do. Images made from this one (a session's) do not get it: their
	// generator's state is the session's own. The caller of Capture sets
	// it before the image is shared.
	fresh Range

	backing *backing // copy-on-write source of Memory, when available

	// A delta image (snapshot_delta.go) has no Memory: it is base's
	// memory, size bytes long, with pages replaced.
	base  *Snapshot
	size  int
	pages []deltaPage

	poolMu    sync.Mutex
	pools     map[regionKey]*regionPool // by reservation size (snapshot_pool.go)
	poolClock uint64                    // counts poolFor calls, for regionPool.used
	closed    bool
	// closes are the instances resumed from the image still closing in
	// the background (close_later.go); Close waits for them first.
	closes pendingCloses
	// closeHooks run first in Close: instance pools made from the image
	// (wazero_pool.go) stop reading it.
	closeHooks []func()
}

// Range is a span of linear memory.
type Range struct{ Addr, Len uint32 }

// within tells whether r lies inside a memory of size bytes.
func (r Range) within(size int) bool { return uint64(r.Addr)+uint64(r.Len) <= uint64(size) }

// pausePoint is a run's state at the snapshot point (run.pause), which
// fd_read's adapter consults.
type pausePoint struct {
	capture bool      // unwind at a read of fd 0 (else: stop the rewind at the first)
	fired   bool      // the point was reached
	rewound time.Time // when a resume's rewind arrived back in its read
	buffer  uint32    // the unwind buffer: grown when capturing, the image's when resuming
	// pauseWhen (RunSpec.PauseWhen) picks the read a capture pauses in,
	// and may pause a resumed run again at a later read of fd 0; paused
	// tells it did, and unwinding that asyncify's unwind has started.
	pauseWhen func(buffers uint32) bool
	paused    bool
	unwinding bool
	from      *Snapshot // the image resumed, whose base a new pause is a delta over
	// entered: the resume called the image's entry point, so no read
	// pauses (the stack under it is not asyncify's to unwind) and the
	// guest pauses by returning.
	entered bool
}

// pauseAction is what a read of fd 0 does in a capture or resume.
type pauseAction int

const (
	readOn     pauseAction = iota // serve the read
	pauseHere                     // unwind: the guest pauses in this read
	stopRewind                    // the rewound guest is back in its read: end the rewind, then serve it
)

// at tells what a read of fd 0 passing buffers does, and notes it.
func (p *pausePoint) at(buffers uint32) pauseAction {
	switch {
	case p.entered:
		return readOn
	case p.capture:
		if p.fired || p.pauseWhen != nil && !p.pauseWhen(buffers) {
			return readOn
		}
		p.fired = true
		return pauseHere
	case !p.fired:
		p.fired = true
		p.rewound = time.Now()
		return stopRewind
	case p.pauseWhen != nil && !p.paused && p.pauseWhen(buffers):
		p.paused = true
		return pauseHere
	}
	return readOn
}

// unwind pauses the guest in the read it is in: room for asyncify's
// buffer, then the unwind starts and the guest returns from _start.
func (p *pausePoint) unwind(s *wasi.State, caller backend.Instance) error {
	if err := onlyStdioOpen(s); err != nil {
		return err
	}
	if p.buffer == 0 {
		// Pages the guest's allocator never saw (it grows memory from
		// where memory.size says), so later pauses reuse them.
		old, ok := caller.Grow(unwindPages)
		if !ok {
			return fmt.Errorf("engine: snapshot: no room for the unwind buffer: %w", ErrBelowMinMemory)
		}
		p.buffer = old * PageSize
	}
	mem := caller.Memory()
	if uint64(p.buffer)+unwindPages*PageSize > uint64(len(mem)) {
		return fmt.Errorf("engine: snapshot: unwind buffer at %#x outside memory", p.buffer)
	}
	// asyncify's buffer header: the next free byte, then the end.
	binary.LittleEndian.PutUint32(mem[p.buffer:], p.buffer+8)
	binary.LittleEndian.PutUint32(mem[p.buffer+4:], p.buffer+unwindPages*PageSize)
	if err := caller.Call("asyncify_start_unwind", p.buffer); err != nil {
		return fmt.Errorf("engine: asyncify_start_unwind: %w", err)
	}
	p.unwinding = true
	return nil
}

// Capture runs the module until its first read of stdin and returns the
// paused instance as an Snapshot. spec is as for Run; its WASI state is the
// world the guest starts in (the image remembers what it read of it, such
// as argv and the environment).
//
// # Errors
// ErrNotResumable for a module not loaded by LoadResumable; ErrNoPausePoint
// when the guest exits (or returns) first; ErrPausedWithOpenFiles; any
// error Run reports.
func (m *Compiled) Capture(ctx context.Context, spec RunSpec) (*Snapshot, error) {
	if m.snap == nil {
		return nil, ErrNotResumable
	}
	limit, err := m.memoryCap(spec.MemoryLimit, nil)
	if err != nil {
		return nil, fmt.Errorf("engine: snapshot: %w", err)
	}
	p := &pausePoint{capture: true, pauseWhen: spec.PauseWhen}
	r := &runState{ctx: ctx, wasi: spec.WASI, pause: p, maxThreads: spec.MaxThreads}
	inst, err := m.code.Start(ctx, r, spec.start(limit), nil)
	if err != nil {
		return nil, fmt.Errorf("engine: snapshot: %w", err)
	}
	defer inst.Close()
	segments, err := m.snap.segments()
	if err != nil {
		return nil, fmt.Errorf("engine: snapshot: %w", err)
	}
	mem := inst.Memory()
	for _, s := range segments {
		if uint64(s.Offset)+uint64(len(s.Data)) > uint64(len(mem)) {
			return nil, fmt.Errorf("engine: snapshot: data segment at %#x outside memory", s.Offset)
		}
		copy(mem[s.Offset:], s.Data)
	}
	err = inst.Call("_start")
	if err != nil || !p.fired {
		out, err := r.classify(m.code, inst, Outcome{}, err)
		if err == nil {
			err = fmt.Errorf("%w (exit status %d)", ErrNoPausePoint, out.ExitCode)
		}
		return nil, fmt.Errorf("engine: snapshot: %w", err)
	}
	return m.paused(inst, p)
}

// newSnapshot assembles an image (as read back from storage, say); it takes
// ownership of memory. Where the platform allows, the image is also put in
// a sealed memfd that runs map copy-on-write; otherwise each run copies it.
func newSnapshot(memory []byte, globals []uint64, unwindBuffer uint32) *Snapshot {
	img := &Snapshot{memory: memory, globals: globals, unwindBuffer: unwindBuffer}
	if b, err := newBacking(memory); err == nil {
		img.backing = b
	}
	return img
}

// Close releases the image's pooled regions and copy-on-write backing. It
// must not race with runs resumed from the image.
func (img *Snapshot) Close() {
	img.closes.stop()
	img.poolMu.Lock()
	img.closed = true
	hooks := img.closeHooks
	img.closeHooks = nil
	img.poolMu.Unlock()
	for _, fn := range hooks {
		fn()
	}
	img.poolMu.Lock()
	pools := img.pools
	img.pools = nil
	img.poolMu.Unlock()
	for _, p := range pools {
		p.close()
	}
	if img.backing != nil {
		img.backing.close()
		img.backing = nil
	}
}

// Resume runs a fresh instance from img: the guest continues at the read
// of stdin it was paused in, reading spec's WASI state from then on.
// Outcome and errors are as for Run; the image's memory counts against the
// run's memory cap (ErrBelowMinMemory when the cap is below it).
func (m *Compiled) Resume(ctx context.Context, img *Snapshot, spec RunSpec) (Outcome, error) {
	if m.snap == nil {
		return Outcome{}, ErrNotResumable
	}
	if len(img.globals) != len(m.snap.globals) {
		return Outcome{}, fmt.Errorf("engine: image has %d globals, module %d", len(img.globals), len(m.snap.globals))
	}
	limit, err := m.memoryCap(spec.MemoryLimit, img)
	if err != nil {
		return Outcome{MemoryLimitHit: true}, err
	}
	p := &pausePoint{buffer: img.unwindBuffer, pauseWhen: spec.PauseWhen, from: img}
	r := &runState{ctx: ctx, wasi: spec.WASI, pause: p, maxThreads: spec.MaxThreads}
	began := time.Now()
	inst, err := m.code.Start(ctx, r, spec.start(limit), img)
	if err != nil {
		return Outcome{MemoryLimitHit: errors.Is(err, ErrBelowMinMemory)}, err
	}
	closed := false
	defer func() {
		if !closed {
			inst.Close()
		}
	}()
	started := time.Now()
	if img.entry != 0 {
		err = m.enter(inst, img, p, spec)
	} else if err = m.rewind(inst, img, spec.WASI); err == nil {
		err = p.resumeErr(ctx, inst.Call("_start"))
	}
	returned := time.Now()
	var paused *Snapshot
	if err == nil && p.paused {
		paused, err = m.paused(inst, p)
	}
	out := outcomeOf(inst.Figures())
	out.Image = paused
	out, err = r.classify(m.code, inst, out, err)
	closing := time.Now()
	closed = true
	m.closeLater(img, inst)
	out.Phases = Phases{Start: started.Sub(began), Close: time.Since(closing), Pooled: pooled(inst)}
	if p.fired {
		out.Phases.Restore = p.rewound.Sub(started)
		out.Phases.Guest = returned.Sub(p.rewound)
	}
	return out, err
}

// pooled tells whether inst was made ahead (wazero_pool.go).
func pooled(inst backend.Instance) bool {
	p, ok := inst.(interface{ Pooled() bool })
	return ok && p.Pooled()
}

// Phases is where a resumed run's time went, for `airlock bench --phases`.
type Phases struct {
	// Start: an instance ready, its memory the image's. Taken from the
	// instances made ahead (Pooled) or instantiated and mapped now.
	Start time.Duration
	// Restore: the globals set and the rewind back into the read the
	// image paused in.
	Restore time.Duration
	// Guest: the run's own work, from that read to the guest's exit or
	// pause (a session's image taken after it is not included).
	Guest time.Duration
	// Close: the instance closed, its memory region reset for reuse, as
	// far as the run waits for it: a lone run's on wazero closes in the
	// background (closeLater).
	Close  time.Duration
	Pooled bool
}

// paused takes the instance's state as an Snapshot, once the guest has
// returned from its entry or from an unwind (which it finishes).
func (m *Compiled) paused(inst backend.Instance, p *pausePoint) (*Snapshot, error) {
	if !p.entered {
		if err := inst.Call("asyncify_stop_unwind"); err != nil {
			return nil, fmt.Errorf("engine: snapshot: stop unwind: %w", err)
		}
	}
	globals := make([]uint64, len(m.snap.globals))
	for i, name := range m.snap.globals {
		v, err := inst.Global(name)
		if err != nil {
			return nil, fmt.Errorf("engine: snapshot: %w", err)
		}
		globals[i] = v
	}
	mem := inst.Memory()
	if err := p.checkStack(mem); err != nil {
		return nil, err
	}
	if p.from == nil {
		return newSnapshot(bytes.Clone(mem), globals, p.buffer), nil
	}
	// A session's pause: keep only what differs from the base image.
	base := p.from
	if base.base != nil {
		base = base.base
	}
	img, ok := captureDelta(base, p.from, mem, globals, p.buffer)
	if !ok {
		img = newSnapshot(bytes.Clone(mem), globals, p.buffer)
	}
	img.entry = p.from.entry
	return img, nil
}

// checkStack compares the stack a resumed guest just unwound (memory is
// the instance's) with its image's: the same read, reached through the
// same functions, leaves asyncify's buffer filled to the same end. A
// stack through other functions does not, or only by a coincidence of
// frame sizes that the resume then catches (ErrBadImage). asyncify
// may instrument only the functions on the expected path (python.PausePath),
// so another stack may have frames that saved nothing.
func (p *pausePoint) checkStack(memory []byte) error {
	if p.from == nil || p.entered {
		return nil // a capture's stack is the expected one; an entry's is empty
	}
	want, ok := p.from.u32(int(p.from.unwindBuffer))
	got, ok2 := u32At(memory, int(p.buffer))
	if !ok || !ok2 || got != want {
		return fmt.Errorf("%w (%d bytes of stack saved, the image's %d)", ErrPausedElsewhere, got-p.buffer, want-p.from.unwindBuffer)
	}
	return nil
}

// resumeErr is what a resumed run whose start returned err reports, in
// place of what a derailed guest did (%v: its exit is no exit):
// ErrBadImage when the guest never re-entered its read (its image's stack
// had a gap, so the rewind ran off course); ErrPausedElsewhere when an
// unwind it was asked to make failed (a frame asyncify did not
// instrument carried on as if the read had returned).
func (p *pausePoint) resumeErr(ctx context.Context, err error) error {
	switch {
	case !p.fired && err == nil:
		return ErrBadImage
	case !p.fired:
		return fmt.Errorf("%w (%v)", ErrBadImage, err)
	case p.unwinding && err != nil && ctx.Err() == nil:
		return fmt.Errorf("%w (%v)", ErrPausedElsewhere, err)
	}
	return err
}

func u32At(b []byte, off int) (uint32, bool) {
	if off < 0 || off+4 > len(b) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[off:]), true
}

// Enters tells whether m exports Options.Entry's functions, so that its
// images can resume at an entry point (Snapshot.Entry).
func (m *Compiled) Enters() bool { return m.snap != nil && len(m.snap.entry) > 0 }

// enter puts img's state into a new instance and calls its entry point:
// the module's entry functions in turn, the last with img.Entry. A
// return (the guest neither exited nor trapped) is a pause in a run that
// pauses (spec.PauseWhen, which is not asked), else an error: a run from
// an entry point ends by exiting.
func (m *Compiled) enter(inst backend.Instance, img *Snapshot, p *pausePoint, spec RunSpec) error {
	if len(m.snap.entry) == 0 {
		return ErrNoEntry
	}
	if err := m.restore(inst, img, spec.WASI); err != nil {
		return err
	}
	p.entered, p.fired, p.rewound = true, true, time.Now()
	last := len(m.snap.entry) - 1
	for _, name := range m.snap.entry[:last] {
		if err := inst.Call(name); err != nil {
			return err
		}
	}
	ret, err := callResult(inst, m.snap.entry[last], img.entry)
	if err != nil {
		return err
	}
	if spec.PauseWhen == nil {
		// An entry point that returns non-zero (for CPython, the object
		// `enter` returned rather than NULL) ends the run with status 0,
		// as an exit would, without the trap an exit is on both engines
		// (~20 µs of a small run).
		if ret != 0 {
			return nil
		}
		return ErrEntryReturned
	}
	if err := onlyStdioOpen(spec.WASI); err != nil {
		return err
	}
	p.paused = true
	return nil
}

// callResult calls an export of inst and gives back its i32 result, 0
// where the instance cannot tell it.
func callResult(inst backend.Instance, name string, args ...uint32) (uint32, error) {
	if rc, ok := inst.(interface {
		CallResult(string, ...uint32) (uint32, error)
	}); ok {
		return rc.CallResult(name, args...)
	}
	return 0, inst.Call(name, args...)
}

// onlyStdioOpen refuses a pause with descriptors beyond stdio and the
// root open: a run restored from the image would not have them.
func onlyStdioOpen(s *wasi.State) error {
	if fds := s.OpenFDs(); !slices.Equal(fds, []uint32{0, 1, 2, 3}) {
		return fmt.Errorf("%w: %v", ErrPausedWithOpenFiles, fds)
	}
	return nil
}

// rewind puts img's state into a new instance (its memory, once grown,
// is the image's: see backend.Code.Start) and starts asyncify's rewind.
func (m *Compiled) rewind(inst backend.Instance, img *Snapshot, ws *wasi.State) error {
	if err := m.restore(inst, img, ws); err != nil {
		return err
	}
	return inst.Call("asyncify_start_rewind", img.unwindBuffer)
}

// restore puts img's memory (see backend.Code.Start) and globals into a new
// instance, and fills its fresh range from ws's random source.
func (m *Compiled) restore(inst backend.Instance, img *Snapshot, ws *wasi.State) error {
	pages := uint32(img.Len() / PageSize)
	if cur := uint32(len(inst.Memory()) / PageSize); cur < pages {
		if _, ok := inst.Grow(pages - cur); !ok {
			return ErrBelowMinMemory
		}
	}
	for i, name := range m.snap.globals {
		if err := inst.SetGlobal(name, img.globals[i]); err != nil {
			return err
		}
	}
	if f := img.fresh; f.Len != 0 {
		mem := inst.Memory()
		if !f.within(len(mem)) {
			return fmt.Errorf("engine: image's fresh range %#x+%d outside its memory (%d bytes)", f.Addr, f.Len, len(mem))
		}
		if err := ws.ReadRandom(mem[f.Addr : f.Addr+f.Len]); err != nil {
			return fmt.Errorf("engine: fill the image's fresh range: %w", err)
		}
	}
	return nil
}
