package plannertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// Env is a fresh store, the event log it appends to, and the tracker store that keeps the
// projects sessions belong to.
type Env struct {
	Store   planner.Store
	Log     streams.Log
	Tracker tracker.Store
}

// Run runs the suite; newEnv returns an empty environment for each test.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	tests := []struct {
		name string
		f    func(t *testing.T, e *suite)
	}{
		{"Sessions", testSessions},
		{"SessionPaging", testSessionPaging},
		{"Messages", testMessages},
		{"MessageEvents", testMessageEvents},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Summaries", testSummaries},
		{"Leases", testLeases},
		{"LeaseExpiry", testLeaseExpiry},
		{"LeaseBatches", testLeaseBatches},
		{"TurnsPerSubject", testTurnsPerSubject},
		{"Outputs", testOutputs},
		{"OutputCut", testOutputCut},
		{"OutputExpiry", testOutputExpiry},
		{"OutputBatch", testOutputBatch},
		{"IdempotencyKeys", testIdempotencyKeys},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t)
			e := &suite{Env: env, ctx: ctxT(t)}
			for _, key := range []string{"WEB", "OPS"} {
				if _, err := env.Tracker.CreateProject(e.ctx, tracker.Actor{Kind: tracker.ActorHuman, Subject: "root"}, key, key+" project"); err != nil {
					t.Fatal(err)
				}
			}
			tc.f(t, e)
		})
	}
}

type suite struct {
	Env
	ctx context.Context
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var alice = tracker.Actor{Kind: tracker.ActorHuman, Subject: "alice"}

func (e *suite) session(t *testing.T, project, title string, at time.Time) *planner.Session {
	t.Helper()
	s := &planner.Session{ID: tracker.NewID(at), Project: project, Title: title, CreatedBy: "alice", CreatedAt: at.UTC().Truncate(time.Microsecond)}
	if err := e.Store.CreateSession(e.ctx, s); err != nil {
		t.Fatalf("create session: %v", err)
	}
	return s
}

func (e *suite) append(t *testing.T, id, role string, content any) *planner.Message {
	t.Helper()
	b, err := json.Marshal(content)
	if err != nil {
		t.Fatal(err)
	}
	a := alice
	if role != planner.RoleHuman {
		a = tracker.Actor{Kind: tracker.ActorAgent, Subject: "alice"}
	}
	m, err := e.Store.AppendMessage(e.ctx, id, planner.NewMessage{Role: role, Content: b, Actor: a})
	if err != nil {
		t.Fatalf("append %s message: %v", role, err)
	}
	return m
}

func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("stored content %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("content %s, want %s", got, want)
	}
}

