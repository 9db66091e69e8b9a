package airlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
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
	module *engine.Compiled // the asyncified module, prepared for resuming
	lean   *baseImage       // the interpreter with the standard library's common modules

	// The full image: the lean one's spec with fullImports imported too,
	// made on first need (fullImage), for code that imports any of them.
	// fullSpec is nil when the build lacks numpy and pandas or with
	// WithFullImage(false).
	fullSpec *python.ImageSpec
	fullKey  engine.ImageKey // fullSpec's
	fullOnce sync.Once
	// full is nil until made, and when it could not be; atomic, as
	// IdleMemory reads it while a first run may be making it.
	full     atomic.Pointer[baseImage]
	cacheDir string // where images are stored; "" for none
	notice   io.Writer
}

// baseImage is an image that runs and new sessions start from.
type baseImage struct {
	img *engine.Snapshot
	key engine.ImageKey // what the image was made from (saved sessions name it)

	memSumOnce sync.Once
	memSum     [32]byte // sha256 of the image's memory, for saved sessions
}

// memorySum is the sha256 of the image's memory, computed once.
func (b *baseImage) memorySum() [32]byte {
	b.memSumOnce.Do(func() { b.memSum = b.img.Digest() })
	return b.memSum
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
	s := &snapshotter{module: mod, lean: &baseImage{img: img, key: spec.Key()}, cacheDir: imageDir, notice: cfg.notice}
	if !cfg.noFullImage && art.HasLibraries("numpy", "pandas") {
		imports := fullImports
		if art.HasLibraries("matplotlib", "pillow") {
			imports = slices.Concat(fullImports, chartImports)
		}
		full := spec
		full.Env = append(slices.Clip(spec.Env), python.ImageImportsVar+"="+strings.Join(imports, ","))
		s.fullSpec, s.fullKey = &full, full.Key()
	}
	return s, nil
}

// fullImports are the modules the full image has imported: numpy and
// pandas (~0.9 s of a run's time when imported there), and the standard
// library's modules that cost more to import in a run (unittest ~45 ms,
// asyncio ~70 ms, logging, pathlib, xml.etree, ... 1.5-15 ms each) than a
// run from the full image costs beyond one from the lean image (~0.3 ms:
// reseeding numpy's generator, the pages a larger heap touches). They
// would cost every run a little in the lean image, which plain code needs
// fast.
var fullImports = []string{"numpy", "pandas", "unittest", "asyncio", "logging", "pathlib", "urllib.parse",
	"xml.etree.ElementTree", "doctest", "pickle", "shutil", "zipfile", "sqlite3", "html", "calendar", "csv", "tempfile"}

// chartImports join fullImports where the build has matplotlib and
// Pillow: pyplot's import and a first chart's set-up cost a run ~1 s
// (more than native CPython's new process); from the image, a chart's run
// is its drawing.
var chartImports = []string{"matplotlib.pyplot", "PIL.Image"}

// fullAlso are packages that are not in the full image but import what
// it has (matplotlib, pandas): code importing them starts from it too.
var fullAlso = []string{"seaborn", "xarray", "patsy"}

// WithFullImage turns the full image on or off. With snapshots, a run
// whose code imports numpy, pandas, matplotlib, PIL (or seaborn, xarray,
// patsy, which import them) or one of the standard library's modules that
// are slow to import (unittest, asyncio, logging, pathlib, ...: an import
// statement naming one, anywhere in the source) resumes
// from a second image that has them all imported already, made once per
// machine and cached like the first; other runs resume from the lean
// image. Each run still imports whatever its image lacks, so the choice
// changes how fast a run starts, never what it can do. The default is on
// where the build has numpy and pandas (the own build).
//
// # Notes
// A run resumes from the lean image instead when its memory limit is
// below what the full image holds (~60-80 MB) plus a margin, or when the
// full image could not be made (the reason goes to WithNotice's writer).
// A session starts from the image its first call's code picks.
func WithFullImage(on bool) Option { return func(c *config) { c.noFullImage = !on } }

// fullMargin is the memory a run from the full image must have beyond
// the image itself to be worth resuming from it.
const fullMargin = 32 << 20

