package engine

import (
	"testing"
	"time"
)

func TestPendingCloses(t *testing.T) {
	var p pendingCloses
	p.wait() // nothing pending: returns at once
	if !p.add() || !p.add() {
		t.Fatal("add refused before stop")
	}
	waited := make(chan struct{})
	go func() { p.wait(); close(waited) }()
	p.done()
	select {
	case <-waited:
		t.Fatal("wait returned with a close pending")
	case <-time.After(20 * time.Millisecond):
	}
	p.done()
	<-waited
	if p.awaitOne() {
		t.Fatal("awaitOne waited with nothing pending")
	}
	p.add()
	p.add()
	finished := make(chan struct{})
	go func() { // two closes finish, one after the other
		for range 2 {
			time.Sleep(10 * time.Millisecond)
			p.done()
		}
		close(finished)
	}()
	if !p.awaitOne() { // returns at the first done after it began
		t.Fatal("awaitOne said nothing was pending")
	}
	<-finished
	if !p.add() {
		t.Fatal("add refused after a wait")
	}
	stopped := make(chan struct{})
	go func() { p.stop(); close(stopped) }()
	for {
		p.mu.Lock()
		s := p.stopped
		p.mu.Unlock()
		if s {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if p.add() {
		t.Fatal("add accepted after stop")
	}
	select {
	case <-stopped:
		t.Fatal("stop returned with a close pending")
	default:
	}
	p.done()
	<-stopped
}
