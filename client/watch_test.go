package client_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/client"
)

// turnLog is a peer's record of one turn's outputs, which it replays to a
// planner.watch that asks to resume.
type turnLog struct {
	mu      sync.Mutex
	id      string
	outputs []map[string]any // offset i+1
}

// add records the turn's next output and returns it.
func (tl *turnLog) add(typ, text string) map[string]any {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	o := map[string]any{"session": "sess-1", "turn": tl.id, "offset": len(tl.outputs) + 1, "type": typ, "text": text}
	tl.outputs = append(tl.outputs, o)
	return o
}

// after returns the outputs after offset.
func (tl *turnLog) after(offset int) []map[string]any {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.outputs[min(offset, len(tl.outputs)):]
}

// to addresses o to subscription sub.
func to(sub string, o map[string]any) map[string]any {
	c := map[string]any{"subscription": sub}
	for k, v := range o {
		c[k] = v
	}
	return c
}

// turnSet is the turns a peer keeps, and the running one.
type turnSet struct {
	mu    sync.Mutex
	turns map[string]*turnLog
	cur   string
}

func newTurns(running string, turns ...*turnLog) *turnSet {
	ts := &turnSet{turns: map[string]*turnLog{}, cur: running}
	for _, tl := range turns {
		ts.turns[tl.id] = tl
	}
	return ts
}

func (ts *turnSet) running(id string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.cur = id
}

// forget drops a turn's record: it can no longer be resumed.
func (ts *turnSet) forget(id string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.turns, id)
}

// resumingPeer is a planner peer whose planner.watch resumes the turns in
// ts: {turn, after} replays that turn, {after} alone the running turn,
// before the answer, as the gateway does.
func resumingPeer(t *testing.T, ts *turnSet) *plannerPeer {
	pp := startPlannerPeer(t)
	pp.watch = func(pc *peerConn, p map[string]any) map[string]any {
		ts.mu.Lock()
		cur := ts.cur
		turn, _ := p["turn"].(string)
		if turn == "" {
			turn = cur
		}
		tl := ts.turns[turn]
		ts.mu.Unlock()
		sub := p["subscription"].(string)
		res := map[string]any{"subscription": sub, "running": cur != ""}
		after, ok := number(p["after"])
		if !ok {
			return res
		}
		res["resumed"] = tl != nil
		if tl != nil {
			res["turn"] = turn
			for _, o := range tl.after(after) {
				pp.notify(pc, "planner.output", to(sub, o))
			}
		}
		return res
	}
	return pp
}

// number is a decoded JSON or MessagePack integer.
func number(v any) (int, bool) {
	r := reflect.ValueOf(v)
	switch {
	case r.CanInt():
		return int(r.Int()), true
	case r.CanUint():
		return int(r.Uint()), true
	case r.CanFloat():
		return int(r.Float()), true
	}
	return 0, false
}

// readText reads w's outputs until done (or n outputs) and returns their
// offsets and the text they make.
func readText(t *testing.T, w *client.Watch, n int) (offsets []int64, text string) {
	t.Helper()
	var b strings.Builder
	timeout := time.After(30 * time.Second)
	for len(offsets) < n {
		select {
		case o, ok := <-w.Output():
			if !ok {
				t.Fatalf("watch ended: %v", w.Err())
			}
			offsets = append(offsets, o.Offset)
			b.WriteString(o.Text)
			if o.Type == client.OutputDone {
				return offsets, b.String()
			}
		case <-timeout:
			t.Fatalf("after %d outputs (%q): no more", len(offsets), b.String())
		}
	}
	return offsets, b.String()
}

