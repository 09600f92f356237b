package presence

import (
	"slices"
	"strings"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/protocol"
)

// ChunkSize is the most subjects (joined and left together) one presence.changed carries: a
// longer change goes out as several notifications, one after the other.
const ChunkSize = 100

// Notice is one change of a stream's members, as a watcher hears it: the subjects that
// joined and those that left, each sorted. A watcher's first notice after Join is a
// snapshot: every member in Joined.
type Notice struct {
	Stream string
	Joined []string
	Left   []string

	bodies [2][][]byte
	err    [2]error
	split  []*Notice
	splitp string
}

// Grouped streams carry the presence of a family of streams in one: their subjects are
// "<group> <subject>" (GroupSubject), as the items of a project are "<item key> <subject>"
// on the gateway's items stream, so that one watcher follows them all.

// GroupSubject is subject in group, on a grouped stream. A group has no space.
func GroupSubject(group, subject string) string { return group + " " + subject }

// SplitSubject undoes GroupSubject; ok is false when s is not grouped.
func SplitSubject(s string) (group, subject string, ok bool) {
	return strings.Cut(s, " ")
}

// Split returns a grouped stream's notice as the notices of its groups, in group order: each
// named prefix+group, with its subjects. A snapshot of nobody is no notice. The result is
// computed once and shared, like Bodies; same rules.
func (n *Notice) Split(prefix string) []*Notice {
	if n.split != nil && n.splitp == prefix {
		return n.split
	}
	groups := map[string]*Notice{}
	get := func(group string) *Notice {
		g := groups[group]
		if g == nil {
			g = &Notice{Stream: prefix + group}
			groups[group] = g
		}
		return g
	}
	for _, s := range n.Joined {
		if group, subject, ok := SplitSubject(s); ok {
			g := get(group)
			g.Joined = append(g.Joined, subject)
		}
	}
	for _, s := range n.Left {
		if group, subject, ok := SplitSubject(s); ok {
			g := get(group)
			g.Left = append(g.Left, subject)
		}
	}
	out := make([]*Notice, 0, len(groups))
	for _, g := range groups {
		slices.Sort(g.Joined)
		slices.Sort(g.Left)
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *Notice) int { return strings.Compare(a.Stream, b.Stream) })
	n.split, n.splitp = out, prefix
	return out
}

// Bodies returns the notice's presence.changed params (without "subscription", which the
// connection adds) encoded in c: one body per chunk of at most ChunkSize subjects, left
// before joined, at least one. Each codec's bodies are encoded once and shared by every
// watcher. Not safe for concurrent use: the registry calls sinks from one goroutine.
func (n *Notice) Bodies(c codec.Codec) ([][]byte, error) {
	i := 0
	if c.Binary() {
		i = 1
	}
	if n.bodies[i] == nil && n.err[i] == nil {
		n.bodies[i], n.err[i] = n.encode(c)
	}
	return n.bodies[i], n.err[i]
}

func (n *Notice) encode(c codec.Codec) ([][]byte, error) {
	left, joined := n.Left, n.Joined
	var out [][]byte
	for first := true; first || len(left)+len(joined) > 0; first = false {
		w := protocol.Presence{Stream: n.Stream, Joined: []protocol.PresenceSubject{}, Left: []protocol.PresenceSubject{}}
		room := ChunkSize
		for ; room > 0 && len(left) > 0; room-- {
			w.Left = append(w.Left, protocol.PresenceSubject{Subject: left[0]})
			left = left[1:]
		}
		for ; room > 0 && len(joined) > 0; room-- {
			w.Joined = append(w.Joined, protocol.PresenceSubject{Subject: joined[0]})
			joined = joined[1:]
		}
		b, err := c.Marshal(w)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
