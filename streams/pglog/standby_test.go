package pglog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/logtest"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/streams/pgtest"
)

// replayedAppender appends on the primary and returns once the standby the log reads has
// replayed the append, so the suite's read-after-append checks hold; the log itself waits
// for nothing.
type replayedAppender struct{ l *pglog.Log }

func (a replayedAppender) Append(ctx context.Context, evs ...streams.NewEvent) (int64, error) {
	last, err := a.l.Append(ctx, evs...)
	if err != nil || last == 0 {
		return last, err
	}
	for {
		head, err := a.l.Head(ctx)
		if err != nil || head >= last {
			return last, err
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// openTail opens a log that writes to db's primary and reads its standby.
func openTail(t *testing.T, db *pgtest.StandbyDB, opts *pglog.Options) *pglog.Log {
	t.Helper()
	var o pglog.Options
	if opts != nil {
		o = *opts
	}
	o.Tail = db.StandbyPool(t)
	return open(t, db.Pool, &o)
}

// The conformance suite against a log read from a streaming standby: one test after another,
// since on the shared standby they took twice as long in parallel.
func TestStandbyConformance(t *testing.T) {
	logtest.Run(t, func(t *testing.T) (streams.Log, streams.Appender) {
		l := openTail(t, pgtest.Standby(t), nil)
		return l, replayedAppender{l}
	})
}

// Concurrent writers on the primary, a tailer and a hot reader on the standby: each gets every
// committed event once, in commit order, each transaction's events together.
func TestStandbyCommitOrder(t *testing.T) {
	db := pgtest.Standby(t)
	commitOrder(t, db.Pool, &pglog.Options{Tail: db.StandbyPool(t)})
}

// A standby whose replay is paused: the lag shows, a replay read beyond what it has replayed
// waits for it instead of returning a range with a hole, PrimaryHead is the primary's.
func TestStandbyLagAndHoles(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	pair := pgtest.NewPair(t, nil)
	db := pgtest.StandbyOn(t, pair)
	l := openTail(t, db, nil)
	a := replayedAppender{l}
	web := streams.Stream{Kind: streams.StreamProject, Key: "WEB"}
	first, err := a.Append(ctx, streams.NewEvent{ProjectKey: "WEB", Type: "t", EntityType: "item", EntityID: "a", ActorKind: "human"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no lag", 30*time.Second, func() bool { return l.TailStatus().Lag == 0 })

	if err := pair.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	last, err := l.Append(ctx, streams.NewEvent{ProjectKey: "WEB", Type: "t", EntityType: "item", EntityID: "b", ActorKind: "human"},
		streams.NewEvent{ProjectKey: "WEB", Type: "t", EntityType: "item", EntityID: "c", ActorKind: "human"})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := l.PrimaryHead(ctx); err != nil || h != last {
		t.Fatalf("PrimaryHead = %d, %v; want %d", h, err, last)
	}
	if h, err := l.Head(ctx); err != nil || h != first {
		t.Fatalf("Head on the paused standby = %d, %v; want %d", h, err, first)
	}
	waitFor(t, "the lag to show", 30*time.Second, func() bool { return l.TailStatus().Lag > 500*time.Millisecond })

	read := make(chan []streams.Event, 1)
	go func() {
		evs, err := l.ReadStream(ctx, web, 0, last, 100)
		if err != nil {
			t.Error(err)
		}
		read <- evs
	}()
	select {
	case evs := <-read:
		t.Fatalf("ReadStream up to %d returned %v while the standby is at %d", last, seqsOf(evs), first)
	case <-time.After(300 * time.Millisecond):
	}
	if err := pair.ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := <-read; len(evs) != 3 || evs[2].Seq != last {
		t.Fatalf("ReadStream after the resume: %v", seqsOf(evs))
	}
	waitFor(t, "no lag after the resume", 30*time.Second, func() bool { return l.TailStatus().Lag == 0 })

	// Past the wait's bound the read fails rather than return less.
	if err := pair.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	ahead, err := l.Append(ctx, streams.NewEvent{ProjectKey: "WEB", Type: "t", EntityType: "item", EntityID: "d", ActorKind: "human"})
	if err != nil {
		t.Fatal(err)
	}
	if evs, err := l.ReadStream(ctx, web, last, ahead, 100); !errors.Is(err, pglog.ErrTailBehind) {
		t.Fatalf("ReadStream beyond a paused standby = %v, %v; want ErrTailBehind", seqsOf(evs), err)
	}
	if err := pair.ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
}

func seqsOf(evs []streams.Event) []int64 {
	s := make([]int64, len(evs))
	for i := range evs {
		s[i] = evs[i].Seq
	}
	return s
}

// The standby is stopped and started again while writers keep writing to the primary: the
// tailer pauses, then resumes with every event once and in order; the lag grows while it is
// down and goes back to 0.
func TestStandbyRestartMidStream(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	pair := pgtest.NewPair(t, nil)
	db := pgtest.StandbyOn(t, pair)
	l := openTail(t, db, nil)
	var c collector
	tl := startTailer(t, l, &c, 50)

	var stop atomic.Bool
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := range 2 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if _, err := l.Append(ctx, streams.NewEvent{ProjectKey: "WEB", Type: "t", EntityType: "item",
					EntityID: fmt.Sprintf("w%d-%d", w, i), ActorKind: "human"}); err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	waitFor(t, "events before the restart", time.Minute, func() bool { return tl.Position() > 50 })
	pair.StopStandby()
	stoppedAt := tl.Position()
	// The lag grows from the first probe (once a second) that finds the standby down.
	waitFor(t, "the lag to grow while the standby is down", time.Minute, func() bool {
		return l.TailStatus().Lag >= 500*time.Millisecond
	})
	if err := pair.StartStandby(ctx); err != nil {
		t.Fatal(err)
	}
	n := written.Load()
	waitFor(t, "more events after the restart", time.Minute, func() bool { return written.Load() > n+50 })
	stop.Store(true)
	wg.Wait()
	head, err := l.PrimaryHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tailer to reach the primary's head", time.Minute, func() bool { return tl.Position() >= head })
	evs, orderErrs := c.snapshot()
	if len(orderErrs) > 0 {
		t.Fatalf("out of order: %v", orderErrs)
	}
	all, err := l.ReadAfter(ctx, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(all) || int64(len(all)) != written.Load() {
		t.Fatalf("tailer got %d events, the log holds %d, %d written", len(evs), len(all), written.Load())
	}
	for i := range all {
		if evs[i].Seq != all[i].Seq || evs[i].EntityID != all[i].EntityID {
			t.Fatalf("event %d: tailer got %d %s, the log has %d %s", i, evs[i].Seq, evs[i].EntityID, all[i].Seq, all[i].EntityID)
		}
	}
	waitFor(t, "no lag after the restart", time.Minute, func() bool { return l.TailStatus().Lag == 0 })
	t.Logf("%d events; the standby stopped at position %d", len(evs), stoppedAt)
}

// Behind a pooler in front of two standbys, one of them paused, reads go back and forth in
// time. The tailer still hands over every event once and in order, and a replay read never
// returns a range with a hole.
func TestStandbyPoolerOfTwo(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	pair := pgtest.NewPair(t, nil)
	second, err := pair.AddStandby(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := pgtest.StandbyOn(t, pair)
	l := open(t, db.Pool, &pglog.Options{Tail: db.StandbyPoolWith(t, pgtest.AlternateStandbys(pair))})
	var c collector
	tl := startTailer(t, l, &c, 20)

	if err := second.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	web := streams.Stream{Kind: streams.StreamProject, Key: "WEB"}
	wentBack := false
	var prev int64
	for i := range 60 {
		if _, err := l.Append(ctx, streams.NewEvent{ProjectKey: "WEB", Type: "t", EntityType: "item",
			EntityID: fmt.Sprint(i), ActorKind: "human"}); err != nil {
			t.Fatal(err)
		}
		if i%6 != 5 {
			continue
		}
		// Each read takes a new connection, to the standbys in turn; the tailer's reads take
		// turns too, so a few reads in a row are sure to reach both.
		for range 4 {
			head, err := l.Head(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wentBack = wentBack || head < prev
			prev = head
		}
		primary, err := l.PrimaryHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := l.ReadStream(ctx, web, 0, primary, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != i+1 || evs[i].Seq != primary {
			t.Fatalf("replay up to %d: %d events ending at %v", primary, len(evs), seqsOf(evs[max(len(evs)-1, 0):]))
		}
	}
	if !wentBack {
		t.Error("the head never went back: the two standbys were not both read")
	}
	if err := second.ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	head, err := l.PrimaryHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tailer to reach the primary's head", time.Minute, func() bool { return tl.Position() >= head })
	evs, orderErrs := c.snapshot()
	if len(orderErrs) > 0 || len(evs) != 60 {
		t.Fatalf("tailer: %d events, order errors %v", len(evs), orderErrs)
	}
	for i, e := range evs {
		if e.EntityID != fmt.Sprint(i) {
			t.Fatalf("tailer event %d is %s", i, e.EntityID)
		}
	}
}
