package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-sandbox/airlock"
)

// pngCode writes a real 2x2 PNG (zlib and struct, no imaging library).
const pngCode = `import struct, zlib
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
raw = b''.join(b'\x00' + b'\xff\x00\x00' * 2 for _ in range(2))
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 2, 2, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
open('red.png', 'wb').write(png)
open('notes.txt', 'w').write('some notes')
open('plot.svg', 'w').write('<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>')
print('wrote')
`

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func readResource(t *testing.T, cs *mcp.ClientSession, uri string) *mcp.ResourceContents {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].URI != uri {
		t.Fatalf("read %s: %+v", uri, res.Contents)
	}
	return res.Contents[0]
}

// Images written come back as images a model sees; every file written is
// a resource link the client can read.
func TestMCPImagesAndFileResources(t *testing.T) {
	cs := mcpSession(t, MCPConfig{Sandbox: sb})
	res := call(t, cs, "run_python", map[string]any{"code": pngCode})
	if res.IsError {
		t.Fatalf("run: %+v", res.Content[0])
	}
	images := map[string]*mcp.ImageContent{}
	links := map[string]*mcp.ResourceLink{}
	for _, c := range res.Content[1:] {
		switch c := c.(type) {
		case *mcp.ImageContent:
			images[c.MIMEType] = c
		case *mcp.ResourceLink:
			links[c.Title] = c
		}
	}
	if len(images) != 2 || images["image/png"] == nil || !bytes.HasPrefix(images["image/png"].Data, []byte("\x89PNG\r\n\x1a\n")) ||
		images["image/svg+xml"] == nil || !bytes.HasPrefix(images["image/svg+xml"].Data, []byte("<svg")) {
		t.Fatalf("images %v: want the PNG and the SVG", images)
	}
	if len(links) != 3 {
		t.Fatalf("links %+v", links)
	}
	png := readResource(t, cs, links["/home/user/red.png"].URI)
	if png.MIMEType != "image/png" || !bytes.Equal(png.Blob, images["image/png"].Data) || png.Text != "" {
		t.Errorf("png resource %+v", png)
	}
	notes := readResource(t, cs, links["/home/user/notes.txt"].URI)
	if notes.Text != "some notes" || !strings.HasPrefix(notes.MIMEType, "text/plain") {
		t.Errorf("notes resource %+v", notes)
	}
	if l := links["/home/user/notes.txt"]; l.Size == nil || *l.Size != 10 || l.Name != "notes.txt" {
		t.Errorf("link %+v", l)
	}
	// A URI no run left is not found, whatever its shape.
	for _, uri := range []string{runURIPrefix + "0123/stdout", strings.Replace(links["/home/user/notes.txt"].URI, "notes", "other", 1),
		strings.Replace(links["/home/user/notes.txt"].URI, "files/", "", 1), runURIPrefix, "airlock://elsewhere"} {
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("read %s: no error", uri)
		}
	}
}

// Output past MaxText keeps its head and tail around a note naming the
// resource with the whole; stderr keeps room for a traceback.
func TestMCPOutputShapedForAContext(t *testing.T) {
	cs := mcpSession(t, MCPConfig{Sandbox: sb, MaxText: 2000})
	res := call(t, cs, "run_python", map[string]any{"code": "for i in range(5000): print(f'line {i:05}')\nraise ValueError('at the end')"})
	text := res.Content[0].(*mcp.TextContent).Text
	if len(text) > 3000 {
		t.Fatalf("text is %d characters, cap 2000 plus the report", len(text))
	}
	for _, want := range []string{"line 00000\n", "line 04999\n", "characters of stdout cut here", "ValueError: at the end"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	_, after, ok := strings.Cut(text, "the whole is the resource ")
	uri, _, _ := strings.Cut(after, " ")
	if !ok || !strings.HasSuffix(uri, "/stdout") {
		t.Fatalf("no resource named in:\n%s", text)
	}
	if whole := readResource(t, cs, uri); strings.Count(whole.Text, "\n") != 5000 || !strings.HasPrefix(whole.Text, "line 00000\n") {
		t.Errorf("the whole stdout: %d lines", strings.Count(whole.Text, "\n"))
	}
	// Short output is left as it is, and nothing is kept for it.
	short := call(t, cs, "run_python", map[string]any{"code": "print('é' * 1500)"})
	if text := short.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, strings.Repeat("é", 1500)+"\n") || strings.Contains(text, "cut here") {
		t.Errorf("1500 characters were cut (bytes counted?):\n%.200s", text)
	}
}

