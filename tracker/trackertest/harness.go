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

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// harness is one subtest's store, the log it appends to, and a Service over them.
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

// listAll returns every item of project passing filter, from one page of the most a page
// holds, and its seq; more items than that are an error.
func listAll(ctx context.Context, svc *tracker.Service, a tracker.Actor, project string, filter tracker.ItemFilter) ([]tracker.Item, int64, error) {
	list, err := svc.ListItems(ctx, a, project, filter, tracker.ItemPage{Limit: 500})
	if err == nil && list.Next != 0 {
		err = fmt.Errorf("more than one page of items in %s", project)
	}
	return list.Items, list.Seq, err
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
	var te *fault.Error
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
