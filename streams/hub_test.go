package streams

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// recSender records the seqs each subscription is sent, and how many
// pulls it took. It pulls a subscription as soon as it is ready, as a
// connection whose writer is idle; with hold set it only notes that it is
// ready (release pulls), as a connection whose peer does not read.
type recSender struct {
	c codec.Codec
	// pulling is held while a source is pulled and its events recorded, as a connection has
	// one writer: a source made ready again by a catch-up is pulled after the pull before.
	pulling sync.Mutex
	mu      sync.Mutex
	seqs    map[string][]int64
	sends   map[string]int
	hold    bool
	held    []Source
	known   map[*byte]int64 // seq by body: bodies are shared, decode each once
}

func newRecSender(c codec.Codec) *recSender {
	return &recSender{c: c, seqs: map[string][]int64{}, sends: map[string]int{}, known: map[*byte]int64{}}
}

func (r *recSender) Ready(src Source) {
	r.mu.Lock()
	if r.hold {
		r.held = append(r.held, src)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.pull(src)
}

// pull takes everything src has, a few events at a time.
func (r *recSender) pull(src Source) {
	r.pulling.Lock()
	defer r.pulling.Unlock()
	_, sub := src.Notification()
	for {
		bodies, more := src.Pull(nil, 1<<20)
		r.mu.Lock()
		if len(bodies) > 0 {
			r.sends[sub]++
		}
		for _, b := range bodies {
			seq, ok := r.known[&b[0]]
			if !ok {
				var ev WireEvent
				if err := r.c.Unmarshal(b, &ev); err != nil {
					panic(err)
				}
				seq = ev.Seq
				r.known[&b[0]] = seq
			}
			r.seqs[sub] = append(r.seqs[sub], seq)
		}
		r.mu.Unlock()
		if !more {
			return
		}
	}
}

// release stops holding and pulls what is ready.
func (r *recSender) release() {
	r.mu.Lock()
	r.hold = false
	held := r.held
	r.held = nil
	r.mu.Unlock()
	for _, src := range held {
		r.pull(src)
	}
}

func (r *recSender) got(sub string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.seqs[sub]...)
}

// closings records why the server closed each subscription.
type closings struct {
	mu      sync.Mutex
	reasons map[string]string
}

func (c *closings) record(sub *Subscription, reason string) {
	c.mu.Lock()
	c.reasons[sub.ID()] = reason
	c.mu.Unlock()
}

func (c *closings) get() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.reasons)
}

func testEvent(seq int64, typ, item string, payload string) Event {
	ev := Event{Seq: seq, ProjectKey: "P", Type: typ, EntityType: "project", EntityID: "P",
		OccurredAt: time.Unix(seq, 0), ActorKind: "human", ActorSubject: "a", Payload: []byte(payload)}
	if item != "" {
		ev.EntityType, ev.EntityID, ev.EntityKey = "item", item, item
	}
	return ev
}

func subscribe(t *testing.T, h *Hub, id, subject string, s Stream, out Sender, c codec.Codec, closed func(*Subscription, string)) *Subscription {
	t.Helper()
	sub, _, err := h.Subscribe(context.Background(), emptyLog{}, SubscribeRequest{
		ID: id, Subject: subject, Stream: s, Codec: c, Out: out, OnClosed: closed})
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// Many subscriptions of one stream (spread over parallel parts) and a few
// of item streams get exactly their stream's events, once, in order, with
// at most one pull with events per subscription per dispatch.
func TestDispatchRunsInOrder(t *testing.T) {
	h := NewHub(nil)
	senders := map[codec.Codec]*recSender{codec.JSON: newRecSender(codec.JSON), codec.MsgPack: newRecSender(codec.MsgPack)}
	type subInfo struct {
		id string
		s  Stream
		c  codec.Codec
	}
	var subs []subInfo
	for i := range 4 * wakeChunk {
		c := []codec.Codec{codec.JSON, codec.MsgPack}[i%2]
		s := Stream{Kind: StreamProject, Key: "P"}
		if i%50 == 0 {
			s = Stream{Kind: StreamItem, Key: fmt.Sprintf("P-%d", i%3)}
		}
		id := fmt.Sprint("s", i)
		subscribe(t, h, id, "u", s, senders[c], c, nil)
		subs = append(subs, subInfo{id, s, c})
	}
	var all []Event
	seq := int64(0)
	dispatches := 0
	for size := 1; seq < 1000; size = size%40 + 1 {
		evs := make([]Event, size)
		for i := range evs {
			seq++
			item := ""
			if seq%3 != 0 {
				item = fmt.Sprintf("P-%d", seq%4)
			}
			evs[i] = testEvent(seq, "item.updated", item, `{"n":1}`)
		}
		all = append(all, evs...)
		h.Dispatch(evs)
		dispatches++
	}
	for _, si := range subs {
		var want []int64
		for i := range all {
			if si.s.Matches(&all[i]) {
				want = append(want, all[i].Seq)
			}
		}
		got := senders[si.c].got(si.id)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s on %s (%s): got %d events, want %d\ngot  %v\nwant %v", si.id, si.s, si.c.Name(), len(got), len(want), got, want)
		}
		if n := senders[si.c].sends[si.id]; n > dispatches {
			t.Fatalf("%s: %d sends for %d dispatches", si.id, n, dispatches)
		}
	}
}

