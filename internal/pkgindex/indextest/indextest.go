// Package indextest builds wheels and a package index (PEP 691 JSON and
// PEP 503 HTML on one httptest server) for tests: nothing third-party,
// everything made by the test.
package indextest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Wheel describes a wheel to build.
type Wheel struct {
	Name, Version string
	Tag           string            // "py3-none-any" by default
	Requires      []string          // Requires-Dist lines
	Files         map[string]string // extra files by path in the zip
	// Module is the top-level package's __init__.py; default sets
	// __version__ and NAME.
	Module string
	// BadHash makes the index give a sha256 the file does not have.
	BadHash bool
	Yanked  bool
	// RequiresPython is the index's data-requires-python.
	RequiresPython string
}

// Filename is the wheel's file name.
func (w Wheel) Filename() string {
	tag := w.Tag
	if tag == "" {
		tag = "py3-none-any"
	}
	return strings.ReplaceAll(w.Name, "-", "_") + "-" + w.Version + "-" + tag + ".whl"
}

// Build makes the wheel's bytes: the package, its dist-info METADATA,
// WHEEL and RECORD.
func (w Wheel) Build(t testing.TB) []byte {
	t.Helper()
	mod := strings.ReplaceAll(w.Name, "-", "_")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name, body string) {
		f, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	src := w.Module
	if src == "" {
		src = fmt.Sprintf("__version__ = %q\nNAME = %q\n", w.Version, w.Name)
	}
	add(mod+"/__init__.py", src)
	names := make([]string, 0, len(w.Files))
	for n := range w.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		add(n, w.Files[n])
	}
	info := mod + "-" + w.Version + ".dist-info/"
	meta := "Metadata-Version: 2.1\nName: " + w.Name + "\nVersion: " + w.Version + "\n"
	for _, r := range w.Requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	meta += "\nA test package.\n"
	add(info+"METADATA", meta)
	add(info+"WHEEL", "Wheel-Version: 1.0\nGenerator: indextest\nRoot-Is-Purelib: true\nTag: "+strings.TrimSuffix(strings.TrimPrefix(w.Filename(), mod+"-"+w.Version+"-"), ".whl")+"\n")
	add(info+"RECORD", "")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Index is a package index on loopback.
type Index struct {
	*httptest.Server
	// Mode is "json" (PEP 691 when asked), "html" (PEP 503 only),
	// "garbage", "huge" or "slow" (the page never finishes in time).
	Mode atomic.Value
	// Downloads counts file fetches.
	Downloads atomic.Int64
	// Pages counts page fetches.
	Pages atomic.Int64
	// FilesAt, when set (a string: another server's URL), is where the
	// pages link the files, as absolute URLs; RedirectFilesTo, when set,
	// answers each file fetch with a redirect there.
	FilesAt, RedirectFilesTo atomic.Value

	mu       sync.Mutex
	projects map[string][]entry
	files    map[string][]byte
}

type entry struct {
	w    Wheel
	name string
	sum  string
}

// NewIndex serves the wheels (built now) at URL()+"/simple/".
func NewIndex(t testing.TB, wheels ...Wheel) *Index {
	t.Helper()
	ix := &Index{projects: map[string][]entry{}, files: map[string][]byte{}}
	ix.Mode.Store("json")
	for _, w := range wheels {
		ix.Add(t, w)
	}
	ix.Server = httptest.NewServer(http.HandlerFunc(ix.serve))
	t.Cleanup(ix.Close)
	return ix
}

// Add builds w and lists it.
func (ix *Index) Add(t testing.TB, w Wheel) []byte {
	data := w.Build(t)
	s := sha256.Sum256(data)
	sum := hex.EncodeToString(s[:])
	if w.BadHash {
		sum = strings.Repeat("ab", 32)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	key := normalize(w.Name)
	ix.projects[key] = append(ix.projects[key], entry{w, w.Filename(), sum})
	ix.files[w.Filename()] = data
	return data
}

// AddFile lists a file that is not a wheel built here (an sdist, say).
func (ix *Index) AddFile(project, filename string, data []byte) {
	s := sha256.Sum256(data)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	key := normalize(project)
	ix.projects[key] = append(ix.projects[key], entry{Wheel{Name: project}, filename, hex.EncodeToString(s[:])})
	ix.files[filename] = data
}

// URL is the simple API's root.
func (ix *Index) URL() string { return ix.Server.URL + "/simple/" }

func normalize(s string) string {
	s = strings.ToLower(s)
	for _, c := range []string{"_", "."} {
		s = strings.ReplaceAll(s, c, "-")
	}
	return s
}

func (ix *Index) serve(w http.ResponseWriter, r *http.Request) {
	mode, _ := ix.Mode.Load().(string)
	if name, ok := strings.CutPrefix(r.URL.Path, "/files/"); ok {
		ix.Downloads.Add(1)
		if to, _ := ix.RedirectFilesTo.Load().(string); to != "" {
			http.Redirect(w, r, to+"/files/"+name, http.StatusFound)
			return
		}
		ix.mu.Lock()
		data, ok := ix.files[name]
		ix.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
		return
	}
	project, ok := strings.CutPrefix(r.URL.Path, "/simple/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	ix.Pages.Add(1)
	project = strings.TrimSuffix(project, "/")
	switch mode {
	case "garbage":
		w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
		w.Write([]byte("{\x00\x01 this is not json"))
		return
	case "huge":
		w.Header().Set("Content-Type", "text/html")
		chunk := bytes.Repeat([]byte("<!-- padding -->"), 4096)
		for i := 0; i < 4096; i++ { // 256 MiB unless the client stops reading
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		return
	case "slow":
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	ix.mu.Lock()
	entries := ix.projects[project]
	ix.mu.Unlock()
	if len(entries) == 0 {
		http.NotFound(w, r)
		return
	}
	filesAt, _ := ix.FilesAt.Load().(string)
	if mode == "json" && strings.Contains(r.Header.Get("Accept"), "application/vnd.pypi.simple.v1+json") {
		type jf struct {
			Filename       string            `json:"filename"`
			URL            string            `json:"url"`
			Hashes         map[string]string `json:"hashes"`
			RequiresPython string            `json:"requires-python,omitempty"`
			Yanked         any               `json:"yanked"`
		}
		var files []jf
		for _, e := range entries {
			var y any = false
			if e.w.Yanked {
				y = "broken"
			}
			link := "../../files/" + e.name
			if filesAt != "" {
				link = filesAt + "/files/" + e.name
			}
			files = append(files, jf{e.name, link, map[string]string{"sha256": e.sum}, e.w.RequiresPython, y})
		}
		w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
		json.NewEncoder(w).Encode(map[string]any{"meta": map[string]string{"api-version": "1.1"}, "name": project, "files": files})
		return
	}
	w.Header().Set("Content-Type", "text/html")
	var b strings.Builder
	b.WriteString("<!DOCTYPE html><html><body><h1>Links for " + html.EscapeString(project) + "</h1>\n")
	for _, e := range entries {
		attrs := ""
		if e.w.RequiresPython != "" {
			attrs += ` data-requires-python="` + html.EscapeString(e.w.RequiresPython) + `"`
		}
		if e.w.Yanked {
			attrs += ` data-yanked=""`
		}
		fmt.Fprintf(&b, "<a href=\"%s/files/%s#sha256=%s\"%s>%s</a><br/>\n", filesAt, e.name, e.sum, attrs, html.EscapeString(e.name))
	}
	b.WriteString("</body></html>\n")
	w.Write([]byte(b.String()))
}
