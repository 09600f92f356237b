package streams

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// lockedLog is a sliceLog that the test appends to while catch-ups read it.
type lockedLog struct {
	mu  sync.Mutex
	evs []Event
}

func (l *lockedLog) append(evs []Event) {
	l.mu.Lock()
	l.evs = append(l.evs, evs...)
	l.mu.Unlock()
}

func (l *lockedLog) Head(context.Context) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.evs) == 0 {
		return 0, nil
	}
	return l.evs[len(l.evs)-1].Seq, nil
}

// countingLog is a lockedLog that is also a Counter.
type countingLog struct{ *lockedLog }

func (l countingLog) CountStream(ctx context.Context, s Stream, after, upto int64, limit int) (int, error) {
	evs, err := l.ReadStream(ctx, s, after, upto, limit)
	return len(evs), err
}

func (l *lockedLog) ReadAfter(context.Context, int64, int) ([]Event, error) { panic("not tailed") }
func (l *lockedLog) Wait(context.Context, int64) error                      { panic("not tailed") }

func (l *lockedLog) ReadStream(_ context.Context, s Stream, after, upto int64, limit int) ([]Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, ev := range l.evs {
		if ev.Seq > after && ev.Seq <= upto && s.Matches(&ev) && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

// stepSender is a connection the test pulls by hand: Ready only notes the source, and pull
// takes up to limit bytes from each noted source, in turn, as a writer would.
type stepSender struct {
	c     codec.Codec
	mu    sync.Mutex
	ready []Source
	got   map[string][]int64
}

func (s *stepSender) Ready(src Source) {
	s.mu.Lock()
	s.ready = append(s.ready, src)
	s.mu.Unlock()
}

func (s *stepSender) pull(limit int) {
	s.mu.Lock()
	ready := s.ready
	s.ready = nil
	s.mu.Unlock()
	var again []Source
	for _, src := range ready {
		_, sub := src.Notification()
		bodies, more := src.Pull(nil, limit)
		for _, b := range bodies {
			var ev WireEvent
			if err := s.c.Unmarshal(b, &ev); err != nil {
				panic(err)
			}
			s.got[sub] = append(s.got[sub], ev.Seq)
		}
		if more {
			again = append(again, src)
		}
	}
	s.mu.Lock()
	s.ready = append(again, s.ready...)
	s.mu.Unlock()
}

func (s *stepSender) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ready) == 0
}

