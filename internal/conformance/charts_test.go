package airlock_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

// matplotlib, Pillow, kiwisolver and contourpy are linked into the own
// build (scripts/charts/build-charts.sh): FreeType, qhull and libjpeg
// with the setjmp lowering, the pybind11 C++ with the exception runtime's
// (docs/cxx-exceptions.md). The suite runs this on wazero, and on
// wasmtime in its child with -tags airlock_wasmtime.

// chartsProgram draws what an agent is asked for (a 1,000-point line
// chart with a legend, a histogram grid, an SVG, a PDF, a contour plot
// and a triangulation, laid out by kiwisolver), makes a Pillow thumbnail
// and a JPEG of the PNG, and then makes C++ throw through each pybind11
// or C++ module, many times over, expecting the Python exception each is
// meant to become.
const chartsProgram = `
import io, sys
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from PIL import Image
print("backend", matplotlib.get_backend(), matplotlib.__version__)
print("data", matplotlib.get_data_path())

x = np.linspace(0, 10, 1000)
fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
ax.plot(x, np.sin(x), label="sin")
ax.plot(x, np.cos(x), "--", label="cos")
ax.set_title("1,000 points"); ax.set_xlabel("x"); ax.legend(loc="upper right")
fig.savefig("line.png")
plt.close(fig)
png = open("line.png", "rb").read()
print("png", png[:8] == b"\x89PNG\r\n\x1a\n", len(png) > 20000)

im = Image.open("line.png")
print("pillow", im.format, im.size, im.mode)
im.thumbnail((160, 160))
im.save("thumb.png")
im.convert("RGB").save("thumb.jpg", quality=85)
print("thumb", Image.open("thumb.png").size, Image.open("thumb.jpg").format, Image.open("thumb.jpg").size)

rng = np.random.default_rng(0)
fig, axs = plt.subplots(2, 2, figsize=(6, 6), layout="constrained")
for i, a in enumerate(axs.flat):
    a.hist(rng.normal(i, 1, 500), bins=20, color="C%d" % i)
    a.set_title("mean %d" % i)
fig.savefig("hist.png")
plt.close(fig)
print("hist", Image.open("hist.png").size)

fig, ax = plt.subplots()
ax.plot([1, 2, 3], [1, 4, 9], marker="o")
ax.set_title(r"squares $\alpha^2$")
fig.savefig("chart.svg")
fig.savefig("chart.pdf")
plt.close(fig)
svg = open("chart.svg").read()
pdf = open("chart.pdf", "rb").read()
print("svg", svg.startswith("<?xml") and "<svg" in svg and svg.rstrip().endswith("</svg>"))
print("pdf", pdf[:5] == b"%PDF-", pdf.rstrip().endswith(b"%%EOF"))

X, Y = np.meshgrid(np.linspace(-2, 2, 60), np.linspace(-2, 2, 60))
fig, (a1, a2) = plt.subplots(1, 2, layout="constrained")
cs = a1.contourf(X, Y, np.exp(-X**2 - Y**2), levels=6)
fig.colorbar(cs, ax=a1)
import matplotlib.tri as mtri
tri = mtri.Triangulation(rng.random(40), rng.random(40))
a2.triplot(tri)
buf = io.BytesIO()
fig.savefig(buf, format="png")
plt.close(fig)
print("contour", len(cs.levels), "tri", len(tri.triangles) > 40, buf.getvalue()[:4] == b"\x89PNG")

import kiwisolver as kiwi
from matplotlib import _path, ft2font
import contourpy
font = matplotlib.font_manager.findfont("DejaVu Sans")
counts = {}
def expect(label, exc, fn):
    try:
        fn()
    except exc as e:
        counts[label] = counts.get(label, 0) + 1
        return str(e)
    raise AssertionError(label + ": no exception")
for _ in range(200):
    v = kiwi.Variable("v")
    s = kiwi.Solver()
    s.addConstraint(v >= 1)
    c = v <= 0
    expect("kiwi.UnsatisfiableConstraint", kiwi.UnsatisfiableConstraint, lambda: s.addConstraint(c))
    weak = c | "weak"  # a new constraint: only this one again is a duplicate
    s.addConstraint(weak)
    expect("kiwi.DuplicateConstraint", kiwi.DuplicateConstraint, lambda: s.addConstraint(weak))
    expect("_path ValueError", ValueError, lambda: _path.affine_transform(np.zeros((2, 2, 2)), np.eye(3)))
    expect("ft2font ValueError", ValueError, lambda: ft2font.FT2Font(font, hinting_factor=0))
    expect("ft2font FileNotFoundError", FileNotFoundError, lambda: ft2font.FT2Font("/no/such/font.ttf"))
    expect("contourpy ValueError", ValueError, lambda: contourpy.contour_generator(z=np.arange(16.0).reshape(4, 4)).filled(2.0, 1.0))
print(sorted(counts.items()))
s = kiwi.Solver(); v = kiwi.Variable("v")
s.addConstraint(v == 3); s.updateVariables()
print("after", v.value(), ft2font.FT2Font(font).family_name, _path.affine_transform(np.ones((1, 2)), np.eye(3)).tolist())
`

