package planner

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errOutboxClosed is add's error once the outbox stopped: the replica is closing or was
// abandoned, and its turns are over.
var errOutboxClosed = errors.New("planner: output batching stopped")

// What a queued output leaves in the store.
const (
	keepNone   = iota // sent only: the turn is past its bounds
	keepOutput        // stored for resuming
	keepCut           // the turn's cut, in its place
)

// queued is an output numbered and waiting for its batch.
type queued struct {
	o     Output
	keep  int
	owner string // the turn's lease owner, whose lease records the offset given out
	size  int    // bytes it counts for, as kept output and in the window
}

// outbox gathers the outputs of this replica's turns over a window, then stores them in one
// write and sends them in as few notifications as they fit in (Service.write). It keeps each
// turn's order: a turn numbers its outputs and adds them under its pubMu, and batches are
// written one after the other by one goroutine, run. With a window of zero or less there is
// neither goroutine nor queue: add writes each output alone, before it returns.
type outbox struct {
	svc      *Service
	window   time.Duration
	maxCount int
	maxBytes int

	mu      sync.Mutex
	pending []queued
	bytes   int
	first   time.Time     // when the oldest pending output was added
	room    chan struct{} // closed when the pending outputs are taken: adders waiting retry
	flushed chan struct{} // closed once the pending outputs are stored and sent
	stopped bool          // no more adds: closing (what is pending is written) or killed

	wake chan struct{} // 1 slot: the first output of a window, or a full window
	stop chan struct{} // closed by close or kill
	done chan struct{} // closed when run returns
	once sync.Once
}

