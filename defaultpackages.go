package airlock

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock/internal/atomicfile"
	"github.com/airlock-sandbox/airlock/internal/pkgindex"
	"github.com/airlock-sandbox/airlock/internal/pkglist"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// The default packages are the pure-Python packages of the built-in list
// (internal/pkglist/packages.txt, set "default": sympy, networkx,
// openpyxl, jinja2, requests, pytest, ...). scripts/fetch-wheels.sh
// default fetches them into DefaultPackagesDir; `airlock setup`
// (PrepareDefaultPackages) joins those the build can import into one zip
// with their bytecode compiled by python.wasm itself, as wheels carry
// none and compiling sympy's source would cost each run that imports it
// seconds. Every run mounts that zip read-only, shared by all Sandboxes
// of the process, and the snapshot image is captured with it on sys.path.

// DefaultPackagesDir is where scripts/fetch-wheels.sh default puts the
// default packages' wheels, under the cache directory.
func DefaultPackagesDir(cacheDir string) string { return filepath.Join(cacheDir, "defaultwheels") }

// preparedDir holds the prepared zips, named by their key.
func preparedDir(cacheDir string) string { return filepath.Join(cacheDir, "defaultpackages") }

const (
	// defaultGuestDir is where the prepared zip appears in the guest:
	// apart from PackagesDir, so a caller's package of the same file name
	// cannot collide with it, and the prelude can put the caller's
	// packages before it on sys.path.
	defaultGuestDir = "/opt/airlock/default"
	// packagesInfoPath is the guest's note of what is importable, which
	// the ModuleNotFoundError note reads (python/refusals.py).
	packagesInfoPath = "/opt/airlock/packages.json"
	// prepareFormat changes when the prepared zip's content would.
	prepareFormat = 2
)

// WithDefaultPackages turns the default packages on or off. The default
// is on when `airlock setup` has prepared them for this build (after
// scripts/fetch-wheels.sh default); asking for them explicitly makes New
// fail when they are not prepared.
//
// On, every run can import them (sympy, networkx, xarray, openpyxl,
// xlsxwriter, jinja2, bs4, tabulate, pypdf, reportlab, plotly, requests,
// pytest, ...; `airlock version --packages` lists them) without an
// install; they come after the caller's own packages on sys.path, so a
// package given with WithPackages or Request.Packages wins.
func WithDefaultPackages(on bool) Option { return func(c *config) { c.defaultPackages = &on } }

// ErrDefaultPackages is New's error when WithDefaultPackages(true) asks
// for packages that are not prepared.
var ErrDefaultPackages = errors.New("airlock: default packages")

// defaultPackages are a Sandbox's default packages.
type defaultPackages struct {
	// layer is mounted in every run: the packages' note, and the zip
	// when on.
	layer    *memfs.Layer
	sysPath  string            // the zip's guest path; "" when off
	versions map[string]string // the zip's distributions (normalized) and versions
	size     int64             // the zip's bytes
}

// defaultPlan is what the default packages are for a build: the list's
// packages it can import, their fetched files, and the prepared zip's key.
type defaultPlan struct {
	pkgs  []pkglist.Package
	files []string // host paths, in pkgs' order
	key   string   // hex, names the prepared zip
}

// planDefaults finds the fetched files of the default packages art can
// import. The key covers the files' sha256 (from the fetch's
// SHA256SUMS) and python.wasm's, which compiled their bytecode.
func planDefaults(art *python.Artifact, cacheDir string) (*defaultPlan, error) {
	dir := DefaultPackagesDir(cacheDir)
	sums, err := readSums(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		return nil, fmt.Errorf("the default packages are not fetched (scripts/fetch-wheels.sh default): %w", err)
	}
	has := func(name string) bool { return art.HasLibraries(name) }
	h := sha256.New()
	fmt.Fprintf(h, "airlock default packages\x00format %d\x00python %s\x00", prepareFormat, art.SHA256)
	fixes, err := json.Marshal(sourceFixes)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(h, "fixes %d %s\x00", len(fixes), fixes)
	meta := builtinMetadata(art)
	for _, file := range slices.Sorted(maps.Keys(meta)) {
		fmt.Fprintf(h, "metadata %s %d %s\x00", file, len(meta[file]), meta[file])
	}
	plan := &defaultPlan{}
	for _, p := range pkglist.All() {
		if !p.Mounted(has) {
			continue
		}
		file := fetchedFile(sums, p)
		if file == "" {
			return nil, fmt.Errorf("%s %s is not in %s: run scripts/fetch-wheels.sh default", p.Name, p.Version, dir)
		}
		plan.pkgs = append(plan.pkgs, p)
		plan.files = append(plan.files, filepath.Join(dir, file))
		fmt.Fprintf(h, "%s %s\x00", file, sums[file])
	}
	plan.key = hex.EncodeToString(h.Sum(nil))[:32]
	return plan, nil
}

