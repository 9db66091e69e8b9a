package airlock

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// Rich output, as a notebook shows it (Request.RichOutput): the value of
// the code's last expression and what it passes to airlock.display(), in
// every form each object has. The guest writes them to displayDevice as
// frames: 8 hex digits of length, then a JSON line
// {"kind": "value"|"display", "items": [[mime, size], ...]} and the items'
// bytes in that order (python/airlock.py).

const displayDevice = "/dev/airlock-display"

// Display is one rich output of a run.
type Display struct {
	// Value is true for the value of the code's last expression, false
	// for an airlock.display() call.
	Value bool
	// Items are the object's forms, richest first (image/png,
	// image/svg+xml, text/html, application/json, ...); text/plain, its
	// repr, is always there and last.
	Items []DisplayItem
}

// DisplayItem is one form of a Display.
type DisplayItem struct {
	MIME string
	Data []byte
}

// Text is the display's text/plain form.
func (d Display) Text() string {
	for _, it := range d.Items {
		if it.MIME == "text/plain" {
			return string(it.Data)
		}
	}
	return ""
}

const (
	maxDisplays     = 64 // per run
	maxDisplayItems = 16 // forms of one object
)

// displaySink collects a run's displays within budget bytes (the run's
// output limit) and maxDisplays. A frame past either is refused with
// EFBIG and sets truncated; a malformed one gets EINVAL. Either way the
// sink then refuses every later write with that error (the guest's
// display() raises), so nothing the guest writes grows the host past the
// budget or is misread as a frame.
type displaySink struct {
	budget    int64
	displays  []Display
	truncated bool

	hdr    []byte // the length digits read so far
	need   int    // bytes of the current frame still to come; -1 between frames
	body   []byte
	closed errno.Errno // non-zero once a frame was refused
}

func newDisplaySink(budget int64) *displaySink { return &displaySink{budget: budget, need: -1} }

func (d *displaySink) Read(context.Context, []byte) (int, error) { return 0, nil }

func (d *displaySink) Write(_ context.Context, p []byte) (int, error) {
	if d.closed != 0 {
		return 0, d.closed
	}
	refuse := func(n int, e errno.Errno) (int, error) {
		d.closed, d.body, d.hdr = e, nil, nil
		return n, e
	}
	n := 0
	for n < len(p) {
		if d.need < 0 {
			k := min(8-len(d.hdr), len(p)-n)
			d.hdr = append(d.hdr, p[n:n+k]...)
			n += k
			if len(d.hdr) < 8 {
				continue
			}
			size, err := strconv.ParseUint(string(d.hdr), 16, 32)
			d.hdr = d.hdr[:0]
			switch {
			case err != nil:
				return refuse(n, errno.EINVAL)
			case int64(size) > d.budget || len(d.displays) == maxDisplays:
				d.truncated = true
				return refuse(n, errno.EFBIG)
			}
			d.need, d.body = int(size), make([]byte, 0, size)
		}
		k := min(d.need, len(p)-n)
		d.body = append(d.body, p[n:n+k]...)
		d.need -= k
		n += k
		if d.need == 0 {
			d.need = -1
			disp, ok := parseDisplay(d.body)
			d.budget -= int64(len(d.body))
			d.body = nil
			if !ok {
				return refuse(n, errno.EINVAL)
			}
			d.displays = append(d.displays, disp)
		}
	}
	return n, nil
}

// parseDisplay reads one frame's body; ok is false for a malformed one.
func parseDisplay(body []byte) (Display, bool) {
	line, data, found := bytes.Cut(body, []byte("\n"))
	if !found {
		return Display{}, false
	}
	var head struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if json.Unmarshal(line, &head) != nil || (head.Kind != "value" && head.Kind != "display") ||
		len(head.Items) == 0 || len(head.Items) > maxDisplayItems {
		return Display{}, false
	}
	d := Display{Value: head.Kind == "value"}
	for _, raw := range head.Items {
		var pair []json.RawMessage
		var mime string
		var size int
		if json.Unmarshal(raw, &pair) != nil || len(pair) != 2 || json.Unmarshal(pair[0], &mime) != nil ||
			json.Unmarshal(pair[1], &size) != nil || !validMIME(mime) || size < 0 || size > len(data) {
			return Display{}, false
		}
		d.Items = append(d.Items, DisplayItem{MIME: mime, Data: data[:size:size]})
		data = data[size:]
	}
	if len(data) != 0 || d.Items[len(d.Items)-1].MIME != "text/plain" {
		return Display{}, false
	}
	return d, true
}

// validMIME accepts type/subtype of token characters, as a client would
// use it as a key or a header.
func validMIME(m string) bool {
	typ, sub, ok := strings.Cut(m, "/")
	if !ok || len(m) > 100 || typ == "" || sub == "" {
		return false
	}
	for _, c := range typ + sub {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.ContainsRune("+-.", c)) {
			return false
		}
	}
	return true
}

// results puts the sink's displays into res: the value's text as Value,
// the value itself among Displays only when it has a form beyond text.
func (d *displaySink) results(res *Result) {
	res.DisplaysTruncated = d.truncated
	for _, disp := range d.displays {
		if disp.Value {
			res.Value = disp.Text()
			if len(disp.Items) == 1 {
				continue
			}
		}
		res.Displays = append(res.Displays, disp)
	}
}