// forCode is the image a run of code starts from under memLimit bytes.
func (s *snapshotter) forCode(ctx context.Context, code string, memLimit int64) *baseImage {
	if s.fullSpec == nil || !importsHeavy(code) {
		return s.lean
	}
	full := s.fullImage(ctx)
	if full == nil || int64(full.img.Len())+fullMargin > memLimit {
		return s.lean
	}
	return full
}

// fullImage loads or captures the full image the first time it is
// needed; nil when there is none. A capture takes seconds once per
// machine (the image is stored in the cache), a load milliseconds.
func (s *snapshotter) fullImage(ctx context.Context) *baseImage {
	if s.fullSpec == nil {
		return nil
	}
	s.fullOnce.Do(func() {
		// Not the run's deadline: the image serves every later run too.
		img, err := python.Snapshot(context.WithoutCancel(ctx), s.module, *s.fullSpec, s.cacheDir, s.notice)
		if err != nil {
			if s.notice != nil {
				fmt.Fprintf(s.notice, "airlock: the full image (numpy, pandas, ... imported) could not be made; runs import them themselves: %v\n", err)
			}
			return
		}
		s.full.Store(&baseImage{img: img, key: s.fullKey})
	})
	return s.full.Load()
}

// byKey is the base image whose key is key (a saved session's), making
// the full image if it is that one; nil when neither matches.
func (s *snapshotter) byKey(ctx context.Context, key []byte) *baseImage {
	if bytes.Equal(key, s.lean.key[:]) {
		return s.lean
	}
	if s.fullSpec != nil {
		if bytes.Equal(key, s.fullKey[:]) {
			return s.fullImage(ctx)
		}
	}
	return nil
}

// images are the base images made so far.
func (s *snapshotter) images() []*baseImage {
	if full := s.full.Load(); full != nil {
		return []*baseImage{s.lean, full}
	}
	return []*baseImage{s.lean}
}

// heavyNames are the top-level names of fullImports, chartImports and
// fullAlso.
var heavyNames = func() []string {
	var names []string
	for _, m := range slices.Concat(fullImports, chartImports, fullAlso) {
		if top, _, _ := strings.Cut(m, "."); !slices.Contains(names, top) {
			names = append(names, top)
		}
	}
	return names
}()

// heavyImport finds an import statement naming one of heavyNames: at the
// start of a line, after indentation or a semicolon, "import" with one
// among its names, or "from" one (or a submodule of one).
var heavyImport = regexp.MustCompile(`(?m)(?:^|;)[ \t]*(?:import[ \t][^\n#]*\b(?:` + strings.Join(heavyNames, "|") +
	`)\b|from[ \t]+(?:` + strings.Join(heavyNames, "|") + `)\b)`)

// importsHeavy tells whether code imports one of heavyNames. Wrong
// either way costs time, not correctness: a run on the lean image
// imports them itself, one on the full image has them in sys.modules
// unused.
func importsHeavy(code string) bool {
	if !strings.Contains(code, "import") {
		return false
	}
	return heavyImport.MatchString(code)
}

// enters tells whether a run resumed from img starts at its entry point,
// rather than through the interpreter's loop (engine.Snapshot.Entry).
func (s *snapshotter) enters(img *engine.Snapshot) bool { return img.Entry() != 0 && s.module.Enters() }

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
	var out IdleMemory
	for _, b := range sb.snap.images() {
		regions, private := sb.snap.module.IdleMemory(b.img)
		out.Regions += regions
		out.Private = append(out.Private, private...)
	}
	return out
}

// DropIdleMemory gives back the memory the Sandbox keeps for its next
// runs (IdleMemory's: reset regions and instances made ahead, each of
// which holds one): a server near its memory budget drops it before it
// moves sessions out. Later runs make them again. It returns how many
// regions it dropped.
func (sb *Sandbox) DropIdleMemory() int {
	if sb.snap == nil {
		return 0
	}
	n := 0
	for _, b := range sb.snap.images() {
		n += sb.snap.module.DropIdleMemory(b.img)
	}
	return n
}

// execute runs one prepared request: resumed from base when not nil
// (see resumes), else in a freshly started interpreter.
func (sb *Sandbox) execute(ctx context.Context, base *baseImage, spec engine.RunSpec) (engine.Outcome, error) {
	if base != nil {
		return sb.snap.module.Resume(ctx, base.img, spec)
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