func testSessions(t *testing.T, e *suite) {
	base := time.Now().Add(-time.Hour)
	s1 := e.session(t, "WEB", "first", base)
	s2 := e.session(t, "WEB", "second", base.Add(time.Minute))
	e.session(t, "OPS", "elsewhere", base.Add(2*time.Minute))

	got, err := e.Store.Session(e.ctx, s1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != s1.ID || got.Project != "WEB" || got.Title != "first" || got.CreatedBy != "alice" ||
		!got.CreatedAt.Equal(s1.CreatedAt) || got.Running {
		t.Fatalf("session %+v, want %+v", got, s1)
	}
	list, err := e.Store.Sessions(e.ctx, "WEB", planner.SessionPage{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 2 || list.Sessions[0].ID != s2.ID || list.Sessions[1].ID != s1.ID || list.Next != nil {
		t.Fatalf("sessions of WEB: %+v, want second then first", list)
	}
	if list, err := e.Store.Sessions(e.ctx, "NONE", planner.SessionPage{}); err != nil || len(list.Sessions) != 0 || list.Sessions == nil {
		t.Fatalf("sessions of an unknown project: %v, %v", list, err)
	}
	for _, id := range []string{tracker.NewID(time.Now()), "not-a-session", ""} {
		if _, err := e.Store.Session(e.ctx, id); !errors.Is(err, planner.ErrNotFound) {
			t.Errorf("session %q: %v, want ErrNotFound", id, err)
		}
	}
	err = e.Store.CreateSession(e.ctx, &planner.Session{ID: tracker.NewID(time.Now()), Project: "NOPE", CreatedBy: "alice", CreatedAt: time.Now()})
	if !errors.Is(err, planner.ErrNotFound) {
		t.Fatalf("session in an unknown project: %v, want ErrNotFound", err)
	}
}

func testMessages(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "", time.Now())
	human := e.append(t, s.ID, planner.RoleHuman, "create Fix login")
	asst := e.append(t, s.ID, planner.RoleAssistant, planner.AssistantContent{Text: "On it.",
		ToolCalls: []planner.ToolCall{{ID: "toolu_1", Name: "create_item", Input: json.RawMessage(`{"title":"Fix login"}`)}}})
	tool := e.append(t, s.ID, planner.RoleTool, planner.ToolContent{Results: []planner.ToolResult{{ToolUseID: "toolu_1", Tool: "create_item", Text: "WEB-1"}}})
	if human.Seq != 1 || asst.Seq != 2 || tool.Seq != 3 {
		t.Fatalf("seqs %d %d %d, want 1 2 3", human.Seq, asst.Seq, tool.Seq)
	}
	if human.CreatedAt.IsZero() || human.Session != s.ID || human.Role != planner.RoleHuman {
		t.Fatalf("message %+v", human)
	}
	msgs, err := e.Store.Messages(e.ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 {
		t.Fatalf("%d messages", len(msgs))
	}
	for i, want := range []*planner.Message{human, asst, tool} {
		got := msgs[i]
		if got.Seq != want.Seq || got.Role != want.Role || !got.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("message %d: %+v, want %+v", i, got, want)
		}
		sameJSON(t, got.Content, want.Content)
	}
	var text string
	if err := json.Unmarshal(msgs[0].Content, &text); err != nil || text != "create Fix login" {
		t.Fatalf("human content %s", msgs[0].Content)
	}
	later, err := e.Store.Messages(e.ctx, s.ID, 2)
	if err != nil || len(later) != 1 || later[0].Seq != 3 {
		t.Fatalf("messages after 2: %+v, %v", later, err)
	}

	_, err = e.Store.AppendMessage(e.ctx, tracker.NewID(time.Now()), planner.NewMessage{Role: planner.RoleHuman, Content: []byte(`"x"`), Actor: alice})
	if !errors.Is(err, planner.ErrNotFound) {
		t.Fatalf("append to an unknown session: %v, want ErrNotFound", err)
	}
	for _, bad := range []planner.NewMessage{
		{Role: "robot", Content: []byte(`"x"`), Actor: alice},
		{Role: planner.RoleHuman, Content: []byte(`{broken`), Actor: alice},
	} {
		if _, err := e.Store.AppendMessage(e.ctx, s.ID, bad); err == nil {
			t.Errorf("append %+v: no error", bad)
		}
	}
	msgs, err = e.Store.Messages(e.ctx, s.ID, 0)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("after refused appends: %d messages, %v", len(msgs), err)
	}
	if next := e.append(t, s.ID, planner.RoleHuman, "next"); next.Seq != 4 {
		t.Fatalf("seq after refused appends %d, want 4", next.Seq)
	}
}

// messageEvents returns the planner.message events of the project.
func (e *suite) messageEvents(t *testing.T, project string) []streams.Event {
	t.Helper()
	head, err := e.Log.Head(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := e.Log.ReadStream(e.ctx, streams.Stream{Kind: streams.StreamProject, Key: project}, 0, head, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var out []streams.Event
	for _, ev := range evs {
		if ev.Type == planner.EventMessage {
			out = append(out, ev)
		}
	}
	return out
}

type messagePayload struct {
	Session string `json:"session"`
	Seq     int64  `json:"seq"`
	Role    string `json:"role"`
}

func testMessageEvents(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "", time.Now())
	e.append(t, s.ID, planner.RoleHuman, "hello")
	m := e.append(t, s.ID, planner.RoleAssistant, planner.AssistantContent{Text: "hi", ToolCalls: []planner.ToolCall{}})
	_, _ = e.Store.AppendMessage(e.ctx, s.ID, planner.NewMessage{Role: "robot", Content: []byte(`"x"`), Actor: alice})

	evs := e.messageEvents(t, "WEB")
	if len(evs) != 2 {
		t.Fatalf("%d planner.message events, want 2: %+v", len(evs), evs)
	}
	for i, ev := range evs {
		var p messagePayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		wantRole, wantKind := planner.RoleHuman, tracker.ActorHuman
		if i == 1 {
			wantRole, wantKind = planner.RoleAssistant, tracker.ActorAgent
		}
		if ev.EntityType != "planner_session" || ev.EntityID != s.ID || ev.EntityKey != "" || ev.ProjectKey != "WEB" ||
			ev.ActorKind != wantKind || ev.ActorSubject != "alice" ||
			p != (messagePayload{Session: s.ID, Seq: int64(i + 1), Role: wantRole}) {
			t.Errorf("event %d: %+v payload %s", i, ev, ev.Payload)
		}
	}
	if !evs[1].OccurredAt.Equal(m.CreatedAt) {
		t.Errorf("event time %v, message time %v", evs[1].OccurredAt, m.CreatedAt)
	}
	if len(e.messageEvents(t, "OPS")) != 0 {
		t.Error("events on another project's stream")
	}
}

func testConcurrentAppends(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "", time.Now())
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				b, _ := json.Marshal(fmt.Sprintf("writer %d message %d", w, i))
				if _, err := e.Store.AppendMessage(e.ctx, s.ID, planner.NewMessage{Role: planner.RoleHuman, Content: b, Actor: alice}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	msgs, err := e.Store.Messages(e.ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != writers*each {
		t.Fatalf("%d messages, want %d", len(msgs), writers*each)
	}
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has seq %d", i, m.Seq)
		}
	}
	evs := e.messageEvents(t, "WEB")
	if len(evs) != writers*each {
		t.Fatalf("%d events, want %d", len(evs), writers*each)
	}
	seen := map[int64]bool{}
	for _, ev := range evs {
		var p messagePayload
		_ = json.Unmarshal(ev.Payload, &p)
		if seen[p.Seq] || p.Seq < 1 || p.Seq > writers*each {
			t.Fatalf("event for seq %d (duplicate or out of range)", p.Seq)
		}
		seen[p.Seq] = true
	}
}

func testSummaries(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "", time.Now())
	if sum, err := e.Store.Summary(e.ctx, s.ID); err != nil || sum != nil {
		t.Fatalf("summary of a new session: %+v, %v", sum, err)
	}
	for i := 0; i < 4; i++ {
		e.append(t, s.ID, planner.RoleHuman, fmt.Sprint("message ", i))
	}
	if err := e.Store.SaveSummary(e.ctx, &planner.Summary{Session: s.ID, UpTo: 2, Text: "two"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.SaveSummary(e.ctx, &planner.Summary{Session: s.ID, UpTo: 3, Text: "three"}); err != nil {
		t.Fatal(err)
	}
	sum, err := e.Store.Summary(e.ctx, s.ID)
	if err != nil || sum == nil || sum.UpTo != 3 || sum.Text != "three" || sum.Session != s.ID || sum.CreatedAt.IsZero() {
		t.Fatalf("summary %+v, %v; want up to 3", sum, err)
	}
	if err := e.Store.SaveSummary(e.ctx, &planner.Summary{Session: s.ID, UpTo: 3, Text: "three again"}); err != nil {
		t.Fatal(err)
	}
	if sum, _ := e.Store.Summary(e.ctx, s.ID); sum == nil || sum.Text != "three again" {
		t.Fatalf("replaced summary %+v", sum)
	}
	if err := e.Store.SaveSummary(e.ctx, &planner.Summary{Session: s.ID, UpTo: 9, Text: "beyond"}); !errors.Is(err, planner.ErrInvalid) {
		t.Fatalf("summary beyond the transcript: %v, want ErrInvalid", err)
	}
	if err := e.Store.SaveSummary(e.ctx, &planner.Summary{Session: tracker.NewID(time.Now()), UpTo: 1, Text: "x"}); !errors.Is(err, planner.ErrNotFound) {
		t.Fatalf("summary of an unknown session: %v, want ErrNotFound", err)
	}
	if msgs, _ := e.Store.Messages(e.ctx, s.ID, 0); len(msgs) != 4 {
		t.Fatalf("summaries changed the transcript: %d messages", len(msgs))
	}
}
