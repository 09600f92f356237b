package streams

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ballet/gateway/codec"
)

// groups returns the hub's filter groups and their members.
func groups(h *Hub) map[groupKey]int {
	out := map[groupKey]int{}
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.RLock()
		for k, g := range sh.groups {
			out[k] = g.members
		}
		sh.mu.RUnlock()
	}
	return out
}

// Subscriptions of one stream with equal filters, however written, share one group; the group
// keeps a memo from groupShared members on, and leaves with its last member.
func TestFilterGroupsShareAndLeave(t *testing.T) {
	h := NewHub(nil)
	defer h.Close()
	out := &stepSender{c: codec.JSON, got: map[string][]int64{}}
	p, q := Stream{StreamProject, "P"}, Stream{StreamProject, "Q"}
	spellings := [][]string{{"item.created", "comment.*"}, {"comment.*", "item.created"},
		{"item.created", "comment.*", "item.created"}}
	var subs []*Subscription
	subscribeTypes := func(id string, s Stream, patterns []string) {
		f, err := ParseTypes(patterns)
		if err != nil {
			t.Fatal(err)
		}
		sub, _, err := h.Subscribe(context.Background(), emptyLog{}, SubscribeRequest{
			ID: id, Subject: "u", Stream: s, Codec: codec.JSON, Out: out, Types: f})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	for i := range groupShared {
		subscribeTypes(fmt.Sprint("p", i), p, spellings[i%len(spellings)])
	}
	subscribeTypes("q", q, spellings[0])
	subscribeTypes("p-other", p, []string{"item.created"})
	subscribeTypes("p-all", p, nil)
	got := groups(h)
	shared := groupKey{p, "comment.*\x00item.created"}
	if len(got) != 3 || got[shared] != groupShared || got[groupKey{q, shared.types}] != 1 ||
		got[groupKey{p, "item.created"}] != 1 {
		t.Fatalf("groups %v", got)
	}
	if subs[0].group != subs[1].group || subs[0].group.memo.Load() == nil {
		t.Fatal("equal filters of one stream do not share a group with a memo")
	}
	if subs[groupShared].group.memo.Load() != nil {
		t.Fatal("a group of one keeps a memo")
	}
	for _, sub := range subs {
		h.Unsubscribe(sub)
		h.Unsubscribe(sub) // a second time changes nothing
	}
	if got := groups(h); len(got) != 0 {
		t.Fatalf("groups left after every subscription left: %v", got)
	}
}

// The memo answers for the seq and the window's resets it was asked with, and for nothing else:
// two seqs in one slot, and one seq before and after a reset log, are each matched again.
func TestFilterGroupMemo(t *testing.T) {
	f, err := ParseTypes([]string{"item.*"})
	if err != nil {
		t.Fatal(err)
	}
	g := &filterGroup{filter: f}
	g.memo.Store(new(matchMemo))
	cases := []struct {
		seq   int64
		epoch uint16
		typ   string
		want  bool
	}{
		{5, 0, "item.created", true},
		{5, 0, "item.created", true}, // from the memo
		{5 + memoSize, 0, "project.renamed", false},
		{5, 0, "item.created", true},
		{5, 1, "project.renamed", false}, // the log was reset: seq 5 is another event
		{5, 1, "project.renamed", false},
		{5, 0x8000 + 1, "project.renamed", false}, // the epoch as the memo keeps it (15 bits)
		{1 << 47, 0, "item.moved", true},          // beyond the memo's seqs: matched
		{1 << 47, 0, "project.renamed", false},
		{0, 0, "item.moved", true},
	}
	for i, c := range cases {
		if got := g.match(&item{seq: c.seq, epoch: c.epoch, typ: c.typ}); got != c.want {
			t.Errorf("case %d: seq %d epoch %d %s: %v, want %v", i, c.seq, c.epoch, c.typ, got, c.want)
		}
	}
}

// A log reset reuses seqs: a group's memo of the old events does not select the new ones.
func TestFilterGroupAcrossALogReset(t *testing.T) {
	h := NewHub(nil)
	defer h.Close()
	h.groupShared = 1
	ll := &lockedLog{}
	out := &stepSender{c: codec.MsgPack, got: map[string][]int64{}}
	p := Stream{StreamProject, "P"}
	f, err := ParseTypes([]string{"item.created"})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(typ string) []Event {
		evs := make([]Event, 5)
		for i := range evs {
			evs[i] = testEvent(int64(i+1), typ, "", `{}`)
		}
		return evs
	}
	subscribeFrom := func(id string, from int64) {
		if _, _, err := h.Subscribe(context.Background(), ll, SubscribeRequest{
			ID: id, Subject: "u", Stream: p, Codec: codec.MsgPack, Out: out, Types: f, FromSeq: &from}); err != nil {
			t.Fatal(err)
		}
	}
	old := batch("item.created")
	ll.append(old)
	h.Dispatch(old)
	subscribeFrom("before", 0)
	out.pull(64 << 10)
	if want := []int64{1, 2, 3, 4, 5}; !slices.Equal(out.got["before"], want) {
		t.Fatalf("before the reset: %v, want %v", out.got["before"], want)
	}
	// The database is reset: seqs 1 to 5 again, of a type the filter does not select.
	ll.mu.Lock()
	ll.evs = nil
	ll.mu.Unlock()
	reset := batch("project.renamed")
	ll.append(reset)
	h.Dispatch(reset)
	subscribeFrom("after", 0)
	out.pull(64 << 10)
	if got := out.got["after"]; len(got) != 0 {
		t.Fatalf("after the reset the filter selected %v, events of a type it does not select", got)
	}
}
