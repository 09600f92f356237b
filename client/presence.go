package client

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/ballet/gateway/protocol"
)

// PresenceSubject names a subject in a presence change.
type PresenceSubject = protocol.PresenceSubject

// presence is the subjects present on a subscription's stream and, with
// item presence, on each item of its project, as the server's
// presence.changed notifications tell them: empty at each (re)subscribe,
// whose first notifications are a snapshot, then changed by each
// notification.
type presence struct {
	own     bool                           // the subscription's own stream is followed
	mu      sync.Mutex                     //
	members map[string]map[string]struct{} // stream → subjects
	changed chan struct{}                  // a signal, coalesced: capacity 1
}

func newPresence(own bool) *presence {
	return &presence{own: own, members: map[string]map[string]struct{}{}, changed: make(chan struct{}, 1)}
}

// reset forgets who was present: a new subscription's snapshot follows.
func (p *presence) reset() {
	p.mu.Lock()
	clear(p.members)
	p.mu.Unlock()
}

func (p *presence) apply(ch protocol.PresenceChangedParams) {
	p.mu.Lock()
	m := p.members[ch.Stream]
	if m == nil {
		m = map[string]struct{}{}
		p.members[ch.Stream] = m
	}
	for _, s := range ch.Joined {
		m[s.Subject] = struct{}{}
	}
	for _, s := range ch.Left {
		delete(m, s.Subject)
	}
	if len(m) == 0 {
		delete(p.members, ch.Stream)
	}
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// list returns the subjects on stream, sorted and never nil.
func (p *presence) list(stream string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return sortedKeys(p.members[stream])
}

// items returns the subjects on every item stream, by item key.
func (p *presence) items() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]string{}
	for stream, m := range p.members {
		if key, ok := strings.CutPrefix(stream, "item:"); ok {
			out[key] = sortedKeys(m)
		}
	}
	return out
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Present returns the subjects present on the subscription's stream, sorted,
// for a subscription made with SubscribeOptions.Presence; nil otherwise, and
// once the subscription has ended. It follows the server across reconnects.
func (s *Subscription) Present() []string {
	if s.presence == nil || !s.presence.own || s.ended() {
		return nil
	}
	return s.presence.list(s.stream)
}

// ItemsPresent returns who has each item of the subscription's project open,
// by item key ("WEB-42"), each list sorted; only items that have someone
// present are in it. For a subscription made with
// SubscribeOptions.ItemPresence; nil otherwise, and once the subscription
// has ended. It follows the server across reconnects.
func (s *Subscription) ItemsPresent() map[string][]string {
	if s.presence == nil || s.ended() {
		return nil
	}
	if !s.itemPresence {
		return nil
	}
	return s.presence.items()
}

func (s *Subscription) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.feed.done
}

// PresenceChanged receives a value (coalesced: one for any number of changes
// not yet taken) each time Present or ItemsPresent may have changed; nil for
// a subscription with neither Presence nor ItemPresence.
func (s *Subscription) PresenceChanged() <-chan struct{} {
	if s.presence == nil {
		return nil
	}
	return s.presence.changed
}

// PresenceMember is one subject of PresenceGet's answer, with its connections.
type PresenceMember = protocol.PresenceMember

// PresenceMembers is presence.get's answer.
type PresenceMembers struct {
	Stream    string
	Members   []PresenceMember
	Truncated bool
	// Items, from PresenceGetItems: the project's items that have someone
	// present, in order of stream.
	Items []ItemMembers
	// ItemsTruncated: (item, subject) pairs past the server's bound were
	// left out of Items.
	ItemsTruncated bool
}

// ItemMembers is who has one item ("item:<KEY>") open.
type ItemMembers = protocol.ItemMembers

// PresenceGet returns who is present on stream now, on every replica, with
// their connection counts. It needs tracker.read on the project.
func (c *Client) PresenceGet(ctx context.Context, stream string) (PresenceMembers, error) {
	return c.presenceGet(ctx, protocol.PresenceGetParams{Stream: stream})
}

// PresenceGetItems is PresenceGet of a project ("project:<KEY>") that also
// answers who has each of its items open (Items).
func (c *Client) PresenceGetItems(ctx context.Context, project string) (PresenceMembers, error) {
	return c.presenceGet(ctx, protocol.PresenceGetParams{Stream: project, Items: true})
}

func (c *Client) presenceGet(ctx context.Context, p protocol.PresenceGetParams) (PresenceMembers, error) {
	var r protocol.PresenceGetResult
	if err := c.Call(ctx, protocol.PresenceGet, p, &r); err != nil {
		return PresenceMembers{}, err
	}
	m := PresenceMembers{Stream: r.Stream, Members: r.Members, Truncated: r.Truncated}
	if r.Items != nil {
		m.Items = *r.Items
	}
	if r.ItemsTruncated != nil {
		m.ItemsTruncated = *r.ItemsTruncated
	}
	return m, nil
}
