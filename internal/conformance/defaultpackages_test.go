package airlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// The default packages (internal/pkglist/packages.txt, set "default"),
// fetched by scripts/fetch-wheels.sh default and prepared by airlock
// setup, are importable in a default run and do real work there.

var defaultsLazy lazySandbox

func defaultsSandbox(t *testing.T) *airlock.Sandbox {
	t.Helper()
	s := defaultsLazy.get(t, append(suiteOptions(), airlock.WithDefaultPackages(true))...)
	return s
}

// defaultPackagesProgram does one real thing with each package; each
// line is label|value.
const defaultPackagesProgram = `import io, json, sys, time
t0 = time.perf_counter()
def show(label, value):
    print(label + "|" + str(value))

import sympy
x = sympy.symbols("x")
show("sympy", sorted(sympy.solve(x**2 - 5*x + 6, x)))

import networkx as nx
g = nx.Graph()
g.add_weighted_edges_from([("a", "b", 1), ("b", "c", 2), ("a", "c", 5), ("c", "d", 1)])
show("networkx", nx.shortest_path(g, "a", "d", weight="weight"))

import openpyxl
wb = openpyxl.Workbook(); ws = wb.active
ws.append(["name", "n"]); ws.append(["a", 3]); ws["C2"] = "=B2*2"
buf = io.BytesIO(); wb.save(buf); buf.seek(0)
wb2 = openpyxl.load_workbook(buf)
show("openpyxl", [list(r) for r in wb2.active.iter_rows(values_only=True)])

import jinja2
show("jinja2", jinja2.Environment(autoescape=True).from_string("{% for i in xs %}<{{ i }}>{% endfor %}").render(xs=["a", "<b>"]))

import tabulate
show("tabulate", tabulate.tabulate([["a", 1], ["bb", 22]], headers=["k", "v"], tablefmt="github").replace("\n", "/"))

import bs4
soup = bs4.BeautifulSoup("<ul><li class=x>one</li><li>two</li></ul>", "html.parser")
show("bs4", [li.text for li in soup.select("li")] + [soup.select_one("li.x").text])

import xlsxwriter
buf = io.BytesIO()
wbx = xlsxwriter.Workbook(buf, {"in_memory": True}); wsx = wbx.add_worksheet(); wsx.write("A1", "hi"); wsx.write_formula("A2", "=1+1"); wbx.close()
show("xlsxwriter", openpyxl.load_workbook(io.BytesIO(buf.getvalue())).active["A1"].value)

import pypdf
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject
w = pypdf.PdfWriter()
page = w.add_blank_page(612, 792)
font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"), NameObject("/BaseFont"): NameObject("/Helvetica")})
page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): w._add_object(font)})})
cs = DecodedStreamObject(); cs.set_data(b"BT /F1 24 Tf 72 720 Td (Hello from pypdf) Tj ET")
page[NameObject("/Contents")] = w._add_object(cs)
w.add_metadata({"/Title": "airlock"})
buf = io.BytesIO(); w.write(buf)
reader = pypdf.PdfReader(io.BytesIO(buf.getvalue()))
show("pypdf", (len(reader.pages), reader.pages[0].extract_text().strip(), reader.metadata.title))

import plotly.graph_objects as go
fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 3]))
show("plotly", json.loads(fig.to_json())["data"][0]["type"])

import pytz, datetime
d = pytz.timezone("Europe/Oslo").localize(datetime.datetime(2026, 7, 1, 12, 0))
show("pytz", d.astimezone(pytz.utc).isoformat())

import tqdm
show("tqdm", sum(tqdm.tqdm(range(100), file=io.StringIO())))

import pandas as pd, numpy as np, patsy
df = pd.DataFrame({"y": [1.0, 2.0, 3.0, 4.0], "x": [0.5, 1.5, 2.0, 3.5], "g": ["a", "b", "a", "b"]})
y, X = patsy.dmatrices("y ~ x + C(g)", df, return_type="dataframe")
show("patsy", list(X.columns))

import joblib
show("joblib", joblib.Parallel(n_jobs=1, backend="sequential")(joblib.delayed(lambda v: v * v)(i) for i in range(5)))
mem = joblib.Memory(None)
show("joblib-hash", len(joblib.hash([1, 2, 3])))

import xarray as xr
da = xr.DataArray(np.arange(6.0).reshape(2, 3), dims=("t", "s"), coords={"t": [10, 20]})
show("xarray", (da.mean(dim="s").values.tolist(), float(da.sel(t=20).sum())))

import mpmath
mpmath.mp.dps = 30
show("mpmath", str(mpmath.sqrt(2))[:12])

import xlrd, six, packaging.version, markupsafe, tornado, click, defusedxml, attrs, narwhals, certifi, idna, charset_normalizer, urllib3
show("misc", (packaging.version.Version("1.10") > packaging.version.Version("1.9"), str(markupsafe.escape("<a>")), tornado.version))

import tornado.template
show("tornado", tornado.template.Template("{{ x }}!").generate(x="hi").decode())

import aiohttp, multidict, yarl
show("aiohttp", (yarl.URL("https://example.org/a?b=1").query["b"], multidict.MultiDict([("a", 1), ("a", 2)]).getall("a")))

import requests
try:
    requests.get("https://example.org/", timeout=5)
    show("requests", "ALLOWED")
except Exception as e:
    show("requests", type(e).__name__ + ": " + str(e)[:300])

async def aio():
    async with aiohttp.ClientSession() as session:
        try:
            async with session.get("http://example.org/") as r:
                return "ALLOWED"
        except aiohttp.ClientError as e:
            return type(e).__name__ + ": " + str(e)[:300]
import asyncio
show("aiohttp-net", asyncio.run(aio()))

import pytest
show("pytest", pytest.__version__)
`

