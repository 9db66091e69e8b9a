package egress

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// errTimeout is a guest's socket timeout passing.
var errTimeout = errors.New("network: timed out")

// pipe carries bytes one way between the guest's calls and a connection's
// goroutine, holding at most limit bytes: a writer waits for room, a
// reader for data, each also for its context.
type pipe struct {
	mu      sync.Mutex
	buf     []byte
	limit   int
	closed  bool  // the writer is done: readers drain buf, then get err
	err     error // nil: io.EOF
	discard bool  // the reader is gone: writes are dropped
	waiting bool  // a reader waits on an empty buffer
	wake    chan struct{}
}

func newPipe(limit int) *pipe { return &pipe{limit: limit, wake: make(chan struct{})} }

func (p *pipe) signal() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// write appends all of b, waiting for room. timeout 0 waits without one.
func (p *pipe) write(ctx context.Context, b []byte, timeout time.Duration) (int, error) {
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	n := 0
	for {
		p.mu.Lock()
		switch {
		case p.discard:
			p.mu.Unlock()
			return len(b), nil
		case p.closed:
			err := p.err
			p.mu.Unlock()
			if err == nil {
				err = io.ErrClosedPipe
			}
			return n, err
		}
		k := min(p.limit-len(p.buf), len(b)-n)
		if k > 0 {
			p.buf = append(p.buf, b[n:n+k]...)
			n += k
			p.signal()
		}
		if n == len(b) {
			p.mu.Unlock()
			return n, nil
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return n, context.Cause(ctx)
		case <-expire:
			return n, errTimeout
		}
	}
}

// read moves up to len(b) bytes, waiting for some; (0, nil) never
// happens: the end is io.EOF or the writer's error.
func (p *pipe) read(ctx context.Context, b []byte, timeout time.Duration) (int, error) {
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	for {
		p.mu.Lock()
		if len(p.buf) > 0 {
			k := copy(b, p.buf)
			p.buf = p.buf[k:]
			if len(p.buf) == 0 {
				p.buf = nil // let a drained buffer go
			}
			p.signal()
			p.mu.Unlock()
			return k, nil
		}
		if p.closed {
			err := p.err
			p.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return 0, err
		}
		if len(b) == 0 {
			p.mu.Unlock()
			return 0, nil
		}
		p.waiting = true
		p.signal()
		wake := p.wake
		p.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = context.Cause(ctx)
		case <-expire:
			err = errTimeout
		}
		p.mu.Lock()
		p.waiting = false
		p.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
}

// idle tells whether the reader waits for more than the buffer holds,
// and returns the channel that signals the next change.
func (p *pipe) idle() (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.buf) == 0 && p.waiting || p.discard, p.wake
}

// close ends the writing side; err (nil: end of file) reaches the reader
// after the data.
func (p *pipe) close(err error) {
	p.mu.Lock()
	if !p.closed {
		p.closed, p.err = true, err
		p.signal()
	}
	p.mu.Unlock()
}

// drop ends the reading side: what is written from now on is dropped.
func (p *pipe) drop() {
	p.mu.Lock()
	p.discard, p.buf = true, nil
	p.signal()
	p.mu.Unlock()
}

// reader reads a pipe under ctx, for net/http.
type reader struct {
	ctx context.Context
	p   *pipe
}

func (r reader) Read(b []byte) (int, error) { return r.p.read(r.ctx, b, 0) }

// writer writes a pipe under ctx, for net/http.
type writer struct {
	ctx context.Context
	p   *pipe
}

func (w writer) Write(b []byte) (int, error) { return w.p.write(w.ctx, b, 0) }
