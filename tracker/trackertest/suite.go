package trackertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// Open returns a fresh, empty store and the event log it appends to; cleanups are registered
// on t.
type Open func(t *testing.T) (tracker.Store, streams.Log)

// Admin is the admin subject of the suite's services.
const Admin = "root"

// Actors of the suite.
var (
	Root  = tracker.Actor{Kind: tracker.ActorHuman, Subject: Admin}
	Alice = tracker.Actor{Kind: tracker.ActorHuman, Subject: "alice"} // admin of WEB
	Bob   = tracker.Actor{Kind: tracker.ActorHuman, Subject: "bob"}   // member of WEB
	Vic   = tracker.Actor{Kind: tracker.ActorHuman, Subject: "vic"}   // viewer of WEB
	Eve   = tracker.Actor{Kind: tracker.ActorHuman, Subject: "eve"}   // no role
	Agent = tracker.Actor{Kind: tracker.ActorAgent, Subject: "bob"}   // the planner for bob
	Bot   = tracker.Actor{Kind: tracker.ActorService, Subject: "bot"} // a service, member of WEB
)

// Run runs the suite; each subtest opens its own store. When the log is also a
// streams.ProjectStore, projects made through it are checked too.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		f    func(t *testing.T, h *harness)
	}{
		{"Projects", testProjects},
		{"Members", testMembers},
		{"CreateAndNumbering", testCreate},
		{"UpdateVersionsAndEvents", testUpdate},
		{"Preconditions", testPreconditions},
		{"Dependencies", testDependencies},
		{"Cycles", testCycles},
		{"DeleteCascades", testDeleteCascades},
		{"Permissions", testPermissions},
		{"Validation", testValidation},
		{"Filters", testFilters},
		{"CancelledWritesAppendNothing", testCancelled},
		{"SnapshotSeqUnderConcurrentWrites", testSnapshotConsistency},
		{"ConcurrentNumbering", testConcurrentNumbering},
		{"ProjectsMadeByOtherWriters", testForeignProjects},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store, log := open(t)
			h := &harness{t: t, store: store, log: log, svc: tracker.NewService(store, &tracker.Options{AdminSubjects: []string{Admin}})}
			tc.f(t, h)
		})
	}
}

