package trackertest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// Replica is a client's copy of one project's items, built from a snapshot and the events
// after it.
type Replica struct {
	Items map[string]*tracker.Item // by key
	Seq   int64                    // the last event applied, or the snapshot's seq
	paged bool                     // built from pages: see NewPagedReplica
}

// NewReplica starts a replica from a snapshot.
func NewReplica(items []tracker.Item, seq int64) *Replica {
	r := &Replica{Items: map[string]*tracker.Item{}, Seq: seq}
	for i := range items {
		it := items[i]
		it.BlockedBy = slices.Clone(it.BlockedBy)
		r.Items[it.Key] = &it
	}
	return r
}

// NewPagedReplica starts a replica from a snapshot loaded page by page, as the client recipe
// says: the items of every page and the first page's seq. A later page may already reflect
// some events after that seq, so they are applied idempotently: an event below its item's
// version is skipped; one at the item's version (or an item.created of an item held) is
// applied again without checking what it changes from, as its payload says what the item
// became; and one on an item no page had is skipped (the item was deleted before its page
// was read, and its item.deleted follows). One page is a snapshot like any other.
func NewPagedReplica(pages []tracker.ItemList) *Replica {
	var items []tracker.Item
	for _, p := range pages {
		items = append(items, p.Items...)
	}
	r := NewReplica(items, pages[0].Seq)
	r.paged = len(pages) > 1
	return r
}

// Apply applies one event. Events at or below Seq are already reflected and skipped;
// events that do not fit the replica's state (a version going back, an update of an unknown
// item) are errors, but for a paged replica's (NewPagedReplica).
func (r *Replica) Apply(ev *streams.Event) error {
	if ev.Seq <= r.Seq {
		return nil
	}
	r.Seq = ev.Seq
	if ev.EntityType != "item" {
		return nil
	}
	var p struct {
		Version     int64   `json:"version"`
		From        string  `json:"from"`
		To          string  `json:"to"`
		Blocker     string  `json:"blocker"`
		Blocked     string  `json:"blocked"`
		Title       *change `json:"title"`
		Description *change `json:"description"`
	}
	if ev.Type != "item.created" {
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return fmt.Errorf("event %d %s: payload %s: %v", ev.Seq, ev.Type, ev.Payload, err)
		}
	}
	if ev.Type == "item.created" {
		var it tracker.Item
		if err := json.Unmarshal(ev.Payload, &it); err != nil {
			return fmt.Errorf("event %d item.created: payload %s: %v", ev.Seq, ev.Payload, err)
		}
		if cur, ok := r.Items[it.Key]; ok && r.paged && cur.ID == it.ID {
			return nil
		}
		if _, ok := r.Items[it.Key]; ok || it.Key != ev.EntityKey || it.ID != ev.EntityID || it.Version != 1 {
			return fmt.Errorf("event %d: item.created %s (version %d) does not fit", ev.Seq, it.Key, it.Version)
		}
		r.Items[it.Key] = &it
		return nil
	}
	it, ok := r.Items[ev.EntityKey]
	if !ok && r.paged {
		return nil
	}
	if !ok {
		return fmt.Errorf("event %d %s: item %s unknown", ev.Seq, ev.Type, ev.EntityKey)
	}
	if it.ID != ev.EntityID {
		return fmt.Errorf("event %d %s: entity_id %s, item %s has id %s", ev.Seq, ev.Type, ev.EntityID, it.Key, it.ID)
	}
	if r.paged && p.Version < it.Version {
		return nil
	}
	again := r.paged && p.Version == it.Version // perhaps reflected already
	// Events of one write share the new version; deleting keeps the version.
	if p.Version < it.Version || p.Version > it.Version+1 {
		return fmt.Errorf("event %d %s on %s: version %d after %d", ev.Seq, ev.Type, it.Key, p.Version, it.Version)
	}
	switch ev.Type {
	case "item.updated":
		if p.Title == nil && p.Description == nil {
			return fmt.Errorf("event %d item.updated: no change in %s", ev.Seq, ev.Payload)
		}
		if p.Title != nil {
			if p.Title.From != it.Title && !again {
				return fmt.Errorf("event %d: title from %q, replica has %q", ev.Seq, p.Title.From, it.Title)
			}
			it.Title = p.Title.To
		}
		if p.Description != nil {
			if p.Description.From != it.Description && !again {
				return fmt.Errorf("event %d: description from %q, replica has %q", ev.Seq, p.Description.From, it.Description)
			}
			it.Description = p.Description.To
		}
	case "item.state_changed":
		if p.From != it.State && !again {
			return fmt.Errorf("event %d: state from %q, replica has %q", ev.Seq, p.From, it.State)
		}
		it.State = p.To
	case "dependency.added":
		if p.Blocked != it.Key || slices.Contains(it.BlockedBy, p.Blocker) && !again {
			return fmt.Errorf("event %d: dependency.added %s→%s does not fit %v", ev.Seq, p.Blocker, p.Blocked, it.BlockedBy)
		}
		it.BlockedBy = slices.DeleteFunc(it.BlockedBy, func(k string) bool { return k == p.Blocker })
		it.BlockedBy = append(it.BlockedBy, p.Blocker)
		slices.SortFunc(it.BlockedBy, byNumber)
	case "dependency.removed":
		if p.Blocked != it.Key || !slices.Contains(it.BlockedBy, p.Blocker) && !again {
			return fmt.Errorf("event %d: dependency.removed %s→%s does not fit %v", ev.Seq, p.Blocker, p.Blocked, it.BlockedBy)
		}
		it.BlockedBy = slices.DeleteFunc(it.BlockedBy, func(k string) bool { return k == p.Blocker })
	case "item.deleted":
		if p.Version != it.Version {
			return fmt.Errorf("event %d: item.deleted at version %d, replica has %d", ev.Seq, p.Version, it.Version)
		}
		delete(r.Items, it.Key)
		return nil
	default:
		return nil
	}
	it.Version = p.Version
	it.UpdatedAt = ev.OccurredAt
	return nil
}

type change struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func byNumber(a, b string) int {
	_, na, _ := tracker.ParseItemKey(a)
	_, nb, _ := tracker.ParseItemKey(b)
	return cmp.Compare(na, nb)
}

// Diff compares the replica with a snapshot as JSON (times at millisecond precision, as
// clients see them) and describes the differences; "" means equal.
func (r *Replica) Diff(items []tracker.Item) string {
	var b strings.Builder
	want := map[string]string{}
	for _, it := range items {
		j, _ := json.Marshal(it)
		want[it.Key] = string(j)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Items)) {
		j, _ := json.Marshal(r.Items[k])
		switch w, ok := want[k]; {
		case !ok:
			fmt.Fprintf(&b, "replica has %s, the server does not: %s\n", k, j)
		case w != string(j):
			fmt.Fprintf(&b, "%s differs:\n  replica %s\n  server  %s\n", k, j, w)
		}
		delete(want, k)
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		fmt.Fprintf(&b, "replica lacks %s: %s\n", k, want[k])
	}
	return b.String()
}

// WireToEvent turns a stream.event as a client receives it into an Event for Apply.
func WireToEvent(w *streams.WireEvent) streams.Event {
	e := streams.Event{
		Seq: w.Seq, Type: w.Type, EntityType: w.EntityType, EntityID: w.EntityID,
		OccurredAt: time.UnixMilli(w.OccurredAt).UTC(), ActorKind: w.Actor.Kind,
		ActorSubject: w.Actor.Subject, Payload: []byte(w.Payload),
	}
	if w.EntityKey != nil {
		e.EntityKey = *w.EntityKey
	}
	return e
}
