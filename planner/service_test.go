package planner_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/tracker"
)

func TestFullTurnWithTwoToolRounds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		svc, _ := b.service(t, nil, nil)
		id := b.newSession(t, svc)
		w1, w2 := watch(t, svc, alice, id), watch(t, svc, victor, id)
		if w1.running || w2.running {
			t.Fatal("running before any Send")
		}
		seq, err := svc.Send(ctxT(t), alice, id, "please plan the release")
		if err != nil || seq != 1 {
			t.Fatalf("Send = %d, %v", seq, err)
		}
		out1 := w1.until(t, planner.OutputDone)
		out2 := w2.until(t, planner.OutputDone)
		if !reflect.DeepEqual(out1, out2) {
			t.Fatalf("watchers saw different output:\n%v\n%v", shape(out1), shape(out2))
		}
		got := shape(out1)
		want := []string{
			"message 1",
			"text Creating the item.",
			`tool_call create_item {"title":"Alpha"}`,
			"message 2",
			"tool_result create_item ok",
			"message 3",
			"text Listing.",
			"tool_call list_items {}",
			"message 4",
			"tool_result list_items ok",
			"message 5",
		}
		if len(got) != len(want)+3 || !slices.Equal(got[:len(want)], want) ||
			!strings.HasPrefix(got[len(want)], `text All done: {"items":[{"key":"WEB-1","title":"Alpha"`) ||
			got[len(want)+1] != "message 6" || got[len(want)+2] != "done end_turn" {
			t.Fatalf("output:\n%s", strings.Join(got, "\n"))
		}
		for _, o := range out1 {
			if o.Session != id {
				t.Fatalf("output of another session: %+v", o)
			}
		}

		// The tool's change is the agent's, for alice.
		created := events(t, b.log, "WEB", "item.created")
		if len(created) != 1 || created[0].ActorKind != tracker.ActorAgent || created[0].ActorSubject != "alice" || created[0].EntityKey != "WEB-1" {
			t.Fatalf("item.created events %+v", created)
		}
		// Every stored message has its event.
		msgEvents := events(t, b.log, "WEB", planner.EventMessage)
		msgs := transcript(t, svc, id)
		if roles(msgs) != "human assistant tool assistant tool assistant" || len(msgEvents) != len(msgs) {
			t.Fatalf("transcript %s with %d events", roles(msgs), len(msgEvents))
		}
		for i, ev := range msgEvents {
			var p struct {
				Session string `json:"session"`
				Seq     int64  `json:"seq"`
				Role    string `json:"role"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			kind := tracker.ActorAgent
			if i == 0 {
				kind = tracker.ActorHuman
			}
			if p.Session != id || p.Seq != msgs[i].Seq || p.Role != msgs[i].Role || ev.EntityType != "planner_session" ||
				ev.EntityID != id || ev.EntityKey != "" || ev.ActorKind != kind || ev.ActorSubject != "alice" {
				t.Errorf("event %d: %+v %s", i, ev, ev.Payload)
			}
		}
		var human string
		if err := json.Unmarshal(msgs[0].Content, &human); err != nil || human != "please plan the release" {
			t.Fatalf("human content %s", msgs[0].Content)
		}
		var a planner.AssistantContent
		if err := json.Unmarshal(msgs[1].Content, &a); err != nil || a.Text != "Creating the item." || len(a.ToolCalls) != 1 ||
			a.ToolCalls[0].Name != "create_item" || a.ToolCalls[0].ID == "" {
			t.Fatalf("assistant content %s", msgs[1].Content)
		}
		var tc planner.ToolContent
		if err := json.Unmarshal(msgs[2].Content, &tc); err != nil || len(tc.Results) != 1 || tc.Results[0].ToolUseID != a.ToolCalls[0].ID ||
			tc.Results[0].IsError || !strings.Contains(tc.Results[0].Text, `"key":"WEB-1"`) {
			t.Fatalf("tool content %s", msgs[2].Content)
		}

		// done comes after the session is free: a Send right away is accepted, every time.
		for i := 0; i < 3; i++ {
			if _, err := svc.Send(ctxT(t), alice, id, "hello again"); err != nil {
				t.Fatalf("Send right after done: %v", err)
			}
			if got := shape(w1.until(t, planner.OutputDone)); got[len(got)-1] != "done end_turn" {
				t.Fatalf("output %v", got)
			}
		}
	})
}

func TestConflictAndCancelMidStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		svc, _ := b.service(t, nil, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		if _, err := svc.Send(ctxT(t), alice, id, "think slowly"); err != nil {
			t.Fatal(err)
		}
		w.until(t, planner.OutputText)
		if _, err := svc.Send(ctxT(t), alice, id, "another"); !errors.Is(err, planner.ErrConflict) {
			t.Fatalf("second Send: %v, want ErrConflict", err)
		}
		if w2 := watch(t, svc, alice, id); !w2.running {
			t.Fatal("Watch does not report the running turn")
		}
		if err := svc.Cancel(ctxT(t), victor, id); !errors.Is(err, planner.ErrForbidden) {
			t.Fatalf("viewer Cancel: %v, want ErrForbidden", err)
		}
		if err := svc.Cancel(ctxT(t), alice, id); err != nil {
			t.Fatal(err)
		}
		rest := shape(w.until(t, planner.OutputDone))
		if rest[len(rest)-1] != "done cancelled" || slices.ContainsFunc(rest, func(s string) bool { return strings.HasPrefix(s, "error") || strings.HasPrefix(s, "message") }) {
			t.Fatalf("output after cancel: %v", rest)
		}
		// Nothing half-written: the transcript holds the human message only.
		if msgs := transcript(t, svc, id); roles(msgs) != "human" {
			t.Fatalf("transcript after cancel: %s", roles(msgs))
		}
		if n := len(events(t, b.log, "WEB", planner.EventMessage)); n != 1 {
			t.Fatalf("%d planner.message events after cancel, want 1", n)
		}
		if err := svc.Cancel(ctxT(t), alice, id); err != nil {
			t.Fatalf("Cancel without a turn: %v", err)
		}
		// The session is usable.
		if _, err := svc.Send(ctxT(t), alice, id, "hello"); err != nil {
			t.Fatal(err)
		}
		if got := shape(w.until(t, planner.OutputDone)); got[len(got)-1] != "done end_turn" {
			t.Fatalf("output %v", got)
		}
		if msgs := transcript(t, svc, id); roles(msgs) != "human human assistant" {
			t.Fatalf("transcript %s", roles(msgs))
		}
	})
}

func TestCancelKeepsStoredMessages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		svc, rec := b.service(t, nil, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		if _, err := svc.Send(ctxT(t), alice, id, "toolpause"); err != nil {
			t.Fatal(err)
		}
		w.until(t, planner.OutputToolResult)
		w.until(t, planner.OutputMessage) // the tool message
		waitFor(t, "the second model call", func() bool { return len(rec.requests()) == 2 })
		if err := svc.Cancel(ctxT(t), alice, id); err != nil {
			t.Fatal(err)
		}
		if got := shape(w.until(t, planner.OutputDone)); got[len(got)-1] != "done cancelled" {
			t.Fatalf("output %v", got)
		}
		if msgs := transcript(t, svc, id); roles(msgs) != "human assistant tool" {
			t.Fatalf("transcript %s", roles(msgs))
		}
		// The next turn's context pairs the old tool call with its result.
		if _, err := svc.Send(ctxT(t), alice, id, "hello"); err != nil {
			t.Fatal(err)
		}
		w.until(t, planner.OutputDone)
		reqs := rec.requests()
		last := reqs[len(reqs)-1]
		if len(last.Messages) != 3 || last.Messages[2].Content[0].Type != "tool_result" || last.Messages[2].Content[1].Text != "hello" {
			t.Fatalf("context of the next turn: %+v", last.Messages)
		}
	})
}

func TestMaxRounds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		svc, _ := b.service(t, &planner.Options{MaxRounds: 2}, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		if _, err := svc.Send(ctxT(t), alice, id, "loop forever"); err != nil {
			t.Fatal(err)
		}
		got := shape(w.until(t, planner.OutputDone))
		want := []string{
			"message 1",
			"tool_call list_items {}", "message 2", "tool_result list_items ok", "message 3",
			"tool_call list_items {}", "message 4", "tool_result list_items error", "message 5",
			"error the planner stopped after 2 rounds without finishing",
			"done max_rounds",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("output:\n%s", strings.Join(got, "\n"))
		}
		msgs := transcript(t, svc, id)
		var tc planner.ToolContent
		if err := json.Unmarshal(msgs[4].Content, &tc); err != nil || !tc.Results[0].IsError || !strings.Contains(tc.Results[0].Text, "limit of 2 rounds") {
			t.Fatalf("last tool message %s", msgs[4].Content)
		}
		if _, err := svc.Send(ctxT(t), alice, id, "hello"); err != nil {
			t.Fatalf("Send after max rounds: %v", err)
		}
		w.until(t, planner.OutputDone)
	})
}

func TestProviderFailure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		svc, _ := b.service(t, nil, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		if _, err := svc.Send(ctxT(t), alice, id, "fail please"); err != nil {
			t.Fatal(err)
		}
		got := shape(w.until(t, planner.OutputDone))
		want := []string{"message 1", "text partial", "error the model provider failed: scripted: api_error: upstream exploded", "done error"}
		if !slices.Equal(got, want) {
			t.Fatalf("output:\n%s", strings.Join(got, "\n"))
		}
		if msgs := transcript(t, svc, id); roles(msgs) != "human" {
			t.Fatalf("transcript %s", roles(msgs))
		}
		if _, err := svc.Send(ctxT(t), alice, id, "hello"); err != nil {
			t.Fatalf("Send after a failure: %v", err)
		}
		if got := shape(w.until(t, planner.OutputDone)); got[len(got)-1] != "done end_turn" {
			t.Fatalf("output %v", got)
		}
	})
}

func TestToolErrorsGoBackToTheModel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		svc, rec := b.service(t, nil, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		if _, err := svc.Send(ctxT(t), alice, id, "missing items"); err != nil {
			t.Fatal(err)
		}
		outs := w.until(t, planner.OutputDone)
		var results []planner.Output
		for _, o := range outs {
			if o.Type == planner.OutputToolResult {
				results = append(results, o)
			}
		}
		if len(results) != 2 || !*results[0].IsError || !*results[1].IsError ||
			results[0].Text != "item WEB-999 not found" || results[1].Text != "invalid input: item OPS-1 is not in project WEB" {
			t.Fatalf("tool results %+v", results)
		}
		if got := shape(outs); got[len(got)-1] != "done end_turn" {
			t.Fatalf("output %v", got)
		}
		reqs := rec.requests()
		last := reqs[len(reqs)-1].Messages
		tr := last[len(last)-1].Content
		if len(tr) != 2 || !tr[0].IsError || tr[0].Type != "tool_result" {
			t.Fatalf("the model did not get the error results: %+v", tr)
		}
	})
}

func TestToolsCheckPermissionsAtEachCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		svc, rec := b.service(t, nil, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		// Alice becomes a viewer after sending: the tools keep her permissions, call by call.
		rec.setBefore(func(n int) {
			if n == 1 {
				if _, err := b.trk.SetMember(ctxT(t), tracker.Actor{Kind: tracker.ActorHuman, Subject: "root"}, "WEB", "alice", "viewer"); err != nil {
					t.Error(err)
				}
			}
		})
		if _, err := svc.Send(ctxT(t), alice, id, "please plan"); err != nil {
			t.Fatal(err)
		}
		outs := w.until(t, planner.OutputDone)
		var results []planner.Output
		for _, o := range outs {
			if o.Type == planner.OutputToolResult {
				results = append(results, o)
			}
		}
		if len(results) != 2 || !*results[0].IsError || results[0].Text != "tracker.write on project WEB is required" || *results[1].IsError {
			t.Fatalf("tool results %+v", results)
		}
		if got := shape(outs); got[len(got)-1] != "done end_turn" {
			t.Fatalf("output %v", got)
		}
		if n := len(events(t, b.log, "WEB", "item.created")); n != 0 {
			t.Fatalf("%d items created without permission", n)
		}
	})
}

func TestPermissionsAndArguments(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		svc, _ := b.service(t, nil, nil)
		ctx := ctxT(t)
		id := b.newSession(t, svc)
		check := func(what string, err, want error) {
			t.Helper()
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", what, err, want)
			}
		}
		_, err := svc.Send(ctx, victor, id, "hello")
		check("viewer Send", err, planner.ErrForbidden)
		_, err = svc.Send(ctx, bot, id, "hello")
		check("non-human Send", err, planner.ErrForbidden)
		_, err = svc.Send(ctx, mallory, id, "hello")
		check("non-member Send", err, planner.ErrNotFound) // not found or not theirs: one answer
		_, _, err = svc.Watch(ctx, mallory, id, func(planner.Output) bool { return true })
		check("non-member Watch", err, planner.ErrNotFound)
		check("non-member Cancel", svc.Cancel(ctx, mallory, id), planner.ErrNotFound)
		_, err = svc.Send(ctx, alice, tracker.NewID(time.Now()), "hello")
		check("unknown session", err, planner.ErrNotFound)
		_, err = svc.Send(ctx, alice, "not-a-session", "hello")
		check("malformed session", err, planner.ErrNotFound)
		_, _, err = svc.Watch(ctx, alice, "x", func(planner.Output) bool { return true })
		check("Watch of a malformed session", err, planner.ErrNotFound)
		_, err = svc.Send(ctx, alice, id, " \n ")
		check("empty text", err, planner.ErrInvalid)
		_, err = svc.Send(ctx, alice, id, strings.Repeat("x", planner.DefaultMaxMessageBytes+1))
		check("oversized text", err, planner.ErrInvalid)
		_, err = svc.CreateSession(ctx, victor, "WEB", "")
		check("viewer CreateSession", err, planner.ErrForbidden)
		_, err = svc.CreateSession(ctx, bot, "WEB", "")
		check("non-human CreateSession", err, planner.ErrForbidden)
		_, err = svc.CreateSession(ctx, alice, "NOPE", "")
		check("CreateSession in an unknown project", err, planner.ErrNotFound)
		_, err = svc.CreateSession(ctx, alice, "WEB", strings.Repeat("t", planner.MaxTitle+1))
		check("long title", err, planner.ErrInvalid)
		_, err = svc.Sessions(ctx, mallory, "WEB", planner.SessionPage{})
		check("non-member Sessions", err, planner.ErrForbidden)
		_, _, err = svc.Transcript(ctx, mallory, id)
		check("non-member Transcript", err, planner.ErrNotFound)

		// What a viewer may do.
		if _, stop, err := svc.Watch(ctx, victor, id, func(planner.Output) bool { return true }); err != nil {
			t.Errorf("viewer Watch: %v", err)
		} else {
			stop()
			stop()
		}
		if _, _, err := svc.Transcript(ctx, victor, id); err != nil {
			t.Errorf("viewer Transcript: %v", err)
		}
		if _, err := svc.Send(ctx, alice, id, strings.Repeat("x", planner.DefaultMaxMessageBytes)); err != nil {
			t.Errorf("Send of DefaultMaxMessageBytes bytes: %v", err)
		}
		if msgs := transcript(t, svc, id); len(msgs) < 1 {
			t.Fatal("no message stored")
		}
	})
}

func TestCloseEndsRunningTurns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		bus := b.bus(t)
		svc, _ := b.service(t, nil, bus)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		if _, err := svc.Send(ctxT(t), alice, id, "slow"); err != nil {
			t.Fatal(err)
		}
		w.until(t, planner.OutputText)
		if err := svc.Close(); err != nil {
			t.Fatal(err)
		}
		got := shape(w.until(t, planner.OutputDone))
		if got[len(got)-2] != "error the planner was stopped: the server is shutting down" || got[len(got)-1] != "done error" {
			t.Fatalf("output on close: %v", got)
		}
		if _, err := svc.Send(ctxT(t), alice, id, "hello"); !errors.Is(err, planner.ErrClosed) {
			t.Fatalf("Send after Close: %v", err)
		}
		if err := svc.Close(); err != nil {
			t.Fatal(err)
		}
		// The lease was released: another Service takes the session at once.
		next, _ := b.service(t, nil, bus)
		w2 := watch(t, next, alice, id)
		if w2.running {
			t.Fatal("still running after Close")
		}
		if _, err := next.Send(ctxT(t), alice, id, "hello"); err != nil {
			t.Fatal(err)
		}
		w2.until(t, planner.OutputDone)
	})
}

func TestWatchEnds(t *testing.T) {
	b := newBackend(t, "memory")
	svc, _ := b.service(t, &planner.Options{WatchQueue: 1}, nil)
	id := b.newSession(t, svc)

	// fn returning false ends the watch.
	calls := make(chan planner.Output, 100)
	_, stop, err := svc.Watch(ctxT(t), alice, id, func(o planner.Output) bool {
		calls <- o
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	// A watch that falls behind ends with a lagging output.
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before Close, which waits for fn
	lagged := make(chan planner.Output, 100)
	_, stop2, err := svc.Watch(ctxT(t), alice, id, func(o planner.Output) bool {
		<-release
		lagged <- o
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()

	if _, err := svc.Send(ctxT(t), alice, id, "please plan"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the end of the turn", func() bool {
		s, _, err := svc.Transcript(ctxT(t), alice, id)
		return err == nil && !s.Running && len(transcript(t, svc, id)) == 6
	})
	unblock()
	var last planner.Output
	for o := range lagged {
		last = o
		if o.Type == planner.OutputLagging {
			break
		}
	}
	if last.Type != planner.OutputLagging || last.Session != id {
		t.Fatalf("last output of a lagging watch: %+v", last)
	}
	// Outputs reach watchers with their window, which may close after the turn has ended.
	waitFor(t, "the watch that returned false to be called", func() bool { return len(calls) > 0 })
	time.Sleep(100 * time.Millisecond)
	if len(calls) != 1 {
		t.Fatalf("fn returning false was called %d times", len(calls))
	}
}
