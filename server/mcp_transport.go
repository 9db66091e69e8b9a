package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of LineTransport.
const (
	// DefaultMaxMessage is as large as POST /v1/run's default body: a run's
	// code and files travel in one message.
	DefaultMaxMessage = 32 << 20
	// DefaultMaxPending bounds the calls read and not yet answered, so
	// that calls waiting for a turn (each holding its message) cannot pile
	// up without bound.
	DefaultMaxPending = 16
)

// codeBusy answers a call past LineTransport.MaxPending (the range
// JSON-RPC leaves to servers).
const codeBusy = -32000

// idScanBytes is how much of an oversize line is kept to find its id.
const idScanBytes = 4096

// LineTransport is an mcp.Transport over newline-delimited JSON, as the
// SDK's IOTransport, for a peer that may send anything (`airlock mcp`'s
// stdin). The SDK's transport ends the connection at the first line that
// does not decode, so one bad line would leave the calls in flight and
// every later one unanswered. This one:
//
//   - answers a line that does not decode with a JSON-RPC error (parse
//     error, or invalid request for JSON that is no JSON-RPC message) when
//     it carries an id, and otherwise logs and drops it (a response with a
//     null id would end the SDK's own client), then reads on;
//   - refuses a line over MaxMessage the same way, discarding it as it
//     arrives: only its first 4 KiB are kept, to find its id;
//   - answers a call past MaxPending unanswered ones with an error at once;
//   - at the end of input, answers the calls in flight before it reports
//     the end (after which the SDK writes nothing more).
//
// Batches (JSON arrays), which MCP dropped in 2025-06-18, are refused as
// invalid messages.
type LineTransport struct {
	Reader io.Reader
	Writer io.Writer
	// MaxMessage caps one inbound line in bytes (default DefaultMaxMessage).
	MaxMessage int
	// MaxPending caps the calls read and not yet answered (default
	// DefaultMaxPending).
	MaxPending int
	// Logger receives a record for each line refused (default
	// slog.Default()).
	Logger *slog.Logger
}

// Connect implements mcp.Transport. A LineTransport connects once.
func (t *LineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{
		w: t.Writer, max: t.MaxMessage, maxPending: t.MaxPending, log: t.Logger,
		in: make(chan jsonrpc.Message), closed: make(chan struct{}), pending: map[jsonrpc.ID]bool{},
	}
	if c.max <= 0 {
		c.max = DefaultMaxMessage
	}
	if c.maxPending <= 0 {
		c.maxPending = DefaultMaxPending
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if rc, ok := t.Reader.(io.Closer); ok {
		c.rc = rc
	}
	go c.readLoop(t.Reader)
	return c, nil
}

type lineConn struct {
	w          io.Writer
	rc         io.Closer // the reader, closed by Close when it can be
	max        int
	maxPending int
	log        *slog.Logger

	in      chan jsonrpc.Message // closed at the end of input, after readErr is set
	readErr error
	closed  chan struct{}
	once    sync.Once

	writeMu sync.Mutex

	mu      sync.Mutex
	pending map[jsonrpc.ID]bool // calls passed on and not yet answered
	drained chan struct{}       // closed when pending empties, if someone waits
}

func (c *lineConn) SessionID() string { return "" }

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg, ok := <-c.in:
		if ok {
			return msg, nil
		}
		// The SDK stops writing once Read fails: answer first.
		c.waitDrained(ctx)
		return nil, c.readErr
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *lineConn) waitDrained(ctx context.Context) {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	if c.drained == nil {
		c.drained = make(chan struct{})
	}
	drained := c.drained
	c.mu.Unlock()
	select {
	case <-drained:
	case <-c.closed:
	case <-ctx.Done():
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcp transport: encode: %w", err)
	}
	if err := c.writeLine(data); err != nil {
		return err
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.answered(resp.ID)
	}
	return nil
}

func (c *lineConn) writeLine(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	if _, err := c.w.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("mcp transport: write: %w", err)
	}
	return nil
}

func (c *lineConn) answered(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, id)
	if len(c.pending) == 0 && c.drained != nil {
		close(c.drained)
		c.drained = nil
	}
}

func (c *lineConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		if c.rc != nil {
			c.rc.Close()
		}
	})
	return nil
}

