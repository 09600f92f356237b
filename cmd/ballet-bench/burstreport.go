package main

import (
	"fmt"
	"sort"
	"strings"
)

// burstGroup sums up the fast or the paused subscribers of a burst.
type burstGroup struct {
	subscribers    int
	complete       int   // every event exactly once, in order
	incomplete     []int // the first maxListed of the others, by index
	notCaughtUp    int   // never received the last event
	delivered      int64 // committed events received, once each
	gaps           int64 // committed events never received (subscribers without a resync)
	missedByResync int64 // the same, of subscribers told to resync
	dups           int64
	outOfOrder     int64
	resubscribes   int64
	reconnects     int64
	resyncs        int64
	failures       int64
	closes         codeCounts
	disconnects    codeCounts
	firstNs        int64 // earliest receive time
	lastNs         int64 // latest receive time
}

// maxListed is how many incomplete subscribers a group names.
const maxListed = 20

// burstAccount is the check of every subscriber against the commit log.
type burstAccount struct {
	committed int64
	delivered int64
	received  int64 // every event frame of the run received, replays and duplicates included
	foreign   int64
	groups    [2]*burstGroup // fast, paused
}

// accountBurst checks each subscriber's deliveries; call it once the
// drivers have returned.
func accountBurst(subs []*burstSub, commits *commitLog) *burstAccount {
	bm := commits.bitmap()
	last := commits.maxSeq.Load()
	a := &burstAccount{committed: commits.count.Load()}
	for i := range a.groups {
		a.groups[i] = &burstGroup{closes: codeCounts{}, disconnects: codeCounts{}}
	}
	for _, s := range subs {
		g := a.groups[0]
		if s.paused {
			g = a.groups[1]
		}
		tr := s.tr
		g.subscribers++
		got, missing := tr.delivered(bm), tr.gaps(bm)
		g.delivered += got
		a.delivered += got
		a.received += tr.received
		a.foreign += tr.received - tr.dups - got
		if s.resyncs > 0 {
			g.missedByResync += missing
		} else {
			g.gaps += missing
		}
		g.dups += tr.dups
		g.outOfOrder += tr.outOfOrder
		if missing == 0 && tr.dups == 0 && tr.outOfOrder == 0 {
			g.complete++
		} else if len(g.incomplete) < maxListed {
			g.incomplete = append(g.incomplete, s.idx)
		}
		if tr.last.Load() < last {
			g.notCaughtUp++
		}
		g.resubscribes += s.resubscribes
		g.reconnects += s.reconnects
		g.resyncs += s.resyncs
		g.failures += s.failures
		g.closes.add(s.closes)
		g.disconnects.add(s.disconnects)
		if tr.firstNs != 0 && (g.firstNs == 0 || tr.firstNs < g.firstNs) {
			g.firstNs = tr.firstNs
		}
		g.lastNs = max(g.lastNs, tr.lastNs)
	}
	return a
}

// addTo puts the group's figures into the report, each name prefixed.
func (g *burstGroup) addTo(r *report, prefix string) {
	p := func(name string) string { return prefix + "_" + name }
	r.add(p("subscribers"), g.subscribers, "")
	if g.subscribers == 0 {
		return
	}
	r.add(p("complete"), g.complete, "")
	if len(g.incomplete) > 0 {
		r.add(p("incomplete_first"), g.incomplete, "")
	}
	r.add(p("delivered_events"), g.delivered, "")
	r.add(p("gaps"), g.gaps, "")
	r.add(p("duplicates"), g.dups, "")
	r.add(p("out_of_order"), g.outOfOrder, "")
	r.add(p("stream_closed"), g.closes, "")
	r.add(p("disconnects"), g.disconnects, "")
	r.add(p("resubscribed"), g.resubscribes, "")
	r.add(p("reconnected"), g.reconnects, "")
	r.add(p("resyncs"), g.resyncs, "")
	if g.resyncs > 0 {
		r.add(p("missed_by_resync"), g.missedByResync, "")
	}
	if g.failures > 0 {
		r.add(p("failed_attempts"), g.failures, "")
	}
	if g.notCaughtUp > 0 {
		r.add(p("not_caught_up"), g.notCaughtUp, "")
	}
}

// check fails the run unless every subscriber got every event exactly once, in order.
func (a *burstAccount) check(r *report) {
	if a.foreign > 0 {
		r.add("other_events_of_stream", a.foreign, "")
	}
	if a.committed == 0 {
		r.fail("no event was committed")
	}
	var gaps, dups, ooo, resyncs, missed, behind int64
	for _, g := range a.groups {
		gaps += g.gaps
		dups += g.dups
		ooo += g.outOfOrder
		resyncs += g.resyncs
		missed += g.missedByResync
		behind += int64(g.notCaughtUp)
	}
	if gaps > 0 {
		r.fail("%d gaps: committed events never received", gaps)
	}
	if dups > 0 {
		r.fail("%d duplicates", dups)
	}
	if ooo > 0 {
		r.fail("%d events out of order", ooo)
	}
	if resyncs > 0 {
		r.fail("%d resubscriptions answered -32010 (resync required): %d events never delivered", resyncs, missed)
	}
	if behind > 0 {
		r.fail("%d subscribers never received the last event", behind)
	}
}

// String lists the counts in key order ("1006×2 1013×5"), for the table.
func (m codeCounts) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s×%d", k, m[k])
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}