func newOutbox(svc *Service, window time.Duration, maxCount, maxBytes int) *outbox {
	o := &outbox{svc: svc, window: window, maxCount: maxCount, maxBytes: maxBytes,
		room: make(chan struct{}), flushed: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if window > 0 {
		go o.run()
	} else {
		close(o.done)
	}
	return o
}

// closedChan is what add returns when the output is written already.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// add queues the output number makes, once the window has room for size more bytes (an
// empty window takes any output), and returns a channel closed once it is stored and sent.
// number is called under the outbox's lock, only when the output is queued. While the
// window is full add waits, until ctx ends (its error is returned, nothing numbered).
func (o *outbox) add(ctx context.Context, size int, number func() queued) (<-chan struct{}, error) {
	if o.window <= 0 {
		o.mu.Lock()
		stopped := o.stopped
		o.mu.Unlock()
		if stopped {
			return nil, errOutboxClosed
		}
		o.svc.write([]queued{number()})
		return closedChan, nil
	}
	waited := false
	for {
		o.mu.Lock()
		if o.stopped {
			o.mu.Unlock()
			return nil, errOutboxClosed
		}
		if len(o.pending) == 0 || (len(o.pending) < o.maxCount && o.bytes+size <= o.maxBytes) {
			o.pending = append(o.pending, number())
			o.bytes += size
			if len(o.pending) == 1 {
				o.first = time.Now()
			}
			if len(o.pending) == 1 || o.fullLocked() {
				select {
				case o.wake <- struct{}{}:
				default:
				}
			}
			ch := o.flushed
			o.mu.Unlock()
			return ch, nil
		}
		room := o.room
		o.mu.Unlock()
		if !waited {
			waited = true
			o.svc.obs.OutputsWaited()
		}
		select {
		case <-room:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fullLocked reports whether the window holds as much as it may.
func (o *outbox) fullLocked() bool {
	return len(o.pending) >= o.maxCount || o.bytes >= o.maxBytes
}

// run writes a batch when its window has passed since its first output, or at once when it
// is full, until close (which writes what is pending) or kill (which drops it).
func (o *outbox) run() {
	defer close(o.done)
	for {
		select {
		case <-o.stop:
			o.flush()
			return
		case <-o.wake:
		}
		for {
			o.mu.Lock()
			n, full, wait := len(o.pending), o.fullLocked(), time.Until(o.first.Add(o.window))
			o.mu.Unlock()
			if n == 0 {
				break
			}
			if !full && wait > 0 {
				timer := time.NewTimer(wait)
				select {
				case <-timer.C:
				case <-o.wake:
					timer.Stop()
					continue
				case <-o.stop:
					timer.Stop()
					o.flush()
					return
				}
			}
			o.flush()
		}
	}
}

// flush takes the pending outputs, stores and sends them, and tells whoever waits for them.
func (o *outbox) flush() {
	o.mu.Lock()
	batch, flushed := o.pending, o.flushed
	o.pending, o.bytes, o.flushed = nil, 0, make(chan struct{})
	close(o.room)
	o.room = make(chan struct{})
	o.mu.Unlock()
	if len(batch) > 0 {
		o.svc.write(batch)
	}
	close(flushed)
}

// close stops adds, writes what is pending and waits for run. kill stops adds and drops what
// is pending, as if the process died. Either may be called twice, and both.
func (o *outbox) close() { o.end(false) }
func (o *outbox) kill()  { o.end(true) }

func (o *outbox) end(drop bool) {
	o.mu.Lock()
	o.stopped = true
	if drop {
		o.pending, o.bytes = nil, 0
	}
	o.mu.Unlock()
	o.once.Do(func() { close(o.stop) })
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) == 0 && o.flushed != closedChan {
		close(o.flushed) // nothing will come: waiters go
		o.flushed = closedChan
		close(o.room)
		o.room = closedChan
	}
}

// write stores a batch of outputs in one write, recording on the lease of each turn past its
// bounds the highest offset it gives out, then sends them to every replica's watchers in as
// few notifications as they fit in; a batch not stored is not sent. Stored before sent, so a watcher that reads the store after watching
// misses nothing in between, and a replica that ends a dead turn numbers its error and
// done after every output sent.
func (s *Service) write(batch []queued) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	start := time.Now()
	var b OutputBatch
	notes := make([]Note, len(batch))
	last := map[string]*queued{} // by owner: the turn's last output in the batch
	var owners []string
	bytes := 0
	for i := range batch {
		q := &batch[i]
		switch q.keep {
		case keepOutput:
			b.Outputs = append(b.Outputs, q.o)
		case keepCut:
			b.Cuts = append(b.Cuts, Output{Session: q.o.Session, Turn: q.o.Turn, Offset: q.o.Offset})
		}
		if q.owner != "" {
			if last[q.owner] == nil {
				owners = append(owners, q.owner)
			}
			last[q.owner] = q
		}
		notes[i] = Note{Session: q.o.Session, Output: &q.o}
		bytes += q.size
	}
	// A turn's last output stored is its highest stored offset, which the store knows: only
	// the turns whose last output goes out unstored (past their bounds) touch their lease.
	for _, owner := range owners {
		if q := last[owner]; q.keep == keepNone {
			b.Given = append(b.Given, Lease{Session: q.o.Session, Owner: owner, Given: q.o.Offset})
		}
	}
	if err := s.storeOutputs(ctx, b); err != nil {
		// Sent now, the window would be a hole that a watcher resuming later finds, where
		// the live watchers saw none. Unsent, every watcher misses the same outputs: the
		// next output of a turn still running shows them the hole (their watch ends
		// lagging), and a resumed watch is not told the turn is complete. The window's turns
		// running here stop as if they had lost their lease: it expires, and the replica
		// that ends them numbers their error and done after what is stored.
		s.logger.Error("planner: store outputs: the window is not sent, and its turns stop", "outputs", len(batch), "err", err)
		s.stopTurns(batch)
		return
	}
	if err := s.bus.Publish(ctx, notes...); err != nil {
		s.logger.Warn("planner: publish outputs", "outputs", len(batch), "err", err)
	}
	s.obs.OutputsWritten(len(batch), bytes, time.Since(start))
}

// Tries of a window's store write, and the pause before the second; each pause after it
// doubles. The write is idempotent (an offset stored keeps what it holds).
const (
	storeTries = 3
	storeRetry = 100 * time.Millisecond
)

// storeOutputs stores b, trying again after a failure, until storeTries or ctx end.
func (s *Service) storeOutputs(ctx context.Context, b OutputBatch) error {
	pause := storeRetry
	for try := 1; ; try++ {
		err := s.store.AppendOutputs(ctx, b)
		if err == nil || try == storeTries {
			return err
		}
		s.logger.Warn("planner: store outputs", "outputs", len(b.Outputs)+len(b.Cuts), "try", try, "err", err)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return err
		}
		pause *= 2
	}
}

// stopTurns stops, as if they had lost their lease, the turns running here of batch.
func (s *Service) stopTurns(batch []queued) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range batch {
		if t := s.turns[q.o.Session]; t != nil && q.owner != "" && t.owner == q.owner {
			t.cancel(errNotStored)
		}
	}
}
