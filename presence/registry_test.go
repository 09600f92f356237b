package presence_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/presence"
)

func TestSnapshotThenChanges(t *testing.T) {
	r := newRegistry(t, nil, presence.Options{})
	a := newSink()
	pa := r.Join("project:WEB", "alice", "c1", a)
	a.want(t, []string{"alice"}, nil)
	b := newSink()
	pb := r.Join("project:WEB", "bob", "c2", b)
	b.want(t, []string{"alice", "bob"}, nil)
	a.want(t, []string{"bob"}, nil)
	pb.Leave()
	a.want(t, nil, []string{"bob"})
	b.quiet(t, 4*window)
	pa.Leave()
	pa.Leave()
}

func TestOncePerSubject(t *testing.T) {
	r := newRegistry(t, nil, presence.Options{})
	w := newSink()
	r.Join("project:WEB", "watcher", "w", w)
	w.want(t, []string{"watcher"}, nil)
	// alice on two connections, and twice on one of them.
	p1 := r.Join("project:WEB", "alice", "c1", newSink())
	p2 := r.Join("project:WEB", "alice", "c2", newSink())
	p3 := r.Join("project:WEB", "alice", "c2", newSink())
	w.want(t, []string{"alice"}, nil)
	members, truncated, err := r.Members(context.Background(), "project:WEB")
	if err != nil || truncated {
		t.Fatal(err, truncated)
	}
	want := []presence.Member{{Subject: "alice", Connections: 2}, {Subject: "watcher", Connections: 1}}
	if !slices.Equal(members, want) {
		t.Fatalf("members %v, want %v", members, want)
	}
	p1.Leave()
	p2.Leave()
	w.quiet(t, 4*window)
	p3.Leave()
	w.want(t, nil, []string{"alice"})
}

func TestLeaveAndRejoinWithinWindowIsQuiet(t *testing.T) {
	const window = 200 * time.Millisecond
	r := newRegistry(t, nil, presence.Options{Window: window})
	w := newSink()
	r.Join("item:WEB-1", "watcher", "w", w)
	w.want(t, []string{"watcher"}, nil)
	p := r.Join("item:WEB-1", "alice", "c1", newSink())
	w.want(t, []string{"alice"}, nil)
	start := time.Now()
	for i := range 5 {
		p.Leave()
		p = r.Join("item:WEB-1", "alice", fmt.Sprint("c", i+2), newSink())
	}
	// Each absence lasted less than the loop. A loaded machine can stall the loop past a
	// window, and then the watcher may rightly hear alice leave and come back.
	if took := time.Since(start); took >= window/2 {
		t.Logf("the leaves and rejoins took %v, not well within a window: quiet not checked", took)
		return
	}
	w.quiet(t, 3*window)
}

func TestStormIsCoalesced(t *testing.T) {
	r := newRegistry(t, nil, presence.Options{})
	w := newSink()
	r.Join("project:WEB", "watcher", "w", w)
	w.want(t, []string{"watcher"}, nil)
	// 200 subjects reconnect over about 10 windows, each leaving and joining again.
	ps := make([]*presence.Presence, 200)
	for i := range ps {
		ps[i] = r.Join("project:WEB", fmt.Sprint("user", i), "a", newSink())
	}
	start := time.Now()
	for i := range ps {
		ps[i].Leave()
		ps[i] = r.Join("project:WEB", fmt.Sprint("user", i), "b", newSink())
		if i%20 == 19 {
			time.Sleep(window)
		}
	}
	elapsed := time.Since(start)
	// Wait until the watcher knows everyone, counting notices.
	members := map[string]bool{"watcher": true}
	notices := 0
	for len(members) < 201 {
		n := w.next(t)
		notices++
		for _, s := range n.Joined {
			members[s] = true
		}
		for _, s := range n.Left {
			delete(members, s)
		}
	}
	w.quiet(t, 4*window)
	// At most one change per window, plus the first and the last.
	if limit := int(elapsed/window) + 3; notices > limit {
		t.Fatalf("%d notices for a storm of %v; at most %d expected", notices, elapsed, limit)
	}
}

