package plannertest

import (
	"encoding/json"
	"fmt"
	"slices"
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
		kept, found, err := e.Store.TurnOutputs(e.ctx, s.ID, "t-1", after, time.Hour)
		if err != nil || !found || kept.Cut != 0 || !kept.Ended {
			t.Fatalf("outputs after %d: cut %d, ended %v, found %v %v", after, kept.Cut, kept.Ended, found, err)
		}
		got, want := kept.Outputs, outs[min(int(after), len(outs)):]
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
		if got, found, err := e.Store.TurnOutputs(e.ctx, c.session, c.turn, 0, time.Hour); err != nil || found || len(got.Outputs) != 0 {
			t.Fatalf("outputs of %s/%s: %+v %v %v, want not found", c.session, c.turn, got, found, err)
		}
	}
	// A turn whose done is older than the window is not found.
	time.Sleep(50 * time.Millisecond)
	if _, found, err := e.Store.TurnOutputs(e.ctx, s.ID, "t-1", 0, 10*time.Millisecond); err != nil || found {
		t.Fatalf("a turn ended before the window: found %v %v", found, err)
	}
	// One without done is found however old.
	if kept, found, err := e.Store.TurnOutputs(e.ctx, s.ID, "t-2", 0, 10*time.Millisecond); err != nil || !found || kept.Ended {
		t.Fatalf("a running turn: found %v, ended %v, %v", found, kept.Ended, err)
	}
}

// A turn past its bounds stores its cut in the place of its first output not kept: never
// among the outputs, the same whatever the offset asked from, and counted by LastOffset.
func testOutputCut(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "s", time.Now())
	add := func(turn string, offset int64, typ string) {
		t.Helper()
		if err := e.Store.AppendOutput(e.ctx, planner.Output{Session: s.ID, Turn: turn, Offset: offset, Type: typ, Text: fmt.Sprint(offset)}); err != nil {
			t.Fatal(err)
		}
	}
	cut := func(turn string, offset int64) {
		t.Helper()
		if err := e.Store.CutOutputs(e.ctx, s.ID, turn, offset); err != nil {
			t.Fatal(err)
		}
	}
	check := func(turn string, after int64, wantOffsets []int64, wantCut int64, wantEnded bool) {
		t.Helper()
		kept, found, err := e.Store.TurnOutputs(e.ctx, s.ID, turn, after, time.Hour)
		if err != nil || !found {
			t.Fatalf("turn %s after %d: found %v %v", turn, after, found, err)
		}
		var offs []int64
		for _, o := range kept.Outputs {
			if o.Text != fmt.Sprint(o.Offset) {
				t.Fatalf("turn %s after %d: output %+v is not the one stored at its offset", turn, after, o)
			}
			offs = append(offs, o.Offset)
		}
		if !slices.Equal(offs, wantOffsets) || kept.Cut != wantCut || kept.Ended != wantEnded {
			t.Fatalf("turn %s after %d: offsets %v, cut %d, ended %v; want %v, %d, %v",
				turn, after, offs, kept.Cut, kept.Ended, wantOffsets, wantCut, wantEnded)
		}
	}
	last := func(turn string, want int64) {
		t.Helper()
		if got, err := e.Store.LastOffset(e.ctx, s.ID, turn); err != nil || got != want {
			t.Fatalf("last offset of %s: %d %v, want %d", turn, got, err, want)
		}
	}
	for off := int64(1); off <= 3; off++ {
		add("t", off, planner.OutputText)
	}
	cut("t", 4)
	cut("t", 6)                     // a turn keeps its first cut
	add("t", 4, planner.OutputText) // the cut keeps its offset
	check("t", 0, []int64{1, 2, 3}, 4, false)
	check("t", 3, nil, 4, false)
	check("t", 7, nil, 4, false)
	last("t", 4)
	add("t", 9, planner.OutputError)
	add("t", 10, planner.OutputDone)
	check("t", 2, []int64{3, 9, 10}, 4, true)
	check("t", 8, []int64{9, 10}, 4, true)
	check("t", 10, nil, 4, true)
	last("t", 10)

	// A cut alone makes the turn found; one at an offset already stored is not made.
	cut("only", 1)
	check("only", 0, nil, 1, false)
	last("only", 1)
	add("stored", 1, planner.OutputText)
	cut("stored", 1)
	check("stored", 0, []int64{1}, 0, false)
	// The cut of a session that is gone is dropped, as its outputs are.
	if err := e.Store.CutOutputs(e.ctx, tracker.NewID(time.Now()), "t", 1); err != nil {
		t.Fatalf("the cut of an unknown session: %v", err)
	}
}

// Expiry works on the store's clock, so the test measures its own: outputs written before a
// pause longer than the windows must go; those written after it must stay when the expiry
// ran within a window of them, and on a machine so loaded that it did not, the scenario is
// run again.
func testOutputExpiry(t *testing.T, e *suite) {
	const window, abandoned, pause = time.Second, 1200 * time.Millisecond, 1500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if expiryScenario(t, e, window, abandoned, pause) {
			return
		}
		if attempt == 3 {
			t.Fatalf("three times, more than %v passed between writing the fresh outputs and expiring", window)
		}
	}
}

// expiryScenario reports false when the expiry ran too late to say anything of fresh outputs.
func expiryScenario(t *testing.T, e *suite, window, abandoned, pause time.Duration) bool {
	s := e.session(t, "WEB", "s", time.Now())
	add := func(turn string, offset int64, typ string) {
		t.Helper()
		if err := e.Store.AppendOutput(e.ctx, planner.Output{Session: s.ID, Turn: turn, Offset: offset, Type: typ}); err != nil {
			t.Fatal(err)
		}
	}
	cut := func(turn string, offset int64) {
		t.Helper()
		if err := e.Store.CutOutputs(e.ctx, s.ID, turn, offset); err != nil {
			t.Fatal(err)
		}
	}
	add("ended", 1, planner.OutputText)
	add("ended", 2, planner.OutputDone)
	add("abandoned", 1, planner.OutputText)
	add("ended-cut", 1, planner.OutputText)
	cut("ended-cut", 2)
	add("ended-cut", 4, planner.OutputDone)
	add("abandoned-cut", 1, planner.OutputText)
	cut("abandoned-cut", 2)
	time.Sleep(pause) // the age of the outputs above; a wait for nothing else
	freshAt := time.Now()
	add("fresh", 1, planner.OutputText)
	add("recent", 1, planner.OutputDone)
	cut("fresh-cut", 1)
	// Ended more than window ago, or nothing stored for abandoned.
	if err := e.Store.ExpireOutputs(e.ctx, window, abandoned); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(freshAt); el >= window {
		t.Logf("the expiry ran %v after the fresh outputs were written: again", el)
		return false
	}
	for turn, want := range map[string]bool{"ended": false, "abandoned": false, "fresh": true, "recent": true,
		"ended-cut": false, "abandoned-cut": false, "fresh-cut": true} {
		_, found, err := e.Store.TurnOutputs(e.ctx, s.ID, turn, 0, time.Hour)
		if err != nil || found != want {
			t.Errorf("turn %s after expiry: found %v %v, want %v", turn, found, err, want)
		}
		// Nothing of an expired turn is left, its cut included.
		if last, err := e.Store.LastOffset(e.ctx, s.ID, turn); err != nil || (last == 0) == want {
			t.Errorf("turn %s after expiry: last offset %d %v", turn, last, err)
		}
	}
	return true
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
	if seq, found, err := e.Store.SentWithKey(e.ctx, s.ID, "alice", "k1", time.Minute); err != nil || !found || seq != m2.Seq {
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
