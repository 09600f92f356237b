package plannertest

import (
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/tracker"
)

// testOutputBatch: one batch stores the outputs and cuts of several turns, skips a session that
// does not exist, keeps what an offset held, and raises the given offset of the leases whose
// owner holds them, never lowering it; a lease taken over starts again at 0.
func testOutputBatch(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "s", time.Now())
	other := e.session(t, "WEB", "o", time.Now())
	const ttl = 150 * time.Millisecond
	if taken, _, err := e.Store.Acquire(e.ctx, s.ID, "a/t-1", "alice", 0, ttl, planner.TraceContext{}); err != nil || !taken {
		t.Fatalf("acquire: %v %v", taken, err)
	}
	if taken, _, err := e.Store.Acquire(e.ctx, other.ID, "a/t-2", "alice", 0, time.Minute, planner.TraceContext{}); err != nil || !taken {
		t.Fatalf("acquire: %v %v", taken, err)
	}
	text := func(sess, turn string, off int64, txt string) planner.Output {
		return planner.Output{Session: sess, Turn: turn, Offset: off, Type: planner.OutputText, Text: txt}
	}
	gone := tracker.NewID(time.Now())
	b := planner.OutputBatch{
		Outputs: []planner.Output{text(s.ID, "t-1", 1, "a"), text(other.ID, "t-2", 1, "x"), text(s.ID, "t-1", 2, "b"),
			text(gone, "t-9", 1, "lost")},
		Cuts: []planner.Output{{Session: other.ID, Turn: "t-2", Offset: 2}, {Session: gone, Turn: "t-9", Offset: 2}},
		Given: []planner.Lease{{Session: s.ID, Owner: "a/t-1", Given: 2}, {Session: other.ID, Owner: "a/t-2", Given: 7},
			{Session: gone, Owner: "a/t-9", Given: 2}},
	}
	if err := e.Store.AppendOutputs(e.ctx, b); err != nil {
		t.Fatal(err)
	}
	// Again, lower, and from an owner that does not hold the lease: nothing changes.
	b.Outputs[0].Text = "changed"
	b.Given = []planner.Lease{{Session: s.ID, Owner: "a/t-1", Given: 1}, {Session: other.ID, Owner: "b/t-3", Given: 9}}
	if err := e.Store.AppendOutputs(e.ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.AppendOutputs(e.ctx, planner.OutputBatch{}); err != nil {
		t.Fatalf("an empty batch: %v", err)
	}
	kept, found, err := e.Store.TurnOutputs(e.ctx, s.ID, "t-1", 0, time.Hour)
	if err != nil || !found || len(kept.Outputs) != 2 || kept.Outputs[0].Text != "a" || kept.Outputs[1].Text != "b" || kept.Cut != 0 {
		t.Fatalf("turn t-1: %+v %v %v", kept, found, err)
	}
	kept, found, err = e.Store.TurnOutputs(e.ctx, other.ID, "t-2", 0, time.Hour)
	if err != nil || !found || len(kept.Outputs) != 1 || kept.Cut != 2 {
		t.Fatalf("turn t-2: %+v %v %v", kept, found, err)
	}
	var expired []planner.Lease
	deadline := time.Now().Add(30 * time.Second)
	for len(expired) == 0 && time.Now().Before(deadline) {
		time.Sleep(ttl / 2)
		if expired, err = e.Store.Expired(e.ctx, []string{s.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if len(expired) != 1 || expired[0].Given != 2 {
		t.Fatalf("expired lease %+v, want given 2", expired)
	}
	if taken, stale, err := e.Store.Acquire(e.ctx, s.ID, "b/t-4", "alice", 0, ttl, planner.TraceContext{}); err != nil || !taken || !stale {
		t.Fatalf("take over: %v %v %v", taken, stale, err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for expired = nil; len(expired) == 0 && time.Now().Before(deadline); {
		time.Sleep(ttl / 2)
		if expired, err = e.Store.Expired(e.ctx, []string{s.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if len(expired) != 1 || expired[0].Owner != "b/t-4" || expired[0].Given != 0 {
		t.Fatalf("the lease taken over: %+v, want given 0", expired)
	}
}