func TestChunksAndBounds(t *testing.T) {
	r := newRegistry(t, nil, presence.Options{MaxMembers: 250})
	for i := range 300 {
		r.Join("project:BIG", fmt.Sprintf("user%03d", i), "c", newSink())
	}
	w := newSink()
	r.Join("project:BIG", "watcher", "w", w)
	snap := w.next(t)
	// The first 250 in bytewise order: user000..user249 (watcher sorts after them).
	if len(snap.Joined) != 250 || snap.Joined[0] != "user000" || snap.Joined[249] != "user249" {
		t.Fatalf("snapshot of %d: %v … %v", len(snap.Joined), snap.Joined[0], snap.Joined[len(snap.Joined)-1])
	}
	for _, c := range []codec.Codec{codec.JSON, codec.MsgPack} {
		bs := bodies(t, snap, c)
		if len(bs) != 3 {
			t.Fatalf("%s: %d bodies, want 3 chunks", c.Name(), len(bs))
		}
		total := 0
		for _, b := range bs {
			j := b["joined"].([]any)
			if len(j) > presence.ChunkSize || b["stream"] != "project:BIG" || len(b["left"].([]any)) != 0 {
				t.Fatalf("%s: chunk %v", c.Name(), b)
			}
			total += len(j)
		}
		if total != 250 {
			t.Fatalf("%s: %d subjects in the chunks", c.Name(), total)
		}
	}
	members, truncated, err := r.Members(context.Background(), "project:BIG")
	if err != nil || !truncated || len(members) != 250 {
		t.Fatalf("Members: %d, truncated %v, %v", len(members), truncated, err)
	}
}

func TestEmptyNoticeEncodesLists(t *testing.T) {
	n := &presence.Notice{Stream: "item:WEB-1"}
	for _, c := range []codec.Codec{codec.JSON, codec.MsgPack} {
		bs := bodies(t, n, c)
		if len(bs) != 1 || bs[0]["joined"] == nil || bs[0]["left"] == nil {
			t.Fatalf("%s: %v", c.Name(), bs)
		}
	}
}

func TestLostSink(t *testing.T) {
	r := newRegistry(t, nil, presence.Options{})
	full := newSink()
	full.full = true
	p := r.Join("project:WEB", "alice", "c1", full)
	select {
	case <-full.lost:
	case <-time.After(30 * time.Second):
		t.Fatal("PresenceLost not called")
	}
	p.Leave()
}

func TestMembersGauge(t *testing.T) {
	var n int
	r := newRegistry(t, nil, presence.Options{OnMembers: func(_ string, d int) { n += d }})
	a := r.Join("project:WEB", "alice", "c1", newSink())
	b := r.Join("project:WEB", "alice", "c2", newSink())
	c := r.Join("item:WEB-1", "alice", "c1", newSink())
	if n != 2 {
		t.Fatalf("gauge %d after joins, want 2", n)
	}
	a.Leave()
	b.Leave()
	c.Leave()
	if n != 0 {
		t.Fatalf("gauge %d after leaves, want 0", n)
	}
}

func TestAcrossReplicas(t *testing.T) {
	sh := newShared()
	ra := newRegistry(t, sh.replica("a"), presence.Options{})
	rb := newRegistry(t, sh.replica("b"), presence.Options{})
	wa, wb := newSink(), newSink()
	ra.Join("project:WEB", "wa", "1", wa)
	wa.want(t, []string{"wa"}, nil)
	rb.Join("project:WEB", "wb", "2", wb)
	wb.want(t, []string{"wa", "wb"}, nil)
	wa.want(t, []string{"wb"}, nil)

	// alice on both replicas: joined once, left once.
	p1 := ra.Join("project:WEB", "alice", "3", newSink())
	p2 := rb.Join("project:WEB", "alice", "4", newSink())
	wa.want(t, []string{"alice"}, nil)
	wb.want(t, []string{"alice"}, nil)
	waitMembers(t, []presence.Member{{Subject: "alice", Connections: 2}, {Subject: "wa", Connections: 1}, {Subject: "wb", Connections: 1}}, ra, rb)
	p1.Leave()
	wa.quiet(t, 4*window)
	wb.quiet(t, 0)
	p2.Leave()
	wa.want(t, nil, []string{"alice"})
	wb.want(t, nil, []string{"alice"})

	// A replica that dies takes its members with it.
	rb.Join("project:WEB", "bob", "5", newSink())
	wa.want(t, []string{"bob"}, nil)
	sh.kill("b")
	wa.want(t, nil, []string{"bob", "wb"})
}

func TestStoreDown(t *testing.T) {
	sh := newShared()
	ra := newRegistry(t, sh.replica("a"), presence.Options{})
	rb := newRegistry(t, sh.replica("b"), presence.Options{})
	wa := newSink()
	ra.Join("project:WEB", "wa", "1", wa)
	wa.want(t, []string{"wa"}, nil)
	sh.mu.Lock()
	sh.fail = true
	sh.mu.Unlock()
	// Local changes still reach local watchers; Members says the store failed.
	p := ra.Join("project:WEB", "alice", "2", newSink())
	wa.want(t, []string{"alice"}, nil)
	if _, _, err := ra.Members(context.Background(), "project:WEB"); err == nil {
		t.Fatal("Members with the store down: no error")
	}
	rb.Join("project:WEB", "bob", "3", newSink())
	sh.mu.Lock()
	sh.fail = false
	sh.mu.Unlock()
	// Once the store answers, the flushes retried carry alice to b, and bob reaches a.
	wa.want(t, []string{"bob"}, nil)
	waitMembers(t, []presence.Member{{Subject: "alice", Connections: 1}, {Subject: "bob", Connections: 1}, {Subject: "wa", Connections: 1}}, ra, rb)
	p.Leave()
	wa.want(t, nil, []string{"alice"})
}

