package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// plannerOutput is one planner.output as a JSON client reads it.
type plannerOutput struct {
	turn   string
	offset int64
	typ    string
	text   string
}

// readOutputs reads k's planner.output notifications of sub until n have arrived or
// done has.
func (k *jsonClient) readOutputs(sub string, n int) []plannerOutput {
	k.t.Helper()
	var outs []plannerOutput
	for len(outs) < n {
		m := k.next(sub, 30*time.Second)
		if m == nil {
			k.t.Fatalf("no planner.output on %s within 30 s (after %d)", sub, len(outs))
		}
		if m["method"] != "planner.output" {
			continue
		}
		p := m["params"].(map[string]any)
		o := plannerOutput{turn: fmt.Sprint(p["turn"]), typ: fmt.Sprint(p["type"])}
		o.offset = int64(p["offset"].(float64))
		if s, ok := p["text"].(string); ok {
			o.text = s
		}
		outs = append(outs, o)
		if o.typ == "done" {
			break
		}
	}
	return outs
}

// TestPlannerResumeAcrossReplicas: a watcher on A drops its connection mid-answer and
// watches again on B with {turn, after}: it gets the rest of the answer once, in order,
// and the text it assembles is the whole answer. A planner.send repeated with the same
// idempotency_key on the other replica while the turn runs returns the first seq.
func TestPlannerResumeAcrossReplicas(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	answer := strings.Repeat("abcdefghij", 40)
	if err := os.WriteFile(script, []byte(`{"chunk": 2, "chunk_pause_ms": 5, "rules": [
		{"match": "", "steps": [[{"text": "`+answer+`"}]]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 2, "BALLET_PLANNER_PROVIDER=scripted", "BALLET_PLANNER_SCRIPT="+script)
	a, b := c.replicas[0], c.replicas[1]
	session := c.session(a, c.token("alice"))

	first := c.dialJSON(a, "alice")
	first.call("planner.watch", map[string]any{"subscription": "w", "session": session})
	sender := c.dialJSON(a, "alice")
	sent := sender.call("planner.send", map[string]any{"session": session, "text": "go", "idempotency_key": "msg-1"})
	seq := sent["result"].(map[string]any)["seq"].(float64)
	// The retry of a send whose answer was lost, on the other replica, mid-turn.
	again := c.dialJSON(b, "alice").call("planner.send", map[string]any{"session": session, "text": "go", "idempotency_key": "msg-1"})
	if got := again["result"].(map[string]any)["seq"].(float64); got != seq {
		t.Fatalf("the same idempotency_key answered seq %v, then %v", seq, got)
	}

	before := first.readOutputs("w", 20)
	turn, last := before[0].turn, before[len(before)-1].offset
	for i, o := range before {
		if o.turn != turn || o.offset != int64(i+1) {
			t.Fatalf("output %d: %+v", i, o)
		}
	}
	first.ws.CloseNow() // the connection drops mid-answer

	resumed := c.dialJSON(b, "alice")
	res := resumed.call("planner.watch", map[string]any{"subscription": "w2", "session": session, "turn": turn, "after": last})["result"].(map[string]any)
	if res["resumed"] != true || res["turn"] != turn || res["subscription"] != "w2" {
		t.Fatalf("watch result %v", res)
	}
	rest := resumed.readOutputs("w2", 1<<20)
	var text strings.Builder
	for i, o := range append(before, rest...) {
		if o.turn != turn || o.offset != int64(i+1) {
			t.Fatalf("output %d after resuming: %+v", i, o)
		}
		if o.typ == "text" {
			text.WriteString(o.text)
		}
	}
	if rest[len(rest)-1].typ != "done" || text.String() != answer {
		t.Fatalf("resumed to %q (%d outputs), want the whole answer and done", text.String(), len(rest))
	}
	// Once, not twice: the turn started by msg-1 is the only one.
	if m := resumed.next("w2", 500*time.Millisecond); m != nil {
		t.Fatalf("after done: %v", m)
	}
}