func TestMCPBinaryInputAndEndSession(t *testing.T) {
	cs := mcpSession(t, MCPConfig{Sandbox: sb})
	res := call(t, cs, "run_python", map[string]any{"code": "print(list(open('b.bin', 'rb').read()), open('t.txt').read())",
		"files": map[string]string{"t.txt": "text"}, "files_base64": map[string]string{"b.bin": base64.StdEncoding.EncodeToString([]byte{0, 1, 255})}})
	if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || !strings.Contains(text, "[0, 1, 255] text\n") {
		t.Fatalf("binary input: %s", text)
	}
	res = call(t, cs, "run_python", map[string]any{"code": "pass", "files_base64": map[string]string{"b.bin": "not base64!"}})
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(text, `files_base64["b.bin"] is not base64`) {
		t.Fatalf("bad base64: %s", text)
	}
	res = call(t, cs, "run_python", map[string]any{"code": "x = 1", "session": "new"})
	id, _, _ := strings.Cut(strings.TrimPrefix(res.Content[0].(*mcp.TextContent).Text, "session: "), "\n")
	live := sb.Sessions()
	res = call(t, cs, "end_session", map[string]any{"session": id})
	if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || text != "session "+id+" ended" || sb.Sessions() != live-1 {
		t.Fatalf("end_session: %s (sessions %d -> %d)", text, live, sb.Sessions())
	}
	for _, args := range []map[string]any{{"code": "print(x)", "session": id}} {
		if res := call(t, cs, "run_python", args); !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "not_found") {
			t.Errorf("call after end: %+v", res.Content[0])
		}
	}
	if res := call(t, cs, "end_session", map[string]any{"session": id}); !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "not_found") {
		t.Errorf("second end: %+v", res.Content[0])
	}
}

// What is kept for resources stays within its count, bytes and time.
func TestRunStoreBounds(t *testing.T) {
	now := time.Unix(1e9, 0)
	s := newRunStore(1000, 3, time.Minute)
	s.now = func() time.Time { return now }
	run := func(n int) *airlock.Result { return &airlock.Result{Stdout: bytes.Repeat([]byte("x"), n)} }
	a, b := s.keep(run(400), nil), s.keep(run(400), nil)
	c := s.keep(run(400), nil) // over 1000 bytes: a goes
	if s.get(a, nil) != nil || s.get(b, nil) == nil || s.get(c, nil) == nil || s.bytes != 800 {
		t.Fatalf("bytes: a %v b %v c %v, %d bytes", s.get(a, nil) != nil, s.get(b, nil) != nil, s.get(c, nil) != nil, s.bytes)
	}
	d, e := s.keep(run(10), nil), s.keep(run(10), nil) // over 3 runs: b goes
	if s.get(b, nil) != nil || s.get(c, nil) == nil || s.get(d, nil) == nil || s.get(e, nil) == nil || len(s.runs) != 3 {
		t.Fatalf("count: %d runs", len(s.runs))
	}
	if id := s.keep(run(1001), nil); id != "" || len(s.runs) != 3 {
		t.Fatalf("a run over the whole budget was kept (%q), or evicted others (%d)", id, len(s.runs))
	}
	now = now.Add(2 * time.Minute)
	if s.get(e, nil) != nil || len(s.runs) != 0 || s.bytes != 0 {
		t.Fatalf("after the TTL: %d runs, %d bytes", len(s.runs), s.bytes)
	}
}

// run_python returns a notebook's result: the last expression's value,
// and what airlock.display() shows, images as images.
func TestMCPValueAndDisplays(t *testing.T) {
	cs := mcpSession(t, MCPConfig{Sandbox: sb})
	code := pngCode + `
import airlock
class Table:
    def _repr_html_(self): return "<table></table>"
    def __repr__(self): return "Table(3 rows)"
airlock.display(Table(), png)
6 * 7`
	res := call(t, cs, "run_python", map[string]any{"code": code})
	text := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"--- display 1 (text/html, text/plain) ---\nTable(3 rows)\n", "--- display 2 (image/png, text/plain) ---\nb'\\x89PNG", "--- value ---\n42\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	var pngs int
	for _, c := range res.Content[1:] {
		if im, ok := c.(*mcp.ImageContent); ok && im.MIMEType == "image/png" {
			pngs++
		}
	}
	if pngs != 2 { // the display's and the file's
		t.Errorf("%d PNG images, want 2: %+v", pngs, res.Content)
	}
}

// A chart an MCP client asks for comes back as image content: each
// figure plt.show() shows, in the order they were made.
func TestMCPChartsAsImages(t *testing.T) {
	cs := mcpSession(t, MCPConfig{Sandbox: sb})
	code := `
import matplotlib.pyplot as plt
plt.figure(figsize=(8, 2)); plt.plot([1, 3, 2]); plt.title("wide")
plt.figure(figsize=(2, 6)); plt.bar([1, 2], [3, 4]); plt.title("tall")
plt.show()
`
	res := call(t, cs, "run_python", map[string]any{"code": code, "timeout": 60})
	if res.IsError {
		t.Fatalf("run: %+v", res.Content[0])
	}
	var shapes []string
	for _, c := range res.Content[1:] {
		im, ok := c.(*mcp.ImageContent)
		if !ok || im.MIMEType != "image/png" {
			continue
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(im.Data))
		switch {
		case err != nil:
			t.Fatalf("an image that is not a PNG: %v", err)
		case cfg.Width > cfg.Height:
			shapes = append(shapes, "wide")
		default:
			shapes = append(shapes, "tall")
		}
	}
	if strings.Join(shapes, " ") != "wide tall" {
		t.Errorf("PNG images %v, want the wide figure then the tall one; text:\n%s", shapes, res.Content[0].(*mcp.TextContent).Text)
	}
}
