package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-sandbox/airlock"
)

// What a run_python call leaves for the client beyond its text: the full
// stdout and stderr and the files written, as resources
// (airlock://runs/RUN/stdout, .../stderr, .../files/PATH) kept for the
// last calls within a byte budget and a time to live, so that a model
// sees a context-sized text and can fetch the rest; and images written,
// as image content the model sees.

const (
	// DefaultMCPMaxText bounds the text of one call's result, in
	// characters: stdout and stderr beyond it keep their head and tail.
	DefaultMCPMaxText = 20000
	// DefaultMCPKeepBytes and DefaultMCPKeepRuns bound what is kept for
	// resources; DefaultMCPKeepFor is how long a call's are readable.
	DefaultMCPKeepBytes = 256 << 20
	DefaultMCPKeepRuns  = 64
	DefaultMCPKeepFor   = 30 * time.Minute

	// At most this many images, each at most maxImageBytes, go into a
	// result as image content; every file is a resource regardless.
	maxImages     = 4
	maxImageBytes = 4 << 20
	// At most this many files are linked from one result.
	maxFileLinks = 50

	runURIPrefix = "airlock://runs/"
)

type keptRun struct {
	id             string
	stdout, stderr []byte
	files          map[string][]byte // by absolute guest path
	size           int64
	at             time.Time
	owner          any // the MCP client that made it (ownerOf); nil for anyone's
}

// runStore keeps recent calls' outputs and files for resources/read.
type runStore struct {
	mu       sync.Mutex
	runs     []*keptRun // oldest first
	bytes    int64
	maxBytes int64
	maxRuns  int
	ttl      time.Duration
	now      func() time.Time
}

func newRunStore(maxBytes int64, maxRuns int, ttl time.Duration) *runStore {
	return &runStore{maxBytes: maxBytes, maxRuns: maxRuns, ttl: ttl, now: time.Now}
}

// keep stores res's outputs and files as owner's (nil: anyone's) and
// returns the run's ID, or "" when it is larger than the whole budget
// (nothing is kept then).
func (s *runStore) keep(res *airlock.Result, owner any) string {
	r := &keptRun{stdout: res.Stdout, stderr: res.Stderr, files: map[string][]byte{}, owner: owner}
	r.size = int64(len(res.Stdout) + len(res.Stderr))
	for _, f := range res.Files {
		r.files[f.Path] = f.Data
		r.size += int64(len(f.Data))
	}
	if r.size > s.maxBytes {
		return ""
	}
	var b [12]byte
	rand.Read(b[:])
	r.id = hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	r.at = s.now()
	s.expire()
	for len(s.runs) > 0 && (len(s.runs) >= s.maxRuns || s.bytes+r.size > s.maxBytes) {
		s.drop()
	}
	s.runs = append(s.runs, r)
	s.bytes += r.size
	return r.id
}

func (s *runStore) drop() {
	s.bytes -= s.runs[0].size
	s.runs[0] = nil
	s.runs = s.runs[1:]
}

func (s *runStore) expire() {
	for len(s.runs) > 0 && s.now().Sub(s.runs[0].at) > s.ttl {
		s.drop()
	}
}

// get returns the kept run id if it is owner's or anyone's: another's is
// as absent as one never kept.
func (s *runStore) get(id string, owner any) *keptRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	for _, r := range s.runs {
		if r.id == id && (r.owner == nil || r.owner == owner) {
			return r
		}
	}
	return nil
}

// runURI names item (stdout, stderr, files/PATH) of run id.
func runURI(id, item string) string { return runURIPrefix + id + "/" + item }

// fileURI is the URI of the file at guest path p (absolute) of run id;
// each segment is escaped, so any name the guest chose stays one path.
func fileURI(id, p string) string {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return runURI(id, "files/"+strings.Join(segs, "/"))
}