type harness struct {
	t     *testing.T
	store tracker.Store
	log   streams.Log
	svc   *tracker.Service
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (h *harness) head() int64 {
	h.t.Helper()
	n, err := h.log.Head(ctxT(h.t))
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// eventsAfter returns every event after seq.
func (h *harness) eventsAfter(seq int64) []streams.Event {
	h.t.Helper()
	evs, err := h.log.ReadAfter(ctxT(h.t), seq, 1<<20)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

// web creates project WEB with alice (admin), bob (member), vic (viewer), bot (member).
func (h *harness) web() {
	h.t.Helper()
	h.project("WEB", Alice)
	ctx := ctxT(h.t)
	for _, m := range []struct{ s, r string }{{"bob", "member"}, {"vic", "viewer"}, {"bot", "member"}} {
		if _, err := h.svc.SetMember(ctx, Alice, "WEB", m.s, m.r); err != nil {
			h.t.Fatal(err)
		}
	}
}

// project creates a project whose admin is a (root creates it and hands it over).
func (h *harness) project(key string, a tracker.Actor) {
	h.t.Helper()
	ctx := ctxT(h.t)
	if _, err := h.svc.CreateProject(ctx, Root, key, key+" project"); err != nil {
		h.t.Fatal(err)
	}
	if a.Subject != Admin {
		if _, err := h.svc.SetMember(ctx, Root, key, a.Subject, "admin"); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) create(a tracker.Actor, project, title string) *tracker.Item {
	h.t.Helper()
	it, err := h.svc.CreateItem(ctxT(h.t), a, project, tracker.ItemInput{Title: title})
	if err != nil {
		h.t.Fatalf("create %q in %s: %v", title, project, err)
	}
	return it
}

func (h *harness) get(key string) *tracker.Item {
	h.t.Helper()
	it, err := h.svc.GetItem(ctxT(h.t), Bob, key)
	if err != nil {
		h.t.Fatalf("get %s: %v", key, err)
	}
	return it
}

func (h *harness) dep(key, blocker string) *tracker.Item {
	h.t.Helper()
	it, added, err := h.svc.AddDependency(ctxT(h.t), Bob, key, blocker)
	if err != nil || !added {
		h.t.Fatalf("%s blocks %s: added %v, %v", blocker, key, added, err)
	}
	return it
}

// wantErr checks that err matches sentinel and that the write appended nothing.
func (h *harness) wantErr(what string, before int64, err, sentinel error) {
	h.t.Helper()
	if !errors.Is(err, sentinel) {
		h.t.Fatalf("%s: error %v, want %v", what, err, sentinel)
	}
	var te *tracker.Error
	if !errors.As(err, &te) || te.Detail == "" {
		h.t.Fatalf("%s: error %v carries no caller detail", what, err)
	}
	if after := h.head(); after != before {
		h.t.Fatalf("%s failed but appended %d events", what, after-before)
	}
}

// wantEvents checks the events after seq: types, actor, entity, and returns them.
func (h *harness) wantEvents(after int64, a tracker.Actor, types ...string) []streams.Event {
	h.t.Helper()
	evs := h.eventsAfter(after)
	got := make([]string, len(evs))
	for i, e := range evs {
		got[i] = e.Type
		if e.ActorKind != a.Kind || e.ActorSubject != a.Subject {
			h.t.Errorf("event %d %s: actor (%s, %s), want (%s, %s)", e.Seq, e.Type, e.ActorKind, e.ActorSubject, a.Kind, a.Subject)
		}
	}
	if !slices.Equal(got, types) {
		h.t.Fatalf("events %v, want %v", got, types)
	}
	return evs
}

func payload(t *testing.T, e *streams.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		t.Fatalf("event %d payload %s: %v", e.Seq, e.Payload, err)
	}
	return m
}

func wantPayload(t *testing.T, e *streams.Event, want string) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.Payload, &g); err != nil {
		t.Fatal(err)
	}
	wj, _ := json.Marshal(w)
	gj, _ := json.Marshal(g)
	if string(wj) != string(gj) {
		t.Fatalf("event %d %s payload %s, want %s", e.Seq, e.Type, gj, wj)
	}
}

// wantItemEvent checks an item event's entity fields and that it happened when the item
// changed.
func wantItemEvent(t *testing.T, e *streams.Event, it *tracker.Item) {
	t.Helper()
	if e.ProjectKey != it.Project || e.EntityType != "item" || e.EntityKey != it.Key || e.EntityID != it.ID {
		t.Fatalf("event %d %s: project %s entity %s/%s/%s, want %s item/%s/%s", e.Seq, e.Type, e.ProjectKey,
			e.EntityType, e.EntityKey, e.EntityID, it.Project, it.Key, it.ID)
	}
	if !e.OccurredAt.Equal(it.UpdatedAt) {
		t.Fatalf("event %d %s occurred at %v, item updated at %v", e.Seq, e.Type, e.OccurredAt, it.UpdatedAt)
	}
}

func ptr[T any](v T) *T { return &v }

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func testProjects(t *testing.T, h *harness) {
	ctx := ctxT(t)
	start := h.head()
	p, err := h.svc.CreateProject(ctx, Root, "WEB", "Web site")
	if err != nil {
		t.Fatal(err)
	}
	if p.Key != "WEB" || p.Name != "Web site" || p.Role != "admin" || p.CreatedAt.IsZero() {
		t.Fatalf("created %+v", p)
	}
	evs := h.wantEvents(start, Root, "project.created", "member.granted")
	wantPayload(t, &evs[0], `{"key":"WEB","name":"Web site"}`)
	wantPayload(t, &evs[1], `{"subject":"root","role":"admin"}`)
	for _, e := range evs {
		if e.ProjectKey != "WEB" || e.EntityType != "project" || e.EntityKey != "WEB" {
			t.Fatalf("event %+v", e)
		}
	}
	role, exists, err := h.store.Role(ctx, "WEB", Admin)
	if err != nil || !exists || role != "admin" {
		t.Fatalf("creator's role %q %v %v", role, exists, err)
	}

	before := h.head()
	_, err = h.svc.CreateProject(ctx, Root, "WEB", "again")
	h.wantErr("duplicate project", before, err, tracker.ErrConflict)
	_, err = h.svc.CreateProject(ctx, Alice, "API", "API")
	h.wantErr("project by a non-admin", before, err, tracker.ErrForbidden)
	for _, bad := range [][2]string{{"web", "x"}, {"W-1", "x"}, {"", "x"}, {"TOOLONGPROJECTKEY12345", "x"}, {"API", ""}, {"API", "  "}} {
		_, err = h.svc.CreateProject(ctx, Root, bad[0], bad[1])
		h.wantErr(fmt.Sprintf("project %q %q", bad[0], bad[1]), before, err, tracker.ErrInvalid)
	}

	if _, err := h.svc.CreateProject(ctx, Root, "API", "API"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.SetMember(ctx, Root, "API", "alice", "viewer"); err != nil {
		t.Fatal(err)
	}
	keys := func(ps []tracker.Project) []string {
		var ks []string
		for _, p := range ps {
			ks = append(ks, p.Key+":"+p.Role)
		}
		return ks
	}
	ps, err := h.svc.Projects(ctx, Root)
	if err != nil || !slices.Equal(keys(ps), []string{"API:admin", "WEB:admin"}) {
		t.Fatalf("root's projects %v, %v", keys(ps), err)
	}
	ps, err = h.svc.Projects(ctx, Alice)
	if err != nil || !slices.Equal(keys(ps), []string{"API:viewer"}) {
		t.Fatalf("alice's projects %v, %v", keys(ps), err)
	}
	ps, err = h.svc.Projects(ctx, Eve)
	if err != nil || ps == nil || len(ps) != 0 {
		t.Fatalf("eve's projects %v, %v", ps, err)
	}
	// An admin subject sees projects without a role.
	if err := h.svc.RemoveMember(ctx, Root, "API", Admin); err != nil {
		t.Fatal(err)
	}
	ps, err = h.svc.Projects(ctx, Root)
	if err != nil || !slices.Equal(keys(ps), []string{"API:", "WEB:admin"}) {
		t.Fatalf("root's projects %v, %v", keys(ps), err)
	}
	got, err := h.svc.Project(ctx, Alice, "API")
	if err != nil || got.Name != "API" || got.Role != "viewer" {
		t.Fatalf("alice's API %+v %v", got, err)
	}
	if _, err := h.svc.Project(ctx, Eve, "API"); !errors.Is(err, tracker.ErrForbidden) {
		t.Fatalf("eve's API: %v", err)
	}
	if _, err := h.svc.Project(ctx, Root, "NOPE"); !errors.Is(err, tracker.ErrNotFound) {
		t.Fatalf("NOPE: %v", err)
	}
}

func testMembers(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.project("WEB", Alice)
	start := h.head()
	m, err := h.svc.SetMember(ctx, Alice, "WEB", "bob", "member")
	if err != nil || *m != (tracker.Member{Project: "WEB", Subject: "bob", Role: "member"}) {
		t.Fatalf("set member %+v %v", m, err)
	}
	evs := h.wantEvents(start, Alice, "member.granted")
	wantPayload(t, &evs[0], `{"subject":"bob","role":"member"}`)
	// A change of role is a grant too.
	start = h.head()
	if _, err := h.svc.SetMember(ctx, Root, "WEB", "bob", "viewer"); err != nil {
		t.Fatal(err)
	}
	evs = h.wantEvents(start, Root, "member.granted")
	wantPayload(t, &evs[0], `{"subject":"bob","role":"viewer"}`)
	if role, _, _ := h.store.Role(ctx, "WEB", "bob"); role != "viewer" {
		t.Fatalf("bob's role %q", role)
	}

	before := h.head()
	_, err = h.svc.SetMember(ctx, Bob, "WEB", "eve", "viewer")
	h.wantErr("grant by a viewer", before, err, tracker.ErrForbidden)
	_, err = h.svc.SetMember(ctx, Eve, "WEB", "eve", "admin")
	h.wantErr("grant by a stranger", before, err, tracker.ErrForbidden)
	_, err = h.svc.SetMember(ctx, Alice, "WEB", "eve", "owner")
	h.wantErr("bad role", before, err, tracker.ErrInvalid)
	_, err = h.svc.SetMember(ctx, Alice, "WEB", "eve", "")
	h.wantErr("empty role", before, err, tracker.ErrInvalid)
	_, err = h.svc.SetMember(ctx, Alice, "WEB", "", "viewer")
	h.wantErr("empty subject", before, err, tracker.ErrInvalid)
	_, err = h.svc.SetMember(ctx, Root, "NOPE", "eve", "viewer")
	h.wantErr("grant in a missing project", before, err, tracker.ErrNotFound)
	err = h.svc.RemoveMember(ctx, Alice, "WEB", "eve")
	h.wantErr("revoke a non-member", before, err, tracker.ErrNotFound)
	err = h.svc.RemoveMember(ctx, Bob, "WEB", "alice")
	h.wantErr("revoke by a viewer", before, err, tracker.ErrForbidden)

	start = h.head()
	if err := h.svc.RemoveMember(ctx, Alice, "WEB", "bob"); err != nil {
		t.Fatal(err)
	}
	evs = h.wantEvents(start, Alice, "member.revoked")
	wantPayload(t, &evs[0], `{"subject":"bob"}`)
	if role, exists, _ := h.store.Role(ctx, "WEB", "bob"); role != "" || !exists {
		t.Fatalf("bob's role after revoke %q", role)
	}
	// Service actors are recorded as such.
	start = h.head()
	if _, err := h.svc.SetMember(ctx, Alice, "WEB", "bot", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.SetMember(ctx, Bot, "WEB", "bob", "member"); err != nil {
		t.Fatal(err)
	}
	evs = h.eventsAfter(start)
	if len(evs) != 2 || evs[1].ActorKind != "service" || evs[1].ActorSubject != "bot" {
		t.Fatalf("events %+v", evs)
	}
}

func testCreate(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	h.project("API", Alice)
	start := h.head()
	t0 := time.Now().Add(-time.Second)
	a := h.create(Bob, "WEB", "First")
	if a.Key != "WEB-1" || a.Project != "WEB" || a.Number != 1 || a.Title != "First" || a.Description != "" ||
		a.State != tracker.StateBacklog || a.Version != 1 || len(a.BlockedBy) != 0 || a.BlockedBy == nil {
		t.Fatalf("created %+v", a)
	}
	if !uuidV7.MatchString(a.ID) {
		t.Fatalf("id %q is not a UUIDv7", a.ID)
	}
	if a.CreatedAt.Before(t0) || !a.CreatedAt.Equal(a.UpdatedAt) {
		t.Fatalf("times %v %v", a.CreatedAt, a.UpdatedAt)
	}
	evs := h.wantEvents(start, Bob, "item.created")
	wantItemEvent(t, &evs[0], a)
	aj, _ := json.Marshal(a)
	wantPayload(t, &evs[0], string(aj))
	if got := h.get("WEB-1"); !reflectEqual(got, a) {
		t.Fatalf("get %+v, created %+v", got, a)
	}

	b, err := h.svc.CreateItem(ctx, Agent, "WEB", tracker.ItemInput{Title: "Second", Description: "d", State: tracker.StateReady})
	if err != nil {
		t.Fatal(err)
	}
	if b.Key != "WEB-2" || b.State != "ready" || b.Description != "d" || b.ID <= a.ID {
		t.Fatalf("second %+v (first id %s)", b, a.ID)
	}
	evs = h.eventsAfter(h.head() - 1)
	if evs[0].ActorKind != "agent" || evs[0].ActorSubject != "bob" {
		t.Fatalf("agent's event actor (%s, %s)", evs[0].ActorKind, evs[0].ActorSubject)
	}
	// Numbers are per project and never reused.
	if c := h.create(Alice, "API", "Other"); c.Key != "API-1" {
		t.Fatalf("first of API is %s", c.Key)
	}
	c := h.create(Bob, "WEB", "Third")
	if err := h.svc.DeleteItem(ctx, Bob, c.Key, nil); err != nil {
		t.Fatal(err)
	}
	if d := h.create(Bob, "WEB", "Fourth"); d.Key != "WEB-4" {
		t.Fatalf("after deleting WEB-3, created %s", d.Key)
	}
	items, seq, err := h.svc.ListItems(ctx, Vic, "WEB", tracker.ItemFilter{})
	if err != nil || seq != h.head() {
		t.Fatalf("list: seq %d (head %d), %v", seq, h.head(), err)
	}
	var keys []string
	for _, it := range items {
		keys = append(keys, it.Key)
	}
	if !slices.Equal(keys, []string{"WEB-1", "WEB-2", "WEB-4"}) {
		t.Fatalf("items %v", keys)
	}
	for _, k := range []string{"WEB-3", "WEB-99", "API-2", "NOPE-1", "WEB-0", "WEB-01", "web-1", "WEB", "WEB-", "-1", "WEB-1-2"} {
		if _, err := h.svc.GetItem(ctx, Root, k); !errors.Is(err, tracker.ErrNotFound) && !errors.Is(err, tracker.ErrForbidden) {
			t.Fatalf("get %s: %v", k, err)
		}
		if ok, err := h.svc.ItemExists(ctx, k); ok || err != nil {
			t.Fatalf("ItemExists(%s) = %v, %v", k, ok, err)
		}
	}
	if ok, err := h.svc.ItemExists(ctx, "WEB-4"); !ok || err != nil {
		t.Fatalf("ItemExists(WEB-4) = %v, %v", ok, err)
	}
}

func reflectEqual(a, b *tracker.Item) bool {
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return string(aj) == string(bj) && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}

func testUpdate(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	a := h.create(Bob, "WEB", "Title")

	start := h.head()
	u, err := h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{Title: ptr("New title")}, nil)
	if err != nil || u.Version != 2 || u.Title != "New title" || !u.UpdatedAt.After(a.UpdatedAt) && !u.UpdatedAt.Equal(a.UpdatedAt) {
		t.Fatalf("update %+v %v", u, err)
	}
	evs := h.wantEvents(start, Bob, "item.updated")
	wantItemEvent(t, &evs[0], u)
	wantPayload(t, &evs[0], `{"title":{"from":"Title","to":"New title"},"version":2}`)

	start = h.head()
	u, err = h.svc.UpdateItem(ctx, Bot, a.Key, tracker.ItemPatch{Title: ptr("T3"), Description: ptr("D"), State: ptr("in_progress")}, ptr(int64(2)))
	if err != nil || u.Version != 3 || u.State != "in_progress" || u.Description != "D" {
		t.Fatalf("update %+v %v", u, err)
	}
	evs = h.wantEvents(start, Bot, "item.updated", "item.state_changed")
	wantPayload(t, &evs[0], `{"title":{"from":"New title","to":"T3"},"description":{"from":"","to":"D"},"version":3}`)
	wantPayload(t, &evs[1], `{"from":"backlog","to":"in_progress","version":3}`)
	wantItemEvent(t, &evs[0], u)
	wantItemEvent(t, &evs[1], u)

	start = h.head()
	u, err = h.svc.UpdateItem(ctx, Agent, a.Key, tracker.ItemPatch{State: ptr("done"), Title: ptr("T3")}, nil)
	if err != nil || u.Version != 4 || u.State != "done" {
		t.Fatalf("update %+v %v", u, err)
	}
	evs = h.wantEvents(start, Agent, "item.state_changed")
	wantPayload(t, &evs[0], `{"from":"in_progress","to":"done","version":4}`)

	// A patch that changes nothing is no change: no version, no event.
	start = h.head()
	u, err = h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{State: ptr("done"), Description: ptr("D")}, ptr(int64(4)))
	if err != nil || u.Version != 4 {
		t.Fatalf("no-op update %+v %v", u, err)
	}
	u, err = h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{}, nil)
	if err != nil || u.Version != 4 {
		t.Fatalf("empty update %+v %v", u, err)
	}
	h.wantEvents(start, Bob)
	if got := h.get(a.Key); !reflectEqual(got, u) {
		t.Fatalf("get %+v, updated %+v", got, u)
	}
	// Empty description is a change too.
	u, err = h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{Description: ptr("")}, nil)
	if err != nil || u.Version != 5 || u.Description != "" {
		t.Fatalf("clear description %+v %v", u, err)
	}
}

