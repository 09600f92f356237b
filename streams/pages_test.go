package streams

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// A connection whose 64 subscriptions each start a catch-up of large events and then stops
// reading makes the replica hold a page for each (16 MiB here); the pages are held within
// CatchUpBytes instead, those let go are read again, and once the connection reads again
// every subscription gets every event once, in order.
func TestCatchUpPagesBoundedForTheReplica(t *testing.T) {
	const (
		subs   = 64
		events = 300
		budget = 4 << 20
	)
	h := NewHub(&HubOptions{RecentBytes: 1 << 20, CatchUpBytes: budget})
	defer h.Close()
	h.pages.grace = 20 * time.Millisecond
	ll := &lockedLog{}
	log := countingLog{ll}
	out := &stepSender{c: codec.MsgPack, got: map[string][]int64{}}
	p := Stream{StreamProject, "P"}
	for i := range subs {
		if _, _, err := h.Subscribe(context.Background(), log, SubscribeRequest{
			ID: fmt.Sprint("s", i), Subject: "u", Stream: p, Codec: codec.MsgPack, Out: out}); err != nil {
			t.Fatal(err)
		}
	}
	pad := strings.Repeat("x", 10<<10)
	evs := make([]Event, events)
	for i := range evs {
		evs[i] = testEvent(int64(i+1), "item.updated", "", `{"pad":"`+pad+`"}`)
	}
	ll.append(evs)
	h.Dispatch(evs) // the window keeps the last 100 or so: every subscription falls behind
	out.pull(1)     // each pulls once: its catch-up starts; then the connection stops reading
	peak := int64(0)
	wait := 20 * time.Second
	if raceBuild {
		wait = 90 * time.Second
	}
	deadline := time.Now().Add(wait)
	for h.CatchUpsRunning() > 0 {
		peak = max(peak, h.CatchUpBytes())
		if time.Now().After(deadline) {
			t.Fatalf("catch-ups still running after %v: %d", wait, h.CatchUpsRunning())
		}
		time.Sleep(time.Millisecond)
	}
	// What may pass the budget: the pages read at once, each by an event.
	slack := int64(DefaultCatchUps * 11 << 10)
	t.Logf("peak %d KiB of pages held (bound %d KiB; %d subscriptions would hold %d KiB), %d let go",
		peak>>10, (budget+slack)>>10, subs, subs*catchUpPageBytes>>10, h.CatchUpPagesDropped())
	if peak > budget+slack {
		t.Fatalf("pages held peaked at %d bytes, bound %d", peak, budget+slack)
	}
	if h.CatchUpPagesDropped() == 0 {
		t.Fatal("no page was let go: the test did not reach the bound")
	}
	for h.CatchUpsRunning() > 0 || !out.idle() {
		out.pull(64 << 10)
		if time.Now().After(deadline) {
			t.Fatalf("still reading after %v", wait)
		}
		time.Sleep(time.Millisecond)
	}
	for i := range subs {
		got := out.got[fmt.Sprint("s", i)]
		if len(got) != events {
			t.Fatalf("s%d got %d events, want %d", i, len(got), events)
		}
		for j, seq := range got {
			if seq != int64(j+1) {
				t.Fatalf("s%d: event %d is seq %d", i, j, seq)
			}
		}
	}
	if n := h.CatchUpBytes(); n != 0 {
		t.Fatalf("%d bytes of pages counted once every page was sent", n)
	}
}