// fetchedFile is the file of p among a fetch's files: its wheel, or the
// zip fetch-wheels.sh repacked from its sdist.
func fetchedFile(sums map[string]string, p pkglist.Package) string {
	for file := range sums {
		name, rest, ok := strings.Cut(file, "-")
		if !ok || distName(name) != distName(p.Name) {
			continue
		}
		if version, _, _ := strings.Cut(rest, "-"); version == p.Version {
			return file
		}
	}
	return ""
}

// readSums reads a sha256sum file: file name to hex sum.
func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if ok {
			sums[file] = sum
		}
	}
	return sums, sc.Err()
}

func (p *defaultPlan) zipPath(cacheDir string) string {
	return filepath.Join(preparedDir(cacheDir), "packages-"+p.key+".zip")
}

func (p *defaultPlan) guestPath() string { return defaultGuestDir + "/packages-" + p.key + ".zip" }

// sharedZips keeps each prepared zip mapped once per process: every
// Sandbox's layer shares its bytes. A replaced zip's old mapping stays,
// as layers made from it may still be mounted.
var sharedZips struct {
	sync.Mutex
	byPath map[string]sharedZip
}

type sharedZip struct {
	size    int64
	modTime time.Time
	data    []byte
}

func readShared(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	sharedZips.Lock()
	defer sharedZips.Unlock()
	if z, ok := sharedZips.byPath[path]; ok && z.size == st.Size() && z.modTime.Equal(st.ModTime()) {
		return z.data, nil
	}
	data, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	// The central directory at least: a torn file is refused here rather
	// than at each import.
	if _, err := zip.NewReader(bytes.NewReader(data), int64(len(data))); err != nil {
		unmapFile(data)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if sharedZips.byPath == nil {
		sharedZips.byPath = map[string]sharedZip{}
	}
	sharedZips.byPath[path] = sharedZip{size: st.Size(), modTime: st.ModTime(), data: data}
	return data, nil
}

// loadDefaultPackages makes New's default packages: on when prepared for
// art (or asked for), off otherwise.
func loadDefaultPackages(cfg config, art *python.Artifact) (*defaultPackages, error) {
	d := &defaultPackages{layer: memfs.NewLayer()}
	want := cfg.defaultPackages
	var plan *defaultPlan
	var data []byte
	if want == nil || *want {
		var err error
		plan, err = planDefaults(art, cfg.cacheDir)
		if err == nil {
			data, err = readShared(plan.zipPath(cfg.cacheDir))
			if errors.Is(err, os.ErrNotExist) {
				err = fmt.Errorf("not prepared for this build: run airlock setup")
			}
		}
		if err != nil {
			if want != nil {
				return nil, fmt.Errorf("%w: %w", ErrDefaultPackages, err)
			}
			// Fetched but not usable: worth a word, as runs lack them.
			if _, serr := os.Stat(DefaultPackagesDir(cfg.cacheDir)); serr == nil && cfg.notice != nil {
				fmt.Fprintf(cfg.notice, "airlock: the default packages are off: %v\n", err)
			}
			plan = nil
		}
	}
	if plan != nil {
		// The zip is named by its inputs' key: that, not a hash of its
		// 61 MB, identifies it for the image key (hashing would read the
		// whole mapping in at every process's start).
		sum := sha256.Sum256(fmt.Appendf(nil, "airlock prepared zip %s %d", plan.key, len(data)))
		if err := d.layer.AddFileSum(plan.guestPath(), data, sum); err != nil {
			return nil, err
		}
		d.sysPath, d.size = plan.guestPath(), int64(len(data))
		d.versions = map[string]string{}
		for _, p := range plan.pkgs {
			d.versions[distName(p.Name)] = p.Version
		}
	}
	info, err := json.Marshal(guestInfo(plan, art))
	if err != nil {
		return nil, err
	}
	if err := d.layer.AddFile(packagesInfoPath, info); err != nil {
		return nil, err
	}
	return d, nil
}

// packagesInfo is the guest's note of what it can import
// (packagesInfoPath), for the ModuleNotFoundError note.
type packagesInfo struct {
	BuiltIn  []string          `json:"built_in"` // "numpy 2.5.5"
	Mounted  []string          `json:"mounted"`  // the default packages, "sympy 1.14.0"
	Modules  map[string]string `json:"modules"`  // import name -> distribution, of both
	Pending  map[string]string `json:"pending"`  // import name -> why it is not here
	Disabled bool              `json:"disabled"` // the default packages exist but are off
}

func guestInfo(plan *defaultPlan, art *python.Artifact) packagesInfo {
	info := packagesInfo{Modules: map[string]string{}, Pending: map[string]string{}}
	mounted := map[string]bool{}
	if plan != nil {
		for _, p := range plan.pkgs {
			mounted[p.Name] = true
		}
	}
	has := func(name string) bool { return art.HasLibraries(name) }
	for _, p := range pkglist.All() {
		switch {
		case p.From == pkglist.FromBuild && has(p.Name):
			info.BuiltIn = append(info.BuiltIn, p.Name+" "+p.Version)
		case mounted[p.Name]:
			info.Mounted = append(info.Mounted, p.Name)
		case p.From == pkglist.FromPlanned:
			for _, m := range p.Imports {
				info.Pending[m] = fmt.Sprintf("%s has compiled extensions and is not built into this python.wasm yet", p.Name)
			}
			continue
		case p.In(pkglist.SetDefault) && !p.Usable(has):
			for _, m := range p.Imports {
				info.Pending[m] = fmt.Sprintf("%s %s needs %s, which this python.wasm does not have yet", p.Name, p.Version, strings.Join(p.Missing(has), ", "))
			}
			continue
		case p.In(pkglist.SetDefault):
			info.Disabled = true
			continue
		default:
			continue
		}
		for _, m := range p.Imports {
			info.Modules[m] = p.Name
		}
	}
	return info
}

// defaultEnv adds the default packages' sys.path entry to an image spec
// that does not name the Sandbox's packages already.
func (sb *Sandbox) defaultImageSpec(extra python.ImageSpec) python.ImageSpec {
	if sb.defaults == nil || sb.defaults.sysPath == "" {
		return extra
	}
	for _, e := range extra.Env {
		if strings.HasPrefix(e, envPackages+"=") {
			return extra // packageEnv has the default's entry too
		}
	}
	extra.Env = append(slices.Clip(extra.Env), envPackages+"="+sb.defaults.sysPath)
	return extra
}

// withDefaultSysPath appends the default packages' entry to a run's
// sys.path entries (':'-separated, the caller's first).
func (sb *Sandbox) withDefaultSysPath(paths string) string {
	switch {
	case sb.defaults == nil || sb.defaults.sysPath == "":
		return paths
	case paths == "":
		return sb.defaults.sysPath
	}
	return paths + ":" + sb.defaults.sysPath
}

// dropDefaultDuplicates leaves out of the fetched network and test
// wheels those the default packages hold (the same pins): the caller's
// own packages stay.
func dropDefaultDuplicates(paths []string, d *defaultPackages, cacheDir string) []string {
	if d == nil || d.sysPath == "" {
		return paths
	}
	ours := []string{NetworkWheelsDir(cacheDir), filepath.Join(cacheDir, "testwheels")}
	return slices.DeleteFunc(slices.Clone(paths), func(p string) bool {
		return slices.Contains(ours, filepath.Dir(p)) && d.versions[distName(p)] != ""
	})
}

// sourceFixes are the default packages' source changes python.wasm
// needs, applied while preparing (old text, new text; preparing fails
// where the old text is gone, so a new version is looked at again).
var sourceFixes = map[string][][2]string{
	// sympy asks ctypes for C long's size only; python.wasm has no ctypes
	// (no _ctypes), and wasm32's long is 4 bytes.
	"sympy/external/gmpy.py": {{"from ctypes import c_long, sizeof\n",
		"try:\n    from ctypes import c_long, sizeof\nexcept ImportError:  # airlock: no ctypes in python.wasm; wasm32's C long is 4 bytes\n    c_long, sizeof = None, lambda _: 4\n"}},
	// imageio imports ctypes at its import, for FreeImage's plugin alone
	// (which loads a C library, which no sandbox run can).
	"imageio/core/findlib.py": {{"import sys\nimport ctypes\n",
		"import sys\ntry:\n    import ctypes\nexcept ImportError:  # airlock: no ctypes in python.wasm; FreeImage's plugin cannot load its library here\n    ctypes = None\n"}},
	// bokeh's templates are read by path, which a zip on sys.path has
	// none of: jinja2's PackageLoader reads them through the importer.
	"bokeh/core/templates.py": {{"    return Environment(loader=FileSystemLoader(templates_path), trim_blocks=True, lstrip_blocks=True)\n",
		"    from jinja2 import PackageLoader  # airlock: from the zip the package is imported from\n" +
			"    return Environment(loader=PackageLoader(\"bokeh.core\", \"_templates\"), trim_blocks=True, lstrip_blocks=True)\n"}},
	// bokeh reads its CDN files' SRI hashes by path too.
	"bokeh/resources.py": {{`            with open(ROOT_DIR / "_sri" / f"{version}.json") as f:
                _ALL_SRI_HASHES[version] = json.load(f)
`, `            import pkgutil  # airlock: from the zip the package is imported from
            _ALL_SRI_HASHES[version] = json.loads(pkgutil.get_data("bokeh", f"_sri/{version}.json"))
`}},
	// pytz looks its zones up by path, then through importlib.resources,
	// which reads a zip's whole directory at each call: thousands of
	// entries, for each of the ~600 zones pytz checks on its first
	// lookup. The zip's importer has the directory read already.
	"pytz/__init__.py": {{`        if not os.path.exists(filename):
`, `        if not os.path.exists(filename) and hasattr(__loader__, "get_data"):
            # airlock: from the zip through its importer
            from io import BytesIO
            return BytesIO(__loader__.get_data(filename))
        if not os.path.exists(filename):
`}},
	// xlrd imports mmap, which WASI lacks, to map a file it may as well
	// read.
	"xlrd/book.py": {{"import mmap\n", "try:\n    import mmap\nexcept ImportError:  # airlock: no mmap on WASI; files are read instead\n    mmap = None\n"},
		{"                if self.use_mmap:\n", "                if self.use_mmap and mmap is not None:\n"}},
	// tqdm starts a monitor thread on first use, and warns at length when
	// it cannot (wasmtime, the npm build); where threads run, the monitor
	// would be one more thread in every run with a bar, for a bar's refresh.
	"tqdm/std.py": {{"    monitor_interval = 10  # set to 0 to disable the thread\n",
		"    monitor_interval = 0  # airlock: no monitor thread\n"}},
	// aiohttp reads getaddrinfo's flags at import; WASI's socket module
	// lacks some (its network goes through the host in any case).
	"aiohttp/resolver.py": {{"_NUMERIC_SOCKET_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV\n_NAME_SOCKET_FLAGS = socket.NI_NUMERICHOST | socket.NI_NUMERICSERV\n_AI_ADDRCONFIG = socket.AI_ADDRCONFIG\n",
		"# airlock: WASI's socket module lacks some of getaddrinfo's flags\n_NUMERIC_SOCKET_FLAGS = getattr(socket, \"AI_NUMERICHOST\", 0) | getattr(socket, \"AI_NUMERICSERV\", 0)\n_NAME_SOCKET_FLAGS = getattr(socket, \"NI_NUMERICHOST\", 0) | getattr(socket, \"NI_NUMERICSERV\", 0)\n_AI_ADDRCONFIG = getattr(socket, \"AI_ADDRCONFIG\", 0)\n"}},
	// plotly reads its data files by path, which a zip on sys.path has
	// none of: read through the package's loader instead.
	"plotly/validator_cache.py": {{`            if not opath.exists(validator_json_path):
                raise FileNotFoundError(
                    f"Validator JSON file not found: {validator_json_path}"
                )
            with open(validator_json_path, "r") as f:
                ValidatorCache._json_cache = json.load(f)
`, `            import pkgutil  # airlock: from the zip the package is imported from

            ValidatorCache._json_cache = json.loads(pkgutil.get_data("plotly", "validators/_validators.json"))
`}},
	"plotly/data/__init__.py": {{`    with gzip.GzipFile(path, "r") as f:
`, `    import io, pkgutil  # airlock: from the zip the package is imported from

    with gzip.GzipFile(fileobj=io.BytesIO(pkgutil.get_data("plotly", "package_data/datasets/election.geojson.gz")), mode="r") as f:
`}, {`        return backend.read_csv(filepath)
`, `        import io, pkgutil  # airlock: from the zip the package is imported from

        return backend.read_csv(io.BytesIO(pkgutil.get_data("plotly", "package_data/datasets/" + d + ".csv.gz")), compression="gzip")
`}},
	// python-docx reads its templates by path, which a zip on sys.path
	// has none of: read through the package's loader instead.
	"docx/api.py": {{`    docx = _default_docx_path() if docx is None else docx
`, `    if docx is None:  # airlock: from the zip the package is imported from
        import io, pkgutil

        docx = io.BytesIO(pkgutil.get_data("docx", "templates/default.docx"))
`}},
	"docx/parts/hdrftr.py":   {docxTemplateFix("default-footer.xml"), docxTemplateFix("default-header.xml")},
	"docx/parts/styles.py":   {docxTemplateFix("default-styles.xml")},
	"docx/parts/settings.py": {docxTemplateFix("default-settings.xml")},
	"docx/parts/comments.py": {docxTemplateFix("default-comments.xml")},
	// nltk subclasses http.client's and urllib's HTTPS classes at import;
	// python.wasm has no ssl module, so neither exists: plain bases stand
	// in (a fetch fails at its name lookup first, with the sandbox's
	// reason, where the run has no network).
	"nltk/pathsec.py": {{"class _SafeHTTPSConnection(http.client.HTTPSConnection):\n",
		"class _SafeHTTPSConnection(getattr(http.client, \"HTTPSConnection\", http.client.HTTPConnection)):  # airlock: no ssl in python.wasm\n"},
		{"class _SafeHTTPSHandler(urllib.request.HTTPSHandler):\n",
			"class _SafeHTTPSHandler(getattr(urllib.request, \"HTTPSHandler\", urllib.request.BaseHandler)):  # airlock: no ssl in python.wasm\n"}},
	// nltk's downloader needs user ids (its install-directory checks),
	// ssl and the network; python.wasm has neither of the first two: it
	// says so, as nltk reports a failed download, instead of failing on
	// os.geteuid.
	"nltk/downloader.py": {{`        print_to = functools.partial(safe_print, file=print_error_to)
`, `        print_to = functools.partial(safe_print, file=print_error_to)
        # airlock
        msg = ("airlock: nltk.download() does not work in this sandbox (python.wasm has no "
               "user ids or ssl, and no network unless the host allows it); the host can "
               "mount NLTK data (airlock.WithPackages) for code to add to nltk.data.path")
        if raise_on_error:
            raise ValueError(msg)
        print_to(prefix + msg)
        return False
`}},
	// nltk's data (tokenizer models, corpora) is not carried, and its
	// downloader needs the network: the missing-resource error says so
	// and names what works without data.
	"nltk/data.py": {{`    msg += "\n  For more information see: https://www.nltk.org/data.html\n"
`, `    msg += "\n  For more information see: https://www.nltk.org/data.html\n"
    msg += (  # airlock
        "\n  airlock: this sandbox carries no NLTK data, and nltk.download() needs network"
        "\n  access, which the sandbox denies unless the host allows it. Without data:"
        "\n  nltk.wordpunct_tokenize, nltk.regexp_tokenize, nltk.tokenize.TreebankWordTokenizer,"
        "\n  nltk.tokenize.ToktokTokenizer; or the host mounts the data (airlock.WithPackages)"
        "\n  and the code adds its path to nltk.data.path.\n"
    )
`}},
}

// prepareCode runs in python.wasm: it copies the packages' files into one
// zip, each module's bytecode beside its source as an unchecked
// hash-based .pyc (zipimport takes it without reading the source), with
// code objects named by the zip's guest path, as zipimport would name
// them. A module that does not compile on 3.13 keeps its source only. A
// folder of modules without an __init__.py (a namespace package, as
// bokeh.models.common is) gets a directory entry, the only way zipimport
// finds one; wheels have none.
const prepareCode = `
import _imp, json, sys, zipfile
import importlib._bootstrap_external as be
sources, guest = sys.argv[1:-1], sys.argv[-1]
fixes = json.loads(FIXES)
seen, tops, modules = set(), set(), set()
compiled, skipped = 0, []
with zipfile.ZipFile("/home/user/packages.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=6) as out:
    def put(name, data):
        info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        out.writestr(info, data)
    for name, text in sorted(json.loads(METADATA).items()):
        put(name, text.encode())
        seen.add(name)
    for src in sources:
        with zipfile.ZipFile(src) as z:
            for info in z.infolist():
                name = info.filename
                if info.is_dir() or name in seen or name.split("/")[0].endswith(".data"):
                    continue
                seen.add(name)
                tops.add(name.split("/")[0])
                data = z.read(info)
                for old, new in fixes.pop(name, ()):
                    if old.encode() not in data:
                        sys.exit("airlock: %s no longer holds the text a fix replaces: %r" % (name, old))
                    data = data.replace(old.encode(), new.encode(), 1)
                put(name, data)
                if not name.endswith(".py"):
                    continue
                modules.add(name)
                try:
                    code = compile(data, guest + "/" + name, "exec", dont_inherit=True)
                except (SyntaxError, ValueError):
                    skipped.append(name)
                    continue
                put(name[:-3] + ".pyc", be._code_to_hash_pyc(code, _imp.source_hash(be._RAW_MAGIC_NUMBER, data), False))
                compiled += 1
    folders = {name.rsplit("/", 1)[0] for name in modules if "/" in name}
    for folder in sorted(folders):
        parts = folder.split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d + "/__init__.py" not in modules and d + "/" not in seen:
                seen.add(d + "/")
                info = zipfile.ZipInfo(d + "/", (2020, 1, 1, 0, 0, 0))
                info.external_attr = (0o40755 << 16) | 0x10
                out.writestr(info, b"")
# A fix for a package this build does not mount (python-docx without
# lxml, nltk without regex: the npm fallback) has nothing to fix.
missing = sorted(f for f in fixes if f.split("/")[0] in tops)
if missing:
    sys.exit("airlock: no file %s to fix" % ", ".join(missing))
print("compiled", compiled, "skipped", len(skipped), " ".join(skipped[:20]))
`

// PrepareDefaultPackages makes the default packages' zip for this
// build, from the wheels scripts/fetch-wheels.sh default fetched,
// compiling their bytecode with python.wasm (a minute or two once; then
// nothing while the wheels and the build are unchanged). opts are New's
// (the cache directory, engine, build). It returns the zip's path and
// how many packages it holds.
func PrepareDefaultPackages(ctx context.Context, opts ...Option) (string, int, error) {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.cacheDir == "" {
		dir, err := python.CacheDir()
		if err != nil {
			return "", 0, err
		}
		cfg.cacheDir = dir
	}
	art, err := python.Load(cfg.pythonPath, cfg.cacheDir)
	if err != nil {
		return "", 0, fmt.Errorf("airlock: %w", err)
	}
	plan, err := planDefaults(art, cfg.cacheDir)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrDefaultPackages, err)
	}
	out := plan.zipPath(cfg.cacheDir)
	if _, err := os.Stat(out); err == nil {
		return out, len(plan.pkgs), nil
	}
	sb, err := New(ctx, append(slices.Clip(opts), WithDefaultPackages(false), WithSnapshots(false), WithPackages(plan.files...))...)
	if err != nil {
		return "", 0, err
	}
	defer sb.Close(ctx)
	args := []string{}
	for _, f := range plan.files {
		args = append(args, PackagesDir+"/"+filepath.Base(f))
	}
	args = append(args, plan.guestPath())
	fixes, err := json.Marshal(sourceFixes)
	if err != nil {
		return "", 0, err
	}
	meta, err := json.Marshal(builtinMetadata(art))
	if err != nil {
		return "", 0, err
	}
	code := "import sys\nsys.argv[1:] = " + pyList(args) + "\nFIXES = " + strconv.Quote(string(fixes)) +
		"\nMETADATA = " + strconv.Quote(string(meta)) + "\n" + prepareCode
	res, err := sb.Run(ctx, Request{Code: code, Limits: Limits{Timeout: 15 * time.Minute, Memory: 2 << 30,
		FSBytes: 1 << 30, FSFiles: 10}})
	if err != nil {
		return "", 0, fmt.Errorf("%w: compiling: %w", ErrDefaultPackages, err)
	}
	if res.ExitCode != 0 {
		return "", 0, fmt.Errorf("%w: compiling: exit %d: %s", ErrDefaultPackages, res.ExitCode, res.Stderr)
	}
	var data []byte
	for _, f := range res.Files {
		if f.Path == "/home/user/packages.zip" {
			data = f.Data
		}
	}
	if data == nil {
		return "", 0, fmt.Errorf("%w: compiling made no zip: %s", ErrDefaultPackages, res.Stdout)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", 0, err
	}
	if err := atomicfile.WriteBytes(out, 0o644, data); err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrDefaultPackages, err)
	}
	return out, len(plan.pkgs), nil
}

