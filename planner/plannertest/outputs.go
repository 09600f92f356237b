package plannertest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/tracker"
)

func testOutputs(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "s", time.Now())
	isErr := false
	outs := []planner.Output{
		{Type: planner.OutputMessage, Seq: 1},
		{Type: planner.OutputText, Text: "Hé"},
		// Input keeps its bytes: replayed output is what went out live.
		{Type: planner.OutputToolCall, Tool: "create_item", ToolUseID: "t1", Input: codec.RawJSON(`{"z": 1, "a": [true]}`)},
		{Type: planner.OutputToolResult, Tool: "create_item", ToolUseID: "t1", Text: "ok", IsError: &isErr},
		{Type: planner.OutputDone, Text: planner.DoneEndTurn},
	}
	for i := range outs {
		outs[i].Session, outs[i].Turn, outs[i].Offset = s.ID, "t-1", int64(i+1)
		if err := e.Store.AppendOutput(e.ctx, outs[i]); err != nil {
			t.Fatal(err)
		}
	}
	// An offset stored again keeps its first output.
	again := outs[1]
	again.Text = "other"
	if err := e.Store.AppendOutput(e.ctx, again); err != nil {
		t.Fatal(err)
	}
	// Another turn of the session, and the same turn id in another session, stay apart.
	other := e.session(t, "WEB", "other", time.Now())
	for _, o := range []planner.Output{{Session: s.ID, Turn: "t-2", Offset: 1, Type: planner.OutputText, Text: "x"},
		{Session: other.ID, Turn: "t-1", Offset: 1, Type: planner.OutputText, Text: "y"}} {
		if err := e.Store.AppendOutput(e.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, after := range []int64{0, 2, 5, 9} {
		got, found, err := e.Store.TurnOutputs(e.ctx, s.ID, "t-1", after, time.Hour)
		if err != nil || !found {
			t.Fatalf("outputs after %d: %v %v", after, found, err)
		}
		want := outs[min(int(after), len(outs)):]
		if len(got) != len(want) {
			t.Fatalf("after %d: %d outputs, want %d", after, len(got), len(want))
		}
		for i := range got {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			if string(g) != string(w) {
				t.Fatalf("after %d, output %d:\n got %s\nwant %s", after, i, g, w)
			}
		}
	}
	if last, err := e.Store.LastOffset(e.ctx, s.ID, "t-1"); err != nil || last != 5 {
		t.Fatalf("last offset %d %v, want 5", last, err)
	}
	if last, err := e.Store.LastOffset(e.ctx, s.ID, "none"); err != nil || last != 0 {
		t.Fatalf("last offset of an unknown turn %d %v, want 0", last, err)
	}
	for _, c := range []struct{ session, turn string }{{s.ID, "none"}, {tracker.NewID(time.Now()), "t-1"}, {"not-a-uuid", "t-1"}} {
		if got, found, err := e.Store.TurnOutputs(e.ctx, c.session, c.turn, 0, time.Hour); err != nil || found || len(got) != 0 {
			t.Fatalf("outputs of %s/%s: %v %v %v, want not found", c.session, c.turn, got, found, err)
		}
	}
	// A turn whose done is older than the window is not found.
	time.Sleep(50 * time.Millisecond)
	if _, found, err := e.Store.TurnOutputs(e.ctx, s.ID, "t-1", 0, 10*time.Millisecond); err != nil || found {
		t.Fatalf("a turn ended before the window: found %v %v", found, err)
	}
	// One without done is found however old.
	if _, found, err := e.Store.TurnOutputs(e.ctx, s.ID, "t-2", 0, 10*time.Millisecond); err != nil || !found {
		t.Fatalf("a running turn: found %v %v", found, err)
	}
}

func testOutputExpiry(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "s", time.Now())
	add := func(turn string, offset int64, typ string) {
		t.Helper()
		if err := e.Store.AppendOutput(e.ctx, planner.Output{Session: s.ID, Turn: turn, Offset: offset, Type: typ}); err != nil {
			t.Fatal(err)
		}
	}
	add("ended", 1, planner.OutputText)
	add("ended", 2, planner.OutputDone)
	add("abandoned", 1, planner.OutputText)
	time.Sleep(100 * time.Millisecond)
	add("fresh", 1, planner.OutputText)
	add("recent", 1, planner.OutputDone)
	// Ended more than 50 ms ago, or nothing stored for 80 ms.
	if err := e.Store.ExpireOutputs(e.ctx, 50*time.Millisecond, 80*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for turn, want := range map[string]bool{"ended": false, "abandoned": false, "fresh": true, "recent": true} {
		_, found, err := e.Store.TurnOutputs(e.ctx, s.ID, turn, 0, time.Hour)
		if err != nil || found != want {
			t.Errorf("turn %s after expiry: found %v %v, want %v", turn, found, err, want)
		}
	}
}

func testIdempotencyKeys(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "s", time.Now())
	content, _ := json.Marshal("hello")
	m, err := e.Store.AppendMessage(e.ctx, s.ID, planner.NewMessage{Role: planner.RoleHuman, Content: content, Actor: alice, IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if seq, found, err := e.Store.SentWithKey(e.ctx, s.ID, "alice", "k1", time.Hour); err != nil || !found || seq != m.Seq {
		t.Fatalf("key k1: %d %v %v, want %d", seq, found, err, m.Seq)
	}
	for _, c := range []struct{ subject, key string }{{"bob", "k1"}, {"alice", "k2"}} {
		if _, found, err := e.Store.SentWithKey(e.ctx, s.ID, c.subject, c.key, time.Hour); err != nil || found {
			t.Fatalf("%s/%s found: %v %v", c.subject, c.key, found, err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if _, found, err := e.Store.SentWithKey(e.ctx, s.ID, "alice", "k1", 10*time.Millisecond); err != nil || found {
		t.Fatalf("a key older than the window found: %v %v", found, err)
	}
	// An old key is taken over by a new send with it.
	m2, err := e.Store.AppendMessage(e.ctx, s.ID, planner.NewMessage{Role: planner.RoleHuman, Content: content, Actor: alice, IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if seq, found, err := e.Store.SentWithKey(e.ctx, s.ID, "alice", "k1", 40*time.Millisecond); err != nil || !found || seq != m2.Seq {
		t.Fatalf("key k1 sent again: %d %v %v, want %d", seq, found, err, m2.Seq)
	}
	if err := e.Store.ExpireSends(e.ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := e.Store.ExpireSends(e.ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, found, err := e.Store.SentWithKey(e.ctx, s.ID, "alice", "k1", time.Hour); err != nil || found {
		t.Fatalf("an expired key found: %v %v", found, err)
	}
}
