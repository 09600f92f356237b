package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// view returns a copy of it as callers see it. Callers hold s.mu.
func (s *Store) view(it *item) *tracker.Item {
	out := it.Item
	out.BlockedBy = make([]string, 0, len(it.blockedBy))
	for k := range it.blockedBy {
		out.BlockedBy = append(out.BlockedBy, k)
	}
	slices.SortFunc(out.BlockedBy, byNumber)
	return &out
}

func byNumber(a, b string) int {
	_, na, _ := tracker.ParseItemKey(a)
	_, nb, _ := tracker.ParseItemKey(b)
	return cmp.Compare(na, nb)
}

// appendEvents appends evs to the log; the caller holds s.mu and changes its state only
// when this succeeds.
func (s *Store) appendEvents(ctx context.Context, op string, evs []streams.NewEvent) error {
	if _, err := s.log.Append(ctx, evs...); err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	return nil
}

func (s *Store) projectExists(ctx context.Context, project string) error {
	_, exists, err := s.log.Role(ctx, project, "-")
	if err != nil {
		return err
	}
	if !exists {
		return fault.Errorf(tracker.ErrNotFound, "project %s not found", project)
	}
	return nil
}

func (s *Store) Items(ctx context.Context, project string, filter tracker.ItemFilter, page tracker.ItemPage) (tracker.ItemList, error) {
	if err := page.Check(); err != nil {
		return tracker.ItemList{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.projectExists(ctx, project); err != nil {
		return tracker.ItemList{}, err
	}
	var match []*item
	for _, it := range s.items {
		if it.Project == project && it.Number > page.After && filter.Matches(&it.Item) {
			match = append(match, it)
		}
	}
	slices.SortFunc(match, func(a, b *item) int { return cmp.Compare(a.Number, b.Number) })
	list := tracker.ItemList{Items: []tracker.Item{}}
	bytes := 0
	for _, it := range match {
		v := s.view(it)
		if !page.Take(len(list.Items), bytes, v.Size()) {
			list.Next = list.Items[len(list.Items)-1].Number
			break
		}
		list.Items = append(list.Items, *v)
		bytes += v.Size()
	}
	// Item events are appended only under s.mu, so the head read now matches the items.
	head, err := s.log.Head(ctx)
	if err != nil {
		return tracker.ItemList{}, fmt.Errorf("memstore: items of %s: %w", project, err)
	}
	list.Seq = head
	return list, nil
}

func (s *Store) lookup(key string) (*item, error) {
	it, ok := s.items[key]
	if !ok {
		return nil, fault.Errorf(tracker.ErrNotFound, "item %s not found", key)
	}
	return it, nil
}

// lockItem locks the store and returns item key, or ErrNotFound; unlock undoes the lock.
func (s *Store) lockItem(key string) (it *item, unlock func(), err error) {
	s.mu.Lock()
	if it, err = s.lookup(key); err != nil {
		s.mu.Unlock()
		return nil, nil, err
	}
	return it, s.mu.Unlock, nil
}

func (s *Store) Item(ctx context.Context, key string) (*tracker.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	it, unlock, err := s.lockItem(key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.view(it), nil
}

func (s *Store) CreateItem(ctx context.Context, a tracker.Actor, project string, in tracker.ItemInput) (*tracker.Item, error) {
	if err := in.Check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.projectExists(ctx, project); err != nil {
		return nil, err
	}
	n := s.counters[project] + 1
	now := s.timestamp()
	it := &item{
		Item: tracker.Item{
			Key: tracker.ItemKey(project, n), ID: tracker.NewID(now), Project: project, Number: n,
			Title: in.Title, Description: in.Description, State: in.State, Version: 1,
			CreatedAt: now, UpdatedAt: now,
		},
		blockedBy: map[string]struct{}{}, blocks: map[string]struct{}{},
	}
	v := s.view(it)
	if err := s.appendEvents(ctx, "create item", []streams.NewEvent{tracker.ItemCreatedEvent(a, v)}); err != nil {
		return nil, err
	}
	s.counters[project] = n
	s.items[it.Key] = it
	return v, nil
}

func checkVersion(it *item, ifVersion *int64) error {
	if ifVersion != nil && *ifVersion != it.Version {
		return fault.Errorf(tracker.ErrPrecondition, "item %s is at version %d, not %d", it.Key, it.Version, *ifVersion)
	}
	return nil
}

func (s *Store) UpdateItem(ctx context.Context, a tracker.Actor, key string, patch tracker.ItemPatch, ifVersion *int64) (*tracker.Item, error) {
	if err := patch.Check(); err != nil {
		return nil, err
	}
	it, unlock, err := s.lockItem(key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := checkVersion(it, ifVersion); err != nil {
		return nil, err
	}
	before := s.view(it)
	after, changed := tracker.ApplyPatch(before, patch)
	if !changed {
		return before, nil
	}
	after.Version++
	after.UpdatedAt = s.timestamp()
	if err := s.appendEvents(ctx, "update item", tracker.UpdateEvents(a, before, &after)); err != nil {
		return nil, err
	}
	bb := after.BlockedBy
	after.BlockedBy = nil
	it.Item = after
	after.BlockedBy = bb
	return &after, nil
}

func (s *Store) DeleteItem(ctx context.Context, a tracker.Actor, key string, ifVersion *int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, err := s.lookup(key)
	if err != nil {
		return err
	}
	if err := checkVersion(it, ifVersion); err != nil {
		return err
	}
	now := s.timestamp()
	var evs []streams.NewEvent
	// Items this one blocks lose a blocker: a change of theirs.
	blocked := make([]string, 0, len(it.blocks))
	for k := range it.blocks {
		blocked = append(blocked, k)
	}
	slices.SortFunc(blocked, byNumber)
	views := make([]*tracker.Item, len(blocked))
	for i, k := range blocked {
		v := s.view(s.items[k])
		v.BlockedBy = slices.DeleteFunc(v.BlockedBy, func(b string) bool { return b == key })
		v.Version++
		v.UpdatedAt = now
		views[i] = v
		evs = append(evs, tracker.DependencyEvent(a, "dependency.removed", v, key))
	}
	// Its own blockers go with it.
	self := s.view(it)
	for _, b := range self.BlockedBy {
		evs = append(evs, tracker.DependencyEvent(a, "dependency.removed", self, b))
	}
	evs = append(evs, tracker.ItemDeletedEvent(a, self))
	if err := s.appendEvents(ctx, "delete item", evs); err != nil {
		return err
	}
	for i, k := range blocked {
		o := s.items[k]
		delete(o.blockedBy, key)
		o.Version, o.UpdatedAt = views[i].Version, now
	}
	for b := range it.blockedBy {
		delete(s.items[b].blocks, key)
	}
	delete(s.items, key)
	return nil
}

func (s *Store) AddDependency(ctx context.Context, a tracker.Actor, key, blocker string) (*tracker.Item, bool, error) {
	if _, err := tracker.CheckDependency(key, blocker); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, err := s.lookup(key)
	if err != nil {
		return nil, false, err
	}
	b, err := s.lookup(blocker)
	if err != nil {
		return nil, false, err
	}
	if _, ok := it.blockedBy[blocker]; ok {
		return s.view(it), false, nil
	}
	if s.reaches(key, blocker) {
		return nil, false, fault.Errorf(tracker.ErrConflict, "%s blocking %s would make a cycle", blocker, key)
	}
	v := s.view(it)
	v.BlockedBy = append(v.BlockedBy, blocker)
	slices.SortFunc(v.BlockedBy, byNumber)
	v.Version++
	v.UpdatedAt = s.timestamp()
	if err := s.appendEvents(ctx, "add dependency", []streams.NewEvent{tracker.DependencyEvent(a, "dependency.added", v, blocker)}); err != nil {
		return nil, false, err
	}
	it.blockedBy[blocker] = struct{}{}
	b.blocks[key] = struct{}{}
	it.Version, it.UpdatedAt = v.Version, v.UpdatedAt
	return v, true, nil
}

// reaches reports whether from blocks to, directly or through other items.
func (s *Store) reaches(from, to string) bool {
	seen := map[string]bool{from: true}
	stack := []string{from}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for next := range s.items[k].blocks {
			if next == to {
				return true
			}
			if !seen[next] {
				seen[next] = true
				stack = append(stack, next)
			}
		}
	}
	return false
}

func (s *Store) RemoveDependency(ctx context.Context, a tracker.Actor, key, blocker string) (*tracker.Item, error) {
	it, unlock, err := s.lockItem(key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, ok := it.blockedBy[blocker]; !ok {
		return nil, fault.Errorf(tracker.ErrNotFound, "%s does not block %s", blocker, key)
	}
	v := s.view(it)
	v.BlockedBy = slices.DeleteFunc(v.BlockedBy, func(b string) bool { return b == blocker })
	v.Version++
	v.UpdatedAt = s.timestamp()
	if err := s.appendEvents(ctx, "remove dependency", []streams.NewEvent{tracker.DependencyEvent(a, "dependency.removed", v, blocker)}); err != nil {
		return nil, err
	}
	delete(it.blockedBy, blocker)
	delete(s.items[blocker].blocks, key)
	it.Version, it.UpdatedAt = v.Version, v.UpdatedAt
	return v, nil
}
