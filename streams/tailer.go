package streams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// TailerOptions configure a Tailer. The zero value (or nil) means defaults.
type TailerOptions struct {
	// Batch is the most events read, and handed to the sink, at once. Default 1000.
	Batch int
	// BatchBytes bounds, roughly, the bytes of one batch (eventBytes): after a batch larger
	// than this the next reads fewer events, and the count grows back to Batch as batches
	// shrink; reads start at a sixteenth of Batch. Default 8 MiB.
	BatchBytes int
	// Coalesce, when positive, is how long the tailer waits after a wake-up before it reads,
	// so that the events committed meanwhile go out in one dispatch (one write to each
	// subscriber, not one an event), at that much more latency (BALLET_STREAM_COALESCE).
	// Zero (the default): it reads at once, and events committed while a dispatch runs still
	// go out together in the next.
	Coalesce time.Duration
	// Logger receives read errors. Default slog.Default().
	Logger *slog.Logger
	// OnError, if set, is called with every read error (for metrics) before the retry.
	OnError func(error)
}

// Tailer reads the log from a start position and hands every event, exactly once and in seq
// order, to its sink.
type Tailer struct {
	log      Log
	sink     func([]Event)
	batch    int
	bytes    int // BatchBytes
	coalesce time.Duration
	logger   *slog.Logger
	onError  func(error)

	pos atomic.Int64

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}
}

const (
	tailBackoffMin = 100 * time.Millisecond
	tailBackoffMax = 5 * time.Second
)

// NewTailer returns a tailer of log feeding sink. sink is called from one goroutine only, with
// batches of at most Batch events in seq order; it owns each slice it is given, and should
// return quickly: the tailer reads nothing while it runs.
func NewTailer(log Log, sink func([]Event), opts *TailerOptions) *Tailer {
	var o TailerOptions
	if opts != nil {
		o = *opts
	}
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 8 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Tailer{log: log, sink: sink, batch: o.Batch, bytes: o.BatchBytes, coalesce: o.Coalesce, logger: o.Logger, onError: o.OnError}
}

// Start reads the log's head and starts tailing after it; it returns once the goroutine runs.
// The tailer runs until Close or until ctx ends.
func (t *Tailer) Start(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return fmt.Errorf("tailer start: %w", ErrClosed)
	case t.started:
		return errors.New("tailer start: already started")
	}
	head, err := t.log.Head(ctx)
	if err != nil {
		return fmt.Errorf("tailer start: %w", err)
	}
	t.pos.Store(head)
	t.started = true
	ctx, t.cancel = context.WithCancel(ctx)
	t.done = make(chan struct{})
	go t.run(ctx)
	return nil
}

// Position is the seq of the last event handed to the sink (the start head before any).
func (t *Tailer) Position() int64 { return t.pos.Load() }

// Close stops the tailer and waits for its goroutine (and a sink call in progress). Safe to
// call twice, and before Start.
func (t *Tailer) Close() error {
	t.mu.Lock()
	t.closed = true
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// nextLimit sizes the next read from the last one, evs of limit asked: fewer events after a
// batch larger than BatchBytes, twice as many (up to Batch) after a full one that was not.
func (t *Tailer) nextLimit(limit int, evs []Event) int {
	b := 0
	for i := range evs {
		b += eventBytes(&evs[i])
	}
	switch {
	case b > t.bytes:
		return max(1, int(int64(len(evs))*int64(t.bytes)/int64(b)))
	case len(evs) == limit:
		return min(t.batch, 2*limit)
	}
	return limit
}

func (t *Tailer) run(ctx context.Context) {
	defer close(t.done)
	pos := t.pos.Load()
	backoff := tailBackoffMin
	limit := max(t.batch/16, 1)
	for ctx.Err() == nil {
		evs, err := t.log.ReadAfter(ctx, pos, limit)
		if err == nil {
			backoff = tailBackoffMin
			full := len(evs) == limit
			limit = t.nextLimit(limit, evs)
			if len(evs) > 0 {
				if err = checkOrder(pos, evs); err == nil {
					t.sink(evs)
					pos = evs[len(evs)-1].Seq
					t.pos.Store(pos)
				}
			}
			if err == nil && !full {
				err = t.log.Wait(ctx, pos)
				if errors.Is(err, ErrClosed) {
					t.logger.Warn("streams: tailer stopped: log closed", "position", pos)
					return
				}
				if err == nil && t.coalesce > 0 {
					sleep(ctx, t.coalesce)
				}
			}
		}
		if err == nil || ctx.Err() != nil {
			continue
		}
		if t.onError != nil {
			t.onError(err)
		}
		d := jitter(backoff)
		t.logger.Warn("streams: tailer read failed; retrying", "err", err, "position", pos, "retry_in", d)
		backoff = min(2*backoff, tailBackoffMax)
		sleep(ctx, d)
	}
}

// sleep returns after d, or once ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// jitter returns d ± 20%.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}

// checkOrder verifies that evs continue after pos in strictly increasing seq: a log breaking
// that contract must not make the tailer repeat or reorder events.
func checkOrder(pos int64, evs []Event) error {
	for i := range evs {
		if evs[i].Seq <= pos {
			return fmt.Errorf("read returned seq %d after %d: out of order", evs[i].Seq, pos)
		}
		pos = evs[i].Seq
	}
	return nil
}