func testPreconditions(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	a := h.create(Bob, "WEB", "Title")
	if _, err := h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{Title: ptr("v2")}, ptr(int64(1))); err != nil {
		t.Fatal(err)
	}
	before := h.head()
	_, err := h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{Title: ptr("stale")}, ptr(int64(1)))
	h.wantErr("stale update", before, err, tracker.ErrPrecondition)
	_, err = h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{}, ptr(int64(3)))
	h.wantErr("future version", before, err, tracker.ErrPrecondition)
	err = h.svc.DeleteItem(ctx, Bob, a.Key, ptr(int64(1)))
	h.wantErr("stale delete", before, err, tracker.ErrPrecondition)
	_, err = h.svc.UpdateItem(ctx, Bob, "WEB-9", tracker.ItemPatch{Title: ptr("x")}, ptr(int64(1)))
	h.wantErr("update of a missing item", before, err, tracker.ErrNotFound)
	if got := h.get(a.Key); got.Title != "v2" || got.Version != 2 {
		t.Fatalf("after failed writes %+v", got)
	}
	start := h.head()
	if err := h.svc.DeleteItem(ctx, Bob, a.Key, ptr(int64(2))); err != nil {
		t.Fatal(err)
	}
	evs := h.wantEvents(start, Bob, "item.deleted")
	wantPayload(t, &evs[0], fmt.Sprintf(`{"key":"WEB-1","id":%q,"version":2}`, a.ID))
	if evs[0].EntityKey != "WEB-1" || evs[0].EntityID != a.ID {
		t.Fatalf("deleted event %+v", evs[0])
	}
	before = h.head()
	err = h.svc.DeleteItem(ctx, Bob, a.Key, nil)
	h.wantErr("delete twice", before, err, tracker.ErrNotFound)
}