var chartsWant = []string{
	"backend Agg 3.10.9",
	"data /usr/local/share/matplotlib/mpl-data",
	"png True True",
	"pillow PNG (640, 480) RGBA",
	"thumb (160, 120) JPEG (160, 120)",
	"hist (600, 600)",
	"svg True",
	"pdf True True",
	"contour 8 tri True True",
	"[('_path ValueError', 200), ('contourpy ValueError', 200), ('ft2font FileNotFoundError', 200), ('ft2font ValueError', 200), " +
		"('kiwi.DuplicateConstraint', 200), ('kiwi.UnsatisfiableConstraint', 200)]",
	"after 3.0 DejaVu Sans [[1.0, 1.0]]",
}

// chartsSandbox is s, skipping on the npm fallback (CPython 3.12 with no
// compiled packages at all); the own build without matplotlib fails.
func chartsSandbox(t testing.TB, s *airlock.Sandbox) *airlock.Sandbox {
	t.Helper()
	has := strings.Contains(strings.Join(s.Info().Libraries, " "), "matplotlib")
	switch {
	case !has && s.Info().Build == "own":
		t.Fatalf("the own build has no matplotlib built in (libraries: %v): scripts/build-python.sh's chart stage did not run", s.Info().Libraries)
	case !has:
		t.Skipf("the %s build has no matplotlib built in (libraries: %v)", s.Info().Build, s.Info().Libraries)
	}
	return s
}