func TestDefaultPackagesWork(t *testing.T) {
	if testing.Short() {
		t.Skip("imports every default package (seconds)")
	}
	s := defaultsSandbox(t)
	res, err := s.Run(context.Background(), airlock.Request{Code: defaultPackagesProgram, Limits: airlock.Limits{Timeout: 2 * time.Minute}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err=%v exit=%d\nstdout:\n%s\nstderr:\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if k, v, ok := strings.Cut(line, "|"); ok {
			got[k] = v
		}
	}
	want := map[string]string{
		"sympy":       "[2, 3]",
		"networkx":    "['a', 'b', 'c', 'd']",
		"openpyxl":    "[['name', 'n', None], ['a', 3, '=B2*2']]",
		"jinja2":      "<a><&lt;b&gt;>",
		"tabulate":    "| k   |   v |/|-----|-----|/| a   |   1 |/| bb  |  22 |",
		"bs4":         "['one', 'two', 'one']",
		"xlsxwriter":  "hi",
		"pypdf":       "(1, 'Hello from pypdf', 'airlock')",
		"plotly":      "bar",
		"pytz":        "2026-07-01T10:00:00+00:00",
		"tqdm":        "4950",
		"patsy":       "['Intercept', 'C(g)[T.b]', 'x']",
		"joblib":      "[0, 1, 4, 9, 16]",
		"joblib-hash": "32",
		"xarray":      "([1.0, 4.0], 12.0)",
		"mpmath":      "1.4142135623",
		"misc":        "(True, '&lt;a&gt;', '6.6.1')",
		"tornado":     "hi!",
		"aiohttp":     "('1', [1, 2])",
		"pytest":      "9.2.0",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	// requests is importable, and its network refused with the sandbox's
	// reason when the run has no allow-list.
	if r := got["requests"]; !strings.Contains(r, "ConnectionError") || !strings.Contains(r, "network access is disabled in this sandbox") {
		t.Errorf("requests without an allow-list: %q", r)
	}
	if r := got["aiohttp-net"]; !strings.Contains(r, "ClientConnector") || !strings.Contains(r, "network access is disabled in this sandbox") {
		t.Errorf("aiohttp without an allow-list: %q", r)
	}
}

// jinja2 works on every build: where python.wasm carries markupsafe
// (with its compiled speedups) that one is imported, and elsewhere (the
// npm fallback) markupsafe's pure-Python fallback is mounted in its place.
// (Once markupsafe was built in, the npm fallback had neither.)
func TestDefaultPackagesMarkupSafeOnEveryBuild(t *testing.T) {
	s := defaultsSandbox(t)
	out := mustRunOn(t, s, `
import jinja2, markupsafe, sys
print(jinja2.Environment(autoescape=True).from_string("<{{ x }}>").render(x="<b>"))
print("mounted" if markupsafe.__file__.startswith("/opt/airlock/default/") else "built in", "speedups" if "markupsafe._speedups" in sys.modules else "pure")
`)
	want := "<&lt;b&gt;>\nmounted pure\n"
	if strings.Contains(strings.Join(s.Info().Libraries, " "), "markupsafe") {
		want = "<&lt;b&gt;>\nbuilt in speedups\n"
	}
	if out != want {
		t.Fatalf("stdout = %q, want %q", out, want)
	}
}

// Imports take their bytecode from the prepared zip: no module of a
// default package is compiled from source in a run.
func TestDefaultPackagesPrecompiled(t *testing.T) {
	s := defaultsSandbox(t)
	// Four large packages' imports: seconds on the npm fallback's -O0
	// build, more on a busy machine. What is checked is where their
	// bytecode comes from, not how long they take: a minute, not the
	// default 10 s, which CI's lanes once exceeded.
	out := mustRunRequestOn(t, s, airlock.Request{Limits: airlock.Limits{Timeout: time.Minute}, Code: `
import importlib.machinery, sys, networkx, tabulate
compiled = []
orig = compile
import builtins
def spy(src, name, *a, **k):
    compiled.append(name)
    return orig(src, name, *a, **k)
builtins.compile = spy
import openpyxl, bs4
builtins.compile = orig
print(sum(1 for n in compiled if "/opt/airlock/default/" in str(n)))
print(type(sys.modules["networkx"].__loader__).__name__, sys.modules["networkx"].__spec__.origin.endswith("networkx/__init__.pyc"))
`})
	if !strings.HasPrefix(out, "0\nzipimporter True\n") {
		t.Fatalf("stdout = %q", out)
	}
}

// What a missing module's note says: why it is missing (a compiled
// package not built yet; a pure one waiting on one), what is here, and
// how the host adds more.
func TestDefaultPackagesMissingModuleNote(t *testing.T) {
	s := defaultsSandbox(t)
	// What the note lists as built in is the build's: the npm fallback
	// has no numpy or pandas.
	builtIn := "built in: none"
	if strings.Contains(strings.Join(s.Info().Libraries, " "), "numpy") {
		builtIn = "built in: numpy 2.5.5, pandas 3.1.1"
	}
	cases := []struct {
		code string
		want []string
	}{
		{"import seaborn", []string{"No module named 'seaborn'", "airlock: seaborn 0.13.2 needs matplotlib, which this python.wasm does not have yet"}},
		{"import scipy.linalg", []string{"No module named 'scipy'", "airlock: scipy has compiled extensions and is not built into this python.wasm yet"}},
		{"import sklearn", []string{"airlock: scikit-learn has compiled extensions"}},
		{"import no_such_module_anywhere", []string{"airlock: 'no_such_module_anywhere' is not among this sandbox's packages",
			builtIn, "mounted (pure Python): ", "sympy, mpmath, networkx",
			"airlock.WithPackages", "--package", "--index-url"}},
	}
	// The own build has matplotlib, so seaborn is mounted there and
	// imports (with pandas and numpy); the npm fallback's note says why not.
	if strings.Contains(strings.Join(s.Info().Libraries, " "), "matplotlib") {
		res, err := s.Run(context.Background(), airlock.Request{Code: "import seaborn; print(seaborn.__version__)"})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "0.13.2\n" {
			t.Errorf("import seaborn on a build with matplotlib: err=%v exit=%d stdout=%q\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
		}
		cases = cases[1:]
	}
	for _, c := range cases {
		res, err := s.Run(context.Background(), airlock.Request{Code: c.code})
		if err != nil || res.ExitCode != 1 {
			t.Fatalf("%s: err=%v exit=%d", c.code, err, res.ExitCode)
		}
		for _, w := range c.want {
			if !strings.Contains(string(res.Stderr), w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.code, w, res.Stderr)
			}
		}
	}
	off := newSandbox(t, airlock.WithDefaultPackages(false))
	res, err := off.Run(context.Background(), airlock.Request{Code: "import sympy"})
	if err != nil || res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "the default pure-Python packages (sympy, networkx, jinja2, ...) are not mounted for this sandbox") {
		t.Fatalf("with the default packages off: err=%v exit=%d\n%s", err, res.ExitCode, res.Stderr)
	}
}

// A caller's package wins over a default one of the same module name.
func TestDefaultPackagesComeLast(t *testing.T) {
	s := defaultsSandbox(t)
	whl := writeZip(t, t.TempDir(), "tabulate-0.0.1-py3-none-any.whl", map[string]string{"tabulate.py": "tabulate = lambda *a, **k: 'mine'\n"})
	res, err := s.Run(context.Background(), airlock.Request{Code: "import tabulate; print(tabulate.tabulate([]))", Packages: []string{whl}})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "mine\n" {
		t.Fatalf("err=%v exit=%d stdout=%q stderr=%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
}
