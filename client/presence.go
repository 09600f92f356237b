package client

import (
	"context"
	"slices"
	"sync"
)

// PresenceSubject names a subject in a presence change.
type PresenceSubject struct {
	Subject string `json:"subject"`
}

// presenceChange is presence.changed's params.
type presenceChange struct {
	Subscription string            `json:"subscription"`
	Stream       string            `json:"stream"`
	Joined       []PresenceSubject `json:"joined"`
	Left         []PresenceSubject `json:"left"`
}

// presence is the subjects present on a subscription's stream, as the
// server's presence.changed notifications tell them: empty at each
// (re)subscribe, whose first notifications are a snapshot, then changed
// by each notification.
type presence struct {
	mu      sync.Mutex
	members map[string]struct{}
	changed chan struct{} // a signal, coalesced: capacity 1
}

func newPresence() *presence {
	return &presence{members: map[string]struct{}{}, changed: make(chan struct{}, 1)}
}

// reset forgets who was present: a new subscription's snapshot follows.
func (p *presence) reset() {
	p.mu.Lock()
	clear(p.members)
	p.mu.Unlock()
}

func (p *presence) apply(ch presenceChange) {
	p.mu.Lock()
	for _, s := range ch.Joined {
		p.members[s.Subject] = struct{}{}
	}
	for _, s := range ch.Left {
		delete(p.members, s.Subject)
	}
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func (p *presence) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.members))
	for s := range p.members {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Present returns the subjects present on the subscription's stream, sorted,
// for a subscription made with SubscribeOptions.Presence; nil otherwise, and
// once the subscription has ended. It follows the server across reconnects.
func (s *Subscription) Present() []string {
	if s.presence == nil {
		return nil
	}
	s.mu.Lock()
	done := s.feed.done
	s.mu.Unlock()
	if done {
		return nil
	}
	return s.presence.list()
}

// PresenceChanged receives a value (coalesced: one for any number of changes
// not yet taken) each time Present may have changed; nil for a subscription
// without Presence.
func (s *Subscription) PresenceChanged() <-chan struct{} {
	if s.presence == nil {
		return nil
	}
	return s.presence.changed
}

// PresenceMember is one subject of PresenceGet's answer.
type PresenceMember struct {
	Subject     string `json:"subject"`
	Connections int    `json:"connections"`
}

// PresenceMembers is presence.get's answer.
type PresenceMembers struct {
	Stream    string           `json:"stream"`
	Members   []PresenceMember `json:"members"`
	Truncated bool             `json:"truncated,omitempty"`
}

// PresenceGet returns who is present on stream now, on every replica, with
// their connection counts. It needs tracker.read on the project.
func (c *Client) PresenceGet(ctx context.Context, stream string) (PresenceMembers, error) {
	var m PresenceMembers
	err := c.Call(ctx, "presence.get", map[string]string{"stream": stream}, &m)
	return m, err
}