// An event that takes access away inside a batch closes the subscriptions
// it concerns before the events after it go out.
func TestRevocationInsideABatch(t *testing.T) {
	h := NewHub(nil)
	r := newRecSender(codec.JSON)
	cl := &closings{reasons: map[string]string{}}
	p := Stream{Kind: StreamProject, Key: "P"}
	subscribe(t, h, "alice", "alice", p, r, codec.JSON, cl.record)
	subscribe(t, h, "bob", "bob", p, r, codec.JSON, cl.record)
	h.Dispatch([]Event{
		testEvent(1, "item.updated", "P-1", `{}`),
		testEvent(2, "member.revoked", "", `{"subject":"alice"}`),
		testEvent(3, "item.updated", "P-1", `{}`),
		testEvent(4, "item.updated", "P-2", `{}`),
	})
	if got := fmt.Sprint(r.got("alice")); got != "[1 2]" {
		t.Errorf("alice got %s, want [1 2]", got)
	}
	if got := fmt.Sprint(r.got("bob")); got != "[1 2 3 4]" {
		t.Errorf("bob got %s, want [1 2 3 4]", got)
	}
	if got := cl.get(); got["alice"] != ReasonForbidden || got["bob"] != "" {
		t.Errorf("closed: %v", got)
	}
}

// OnAccessLost hears of each event that takes access away, once the
// subscriptions it closes are closed and before the events after it go out.
func TestOnAccessLost(t *testing.T) {
	r := newRecSender(codec.JSON)
	cl := &closings{reasons: map[string]string{}}
	var calls []string
	h := NewHub(&HubOptions{OnAccessLost: func(project, subject, reason string) {
		calls = append(calls, fmt.Sprintf("%s %q %s closed=%v sent=%v", project, subject, reason, cl.get(), r.got("bob")))
	}})
	p := Stream{Kind: StreamProject, Key: "P"}
	subscribe(t, h, "alice", "alice", p, r, codec.JSON, cl.record)
	subscribe(t, h, "bob", "bob", p, r, codec.JSON, cl.record)
	h.Dispatch([]Event{
		testEvent(1, "member.revoked", "", `{"subject":"alice"}`),
		testEvent(2, "member.revoked", "", `{}`), // no subject: nothing lost
		testEvent(3, "item.updated", "P-1", `{}`),
		testEvent(4, "project.deleted", "", `{}`),
		testEvent(5, "item.updated", "P-1", `{}`),
	})
	want := []string{
		`P "alice" forbidden closed=map[alice:forbidden] sent=[1]`,
		`P "" not_found closed=map[alice:forbidden bob:not_found] sent=[1 2 3 4]`,
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("OnAccessLost calls:\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
}

// Dispatch has one caller at a time: a second one, entering while the first runs (here held
// in OnEvent), panics, and the first goes on; a later call is served again.
func TestDispatchConcurrentPanics(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := NewHub(&HubOptions{OnEvent: func(*Event) {
		once.Do(func() { close(entered); <-release })
	}})
	first := make(chan struct{})
	go func() {
		defer close(first)
		h.Dispatch([]Event{testEvent(1, "item.updated", "P-1", `{}`)})
	}()
	<-entered
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "another Dispatch runs") {
				t.Errorf("second Dispatch: recovered %v, want a panic naming the concurrent call", r)
			}
		}()
		h.Dispatch([]Event{testEvent(2, "item.updated", "P-1", `{}`)})
	}()
	close(release)
	<-first
	h.Dispatch([]Event{testEvent(3, "item.updated", "P-1", `{}`)}) // the flag was reset
}