func TestChartsEndToEnd(t *testing.T) {
	s := chartsSandbox(t, freshSandbox(t))
	// Six charts and 1,200 C++ throws: several seconds on wazero, more on
	// wasmtime, where each invoke_ round trip costs more, past the 10 s
	// default on a loaded machine.
	res, err := s.Run(context.Background(), airlock.Request{Code: chartsProgram, Limits: airlock.Limits{Timeout: 2 * time.Minute}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run failed: err=%v exit=%d\nstdout:\n%s\nstderr:\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	if got, want := strings.TrimSpace(string(res.Stdout)), strings.Join(chartsWant, "\n"); got != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s\nstderr:\n%s", got, want, res.Stderr)
	}
	// No warning on the way (a font-cache rebuild, a temporary config
	// folder, a missing font): stderr is empty.
	if len(res.Stderr) != 0 {
		t.Errorf("stderr:\n%s", res.Stderr)
	}
	files := map[string][]byte{}
	for _, f := range res.Files {
		files[f.Path[strings.LastIndex(f.Path, "/")+1:]] = f.Data
	}
	for name, size := range map[string][2]int{"line.png": {640, 480}, "thumb.png": {160, 120}, "hist.png": {600, 600}} {
		cfg, err := png.DecodeConfig(bytes.NewReader(files[name]))
		if err != nil || cfg.Width != size[0] || cfg.Height != size[1] {
			t.Errorf("%s in Result.Files: %v, %dx%d, want a %dx%d PNG", name, err, cfg.Width, cfg.Height, size[0], size[1])
		}
	}
	if !bytes.HasPrefix(files["chart.pdf"], []byte("%PDF-")) || !bytes.Contains(files["chart.svg"], []byte("<svg")) {
		t.Errorf("chart.pdf or chart.svg missing from Result.Files (%d, %d bytes)", len(files["chart.pdf"]), len(files["chart.svg"]))
	}
}

// chartsLineProgram is the benchmark's run: import pyplot, draw the
// 1,000-point line chart with a legend and save it as PNG, timing the
// import and the chart inside the guest ("NAME SECONDS" lines).
const chartsLineProgram = `
import time
t0 = time.perf_counter()
import matplotlib.pyplot as plt
t1 = time.perf_counter()
import io
import numpy as np
x = np.linspace(0, 10, 1000)
fig, ax = plt.subplots()
ax.plot(x, np.sin(x), label="sin")
ax.plot(x, np.cos(x), label="cos")
ax.legend()
buf = io.BytesIO()
fig.savefig(buf, format="png")
t2 = time.perf_counter()
assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
print("import", t1 - t0)
print("chart", t2 - t1)
`

// BenchmarkChartsLine runs chartsLineProgram b.N times on the own build
// as a default Sandbox runs it (a new instance from the snapshot image),
// on $AIRLOCK_ENGINE's engine, and reports the medians: the whole run as
// the host sees it, and the import and the chart inside.
func BenchmarkChartsLine(b *testing.B) {
	own, err := airlock.New(context.Background(), airlock.WithPython(python.SelectOwn))
	if err != nil {
		b.Fatal(err)
	}
	s := chartsSandbox(b, own)
	var wall, imp, chart []float64
	for range b.N {
		start := time.Now()
		res, err := s.Run(context.Background(), airlock.Request{Code: chartsLineProgram})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("err %v, exit %d, stderr %s", err, res.ExitCode, res.Stderr)
		}
		wall = append(wall, time.Since(start).Seconds())
		var ti, tc float64
		if _, err := fmt.Sscanf(string(res.Stdout), "import %g\nchart %g\n", &ti, &tc); err != nil {
			b.Fatalf("stdout %q: %v", res.Stdout, err)
		}
		imp, chart = append(imp, ti), append(chart, tc)
	}
	for name, v := range map[string][]float64{"run": wall, "import": imp, "chart": chart} {
		slices.Sort(v)
		b.ReportMetric(v[len(v)/2], name+"-s")
	}
}

// Charts come back as a notebook shows them (Request.RichOutput): each
// plt.show() turns the open figures into PNG displays, in the order they
// were made, and closes them; a figure left as the last expression is
// the run's value, as PNG.
func TestChartsAsDisplays(t *testing.T) {
	s := chartsSandbox(t, ownSandbox(t))
	code := `
import matplotlib.pyplot as plt
plt.figure()
plt.plot([1, 2, 3])
plt.figure(figsize=(3, 2))
plt.bar([1, 2], [3, 4])
plt.show()
print("open after show:", plt.get_fignums())
fig, ax = plt.subplots(figsize=(2, 2))
ax.plot([3, 2, 1])
plt.show()
last, ax = plt.subplots(figsize=(4, 1))
last
`
	res, err := s.Run(context.Background(), airlock.Request{Code: code, RichOutput: true})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err=%v exit=%d\nstderr:\n%s", err, res.ExitCode, res.Stderr)
	}
	if string(res.Stdout) != "open after show: []\n" || len(res.Stderr) != 0 {
		t.Errorf("stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	want := []struct {
		value bool
		text  string
	}{
		{false, "<Figure size 640x480 with 1 Axes>"},
		{false, "<Figure size 300x200 with 1 Axes>"},
		{false, "<Figure size 200x200 with 1 Axes>"},
		{true, "<Figure size 400x100 with 1 Axes>"},
	}
	if len(res.Displays) != len(want) {
		t.Fatalf("%d displays, want %d: %+v", len(res.Displays), len(want), res.Displays)
	}
	for i, d := range res.Displays {
		if d.Value != want[i].value || d.Text() != want[i].text || len(d.Items) != 2 || d.Items[0].MIME != "image/png" {
			t.Errorf("display %d: value %v, text %q, %d items (first %q); want value %v, %q as image/png and text/plain",
				i, d.Value, d.Text(), len(d.Items), d.Items[0].MIME, want[i].value, want[i].text)
			continue
		}
		if cfg, err := png.DecodeConfig(bytes.NewReader(d.Items[0].Data)); err != nil || cfg.Width < 50 || cfg.Height < 20 {
			t.Errorf("display %d: PNG %v, %dx%d", i, err, cfg.Width, cfg.Height)
		}
	}
	if res.Value != want[3].text {
		t.Errorf("Value %q, want the figure's text %q", res.Value, want[3].text)
	}
}