// positionsRun subscribes a few subscriptions (some replaying, some filtered) to a hub whose
// window holds few events, dispatches random batches of random sizes while connections pull
// at random paces, some not at all for a while, and some catch-ups made to wait for their
// budget, and checks that each subscription got exactly its stream's selected events after
// where it started, once each and in order: or, closed lagging, a gap-free start of them.
func positionsRun(t *testing.T, seed uint64, seen *positionsSeen) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	h := NewHub(&HubOptions{RecentBytes: 2<<10 + rng.IntN(64<<10), CatchUpLimit: 5 + rng.IntN(600),
		OnCatchUp: func(ok bool) {
			if ok {
				seen.caughtUp.Add(1)
			} else {
				seen.lagging.Add(1)
			}
		}})
	defer h.Close()
	h.win.events = 8 + rng.IntN(200)
	if rng.IntN(2) == 0 {
		h.groupShared = 1 // every filtered subscription asks its group's memo
	}
	if rng.IntN(2) == 0 {
		// Pages read from the log let go for others' and read again.
		h.pages.max, h.pages.grace = int64(1+rng.IntN(4<<10)), time.Duration(rng.IntN(2))*time.Millisecond
	}
	ll := &lockedLog{}
	var log Log = ll
	if rng.IntN(2) == 0 {
		log = countingLog{ll} // catch-ups count first, then read a page
	}
	replayLimit := 5 + rng.IntN(300)
	streamsOf := []Stream{{StreamProject, "P"}, {StreamItem, "P-1"}, {StreamItem, "P-2"}, {StreamProject, "Q"}}
	types := []string{"item.updated", "item.created", "project.renamed"}
	seq := int64(0)
	newBatch := func() []Event {
		evs := make([]Event, 1+rng.IntN(40))
		for i := range evs {
			seq += 1 + int64(rng.IntN(4)/3) // some seqs never committed
			project, item := "P", ""
			switch rng.IntN(5) {
			case 0:
				project = "Q"
			case 1, 2:
				item = fmt.Sprint("P-", 1+rng.IntN(2))
			}
			ev := testEvent(seq, types[rng.IntN(len(types))], item, fmt.Sprintf(`{"pad":"%s"}`, strings.Repeat("x", rng.IntN(600))))
			ev.ProjectKey = project
			if item == "" {
				ev.EntityType, ev.EntityID = "project", project
			}
			evs[i] = ev
		}
		return evs
	}
	dispatch := func() {
		evs := newBatch()
		ll.append(evs)
		h.Dispatch(evs)
	}
	for range 3 {
		dispatch()
	}

	type subInfo struct {
		id     string
		s      Stream
		types  *TypeFilter
		from   int64 // events after it are due
		out    *stepSender
		paused int // steps left without pulling
	}
	cl := &closings{reasons: map[string]string{}}
	var subs []*subInfo
	senders := []*stepSender{{c: codec.JSON, got: map[string][]int64{}}, {c: codec.MsgPack, got: map[string][]int64{}}}
	subscribeOne := func(i int) {
		si := &subInfo{id: fmt.Sprint("s", i), s: streamsOf[rng.IntN(len(streamsOf))], out: senders[rng.IntN(2)]}
		req := SubscribeRequest{ID: si.id, Subject: "u", Stream: si.s, Codec: si.out.c, Out: si.out,
			ReplayLimit: replayLimit, OnClosed: cl.record}
		if rng.IntN(3) == 0 {
			var asked atomic.Int64 // every third read waits a little first
			req.CatchUp = func(read int) time.Duration {
				if read == 0 && asked.Add(1)%3 == 0 {
					seen.waited.Add(1)
					return time.Millisecond
				}
				return 0
			}
		}
		if rng.IntN(3) == 0 {
			si.types, _ = ParseTypes([]string{types[rng.IntN(len(types))], "item.*"}[:1+rng.IntN(2)])
			req.Types = si.types
		}
		if rng.IntN(2) == 0 && seq > 0 {
			from := max(0, seq-int64(rng.IntN(2*replayLimit)))
			req.FromSeq = &from
		}
		sub, head, err := h.Subscribe(context.Background(), log, req)
		if err != nil {
			if req.FromSeq == nil || !isResync(err) {
				t.Fatalf("seed %d: subscribe %s: %v", seed, si.id, err)
			}
			seen.resync.Add(1)
			return // too far back: -32010, nothing sent
		}
		switch sub.ReplaySource() {
		case ReplayMemory:
			seen.fromMemory.Add(1)
		case ReplayDatabase:
			seen.fromLog.Add(1)
		}
		si.from = head
		if req.FromSeq != nil {
			si.from = *req.FromSeq
		}
		subs = append(subs, si)
	}
	for i := range 4 + rng.IntN(8) {
		subscribeOne(i)
	}
	for step := range 60 {
		if rng.IntN(3) > 0 {
			dispatch()
		}
		if rng.IntN(10) == 0 {
			subscribeOne(100 + step)
		}
		for _, si := range subs {
			if si.paused > 0 {
				si.paused--
			} else if rng.IntN(12) == 0 {
				si.paused = rng.IntN(20)
			}
		}
		for _, out := range senders {
			// A sender pulls unless every subscription on it is paused.
			busy := false
			for _, si := range subs {
				if si.out == out && si.paused == 0 {
					busy = true
				}
			}
			if busy {
				out.pull(1 + rng.IntN(8<<10))
			}
		}
	}
	// Everyone reads again until nothing is left, catch-ups included.
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, out := range senders {
			out.pull(64 << 10)
		}
		if h.CatchUpsRunning() == 0 && senders[0].idle() && senders[1].idle() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: still pulling after 20 s", seed)
		}
		time.Sleep(time.Millisecond)
	}
	ll.mu.Lock()
	all := slices.Clone(ll.evs)
	seen.dropped.Add(h.CatchUpPagesDropped())
	if n := h.CatchUpBytes(); n != 0 {
		t.Fatalf("seed %d: %d bytes of pages counted once every page was sent", seed, n)
	}
	ll.mu.Unlock()
	reasons := cl.get()
	for _, si := range subs {
		var want []int64
		for i := range all {
			if all[i].Seq > si.from && si.s.Matches(&all[i]) && si.types.Match(all[i].Type) {
				want = append(want, all[i].Seq)
			}
		}
		got := si.out.got[si.id]
		switch reasons[si.id] {
		case "":
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d: %s on %s from %d: got %d events, want %d\ngot  %v\nwant %v",
					seed, si.id, si.s, si.from, len(got), len(want), got, want)
			}
		case ReasonLagging:
			if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
				t.Fatalf("seed %d: %s (lagging) got %v, want a start of %v", seed, si.id, got, want)
			}
		default:
			t.Fatalf("seed %d: %s closed %s", seed, si.id, reasons[si.id])
		}
	}
}

func isResync(err error) bool { return errors.Is(err, ErrResyncRequired) }

// positionsSeen counts what the runs went through, so that the test knows it covered each.
type positionsSeen struct {
	caughtUp, lagging, resync, fromMemory, fromLog, waited, dropped atomic.Int64
}

// Positions across the window's edge, the catch-ups from the log and the replay seam give
// every subscription every event of its once, in order, over many random runs; together they
// catch up (some waiting for their budget), lag, replay from memory and from the log, and are
// refused -32010.
func TestPositionsAcrossTheWindow(t *testing.T) {
	runs := 200
	if testing.Short() || raceBuild {
		runs = 30
	}
	var seen positionsSeen
	for seed := range uint64(runs) {
		positionsRun(t, seed, &seen)
	}
	t.Logf("catch-ups %d (waits %d), lagging %d, -32010 %d, replays from memory %d, from the log %d, "+
		"pages let go %d", seen.caughtUp.Load(), seen.waited.Load(), seen.lagging.Load(), seen.resync.Load(),
		seen.fromMemory.Load(), seen.fromLog.Load(), seen.dropped.Load())
	for name, n := range map[string]int64{"catch-ups": seen.caughtUp.Load(), "lagging": seen.lagging.Load(),
		"waits for the budget": seen.waited.Load(), "pages let go": seen.dropped.Load(),
		"-32010": seen.resync.Load(), "replays from memory": seen.fromMemory.Load(), "replays from the log": seen.fromLog.Load()} {
		if n == 0 {
			t.Errorf("no run had %s", name)
		}
	}
}

func FuzzPositions(f *testing.F) {
	for _, s := range []uint64{1, 7, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { positionsRun(t, seed, new(positionsSeen)) })
}