func seqTo(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// A lagging close and a reconnect mid-turn resume from the last output
// delivered: each output once, in order, and no OnResume.
func TestPlannerWatchResumesFromPosition(t *testing.T) {
	t1 := &turnLog{id: "T1"}
	pp := resumingPeer(t, newTurns("T1", t1))
	c := dial(t, pp.url(), &client.Options{Token: client.StaticToken("tok")})
	ctx := context.Background()
	w, err := c.PlannerWatch(ctx, "sess-1", &client.WatchOptions{OnResume: func(bool) { t.Error("OnResume called") }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b", "c"} {
		pp.output(to(w.ID(), t1.add("text", s)))
	}
	if offs, text := readText(t, w, 3); text != "abc" || !reflect.DeepEqual(offs, seqTo(1, 3)) {
		t.Fatalf("live: %v %q", offs, text)
	}
	// Output the watch misses, then a lagging close.
	t1.add("text", "d")
	t1.add("text", "e")
	pp.notify(pp.last(), "stream.closed", map[string]any{"subscription": w.ID(), "reason": "lagging"})
	if offs, text := readText(t, w, 2); text != "de" || !reflect.DeepEqual(offs, seqTo(4, 5)) {
		t.Fatalf("after lagging: %v %q", offs, text)
	}
	// More missed output, and the connection drops.
	t1.add("text", "f")
	_ = pp.last().ws.Close(websocket.StatusGoingAway, "restart")
	if offs, text := readText(t, w, 1); text != "f" || !reflect.DeepEqual(offs, []int64{6}) {
		t.Fatalf("after the reconnect: %v %q", offs, text)
	}
	pp.output(to(w.ID(), t1.add("done", "")))
	if offs, _ := readText(t, w, 1); !reflect.DeepEqual(offs, []int64{7}) {
		t.Fatalf("live after resuming: %v", offs)
	}
	if turn, off := w.Position(); turn != "T1" || off != 7 {
		t.Fatalf("position %s %d", turn, off)
	}
	id := w.ID()
	want := []string{
		`planner.watch {"session":"sess-1","subscription":"` + id + `"}`,
		`planner.watch {"after":3,"session":"sess-1","subscription":"` + id + `","turn":"T1"}`,
		`planner.watch {"after":5,"session":"sess-1","subscription":"` + id + `","turn":"T1"}`,
	}
	if got := pp.takeRequests(); !reflect.DeepEqual(got, want) {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An output after a hole (one lost on the way) makes the watch give up its
// server watch and resume from the last output delivered; outputs
// delivered already are dropped.
func TestPlannerWatchRepairsGaps(t *testing.T) {
	t1, t2 := &turnLog{id: "T1"}, &turnLog{id: "T2"}
	ts := newTurns("T1", t1, t2)
	pp := resumingPeer(t, ts)
	c := dial(t, pp.url(), &client.Options{Token: client.StaticToken("tok")})
	ctx := context.Background()
	w, err := c.PlannerWatch(ctx, "sess-1", &client.WatchOptions{OnResume: func(bool) { t.Error("OnResume called") }})
	if err != nil {
		t.Fatal(err)
	}
	id := w.ID()
	pp.output(to(id, t1.add("text", "a")))
	pp.output(to(id, t1.add("text", "b")))
	pp.output(to(id, t1.outputs[0])) // a duplicate
	t1.add("text", "c")              // lost
	pp.output(to(id, t1.add("text", "d")))
	pp.output(to(id, t1.add("done", "")))
	if offs, text := readText(t, w, 10); text != "abcd" || !reflect.DeepEqual(offs, seqTo(1, 5)) {
		t.Fatalf("turn 1: %v %q", offs, text)
	}
	// The start of the next turn is lost.
	ts.running("T2")
	t2.add("message", "")
	t2.add("text", "x")
	pp.output(to(id, t2.add("text", "y")))
	pp.output(to(id, t2.add("done", "")))
	if offs, text := readText(t, w, 10); text != "xy" || !reflect.DeepEqual(offs, seqTo(1, 4)) {
		t.Fatalf("turn 2: %v %q", offs, text)
	}
	want := []string{
		`planner.watch {"session":"sess-1","subscription":"` + id + `"}`,
		`stream.unsubscribe {"subscription":"` + id + `"}`,
		`planner.watch {"after":2,"session":"sess-1","subscription":"` + id + `","turn":"T1"}`,
		`stream.unsubscribe {"subscription":"` + id + `"}`,
		`planner.watch {"after":0,"session":"sess-1","subscription":"` + id + `","turn":"T2"}`,
	}
	waitFor(t, "the requests", 30*time.Second, func() bool {
		pp.mu.Lock()
		defer pp.mu.Unlock()
		return len(pp.requests) >= len(want)
	})
	if got := pp.takeRequests(); !reflect.DeepEqual(got, want) {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// FromTurnStart asks for the running turn from its start; when the server
// cannot resume, OnResume runs once before the output that follows, which
// is taken from wherever it is.
func TestPlannerWatchFromTurnStartAndLostOutput(t *testing.T) {
	t1 := &turnLog{id: "T1"}
	ts := newTurns("T1", t1)
	pp := resumingPeer(t, ts)
	c := dial(t, pp.url(), &client.Options{Token: client.StaticToken("tok")})
	ctx := context.Background()
	for _, s := range []string{"a", "b"} {
		t1.add("text", s)
	}
	var mu sync.Mutex
	var log []string
	w, err := c.PlannerWatch(ctx, "sess-1", &client.WatchOptions{FromTurnStart: true, OnResume: func(running bool) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, fmt.Sprintf("resume %v", running))
	}})
	if err != nil {
		t.Fatal(err)
	}
	if offs, text := readText(t, w, 2); text != "ab" || !reflect.DeepEqual(offs, seqTo(1, 2)) {
		t.Fatalf("from the start: %v %q", offs, text)
	}
	// The turn's output is no longer kept: the server cannot resume.
	ts.forget("T1")
	t1.add("text", "c")
	_ = pp.last().ws.Close(websocket.StatusGoingAway, "restart")
	waitFor(t, "OnResume", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(log) == 1
	})
	pp.output(to(w.ID(), t1.add("text", "d")))
	pp.output(to(w.ID(), t1.add("done", "")))
	if offs, text := readText(t, w, 10); text != "d" || !reflect.DeepEqual(offs, seqTo(4, 5)) {
		t.Fatalf("after a lost resume: %v %q", offs, text)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(log, []string{"resume true"}) {
		t.Fatalf("OnResume calls %v", log)
	}
	reqs := pp.takeRequests()
	if len(reqs) != 2 || !strings.Contains(reqs[0], `"after":0`) || strings.Contains(reqs[0], `"turn"`) ||
		!strings.Contains(reqs[1], `"after":2,`) || !strings.Contains(reqs[1], `"turn":"T1"`) {
		t.Fatalf("requests %v", reqs)
	}
}