// SVG on request: after rcParams["savefig.format"] = "svg", a shown
// figure is an SVG display, not a PNG.
func TestChartsAsSVGDisplays(t *testing.T) {
	s := chartsSandbox(t, ownSandbox(t))
	code := `
import matplotlib
import matplotlib.pyplot as plt
matplotlib.rcParams["savefig.format"] = "svg"
plt.plot([1, 2, 3])
plt.show()
`
	res, err := s.Run(context.Background(), airlock.Request{Code: code, RichOutput: true})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err=%v exit=%d\nstderr:\n%s", err, res.ExitCode, res.Stderr)
	}
	if len(res.Displays) != 1 || len(res.Displays[0].Items) != 2 {
		t.Fatalf("displays %+v, want one with an SVG and its text", res.Displays)
	}
	if it := res.Displays[0].Items[0]; it.MIME != "image/svg+xml" || !bytes.Contains(it.Data, []byte("<svg")) {
		t.Errorf("first form %q (%d bytes), want image/svg+xml holding <svg", it.MIME, len(it.Data))
	}
}

// The default packages that wait for matplotlib or Pillow are mounted on
// the own build and work: seaborn, imageio, reportlab with an image,
// bokeh's JSON and HTML (its templates and SRI hashes read from the zip).
func TestChartsDefaultPackages(t *testing.T) {
	s := chartsSandbox(t, defaultsSandbox(t))
	code := `
import io
import numpy as np, pandas as pd
import seaborn as sns
df = pd.DataFrame({"g": ["a", "b", "a", "b"], "v": [1, 2, 3, 4]})
ax = sns.barplot(data=df, x="g", y="v", errorbar=None)
print("seaborn", [float(p.get_height()) for p in ax.patches])
import imageio.v3 as iio
png = iio.imwrite("<bytes>", np.full((4, 6, 3), 200, dtype=np.uint8), extension=".png")
print("imageio", iio.imread(png).shape, png[:4])
from reportlab.pdfgen import canvas
from reportlab.lib.utils import ImageReader
from PIL import Image
buf = io.BytesIO(); c = canvas.Canvas(buf); c.drawString(72, 720, "chart")
c.drawImage(ImageReader(Image.new("RGB", (10, 10), "red")), 72, 600); c.save()
print("reportlab", buf.getvalue()[:5])
import bokeh.plotting, bokeh.embed, bokeh.resources
p = bokeh.plotting.figure(); p.line([1, 2, 3], [3, 1, 2])
html = bokeh.embed.file_html(p, bokeh.resources.CDN, "t")
print("bokeh", sorted(bokeh.embed.json_item(p)), "<html" in html, "cdn.bokeh.org" in html)
`
	res, err := s.Run(context.Background(), airlock.Request{Code: code, Limits: airlock.Limits{Timeout: time.Minute}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err=%v exit=%d\nstdout:\n%s\nstderr:\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	want := "seaborn [2.0, 3.0]\nimageio (4, 6, 3) b'\\x89PNG'\nreportlab b'%PDF-'\nbokeh ['doc', 'root_id', 'target_id', 'version'] True True\n"
	if string(res.Stdout) != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", res.Stdout, want)
	}
}

// Code importing matplotlib resumes from the full image, which has pyplot
// imported and one chart drawn: a run sees none of the warm-up's figures,
// numbers its first figure 1, and draws with the fonts it opens again
// (the image holds no open file).
func TestChartsFromTheFullImage(t *testing.T) {
	s := chartsSandbox(t, ownSandbox(t))
	if !s.Snapshots() {
		t.Skip("no snapshots here: no images to choose from")
	}
	code := `import sys
before = "matplotlib.pyplot" in sys.modules
import matplotlib.pyplot as plt
print(before, plt.get_fignums())
fig = plt.figure()
fig.gca().set_title("again")
fig.savefig("a.png")
print(fig.number, open("a.png", "rb").read()[:4])
`
	for range 2 {
		got := mustRunOn(t, s, code)
		if want := "True []\n1 b'\\x89PNG'\n"; got != want {
			t.Fatalf("stdout %q, want %q", got, want)
		}
	}
}

// Pillow's PDF writer (its parser imported mmap, which WASI lacks, so the
// plugin did not load) and its Arrow export (whose C methods took fewer
// arguments than CPython passes, a trap in WebAssembly).
func TestChartsPillowPDFAndArrow(t *testing.T) {
	s := chartsSandbox(t, ownSandbox(t))
	code := `
import io
from PIL import Image
im = Image.new("RGB", (20, 10), (255, 0, 0))
buf = io.BytesIO()
im.save(buf, "PDF")
print("pdf", buf.getvalue()[:5])
im.save("a.pdf")
Image.new("RGB", (10, 10), (0, 0, 255)).save("a.pdf", append=True)
print("appended", open("a.pdf", "rb").read().count(b"/Type /Page\n"))  # as native Pillow 13.0.0 counts it
back = Image.fromarrow(im, im.mode, im.size)
print("arrow", back.size, back.getpixel((0, 0)))
`
	got := mustRunOn(t, s, code)
	if want := "pdf b'%PDF-'\nappended 3\narrow (20, 10) (255, 0, 0)\n"; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
}

// Two FreeTypes are linked in (scripts/charts/build-charts.sh): 2.6.5,
// its symbols renamed, under matplotlib, whose test baselines (and wheels)
// are drawn with 2.6.1, and Debian's under Pillow, whose ImageFont needs a
// newer one. Both draw text in the same run, each its own version.
func TestChartsTwoFreeTypes(t *testing.T) {
	s := chartsSandbox(t, ownSandbox(t))
	code := `
import matplotlib
matplotlib.use("agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ft2font
from PIL import Image, ImageDraw, ImageFont, features
print("matplotlib", ft2font.__freetype_version__)
print("pillow", features.version("freetype2"))
fig = plt.figure(figsize=(2, 1), dpi=50)
fig.text(0.1, 0.4, "Airlock", fontsize=20)
fig.canvas.draw()
print("mpl ink", (np.asarray(fig.canvas.buffer_rgba())[..., 0] < 128).sum() > 50)
im = Image.new("L", (120, 40), 255)
font = ImageFont.truetype(matplotlib.get_data_path() + "/fonts/ttf/DejaVuSans.ttf", 24)
ImageDraw.Draw(im).text((4, 4), "Airlock", font=font, fill=0)
print("pil ink", sum(1 for p in im.getdata() if p < 128) > 50)
`
	got := mustRunOn(t, s, code)
	if want := "matplotlib 2.6.5\npillow 2.13.3\nmpl ink True\npil ink True\n"; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
}

// Pillow's codecs beyond JPEG and PNG (scripts/charts/build-charts.sh):
// libtiff (LZW, Deflate, JPEG and Group 4 inside TIFF), libwebp (lossless,
// lossy, animated through its mux), OpenJPEG (JPEG 2000, both containers)
// and LittleCMS (a profile transform). Each is round-tripped: written,
// read back, and compared with what went in.
func TestChartsPillowCodecs(t *testing.T) {
	s := chartsSandbox(t, ownSandbox(t))
	code := `
import io
from PIL import Image, ImageChops, ImageCms, ImageStat, features
print("features", [f for f in ("libtiff", "webp", "jpg_2000", "littlecms2") if features.check(f)])
im = Image.linear_gradient("L").resize((64, 48)).convert("RGB")
im.putpixel((3, 5), (255, 0, 0))
def back(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    out = Image.open(io.BytesIO(buf.getvalue()))
    out.load()
    return out
def diff(a, b):  # the largest difference of a channel at a pixel
    return max(hi for lo, hi in ImageChops.difference(a.convert("RGB"), b.convert("RGB")).getextrema())
def mean_diff(a, b):  # a lossy codec's: the mean difference, the worst channel's
    return max(ImageStat.Stat(ImageChops.difference(a.convert("RGB"), b.convert("RGB"))).mean)
for c in ("tiff_lzw", "tiff_adobe_deflate", "jpeg"):
    r = back(im, "TIFF", compression=c)
    print("tiff", c, r.info["compression"], (mean_diff if c == "jpeg" else diff)(im, r) < (4 if c == "jpeg" else 1))
bw = im.convert("1")
r = back(bw, "TIFF", compression="group4")
print("tiff group4", r.mode, r.info["compression"], diff(bw, r) == 0)
r = back(im, "WEBP", lossless=True)
print("webp lossless", r.format, diff(im, r) == 0)
r = back(im, "WEBP", quality=90)
print("webp lossy", r.format, mean_diff(im, r) < 4)
frames = [im, im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
buf = io.BytesIO()
frames[0].save(buf, "WEBP", save_all=True, append_images=frames[1:], lossless=True, duration=100)
anim = Image.open(io.BytesIO(buf.getvalue()))
print("webp frames", anim.n_frames, anim.is_animated)
anim.seek(1)
print("webp frame 1", diff(frames[1], anim) == 0)
for fmt, kw in (("JPEG2000", {}), ("JPEG2000", {"no_jp2": True, "irreversible": False})):
    r = back(im, fmt, **kw)
    print("j2k", r.format, r.size, diff(im, r) == 0)
lab = ImageCms.createProfile("LAB")
srgb = ImageCms.createProfile("sRGB")
to_lab = ImageCms.buildTransform(srgb, lab, "RGB", "LAB")
to_rgb = ImageCms.buildTransform(lab, srgb, "LAB", "RGB")
l = ImageCms.applyTransform(im, to_lab)
print("lcms", l.mode, l.getpixel((0, 0)), l.getpixel((3, 5))[0] in range(130, 146), diff(im, ImageCms.applyTransform(l, to_rgb)) <= 8)
`
	got := mustRunOn(t, s, code)
	want := "features ['libtiff', 'webp', 'jpg_2000', 'littlecms2']\n" +
		"tiff tiff_lzw tiff_lzw True\ntiff tiff_adobe_deflate tiff_adobe_deflate True\ntiff jpeg jpeg True\n" +
		"tiff group4 1 group4 True\n" +
		"webp lossless WEBP True\nwebp lossy WEBP True\nwebp frames 2 True\nwebp frame 1 True\n" +
		"j2k JPEG2000 (64, 48) True\nj2k JPEG2000 (64, 48) True\n" +
		"lcms LAB (1, 128, 128) True True\n"
	if got != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", got, want)
	}
}

