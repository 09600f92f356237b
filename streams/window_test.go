package streams

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// The ring answers exactly what a filter over every dispatched event
// answers, for every range it claims to hold, through wrap-around, seq
// gaps and a reset log.
func TestRecentEventsMatchesTheLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := window{events: bodyCacheSize, maxBytes: DefaultRecentBytes}
	var all []Event
	seq := int64(100)
	projects := []string{"A", "B"}
	keys := []string{"A-1", "A-2", "B-1"}
	check := func() {
		t.Helper()
		for range 50 {
			s := Stream{Kind: StreamProject, Key: projects[rng.IntN(2)]}
			if rng.IntN(2) == 0 {
				s = Stream{Kind: StreamItem, Key: keys[rng.IntN(3)]}
			}
			from := all[0].Seq - 3 + rng.Int64N(seq-all[0].Seq+5)
			to := from + rng.Int64N(3000)
			limit := 1 + rng.IntN(1500)
			got, ok := r.read(s, from, to, limit)
			wantOK := from >= r.floor && to <= r.last && r.n > 0
			if ok != wantOK {
				t.Fatalf("read(%v, %d, %d): ok %v, want %v (floor %d, last %d)", s, from, to, ok, wantOK, r.floor, r.last)
			}
			if !ok {
				continue
			}
			var want []Event
			for _, ev := range all {
				if ev.Seq > from && ev.Seq <= to && s.Matches(&ev) && len(want) < limit {
					want = append(want, ev)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("read(%v, %d, %d, %d): %d events, want %d", s, from, to, limit, len(got), len(want))
			}
			for i := range got {
				if got[i].seq != want[i].Seq || got[i].key != want[i].EntityKey {
					t.Fatalf("read(%v, %d, %d): event %d is seq %d, want %d", s, from, to, i, got[i].seq, want[i].Seq)
				}
			}
		}
	}
	for round := range 40 {
		if round == 30 {
			if r.n != bodyCacheSize {
				t.Fatalf("the ring holds %d events, want it full (%d)", r.n, bodyCacheSize)
			}
			// A reset log starts again from low seqs.
			seq, all = 5, nil
		}
		batch := make([]Event, 1+rng.IntN(900))
		for i := range batch {
			seq += 1 + int64(rng.IntN(3)/2) // some seqs never committed
			k := keys[rng.IntN(3)]
			batch[i] = Event{Seq: seq, ProjectKey: k[:1], EntityType: "item", EntityKey: k}
			if rng.IntN(5) == 0 {
				batch[i].EntityType, batch[i].EntityKey = "project", ""
			}
		}
		r.add(batch, [2]bool{})
		all = append(all, batch...)
		check()
	}
}

// read returns the items of s with from < seq <= to, at most limit of them, and whether the
// window holds every event of that range.
func (w *window) read(s Stream, from, to int64, limit int) ([]*item, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.ring == nil || to > w.last || w.gapLocked(s, from) {
		return nil, false
	}
	si := w.index[s]
	if si == nil {
		return nil, true
	}
	var out []*item
	l := si.live()
	for i := si.after(from); i < len(l) && l[i].seq <= to && len(out) < limit; i++ {
		out = append(out, l[i])
	}
	return out, true
}

// sliceLog is a log in a slice, counting the replays read from it.
type sliceLog struct {
	evs   []Event
	reads int
}

func (l *sliceLog) Head(context.Context) (int64, error) { return l.evs[len(l.evs)-1].Seq, nil }

func (l *sliceLog) ReadAfter(context.Context, int64, int) ([]Event, error) { panic("not tailed") }

func (l *sliceLog) Wait(context.Context, int64) error { panic("not tailed") }

