package airlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// PyYAML (its C loader on libyaml), MarkupSafe's speedups, regex and lxml
// (on libxml2, libxslt, libexslt) are linked into the own build
// (scripts/parsers/build-parsers.sh), their Python sides in the stdlib
// zip; python-docx (lxml), nltk and textblob (regex) are default packages
// that wait for them.

// parsersProgram does real work with each compiled package; each line is
// label|value.
const parsersProgram = `import io, sys
def show(label, value):
    print(label + "|" + str(value))

import yaml
doc = "name: airlock\nitems: [1, 2.5, true, null, '007']\nnested: {a: [x, y]}\nwhen: 2026-12-05\n"
data = yaml.load(doc, Loader=yaml.CLoader)
show("yaml-load", data)
text = yaml.dump(data, Dumper=yaml.CDumper, sort_keys=True, default_flow_style=False)
show("yaml-dump", text.replace("\n", "/"))
show("yaml-roundtrip", yaml.load(text, Loader=yaml.CSafeLoader) == data)
show("yaml-c", (yaml.__with_libyaml__, yaml._yaml.get_version_string(), issubclass(yaml.CLoader, yaml._yaml.CParser)))
try:
    yaml.load("a: [1, 2\nb: c\n", Loader=yaml.CLoader)
except yaml.YAMLError as e:
    show("yaml-error", (type(e).__name__, e.problem, e.problem_mark.line, e.problem_mark.column))

import markupsafe, markupsafe._speedups as speedups
show("markupsafe", (str(markupsafe.escape("<a href='x'>&\"</a>")), markupsafe.Markup("<b>%s</b>") % "<i>", markupsafe._escape_inner is speedups._escape_inner))

import regex
show("regex-recursion", regex.fullmatch(r"\((?:[^()]++|(?R))*\)", "(a(b)(c(d)))") is not None)
show("regex-unicode", regex.findall(r"\p{Greek}+", "abc αβγ def δ"))
show("regex-fuzzy", regex.search(r"(?:airlock){e<=1}", "the airlok sandbox").group())
show("regex-lookbehind", regex.findall(r"(?<=\d+ )kg", "5 kg, 10 kg, x kg"))
show("regex-sub", regex.sub(r"(?V1)[\w--\d]+", "_", "ab12cd"))

import lxml, lxml.etree as ET, lxml.html, lxml.objectify
root = ET.fromstring(b"<?xml version='1.0'?><lib><book id='1' year='2001'><t>A</t></book><book id='2' year='2019'><t>B</t></book></lib>")
show("lxml-xpath", (root.xpath("//book[@year > 2010]/t/text()"), root.xpath("count(//book)"), root.findtext("book/t")))
xslt = ET.XSLT(ET.fromstring(b'''<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform" xmlns:str="http://exslt.org/strings" extension-element-prefixes="str">
<xsl:output method="text"/>
<xsl:template match="/"><xsl:for-each select="//book"><xsl:sort select="@year" order="descending" data-type="number"/><xsl:value-of select="t"/>:<xsl:value-of select="@year"/>:<xsl:value-of select="str:padding(2, '*')"/>;</xsl:for-each></xsl:template>
</xsl:stylesheet>'''))
show("lxml-xslt", str(xslt(root)))
show("lxml-tostring", ET.tostring(root[0]).decode())
page = lxml.html.fromstring("<html><body><p class=x>Hello <b>world</b><p>unclosed<br>line</body></html>")
show("lxml-html", (page.xpath("string(//p[@class='x'])"), len(page.xpath("//p")), lxml.html.tostring(page.xpath("//p")[1]).decode()))
show("lxml-encoding", ET.fromstring("<?xml version='1.0' encoding='Shift_JIS'?><a>日本</a>".encode("shift_jis")).text)
o = lxml.objectify.fromstring("<r><n>3</n><f>1.5</f></r>")
show("lxml-objectify", (o.n + 1, o.f * 2))
try:
    ET.fromstring(b"<a><b></a>")
except ET.XMLSyntaxError as e:
    show("lxml-error", (type(e).__name__, e.lineno, "mismatch" in str(e)))
show("lxml-version", (lxml.__version__, ET.LIBXML_VERSION[:2], ET.LIBXSLT_VERSION[:2]))
show("builtin", sorted(m for m in sys.builtin_module_names if m.startswith(("yaml", "markupsafe", "regex", "lxml"))))
import regex._regex
show("origins", sorted({m.__spec__.origin for m in (yaml._yaml, speedups, regex._regex, ET, lxml.objectify)}))
`

// parsersNative is parsersProgram's output from the same versions' wheels
// on CPython 3.13 on x86-64 Linux, but for the lines that name library
// versions (the wheels carry libyaml 0.2.6 and libxml2 2.14; the build
// Debian trixie's libyaml 0.2.5 and libxml2 2.9.14) or where the modules
// come from.
var parsersNative = []string{
	"yaml-load|{'name': 'airlock', 'items': [1, 2.5, True, None, '007'], 'nested': {'a': ['x', 'y']}, 'when': datetime.date(2026, 12, 5)}",
	"yaml-dump|items:/- 1/- 2.5/- true/- null/- '007'/name: airlock/nested:/  a:/  - x/  - y/when: 2026-12-05/",
	"yaml-roundtrip|True",
	"yaml-error|('ParserError', \"did not find expected ',' or ']'\", 1, 1)",
	"markupsafe|('&lt;a href=&#39;x&#39;&gt;&amp;&#34;&lt;/a&gt;', Markup('<b>&lt;i&gt;</b>'), True)",
	"regex-recursion|True",
	"regex-unicode|['αβγ', 'δ']",
	"regex-fuzzy|airlok",
	"regex-lookbehind|['kg', 'kg']",
	"regex-sub|_12_",
	"lxml-xpath|(['B'], 2.0, 'A')",
	"lxml-xslt|B:2019:**;A:2001:**;",
	"lxml-tostring|<book id=\"1\" year=\"2001\"><t>A</t></book>",
	"lxml-html|('Hello world', 2, '<p>unclosed<br>line</p>')",
	"lxml-encoding|日本",
	"lxml-objectify|(4, 3.0)",
	"lxml-error|('XMLSyntaxError', 1, True)",
}

