package rpc

import (
	"sync"
	"time"
)

// Workers run connections' short-lived loops: a writer runs only while
// frames are queued, and a parked reader resumes for one message. A new
// goroutine for each would grow a fresh stack every time (at one write per
// event per subscriber, stack growth alone was a tenth of the fan-out's
// CPU), so a loop runs on an idle worker when there is one, and a worker
// with nothing to do ends after workerLinger.
//
// The pool is bounded by its connections: a busy worker runs one
// connection's writer or reader, and a connection has at most one of each,
// so there are at most twice as many busy workers as open connections,
// plus idle ones for at most workerLinger. The owner of the connections
// (the server) owns the pool and closes it once they have ended.
type Workers struct {
	work chan func()    // unbuffered: taken only by an idle worker
	quit chan struct{}  // closed by Close: idle workers end
	live sync.WaitGroup // a count for each worker, for Close

	mu     sync.Mutex
	n      int  // workers alive
	closed bool // no worker starts after this
}

const workerLinger = time.Second

// NewWorkers returns an empty pool.
func NewWorkers() *Workers {
	return &Workers{work: make(chan func()), quit: make(chan struct{})}
}

// defaultWorkers serve connections made without Options.Workers (clients).
var defaultWorkers = NewWorkers()

// Close makes idle workers end at once and waits for the busy ones to
// finish their loops; loops run after Close get a goroutine of their own,
// which Close does not wait for. Close the connections first: a busy
// worker is a connection's reader or writer. It is safe to call twice.
func (p *Workers) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
	p.mu.Unlock()
	p.live.Wait()
}

// Len returns the number of workers alive, busy or idle.
func (p *Workers) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// run runs f on an idle worker, or on a new one when none is idle: a loop
// that blocks (a slow client's write) never delays another.
func (p *Workers) run(f func()) {
	select {
	case p.work <- f:
		return
	default:
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		go f()
		return
	}
	p.n++
	p.live.Add(1) // under mu: never after Close has begun to wait
	p.mu.Unlock()
	go p.worker(f)
}

func (p *Workers) worker(f func()) {
	defer func() {
		p.mu.Lock()
		p.n--
		p.mu.Unlock()
		p.live.Done()
	}()
	var t *time.Timer
	for {
		f()
		f = nil
		if t == nil {
			t = time.NewTimer(workerLinger)
		} else {
			t.Reset(workerLinger)
		}
		select {
		case f = <-p.work:
		case <-t.C:
			return
		case <-p.quit:
			t.Stop()
			return
		}
	}
}
