package gateway

import (
	"runtime"
	"sync"

	"github.com/ballet/gateway/internal/subqueue"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

// plannerOut gathers the planner.output frames of a connection's watches made at about the
// same time, and hands them to the connection in one TrySendFrames, one write, rather than
// one each: a notification from another replica carries a window of outputs of many
// sessions, which wakes their watches together. It has no goroutine of its own: the watch
// whose frame finds it idle flushes it, after letting the other watches that are ready to
// run add theirs (runtime.Gosched); the others add and return. A watch's frames and the
// notice that closes it keep their order.
type plannerOut struct {
	mu       sync.Mutex
	pending  []outItem
	spare    []outItem // the flusher's: the last batch's slice, for reuse
	flushing bool
}

// outItem is a frame of a watch, or (body nil) the notice that closes it.
type outItem struct {
	w      *watchSink
	body   []byte // planner.output params
	reason string // the closing notice's
}

// watchSink is what plannerOut needs of one watch.
type watchSink struct {
	sub    string
	queue  *subqueue.Queue
	closed func(reason string) // forgets the watch and tells the client why
	// dead is set under plannerOut.mu once the watch's notice is sent: its frames still
	// pending are dropped, and no more are taken.
	dead bool
}

// outputs is the session's plannerOut, made by the first caller: most sessions watch no
// planner session, and hold only the pointer.
func (s *session) outputs() *plannerOut {
	if p := s.pout.Load(); p != nil {
		return p
	}
	s.pout.CompareAndSwap(nil, new(plannerOut))
	return s.pout.Load()
}

// sendOutput queues a planner.output frame of w, whose room in w.queue is reserved, or
// the notice that closes w (body nil). It reports false when w was closed already.
func (s *session) sendOutput(w *watchSink, body []byte, reason string) bool {
	p := s.outputs()
	p.mu.Lock()
	if w.dead {
		p.mu.Unlock()
		if body != nil {
			w.queue.Unreserve(1)
		}
		return false
	}
	p.pending = append(p.pending, outItem{w: w, body: body, reason: reason})
	if p.flushing {
		p.mu.Unlock()
		return true
	}
	p.flushing = true
	p.mu.Unlock()
	runtime.Gosched()
	s.flushOutputs()
	return true
}

// flushOutputs sends what is pending until nothing is.
func (s *session) flushOutputs() {
	p := s.outputs()
	for {
		p.mu.Lock()
		batch := p.pending
		if len(batch) == 0 {
			p.flushing = false
			p.mu.Unlock()
			return
		}
		p.pending = p.spare[:0]
		p.mu.Unlock()
		s.sendBatch(batch)
		clear(batch)
		p.spare = nil // never the slice pending holds now
		if cap(batch) <= 1024 {
			p.spare = batch[:0]
		}
	}
}

// sendBatch sends the frames of batch, each run of them up to a closing notice in one
// TrySendFrames, then the notice. When the connection refuses a run at once, its frames go
// one by one, and a watch whose frame it refuses is closed lagging.
func (s *session) sendBatch(batch []outItem) {
	fs := frameSlices.Get().(*[]rpc.Frame)
	var run []*watchSink // the watch of each frame in fs
	send := func() {
		s.sendRun(*fs, run)
		clear(*fs)
		*fs = (*fs)[:0]
		run = run[:0]
	}
	for _, it := range batch {
		switch {
		case it.body == nil:
			send()
			if s.killOutput(it.w) {
				it.w.closed(it.reason)
			}
		case s.outputDead(it.w) || it.w.queue.Closed():
			it.w.queue.Unreserve(1) // unsubscribed, or closed: no frame after that
		default:
			*fs = append(*fs, rpc.Frame{Method: protocol.PlannerOutput, Sub: it.w.sub, Params: it.body, Done: it.w.queue.Written()})
			run = append(run, it.w)
		}
	}
	send()
	if cap(*fs) <= 1024 {
		frameSlices.Put(fs)
	}
}

// sendRun hands frames to the connection, at once or else one by one.
func (s *session) sendRun(fs []rpc.Frame, ws []*watchSink) {
	if len(fs) == 0 {
		return
	}
	if s.conn.TrySendFrames(fs, len(fs), nil) {
		s.srv.metrics.MessagesOut.WithLabelValues(protocol.PlannerOutput).Add(float64(len(fs)))
		return
	}
	for i := range fs {
		if s.outputDead(ws[i]) {
			ws[i].queue.Unreserve(1)
			continue
		}
		if s.conn.TrySendFrames(fs[i:i+1], 1, nil) {
			s.srv.metrics.MessagesOut.WithLabelValues(protocol.PlannerOutput).Inc()
			continue
		}
		ws[i].queue.Unreserve(1)
		if s.killOutput(ws[i]) {
			ws[i].closed(streams.ReasonLagging)
		}
	}
}

// outputDead reports whether w was closed.
func (s *session) outputDead(w *watchSink) bool {
	p := s.outputs()
	p.mu.Lock()
	defer p.mu.Unlock()
	return w.dead
}

// killOutput marks w closed, and reports whether it was open: then its notice is the
// caller's to send.
func (s *session) killOutput(w *watchSink) bool {
	p := s.outputs()
	p.mu.Lock()
	defer p.mu.Unlock()
	was := w.dead
	w.dead = true
	return !was
}

// frameSlices are the frames of a batch of notifications for several subscriptions: a
// planner turn's output to its watchers, presence changes, made once and reused.
var frameSlices = sync.Pool{New: func() any { s := make([]rpc.Frame, 0, 16); return &s }}