// builtinMetadata is a dist-info METADATA file for each package built
// into python.wasm, which the build does not carry: importlib.metadata
// then finds numpy and pandas as it would where pip installed them
// (xarray asks it numpy's version on import).
func builtinMetadata(art *python.Artifact) map[string]string {
	out := map[string]string{}
	for _, p := range pkglist.All() {
		if p.From == pkglist.FromBuild && art.HasLibraries(p.Name) {
			dist := strings.ReplaceAll(p.Name, "-", "_")
			out[dist+"-"+p.Version+".dist-info/METADATA"] = "Metadata-Version: 2.1\nName: " + p.Name + "\nVersion: " + p.Version + "\n"
		}
	}
	return out
}

// pyList is strings as a Python list literal.
func pyList(items []string) string {
	b, _ := json.Marshal(items) // JSON strings of paths are Python literals
	return string(b)
}

// addDefaultHave counts the default packages as installed for an
// install from the index: a requirement they meet is satisfied, and none
// is replaced.
func (sb *Sandbox) addDefaultHave(have map[string]pkgindex.Have) {
	if sb.defaults == nil {
		return
	}
	for name, version := range sb.defaults.versions {
		if _, ok := have[name]; !ok {
			have[name] = pkgindex.Have{Version: version, By: "the default packages"}
		}
	}
}

