// Package frame is the guest-host request framing that Airlock's devices
// speak: the guest writes a frame (its payload's length as 8 hex digits,
// then the payload); the write that completes it runs the handler, whose
// answer, framed the same way, the following reads return. The tools,
// network and install devices all speak it through Conn.
package frame

import (
	"context"
	"fmt"
)

// HeaderLen is a frame's header: the payload's length in 8 hex digits.
const HeaderLen = 8

// Conn is one run's end of a device. Nothing the guest writes makes it
// fail: a bad header or an oversized payload gets Fail's answer, and the
// bytes of an oversized payload are discarded as they arrive.
type Conn struct {
	// Max bounds a request's payload.
	Max int
	// Handle answers a complete payload (valid only during the call);
	// Fail answers a malformed frame with a message, and TooLarge, when
	// set, a payload over Max (else Fail does). Their answers are copied.
	Handle   func(ctx context.Context, payload []byte) []byte
	Fail     func(msg string) []byte
	TooLarge func(msg string) []byte

	hdr  [HeaderLen]byte
	hdrN int
	need int // payload length being read; 0 while in the header
	body []byte
	skip int
	resp []byte
	roff int
}

// Write implements wasi.Device; it never fails.
func (c *Conn) Write(ctx context.Context, p []byte) (int, error) {
	if c.hdrN == 0 && c.need == 0 && c.skip == 0 && len(p) > 0 {
		c.resp, c.roff = nil, 0 // a new request drops an unread answer
	}
	n := 0
	for n < len(p) {
		switch {
		case c.skip > 0:
			k := min(c.skip, len(p)-n)
			c.skip -= k
			n += k
			if c.skip == 0 {
				return n, nil
			}
		case c.need == 0:
			k := copy(c.hdr[c.hdrN:], p[n:])
			c.hdrN += k
			n += k
			if c.hdrN < HeaderLen {
				continue
			}
			c.hdrN = 0
			size, ok := parseHex(c.hdr[:])
			switch {
			case !ok:
				c.answer(c.Fail(fmt.Sprintf("malformed request: a frame starts with its length as 8 hex digits, not %q", c.hdr[:])))
				return len(p), nil
			case size == 0:
				c.answer(c.Fail("malformed request: the payload is empty"))
				return n, nil
			case size > c.Max:
				tooLarge := c.Fail
				if c.TooLarge != nil {
					tooLarge = c.TooLarge
				}
				c.answer(tooLarge(fmt.Sprintf("the request is %d bytes; the limit is %d", size, c.Max)))
				c.skip = size
			default:
				c.need = size
				c.body = c.body[:0]
			}
		default:
			k := min(c.need-len(c.body), len(p)-n)
			c.body = append(c.body, p[n:n+k]...)
			n += k
			if len(c.body) == c.need {
				c.need = 0
				c.answer(c.Handle(ctx, c.body))
				if cap(c.body) > 64<<10 {
					c.body = nil // do not keep a large buffer for the whole run
				}
				return n, nil
			}
		}
	}
	return n, nil
}

func (c *Conn) answer(payload []byte) {
	c.resp = append(fmt.Appendf(nil, "%08x", len(payload)), payload...)
	c.roff = 0
}

// Read implements wasi.Device: the pending answer; end of file (0) when
// there is none.
func (c *Conn) Read(_ context.Context, p []byte) (int, error) {
	if c.roff >= len(c.resp) {
		return 0, nil
	}
	k := copy(p, c.resp[c.roff:])
	c.roff += k
	if c.roff == len(c.resp) {
		c.resp, c.roff = nil, 0
	}
	return k, nil
}

func parseHex(h []byte) (int, bool) {
	v := 0
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