// Pillow's complex text layout (scripts/charts/build-charts.sh): raqm,
// shaping with HarfBuzz and ordering with FriBiDi, all linked in. An
// Arabic word comes out joined (its letters' connected forms, lam-alef one
// glyph: narrower than the basic layout's isolated letters), Hebrew right
// to left (as the basic layout draws the reversed string), a ligature can
// be turned off, and the basic layout refuses what needs raqm. The
// expected values are native Pillow 13.0.0's (its wheel has raqm).
func TestChartsPillowTextLayout(t *testing.T) {
	s := chartsSandbox(t, ownSandbox(t))
	code := `
import matplotlib
from PIL import Image, ImageDraw, ImageFont, features
print("features", [f for f in ("raqm", "fribidi", "harfbuzz") if features.check(f)])
print("versions", features.version("fribidi"), features.version("harfbuzz"))
path = matplotlib.get_data_path() + "/fonts/ttf/DejaVuSans.ttf"
raqm = ImageFont.truetype(path, 32, layout_engine=ImageFont.Layout.RAQM)
basic = ImageFont.truetype(path, 32, layout_engine=ImageFont.Layout.BASIC)
def ink(font, text):
    im = Image.new("L", (200, 60), 0)
    ImageDraw.Draw(im).text((4, 4), text, font=font, fill=255)
    return im.tobytes()
salaam = "\u0633\u0644\u0627\u0645"
print("arabic", raqm.getlength(salaam), basic.getlength(salaam))
hebrew = "\u05d0\u05d1\u05d2"
print("hebrew", ink(raqm, hebrew) == ink(basic, hebrew[::-1]), ink(raqm, hebrew) == ink(basic, hebrew))
print("ffi", raqm.getlength("ffi"), raqm.getlength("ffi", features=["-liga"]))
try:
    basic.getlength("abc", direction="rtl")
except KeyError as e:
    print("basic", e)
`
	got := mustRunOn(t, s, code)
	want := "features ['raqm', 'fribidi', 'harfbuzz']\nversions 1.0.16 10.2.0\n" +
		"arabic 65.71875 91.0\nhebrew True False\nffi 30.9375 31.421875\n" +
		"basic 'setting text direction, language or font features is not supported without libraqm'\n"
	if got != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", got, want)
	}
}