// readLoop reads lines and hands on the messages, until the input ends or
// the connection closes.
func (c *lineConn) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, size, err := readLine(br, c.max)
		if size > 0 && !c.handle(line, size) {
			return
		}
		if err != nil {
			c.readErr = io.EOF
			if !errors.Is(err, io.EOF) {
				c.readErr = fmt.Errorf("mcp transport: read: %w", err)
			}
			close(c.in)
			return
		}
	}
}

// readLine reads one line of up to max bytes, without its newline. A
// longer line is read to its end but not kept: line is then its first
// idScanBytes and size says how long it was.
func readLine(br *bufio.Reader, max int) (line []byte, size int, err error) {
	for {
		chunk, e := br.ReadSlice('\n')
		fits := size <= max+1
		size += len(chunk)
		switch {
		case size <= max+1: // +1: the newline
			line = append(line, chunk...)
		case fits:
			// Over the cap from here on: keep only the head, in an array
			// of its own, so the rest of what was read can be freed.
			line = append(line, chunk...)
			line = bytes.Clone(line[:min(len(line), idScanBytes)])
		case len(line) < idScanBytes:
			line = append(line, chunk[:min(len(chunk), idScanBytes-len(line))]...)
		}
		if e != bufio.ErrBufferFull {
			if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
				size--
				if size <= max {
					line = line[:len(line)-1]
				}
			}
			return line, size, e
		}
	}
}

// handle passes on one line's message or answers it; false when the
// connection has closed.
func (c *lineConn) handle(line []byte, size int) bool {
	if size > c.max {
		c.refuse(line, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message of %d bytes exceeds the maximum of %d", size, c.max), size)
		return true
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return true
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		code := jsonrpc.CodeInvalidRequest
		if !json.Valid(line) {
			code = jsonrpc.CodeParseError
		}
		c.refuse(line, int64(code), "not a JSON-RPC message: "+err.Error(), size)
		return true
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.mu.Lock()
		dup := c.pending[req.ID]
		busy := !dup && len(c.pending) >= c.maxPending
		if !dup && !busy {
			c.pending[req.ID] = true
		}
		c.mu.Unlock()
		if dup {
			// Any answer would read as the first call's; the SDK's own
			// would carry a null id, which ends the SDK's client.
			c.log.Warn("mcp: call dropped: its id is already pending", slog.Any("id", req.ID.Raw()))
			return true
		}
		if busy {
			c.log.Warn("mcp: call refused: too many pending", slog.Any("id", req.ID.Raw()), slog.Int("pending", c.maxPending))
			c.answer(req.ID, codeBusy, fmt.Sprintf("server busy: %d calls are pending; retry when one is answered", c.maxPending))
			return true
		}
	}
	select {
	case c.in <- msg:
		return true
	case <-c.closed:
		return false
	}
}

// refuse answers a bad line with an error if its id can be found, and
// logs it either way.
func (c *lineConn) refuse(line []byte, code int64, why string, size int) {
	id, ok := scanID(line)
	c.log.Warn("mcp: message refused", slog.String("why", why), slog.Int("bytes", size), slog.Bool("answered", ok))
	if ok {
		c.answer(id, code, why)
	}
}

func (c *lineConn) answer(id jsonrpc.ID, code int64, msg string) {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}})
	if err == nil {
		_ = c.writeLine(data)
	}
}

// scanID finds the "id" member of the JSON object that b starts with,
// reading tokens no further than the id (b may be the head of a longer
// line, or not JSON past that point).
func scanID(b []byte) (jsonrpc.ID, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return jsonrpc.ID{}, false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return jsonrpc.ID{}, false
		}
		if key == "id" {
			tok, err := dec.Token()
			if err != nil {
				return jsonrpc.ID{}, false
			}
			var id jsonrpc.ID
			switch v := tok.(type) {
			case string:
				id, err = jsonrpc.MakeID(v)
			case json.Number:
				var n int64
				if n, err = strconv.ParseInt(string(v), 10, 64); err == nil {
					id, err = jsonrpc.MakeID(float64(n))
				}
			default:
				return jsonrpc.ID{}, false
			}
			return id, err == nil && id.IsValid()
		}
		if !skipValue(dec) {
			return jsonrpc.ID{}, false
		}
	}
	return jsonrpc.ID{}, false
}

// skipValue reads past one value, however nested.
func skipValue(dec *json.Decoder) bool {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return true
		}
	}
}
