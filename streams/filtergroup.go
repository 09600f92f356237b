package streams

import (
	"slices"
	"strings"
	"sync/atomic"
)

// A stream's subscriptions with equal type filters form a filterGroup: they share the filter
// and, once the group has groupShared members, a memo of its answers by seq, so that an event
// is matched once per (stream, filter) rather than once per subscription. A hundred tabs that
// follow one project with the same "types" match each of its events once between them.
//
// The memo answers for the window's items only (events read from the log are matched by each
// reader). It is a direct-mapped table of the last memoSize seqs asked about, each slot holding
// seq<<16 | epoch<<1 | selected, where epoch is the window's count of log resets when the item
// came (a reset log reuses seqs); readers at different positions overwrite each other's slots
// and match again, never wrongly: a slot answers only for the seq and epoch it names. Its 1 KiB
// is paid by groups of groupShared subscriptions or more, at most 128 bytes a subscription.
type filterGroup struct {
	filter  *TypeFilter
	members int // under the shard's lock
	memo    atomic.Pointer[matchMemo]
}

const (
	memoSize    = 128
	groupShared = 8 // Hub.groupShared unless a test sets it
)

type matchMemo [memoSize]atomic.Uint64

// groupKey names a filter group: the stream and the filter's patterns, sorted.
type groupKey struct {
	stream Stream
	types  string
}

// match reports whether the group's filter selects the window's item it.
func (g *filterGroup) match(it *item) bool {
	m := g.memo.Load()
	if m == nil || it.seq <= 0 || it.seq >= 1<<47 {
		return g.filter.Match(it.typ)
	}
	slot := &m[uint64(it.seq)%memoSize]
	tag := uint64(it.seq)<<16 | uint64(it.epoch&0x7fff)<<1
	if v := slot.Load(); v&^1 == tag {
		return v&1 == 1
	}
	ok := g.filter.Match(it.typ)
	if ok {
		tag |= 1
	}
	slot.Store(tag)
	return ok
}

// joinGroupLocked puts sub, whose filter is not nil, in its stream's group of that filter, and
// gives it the group's filter; the group has a memo from shared members on. The shard's lock
// is held.
func (sh *hubShard) joinGroupLocked(sub *Subscription, shared int) {
	k := groupKey{stream: sub.stream, types: sub.types.key}
	g := sh.groups[k]
	if g == nil {
		if sh.groups == nil {
			sh.groups = make(map[groupKey]*filterGroup)
		}
		g = &filterGroup{filter: sub.types}
		sh.groups[k] = g
	}
	g.members++
	if g.members >= shared && g.memo.Load() == nil {
		g.memo.Store(new(matchMemo))
	}
	sub.group, sub.types = g, g.filter
}

// leaveGroupLocked takes sub out of its group, which is forgotten with its last member. The
// shard's lock is held.
func (sh *hubShard) leaveGroupLocked(sub *Subscription) {
	g := sub.group
	if g == nil {
		return
	}
	if g.members--; g.members == 0 {
		delete(sh.groups, groupKey{stream: sub.stream, types: g.filter.key})
	}
}

// filterKey is the canonical form of a filter's patterns: sorted, without repeats.
func filterKey(exact map[string]struct{}, prefixes []string) string {
	all := make([]string, 0, len(exact)+len(prefixes))
	for t := range exact {
		all = append(all, t)
	}
	for _, p := range prefixes {
		all = append(all, p+"*")
	}
	slices.Sort(all)
	all = slices.Compact(all)
	return strings.Join(all, "\x00") // NUL is in no pattern (validText)
}