// AVIF through libavif on libaom (scripts/charts/build-charts.sh; Pillow's
// wheels decode with dav1d, here libaom does both): a still image, an
// animation and alpha, written and read back; AV1 is lossy, so a mean
// difference under 4 of 255 at quality 90, as for WebP. Asked for four
// threads, which the build has not, it decodes on one (a charts-py-patch:
// it never returned).
func TestChartsPillowAVIF(t *testing.T) {
	s := chartsSandbox(t, ownSandbox(t))
	code := `
import io
from PIL import AvifImagePlugin, Image, ImageChops, ImageStat, features, _avif
print("avif", features.check("avif"), features.version("avif"), _avif.decoder_codec_available("aom"), _avif.encoder_codec_available("aom"))
im = Image.linear_gradient("L").resize((64, 48)).convert("RGB")
im.putpixel((3, 5), (255, 0, 0))
def mean_diff(a, b):  # the mean difference, the worst channel's
    return max(ImageStat.Stat(ImageChops.difference(a.convert("RGB"), b.convert("RGB"))).mean)
buf = io.BytesIO()
im.save(buf, "AVIF", quality=90)
r = Image.open(io.BytesIO(buf.getvalue()))
r.load()
print("still", r.format, r.size, r.mode, mean_diff(im, r) < 4)
frames = [im, im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
buf = io.BytesIO()
frames[0].save(buf, "AVIF", save_all=True, append_images=frames[1:], duration=100, quality=90)
anim = Image.open(io.BytesIO(buf.getvalue()))
anim.seek(1)
print("frames", anim.n_frames, anim.is_animated, mean_diff(frames[1], anim) < 4)
buf = io.BytesIO()
Image.new("RGBA", (16, 16), (10, 200, 30, 128)).save(buf, "AVIF", quality=100)
a = Image.open(io.BytesIO(buf.getvalue()))
print("alpha", a.mode, a.getpixel((8, 8))[3])
AvifImagePlugin.DEFAULT_MAX_THREADS = 4
buf = io.BytesIO()
im.save(buf, "AVIF", quality=90, max_threads=4)
r = Image.open(io.BytesIO(buf.getvalue()))
r.load()
print("four threads", r.size, mean_diff(im, r) < 4)
`
	got := mustRunOn(t, s, code)
	want := "avif True 1.0.4 True True\nstill AVIF (64, 48) RGB True\nframes 2 True True\nalpha RGBA 128\n" +
		"four threads (64, 48) True\n"
	if got != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", got, want)
	}
}
