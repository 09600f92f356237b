package rpc

import (
	"sync"
	"testing"
	"time"
)

// A pool reuses idle workers, runs every loop even when all are busy, and
// Close ends the idle ones at once and waits for the busy ones.
func TestWorkersOwnedAndClosed(t *testing.T) {
	p := NewWorkers()
	release := make(chan struct{})
	var ran sync.WaitGroup
	for range 20 {
		ran.Add(1)
		p.run(func() { defer ran.Done(); <-release }) // busy: each needs a worker of its own
	}
	if n := p.Len(); n != 20 {
		t.Fatalf("%d workers for 20 busy loops", n)
	}
	close(release)
	ran.Wait()
	// Idle workers are reused: a short loop does not start another.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ran.Add(1)
		p.run(func() { ran.Done() })
		ran.Wait()
		if p.Len() <= 20 || time.Now().After(deadline) {
			break
		}
	}
	if n := p.Len(); n > 20 {
		t.Fatalf("%d workers after reuse", n)
	}

	block := make(chan struct{})
	done := make(chan struct{})
	p.run(func() { <-block })
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
		t.Fatal("Close returned while a worker was busy")
	case <-time.After(50 * time.Millisecond):
	}
	close(block)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return once the busy worker was done")
	}
	if n := p.Len(); n != 0 {
		t.Fatalf("%d workers after Close", n)
	}
	// After Close a loop still runs, on a goroutine of its own.
	ran.Add(1)
	p.run(func() { ran.Done() })
	ran.Wait()
	p.Close() // twice is fine
}
