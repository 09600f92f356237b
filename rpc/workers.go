package rpc

import "time"

// workers runs the connections' short-lived loops: a writer runs only while
// frames are queued and a parked reader resumes for one message, and a new
// goroutine for each of those would grow a fresh stack every time (at one
// write per event per subscriber, stack growth alone was a tenth of the
// fan-out's CPU). An idle worker waits for the next loop and ends after
// workerLinger without one, so none outlives its use by more than that.
var workers = workerPool{work: make(chan func())}

const workerLinger = time.Second

type workerPool struct {
	work chan func() // unbuffered: taken only by an idle worker
}

// run runs f on an idle worker, or on a new one when none is idle: a loop
// that blocks (a slow client's write) never delays another.
func (p *workerPool) run(f func()) {
	select {
	case p.work <- f:
	default:
		go p.worker(f)
	}
}

func (p *workerPool) worker(f func()) {
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
		}
	}
}