// parsersBuild is what the build's lines say in the sandbox.
var parsersBuild = map[string]string{
	"yaml-c":       "(True, '0.2.5', True)",
	"lxml-version": "('6.2.0', (2, 9), (1, 1))",
	"builtin":      "['lxml.etree', 'lxml.objectify', 'markupsafe._speedups', 'regex._regex', 'yaml._yaml']",
	"origins":      "['built-in']",
}

func labelled(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, "|"); ok {
			got[k] = v
		}
	}
	return got
}

// checkLabelled checks a program's "label|value" lines against the native
// wheels' lines and against what only this build's record says.
func checkLabelled(t *testing.T, out string, native []string, build map[string]string) {
	t.Helper()
	got := labelled(out)
	for _, line := range native {
		k, v, _ := strings.Cut(line, "|")
		if got[k] != v {
			t.Errorf("%s: got %q, native %q", k, got[k], v)
		}
	}
	for k, v := range build {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}

// The same program, the output of the native wheels: in a fresh
// interpreter and resumed from the snapshot image.
func TestParsersEndToEnd(t *testing.T) {
	own := ownSandbox(t)
	checkLabelled(t, mustRunOn(t, freshSandbox(t), parsersProgram), parsersNative, parsersBuild)
	if !own.Snapshots() {
		t.Skip("no snapshots here: checked in a fresh interpreter only")
	}
	checkLabelled(t, mustRunOn(t, own, parsersProgram), parsersNative, parsersBuild)
}

// parsersMountedProgram does real work with the default packages that
// wait for them.
const parsersMountedProgram = `import io
def show(label, value):
    print(label + "|" + str(value))

import docx
d = docx.Document()
d.add_heading("Report", 1)
d.add_paragraph("Hello from ").add_run("airlock").bold = True
t = d.add_table(rows=2, cols=2)
t.cell(1, 1).text = "x"
d.sections[0].header.paragraphs[0].text = "top"
buf = io.BytesIO()
d.save(buf)
d2 = docx.Document(io.BytesIO(buf.getvalue()))
show("docx", ([p.text for p in d2.paragraphs], [r.bold for r in d2.paragraphs[1].runs], d2.tables[0].cell(1, 1).text, d2.sections[0].header.paragraphs[0].text, buf.getvalue()[:2]))

import nltk
from nltk.tokenize import TreebankWordTokenizer, ToktokTokenizer
show("nltk-wordpunct", nltk.wordpunct_tokenize("Don't panic: it's 4.5 GB!"))
show("nltk-treebank", TreebankWordTokenizer().tokenize("Don't panic, it's fine."))
show("nltk-regexp", nltk.regexp_tokenize("a1 b22 c333", r"\w\d+"))
show("nltk-ngrams", list(nltk.ngrams("abc", 2)))
show("nltk-stem", [nltk.PorterStemmer().stem(w) for w in ("running", "flies", "happily")])
try:
    nltk.word_tokenize("Hello there. General Kenobi.")
except LookupError as e:
    show("nltk-data", ("punkt" in str(e), "airlock: this sandbox carries no NLTK data" in str(e)))
import textblob
show("textblob", textblob.TextBlob("Simple is better").upper().string)

out = io.StringIO()
ok = nltk.download("punkt_tab", print_error_to=out)
show("nltk-download", (ok, "airlock: nltk.download() does not work in this sandbox" in out.getvalue()))
`

func TestParsersMountedPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("imports nltk (seconds)")
	}
	s := defaultsSandbox(t)
	if !strings.Contains(strings.Join(s.Info().Libraries, " "), "lxml") {
		// The npm fallback: they wait for the build's packages, and say so.
		res, err := s.Run(context.Background(), airlock.Request{Code: "import docx"})
		if err != nil || res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "python-docx 1.2.0 needs lxml, which this python.wasm does not have yet") {
			t.Fatalf("import docx without lxml: err=%v exit=%d\n%s", err, res.ExitCode, res.Stderr)
		}
		return
	}
	res, err := s.Run(context.Background(), airlock.Request{Code: parsersMountedProgram, Limits: airlock.Limits{Timeout: 2 * time.Minute}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err=%v exit=%d\nstdout:\n%s\nstderr:\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	got := labelled(string(res.Stdout))
	want := map[string]string{
		// As natively (python-docx 1.2.0, nltk 3.10.4, textblob 0.20.1).
		"docx":           "(['Report', 'Hello from airlock'], [None, True], 'x', 'top', b'PK')",
		"nltk-wordpunct": `['Don', "'", 't', 'panic', ':', 'it', "'", 's', '4', '.', '5', 'GB', '!']`,
		"nltk-treebank":  `['Do', "n't", 'panic', ',', 'it', "'s", 'fine', '.']`,
		"nltk-regexp":    "['a1', 'b22', 'c333']",
		"nltk-ngrams":    "[('a', 'b'), ('b', 'c')]",
		"nltk-stem":      "['run', 'fli', 'happili']",
		"textblob":       "SIMPLE IS BETTER",
		// The sandbox's own: what needs data says the sandbox has none,
		// and the downloader says it does not work here.
		"nltk-data":     "(True, True)",
		"nltk-download": "(False, True)",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}
