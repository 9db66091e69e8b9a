package airlock

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/airlock-sandbox/airlock/internal/engine"
	"github.com/airlock-sandbox/airlock/internal/python"
	"github.com/airlock-sandbox/airlock/internal/wasi/memfs"
)

// WithSnapshots turns snapshot restore on or off. The default is on when
// set-up (scripts/setup.sh, `airlock setup`) has produced the asyncified python.wasm,
// off otherwise; asking for it explicitly makes New fail when it is
// unavailable.
//
// With snapshots, instead of starting CPython for every run (~130 ms, far
// more on a loaded machine), a Sandbox starts it once, pauses it where the
// prelude reads the run's code, and resumes a fresh instance from that
// image for each run (~2 ms). Every run still gets its own instance,
// memory, filesystem and WASI state, and the image itself is never
// written to. Timeouts and the memory, output and filesystem limits apply
// as without snapshots; the image's memory (~13 MB) counts against the
// memory limit.
//
// # Notes
// What runs share by design, being fixed in the image:
//   - str and bytes hash randomisation: one hash seed per image (per
//     machine, as the image is cached on disk), not one per run;
//   - modules imported while warming up (json, re, random, datetime, ...)
//     are in sys.modules when a run starts; random is reseeded from the
//     run's entropy before the run's code; so are WithPreimport's modules;
//   - variables CPython reads at start-up (PYTHON*, LANG, LC_*) are those
//     of python.DefaultEnv.
//
// Runs that need otherwise start a fresh interpreter, as without
// snapshots: deterministic runs (whose hash seed must be the request's)
// and runs whose environment sets a start-up variable differently.
func WithSnapshots(on bool) Option { return func(c *config) { c.snapshots = &on } }

// WithInstancePool(false) makes every run resumed from the snapshot
// instantiate its module on the run's own path. By default, on wazero, a
// few instances of each image are made ahead in the background, so that
// instantiation (~0.2 ms, a quarter of a small run) leaves the
// run's latency; each is used by one run, which sees nothing another did.
// Off, no idle instances are held.
func WithInstancePool(on bool) Option { return func(c *config) { c.unpooled = !on } }

// snapshotter is a Sandbox's snapshot machinery, nil when off.
type snapshotter struct {
	module *engine.Module // the asyncified module, prepared for resuming
	image  *engine.Image
	key    engine.ImageKey // what the image was made from (saved sessions name it)

	memSumOnce sync.Once
	memSum     [32]byte // sha256 of the image's memory, for saved sessions
}

// memorySum is the sha256 of the image's memory, computed once.
func (s *snapshotter) memorySum() [32]byte {
	s.memSumOnce.Do(func() { s.memSum = sha256.Sum256(s.image.Memory) })
	return s.memSum
}

// newSnapshotter loads the asyncified module and its image (capturing the
// image on first use). It returns nil, nil when snapshots are off by
// default and unavailable.
func newSnapshotter(ctx context.Context, cfg config, art *python.Artifact, layers []*memfs.Layer, extra python.ImageSpec, opts engine.Options) (*snapshotter, error) {
	if cfg.snapshots != nil && !*cfg.snapshots {
		return nil, nil
	}
	rec, wasm, err := python.AsyncifiedSource(art, cfg.cacheDir)
	if errors.Is(err, python.ErrNotAsyncified) && cfg.snapshots == nil {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("airlock: snapshots: %w", err)
	}
	if opts.Engine == "" || opts.Engine == engine.EngineWazero {
		// The edge binary's own compiled code, on its first run: a pack
		// that cannot be installed costs the compile it would have saved.
		if _, err := art.InstallPrecompiled(opts.CacheDir); err != nil && cfg.notice != nil {
			fmt.Fprintf(cfg.notice, "airlock: the binary's compiled code was not used: %v\n", err)
		}
	}
	// The module is read only if the cache lacks what is made from it.
	moduleSHA := rec.OutputSHA256
	opts.Entry = python.EntryFuncs
	mod, err := engine.LoadResumableFrom(ctx, moduleSHA, wasm, opts)
	if err != nil {
		return nil, fmt.Errorf("airlock: snapshots: %w", err)
	}
	imageDir := ""
	if !cfg.noCache {
		imageDir = cfg.cacheDir
	}
	// The build's own start-up variables (PYTHONHOME for the own build),
	// then the packages'.
	spec := python.ImageSpec{ModuleSHA: moduleSHA, Layers: slices.Concat(layers, extra.Layers),
		Env: slices.Concat(art.Env, extra.Env)}
	img, err := python.Snapshot(ctx, mod, spec, imageDir, cfg.notice)
	if err != nil {
		mod.Close(ctx)
		return nil, fmt.Errorf("airlock: snapshots: %w", err)
	}
	return &snapshotter{module: mod, image: img, key: spec.Key()}, nil
}

// enters tells whether a run resumed from img starts at its entry point,
// rather than through the interpreter's loop (engine.Image.Entry).
func (s *snapshotter) enters(img *engine.Image) bool { return img.Entry != 0 && s.module.Enters() }

// Snapshots tells whether runs resume from a snapshot (see WithSnapshots).
func (sb *Sandbox) Snapshots() bool { return sb.snap != nil }

// IdleMemory is what a Sandbox holds between runs to start the next ones
// fast: memory regions reset for reuse and, on wazero, instances made
// ahead (see WithInstancePool). They share the snapshot image's unchanged
// pages; Private is what each holds of its own, in bytes (the pages runs
// wrote, kept as private copies, and zeroed memory past the image kept
// resident), on Linux only: nil elsewhere.
type IdleMemory struct {
	Regions int
	Private []int64
}

// IdleMemory reports the memory the Sandbox keeps idle for its next runs
// (none without snapshots).
func (sb *Sandbox) IdleMemory() IdleMemory {
	if sb.snap == nil {
		return IdleMemory{}
	}
	regions := sb.snap.module.IdleRegions(sb.snap.image)
	out := IdleMemory{Regions: len(regions)}
	if private, ok := engine.PrivateBytes(regions); ok {
		out.Private = private
	}
	return out
}

// execute runs one prepared request: resumed from the image when
// resumed (see resumes), else in a freshly started interpreter.
func (sb *Sandbox) execute(ctx context.Context, resumed bool, spec engine.RunSpec) (engine.Outcome, error) {
	if resumed {
		return sb.snap.module.Resume(ctx, sb.snap.image, spec)
	}
	mod, err := sb.freshModule(ctx)
	if err != nil {
		return engine.Outcome{}, err
	}
	return mod.Run(ctx, spec)
}

// resumes tells whether a run of req, with env, can resume from the image.
func (sb *Sandbox) resumes(req *Request, env []string) bool {
	return sb.snap != nil && !req.Deterministic && !python.StartupEnvDiffers(sb.artifact.BaseEnv(), env)
}

func (s *snapshotter) close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	return s.module.Close(ctx)
}