func testDependencies(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	h.project("API", Alice)
	if _, err := h.svc.SetMember(ctx, Alice, "API", "bob", "member"); err != nil {
		t.Fatal(err)
	}
	a, b, c := h.create(Bob, "WEB", "A"), h.create(Bob, "WEB", "B"), h.create(Bob, "WEB", "C")
	other := h.create(Bob, "API", "Other")

	start := h.head()
	got := h.dep(a.Key, c.Key) // C blocks A
	if got.Version != 2 || !slices.Equal(got.BlockedBy, []string{"WEB-3"}) {
		t.Fatalf("after C blocks A: %+v", got)
	}
	evs := h.wantEvents(start, Bob, "dependency.added")
	wantPayload(t, &evs[0], `{"blocker":"WEB-3","blocked":"WEB-1","version":2}`)
	wantItemEvent(t, &evs[0], got)
	got = h.dep(a.Key, b.Key)
	if got.Version != 3 || !slices.Equal(got.BlockedBy, []string{"WEB-2", "WEB-3"}) {
		t.Fatalf("blocked_by not by number: %+v", got)
	}
	if g := h.get(b.Key); g.Version != 1 || len(g.BlockedBy) != 0 {
		t.Fatalf("the blocker changed: %+v", g)
	}

	// Idempotent: no event, no version.
	before := h.head()
	again, added, err := h.svc.AddDependency(ctx, Bob, a.Key, b.Key)
	if err != nil || added || again.Version != 3 {
		t.Fatalf("again: %+v %v %v", again, added, err)
	}
	if h.head() != before {
		t.Fatal("an existing dependency appended events")
	}
	_, _, err = h.svc.AddDependency(ctx, Bob, a.Key, a.Key)
	h.wantErr("self dependency", before, err, tracker.ErrInvalid)
	_, _, err = h.svc.AddDependency(ctx, Bob, a.Key, other.Key)
	h.wantErr("cross-project dependency", before, err, tracker.ErrInvalid)
	_, _, err = h.svc.AddDependency(ctx, Bob, a.Key, "API-99")
	h.wantErr("cross-project dependency on a missing item", before, err, tracker.ErrInvalid)
	_, _, err = h.svc.AddDependency(ctx, Bob, a.Key, "WEB-99")
	h.wantErr("missing blocker", before, err, tracker.ErrNotFound)
	_, _, err = h.svc.AddDependency(ctx, Bob, "WEB-99", a.Key)
	h.wantErr("missing blocked item", before, err, tracker.ErrNotFound)
	_, _, err = h.svc.AddDependency(ctx, Bob, a.Key, "nonsense")
	h.wantErr("malformed blocker", before, err, tracker.ErrNotFound)
	_, _, err = h.svc.AddDependency(ctx, Vic, a.Key, b.Key)
	h.wantErr("dependency by a viewer", before, err, tracker.ErrForbidden)
	_, err = h.svc.RemoveDependency(ctx, Bob, b.Key, a.Key)
	h.wantErr("remove a missing dependency", before, err, tracker.ErrNotFound)
	_, err = h.svc.RemoveDependency(ctx, Bob, a.Key, "WEB-99")
	h.wantErr("remove a dependency on a missing item", before, err, tracker.ErrNotFound)

	start = h.head()
	got, err = h.svc.RemoveDependency(ctx, Agent, a.Key, c.Key)
	if err != nil || got.Version != 4 || !slices.Equal(got.BlockedBy, []string{"WEB-2"}) {
		t.Fatalf("remove: %+v %v", got, err)
	}
	evs = h.wantEvents(start, Agent, "dependency.removed")
	wantPayload(t, &evs[0], `{"blocker":"WEB-3","blocked":"WEB-1","version":4}`)
	wantItemEvent(t, &evs[0], got)
	before = h.head()
	_, err = h.svc.RemoveDependency(ctx, Bob, a.Key, c.Key)
	h.wantErr("remove twice", before, err, tracker.ErrNotFound)
	if g := h.get(a.Key); !reflectEqual(g, got) {
		t.Fatalf("get %+v, want %+v", g, got)
	}
}