// PackageStatus is one package of the built-in list and what this
// Sandbox does with it (Sandbox.Packages).
type PackageStatus struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Kind    string `json:"kind"` // "compiled" or "pure"
	// Status: "built in" (in python.wasm), "mounted" (a default package
	// every run imports), "off" (a default package this Sandbox does
	// not mount), "needs X" (a default package waiting for a compiled
	// one), "planned" (a compiled package not built yet), "network runs"
	// or "airlock test" (mounted only there).
	Status string `json:"status"`
	SHA256 string `json:"sha256,omitempty"`
}

// Packages lists the built-in list's packages (internal/pkglist) with
// what this Sandbox does with each.
func (sb *Sandbox) Packages() []PackageStatus {
	has := func(name string) bool { return sb.artifact.HasLibraries(name) }
	mounted := map[string]string{}
	if sb.defaults != nil {
		mounted = sb.defaults.versions
	}
	var out []PackageStatus
	for _, p := range pkglist.All() {
		s := PackageStatus{Name: p.Name, Version: p.Version, Kind: p.Kind, SHA256: p.SHA256}
		switch {
		case p.From == pkglist.FromPlanned:
			s.Status = "planned"
		case p.From == pkglist.FromBuild:
			switch {
			case has(p.Name):
				s.Status = "built in"
			case p.HasFallback() && mounted[distName(p.Name)] != "":
				s.Status = "mounted" // its pure-Python fallback
			default:
				s.Status = "not in this build"
			}
		case p.In(pkglist.SetDefault) && !p.Usable(has):
			s.Status = "needs " + strings.Join(p.Missing(has), ", ")
		case p.In(pkglist.SetDefault) && mounted[distName(p.Name)] != "":
			s.Status = "mounted"
		case p.In(pkglist.SetDefault):
			s.Status = "off"
		case p.In(pkglist.SetNet):
			s.Status = "network runs"
		default:
			s.Status = "airlock test"
		}
		out = append(out, s)
	}
	return out
}

// docxTemplateFix has python-docx read one of its XML templates from the
// zip it is imported from, where it opened the file by path.
func docxTemplateFix(name string) [2]string {
	return [2]string{
		`        path = os.path.join(os.path.split(__file__)[0], "..", "templates", "` + name + `")
        with open(path, "rb") as f:
`,
		`        import io, pkgutil  # airlock: from the zip the package is imported from

        with io.BytesIO(pkgutil.get_data("docx", "templates/` + name + `")) as f:
`}
}
