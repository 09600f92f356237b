package tracker

import (
	"encoding/json"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/streams"
)

// The helpers below build the events of item writes, so that every store appends exactly the
// same ones. Each event's OccurredAt is the changed item's UpdatedAt.

// ItemCreatedEvent is item.created; its payload is the item.
func ItemCreatedEvent(a Actor, it *Item) streams.NewEvent {
	return itemEvent(a, it, "item.created", it)
}

type fieldChange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ApplyPatch returns before with p applied, and whether anything changed. Version and
// UpdatedAt are left for the caller to advance.
func ApplyPatch(before *Item, p ItemPatch) (after Item, changed bool) {
	after = *before
	if p.Title != nil && *p.Title != before.Title {
		after.Title, changed = *p.Title, true
	}
	if p.Description != nil && *p.Description != before.Description {
		after.Description, changed = *p.Description, true
	}
	if p.State != nil && *p.State != before.State {
		after.State, changed = *p.State, true
	}
	return after, changed
}

// UpdateEvents returns the events of an update from before to after: item.updated when the
// title or description changed, then item.state_changed when the state did.
func UpdateEvents(a Actor, before, after *Item) []streams.NewEvent {
	var evs []streams.NewEvent
	upd := map[string]any{}
	if before.Title != after.Title {
		upd["title"] = fieldChange{before.Title, after.Title}
	}
	if before.Description != after.Description {
		upd["description"] = fieldChange{before.Description, after.Description}
	}
	if len(upd) > 0 {
		upd["version"] = after.Version
		evs = append(evs, itemEvent(a, after, "item.updated", upd))
	}
	if before.State != after.State {
		evs = append(evs, itemEvent(a, after, "item.state_changed", struct {
			From    string `json:"from"`
			To      string `json:"to"`
			Version int64  `json:"version"`
		}{before.State, after.State, after.Version}))
	}
	return evs
}

// ItemDeletedEvent is item.deleted {key, id, version}.
func ItemDeletedEvent(a Actor, it *Item) streams.NewEvent {
	return itemEvent(a, it, "item.deleted", struct {
		Key     string `json:"key"`
		ID      string `json:"id"`
		Version int64  `json:"version"`
	}{it.Key, it.ID, it.Version})
}

// DependencyEvent is dependency.added or dependency.removed (typ) on the blocked item, as it
// is after the change.
func DependencyEvent(a Actor, typ string, blocked *Item, blocker string) streams.NewEvent {
	return itemEvent(a, blocked, typ, struct {
		Blocker string `json:"blocker"`
		Blocked string `json:"blocked"`
		Version int64  `json:"version"`
	}{blocker, blocked.Key, blocked.Version})
}

func itemEvent(a Actor, it *Item, typ string, payload any) streams.NewEvent {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err) // plain structs and maps of them always marshal
	}
	return streams.NewEvent{
		ProjectKey: it.Project, Type: typ, EntityType: "item", EntityID: it.ID, EntityKey: it.Key,
		OccurredAt: it.UpdatedAt, ActorKind: a.Kind, ActorSubject: a.Subject, Payload: b,
	}
}

// CheckDependency validates "blocker blocks key" before any lookup: both keys well formed
// (ErrNotFound otherwise), different (ErrInvalid) and in the same project (ErrInvalid). It
// returns the project.
func CheckDependency(key, blocker string) (string, error) {
	p, _, ok := ParseItemKey(key)
	if !ok {
		return "", fault.Errorf(ErrNotFound, "item %s not found", key)
	}
	bp, _, ok := ParseItemKey(blocker)
	switch {
	case !ok:
		return "", fault.Errorf(ErrNotFound, "item %s not found", blocker)
	case blocker == key:
		return "", fault.Errorf(ErrInvalid, "an item cannot block itself")
	case bp != p:
		return "", fault.Errorf(ErrInvalid, "%s is in another project than %s", blocker, key)
	}
	return p, nil
}