// read answers resources/read for a run's URI, as the client the
// request came from (ownerOf) may see it.
func (s *runStore) read(_ context.Context, req *mcp.ReadResourceRequest, owner any) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	rest, ok := strings.CutPrefix(uri, runURIPrefix)
	id, item, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	r := s.get(id, owner)
	if r == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	var data []byte
	mime := "text/plain; charset=utf-8"
	switch {
	case item == "stdout":
		data = r.stdout
	case item == "stderr":
		data = r.stderr
	case strings.HasPrefix(item, "files/"):
		p, err := url.PathUnescape(strings.TrimPrefix(item, "files/"))
		if err != nil {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		d, found := r.files["/"+p]
		if !found {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		data, mime = d, fileMIME(p, d)
	default:
		return nil, mcp.ResourceNotFoundError(uri)
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: mime}
	if strings.HasPrefix(mime, "text/") && utf8.Valid(data) {
		c.Text = string(data)
	} else {
		c.Blob = data
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// fileMIME is a file's type from its bytes, and for SVG (text that
// sniffing calls XML or plain) its name.
func fileMIME(name string, data []byte) string {
	if strings.EqualFold(path.Ext(name), ".svg") && bytes.Contains(data[:min(len(data), 1024)], []byte("<svg")) {
		return "image/svg+xml"
	}
	return http.DetectContentType(data)
}

// imageMIME is the type of an image a model can be shown, or "".
func imageMIME(name string, data []byte) string {
	switch t := fileMIME(name, data); t {
	case "image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml":
		return t
	}
	return ""
}

// displayImage tells a display's form that a model can be shown as an
// image: one of imageMIME's types, whose bytes are what it says.
func displayImage(it airlock.DisplayItem) bool {
	name := ""
	if it.MIME == "image/svg+xml" {
		name = "display.svg"
	}
	return imageMIME(name, it.Data) == it.MIME
}

// shapeOutputs cuts stdout and stderr to fit maxText characters between
// them, keeping each one's head and tail around a note of what was cut
// and where the whole is; stderr, where tracebacks are, keeps at least
// 30% of the room when it needs it.
func shapeOutputs(stdout, stderr []byte, maxText int, id string) ([]byte, []byte) {
	no, ne := utf8.RuneCount(stdout), utf8.RuneCount(stderr)
	if no+ne <= maxText {
		return stdout, stderr
	}
	errRoom := min(ne, maxText*3/10)
	outRoom := maxText - errRoom
	if no < outRoom {
		outRoom = no
		errRoom = maxText - no
	}
	return cutMiddle(stdout, no, outRoom, id, "stdout"), cutMiddle(stderr, ne, errRoom, id, "stderr")
}

// cutMiddle keeps room characters of data (n of them), half from each
// end, with a note between.
func cutMiddle(data []byte, n, room int, id, stream string) []byte {
	if n <= room {
		return data
	}
	head, tail := room/2, room-room/2
	headEnd := runeOffset(data, head)
	tailStart := runeOffset(data, n-tail)
	where := "it was not kept (larger than the server keeps)"
	if id != "" {
		where = "the whole is the resource " + runURI(id, stream)
	}
	note := fmt.Sprintf("\n[... %d characters of %s cut here to fit a model's context; %s ...]\n", n-room, stream, where)
	out := make([]byte, 0, headEnd+len(note)+len(data)-tailStart)
	out = append(out, data[:headEnd]...)
	out = append(out, note...)
	return append(out, data[tailStart:]...)
}

// runeOffset is the byte offset of the k-th character of data.
func runeOffset(data []byte, k int) int {
	off := 0
	for i := 0; i < k && off < len(data); i++ {
		_, size := utf8.DecodeRune(data[off:])
		off += size
	}
	return off
}

// mcpContent is a call's result as MCP content: the text (outputs
// shaped), then the images written, then links to the files.
func mcpContent(res *airlock.Result, header string, maxText int, store *runStore, owner any) []mcp.Content {
	id := ""
	if len(res.Files) > 0 || utf8.RuneCount(res.Stdout)+utf8.RuneCount(res.Stderr) > maxText {
		id = store.keep(res, owner) // only what has something to fetch
	}
	shaped := *res
	shaped.Stdout, shaped.Stderr = shapeOutputs(res.Stdout, res.Stderr, maxText, id)
	text := header + FormatText(&shaped)
	if id != "" && len(res.Files) > 0 {
		text += fmt.Sprintf("(each file is the resource %s)\n", runURI(id, "files/PATH"))
	}
	content := []mcp.Content{&mcp.TextContent{Text: text}}
	images := 0
	// Displays first (a chart the code showed), then image files.
	for _, d := range res.Displays {
		for _, it := range d.Items {
			if images < maxImages && len(it.Data) <= maxImageBytes && displayImage(it) {
				content = append(content, &mcp.ImageContent{Data: it.Data, MIMEType: it.MIME})
				images++
				break // one image form per display
			}
		}
	}
	for _, f := range res.Files {
		if images == maxImages {
			break
		}
		if mime := imageMIME(f.Path, f.Data); mime != "" && len(f.Data) <= maxImageBytes {
			content = append(content, &mcp.ImageContent{Data: f.Data, MIMEType: mime})
			images++
		}
	}
	if id != "" {
		for i, f := range res.Files {
			if i == maxFileLinks {
				break
			}
			size := f.Size
			content = append(content, &mcp.ResourceLink{URI: fileURI(id, f.Path), Name: path.Base(f.Path),
				Title: f.Path, MIMEType: fileMIME(f.Path, f.Data), Size: &size})
		}
	}
	return content
}