// waitMembers waits until every registry answers want for project:WEB.
func waitMembers(t *testing.T, want []presence.Member, rs ...*presence.Registry) {
	t.Helper()
	waitMembersOf(t, "project:WEB", want, rs...)
}

func waitMembersOf(t *testing.T, stream string, want []presence.Member, rs ...*presence.Registry) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range rs {
		for {
			got, _, err := r.Members(context.Background(), stream)
			if err == nil && slices.Equal(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("members %v (%v), want %v", got, err, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestCloseTwiceAndLeaveAfterClose(t *testing.T) {
	r := presence.New(nil)
	p := r.Join("project:WEB", "alice", "c1", newSink())
	r.Close()
	r.Close()
	p.Leave()
}

// TestEnterAndWatch: members that watch nothing and watchers that are no member, on one
// replica and across two; a stream lives while either is there.
func TestEnterAndWatch(t *testing.T) {
	sh := newShared()
	ra := newRegistry(t, sh.replica("a"), presence.Options{})
	rb := newRegistry(t, sh.replica("b"), presence.Options{})
	alice := ra.Enter("items:WEB", "WEB-1 alice", "c1")
	w := newSink()
	pw := ra.Watch("items:WEB", w)
	w.want(t, []string{"WEB-1 alice"}, nil)
	// A watcher on the other replica, then a member there.
	wb := newSink()
	rb.Watch("items:WEB", wb)
	wb.want(t, []string{"WEB-1 alice"}, nil)
	bob := rb.Enter("items:WEB", "WEB-2 bob", "c2")
	w.want(t, []string{"WEB-2 bob"}, nil)
	wb.want(t, []string{"WEB-2 bob"}, nil)
	waitMembersOf(t, "items:WEB", []presence.Member{{Subject: "WEB-1 alice", Connections: 1}, {Subject: "WEB-2 bob", Connections: 1}}, ra, rb)

	// The last watcher on A leaves; alice stays present for the others.
	pw.Leave()
	wb.quiet(t, 4*window)
	waitMembersOf(t, "items:WEB", []presence.Member{{Subject: "WEB-1 alice", Connections: 1}, {Subject: "WEB-2 bob", Connections: 1}}, ra, rb)
	// Changes while nobody watches on A: a new watcher's snapshot is current.
	bob.Leave()
	wb.want(t, nil, []string{"WEB-2 bob"})
	w2 := newSink()
	ra.Watch("items:WEB", w2)
	w2.want(t, []string{"WEB-1 alice"}, nil)
	alice.Leave()
	alice.Leave()
	w2.want(t, nil, []string{"WEB-1 alice"})
	wb.want(t, nil, []string{"WEB-1 alice"})
	waitMembersOf(t, "items:WEB", nil, ra, rb)
}

func TestSplit(t *testing.T) {
	n := &presence.Notice{
		Stream: "items:WEB",
		Joined: []string{"WEB-1 alice", "WEB-1 bob smith", "WEB-10 carol", "WEB-2 alice", "stray"},
		Left:   []string{"WEB-10 dave", "WEB-3 erin"},
	}
	got := n.Split("item:")
	var lines []string
	for _, x := range got {
		lines = append(lines, fmt.Sprintf("%s +%v -%v", x.Stream, x.Joined, x.Left))
	}
	want := []string{
		"item:WEB-1 +[alice bob smith] -[]",
		"item:WEB-10 +[carol] -[dave]",
		"item:WEB-2 +[alice] -[]",
		"item:WEB-3 +[] -[erin]",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("split:\n%v\nwant\n%v", lines, want)
	}
	if again := n.Split("item:"); &again[0] != &got[0] {
		t.Fatal("split not kept")
	}
	body := bodies(t, got[0], codec.JSON)
	if len(body) != 1 || fmt.Sprint(body[0]["joined"]) != "[map[subject:alice] map[subject:bob smith]]" {
		t.Fatalf("bodies of a split notice: %v", body)
	}
	if (&presence.Notice{Stream: "items:WEB"}).Split("item:") == nil {
		t.Fatal("split of a snapshot of nobody: nil, want empty")
	}
	if g, s, ok := presence.SplitSubject(presence.GroupSubject("WEB-1", "a b")); !ok || g != "WEB-1" || s != "a b" {
		t.Fatalf("SplitSubject(GroupSubject) = %q %q %v", g, s, ok)
	}
}