func (l *sliceLog) ReadStream(_ context.Context, s Stream, after, upto int64, limit int) ([]Event, error) {
	l.reads++
	var out []Event
	for _, ev := range l.evs {
		if ev.Seq > after && ev.Seq <= upto && s.Matches(&ev) && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

// nullSender never pulls.
type nullSender struct{}

func (nullSender) Ready(Source) {}

// A replay of events the hub has dispatched comes from memory; one from
// before them reads the log; both replay the same events.
func TestReplayOfRecentEventsSkipsTheLog(t *testing.T) {
	l := &sliceLog{}
	for i := range bodyCacheSize + 800 {
		l.evs = append(l.evs, Event{Seq: int64(i + 1), ProjectKey: "P", Type: "item.updated", EntityType: "item",
			EntityID: fmt.Sprint(i), EntityKey: "P-1", OccurredAt: time.Unix(0, int64(i)), ActorKind: "human", ActorSubject: "a", Payload: []byte(`{}`)})
	}
	h := NewHub(nil)
	h.win.events = bodyCacheSize
	// The first 300 were committed before the hub started tailing.
	for i := 300; i < len(l.evs); i += 1000 {
		h.Dispatch(l.evs[i:min(i+1000, len(l.evs))])
	}
	ctx := context.Background()
	head, _ := l.Head(ctx)
	sub := func(from int64) int {
		t.Helper()
		s, _, err := h.Subscribe(ctx, l, SubscribeRequest{ID: "s", Stream: Stream{Kind: StreamItem, Key: "P-1"},
			Codec: codec.MsgPack, Out: nullSender{}, FromSeq: &from, ReplayLimit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Unsubscribe(s)
		return s.replayed
	}
	for _, tc := range []struct {
		back      int64
		wantReads int
	}{
		{back: 800, wantReads: 0},
		{back: bodyCacheSize, wantReads: 0},       // the oldest event the ring holds
		{back: bodyCacheSize + 1, wantReads: 1},   // one before it
		{back: bodyCacheSize + 600, wantReads: 2}, // from before the hub's first event
	} {
		if n := sub(head - tc.back); n != int(tc.back) || l.reads != tc.wantReads {
			t.Fatalf("replay of the last %d events: %d events, %d log reads so far; want %d reads", tc.back, n, l.reads, tc.wantReads)
		}
	}
}

// The recent events and their bodies are bounded in bytes too: large events push the oldest
// out (a range that reaches them is read from the log), one larger than the whole budget is
// not held at all, and bodies beyond the budget are not cached.
func TestRecentEventsBoundedInBytes(t *testing.T) {
	const budget = 64 << 10
	r := window{maxBytes: budget}
	big := make([]byte, 10<<10)
	var evs []Event
	for seq := int64(1); seq <= 100; seq++ {
		evs = append(evs, Event{Seq: seq, ProjectKey: "A", Type: "t", Payload: big})
	}
	r.add(evs, [2]bool{})
	if r.heldBytes() > budget || r.n == 0 || r.n > budget/len(big) {
		t.Fatalf("%d events of %d bytes held in %d bytes, budget %d", r.n, len(big), r.heldBytes(), budget)
	}
	a := Stream{Kind: StreamProject, Key: "A"}
	if _, ok := r.read(a, 0, 100, 1000); ok {
		t.Fatal("the ring claims events it dropped for bytes")
	}
	if got, ok := r.read(a, r.floor, 100, 1000); !ok || len(got) != r.n {
		t.Fatalf("the held range: %d events, %v", len(got), ok)
	}
	r.add([]Event{{Seq: 101, ProjectKey: "A", Payload: make([]byte, 2*budget)}}, [2]bool{})
	if _, ok := r.read(a, 100, 101, 10); ok || r.heldBytes() > budget {
		t.Fatalf("an event larger than the budget is held (%d bytes)", r.heldBytes())
	}
	r.add([]Event{{Seq: 102, ProjectKey: "A", Payload: []byte("{}")}}, [2]bool{})
	if got, ok := r.read(a, 101, 102, 10); !ok || len(got) != 1 {
		t.Fatalf("after the large event: %v, %v", got, ok)
	}

	bc := bodyCache{maxBytes: budget}
	for i := range bc.slots {
		bc.slots[i].seq = -1
	}
	for seq := int64(1); seq <= 100; seq++ {
		ev := &Event{Seq: seq, EntityID: "x"}
		bc.put(ev, codec.JSON, big)
		bc.put(ev, codec.MsgPack, big)
	}
	if bc.heldBytes() > budget {
		t.Fatalf("the body cache holds %d bytes, budget %d", bc.heldBytes(), budget)
	}
}

// A body encoded for an item the window has let go (a reader still had it) is not counted:
// the item is not held any more.
func TestWindowBodyOfAnItemLetGoIsNotCounted(t *testing.T) {
	w := window{events: 4, maxBytes: DefaultRecentBytes}
	var evs []Event
	for i := range 8 {
		evs = append(evs, Event{Seq: int64(i + 1), ProjectKey: "A", Type: "t", Payload: []byte(`{"n":1}`)})
	}
	held := func() int {
		n := 0
		for i := range w.n {
			n += itemBytes(w.ring[(w.start+i)%len(w.ring)])
		}
		return n
	}
	w.add(evs[:4], [2]bool{})
	old := w.ring[w.start]
	w.add(evs[4:], [2]bool{false, true})
	for _, c := range []codec.Codec{codec.JSON, codec.MsgPack} {
		want, _ := c.Marshal(wireEvent(&evs[0]))
		if b, err := w.body(old, c); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("the %s body of an item let go: %q, %v", c.Name(), b, err)
		}
	}
	if w.heldBytes() != held() {
		t.Fatalf("the window counts %d bytes, its items hold %d", w.heldBytes(), held())
	}
	w.add([]Event{{Seq: 3, ProjectKey: "A", Payload: []byte(`{}`)}}, [2]bool{}) // a reset log: every item goes
	if w.heldBytes() != held() {
		t.Fatalf("after a reset the window counts %d bytes, its items hold %d", w.heldBytes(), held())
	}
}