func testCycles(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	var k []string
	for i := range 6 {
		k = append(k, h.create(Bob, "WEB", fmt.Sprint("I", i)).Key)
	}
	// A chain k0 blocks k1 blocks ... blocks k4, and k0 blocks k5.
	for i := 0; i < 4; i++ {
		h.dep(k[i+1], k[i])
	}
	h.dep(k[5], k[0])
	before := h.head()
	for _, c := range [][2]string{{k[0], k[1]}, {k[0], k[4]}, {k[2], k[4]}, {k[0], k[5]}} {
		// Making c[1] block c[0] closes a loop: c[0] already blocks c[1], possibly through others.
		_, _, err := h.svc.AddDependency(ctx, Bob, c[0], c[1])
		h.wantErr(fmt.Sprintf("%s blocks %s", c[1], c[0]), before, err, tracker.ErrConflict)
	}
	// Not cycles: a shortcut along the chain, and a branch joining it.
	h.dep(k[4], k[0])
	h.dep(k[5], k[3]) // k3 blocks k5
	h.dep(k[5], k[4]) // k4 blocks k5 as well
	before = h.head()
	// Through the new branch: k1 → k2 → k3 → k5, so k5 cannot block k1.
	_, _, err := h.svc.AddDependency(ctx, Bob, k[1], k[5])
	h.wantErr("long cycle through a branch", before, err, tracker.ErrConflict)
	// Removing a link opens the loop again.
	if _, err := h.svc.RemoveDependency(ctx, Bob, k[3], k[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.RemoveDependency(ctx, Bob, k[5], k[0]); err != nil {
		t.Fatal(err)
	}
	h.dep(k[2], k[5]) // k5 blocks k2: k2 no longer reaches k5
}
