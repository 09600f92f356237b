package rpc

import (
	"fmt"
	"strings"
	"testing"
)

// The writer role walks its moves through setWriterLocked; every other move, and going idle
// with frames still queued, panics naming both states.
func TestWriterStates(t *testing.T) {
	paths := [][]writerState{
		{writerDirect, writerIdle},
		{writerDirect, writerQueued, writerIdle},
		{writerQueued, writerIdle},
	}
	legal := map[[2]writerState]bool{}
	for _, path := range paths {
		var c Conn
		from := writerIdle
		for _, to := range path {
			c.setWriterLocked(to)
			if c.writer != to {
				t.Fatalf("setWriterLocked(%v) from %v: state %v", to, from, c.writer)
			}
			legal[[2]writerState{from, to}] = true
			from = to
		}
	}
	panics := func(c *Conn, to writerState, want string) {
		t.Helper()
		from := c.writer
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), want) {
				t.Errorf("writer %v → %v: recovered %v, want a panic naming %q", from, to, r, want)
			}
			if c.writer != from {
				t.Errorf("refused move %v → %v changed the state to %v", from, to, c.writer)
			}
		}()
		c.setWriterLocked(to)
	}
	for from := writerIdle; from <= writerQueued; from++ {
		for to := writerIdle; to <= writerQueued; to++ {
			if !legal[[2]writerState{from, to}] {
				panics(&Conn{writer: from}, to, fmt.Sprintf("from %v to %v", from, to))
			}
		}
	}
	for _, from := range []writerState{writerDirect, writerQueued} {
		panics(&Conn{writer: from, queue: make([]outFrame, 1)}, writerIdle, "1 frames queued")
	}
}
