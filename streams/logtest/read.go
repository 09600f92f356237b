package logtest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ballet/gateway/streams"
)

func testEmpty(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	head, err := l.Head(ctx)
	if err != nil || head != 0 {
		t.Fatalf("Head = %d, %v; want 0, nil", head, err)
	}
	evs, err := l.ReadAfter(ctx, 0, 10)
	if err != nil || len(evs) != 0 {
		t.Fatalf("ReadAfter = %v, %v; want none", evs, err)
	}
	evs, err = l.ReadStream(ctx, streams.Stream{Kind: streams.StreamProject, Key: "WEB"}, 0, 100, 10)
	if err != nil || len(evs) != 0 {
		t.Fatalf("ReadStream = %v, %v; want none", evs, err)
	}
	last, err := a.Append(ctx)
	if err != nil || last != 0 {
		t.Fatalf("Append() = %d, %v; want 0, nil", last, err)
	}
}

func testAppendReadAfter(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	in := []streams.NewEvent{
		ev("WEB", "item.created", "item", "id-1", "WEB-1"),
		ev("WEB", "item.state_changed", "item", "id-1", "WEB-1"),
		ev("API", "item.created", "item", "id-2", "API-1"),
	}
	in[1].ActorKind, in[1].ActorSubject = "agent", "sub-2"
	last := mustAppend(t, a, in...)
	head, err := l.Head(ctx)
	if err != nil || head != last {
		t.Fatalf("Head = %d, %v; want %d", head, err, last)
	}
	evs := readAll(t, l)
	if len(evs) != len(in) {
		t.Fatalf("read %d events, want %d", len(evs), len(in))
	}
	checkIncreasing(t, evs)
	if evs[len(evs)-1].Seq != last {
		t.Fatalf("last seq %d, Append returned %d", evs[len(evs)-1].Seq, last)
	}
	for i, e := range evs {
		w := in[i]
		if e.ProjectKey != w.ProjectKey || e.Type != w.Type || e.EntityType != w.EntityType ||
			e.EntityID != w.EntityID || e.EntityKey != w.EntityKey || e.ActorKind != w.ActorKind ||
			e.ActorSubject != w.ActorSubject {
			t.Fatalf("event %d = %+v, appended %+v", i, e, w)
		}
		sameJSON(t, e.Payload, w.Payload)
	}
	// A second batch continues after the first.
	last2 := mustAppend(t, a, ev("WEB", "item.created", "item", "id-3", "WEB-2"))
	if last2 <= last {
		t.Fatalf("second Append returned %d after %d", last2, last)
	}
	evs, err = l.ReadAfter(ctx, last, 10)
	if err != nil || len(evs) != 1 || evs[0].Seq != last2 || evs[0].EntityID != "id-3" {
		t.Fatalf("ReadAfter(%d) = %+v, %v", last, evs, err)
	}
	if evs, err := l.ReadAfter(ctx, last2, 10); err != nil || len(evs) != 0 {
		t.Fatalf("ReadAfter(head) = %+v, %v; want none", evs, err)
	}
}

func testPaging(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	var in []streams.NewEvent
	for i := range 25 {
		in = append(in, ev("WEB", "item.created", "item", fmt.Sprint("id-", i), fmt.Sprint("WEB-", i)))
	}
	mustAppend(t, a, in[:10]...)
	mustAppend(t, a, in[10:]...)
	var got []streams.Event
	var pos int64
	for {
		evs, err := l.ReadAfter(ctx, pos, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 7 {
			t.Fatalf("ReadAfter limit 7 returned %d", len(evs))
		}
		if len(evs) == 0 {
			break
		}
		got = append(got, evs...)
		pos = evs[len(evs)-1].Seq
	}
	checkIncreasing(t, got)
	want := make([]string, len(in))
	for i := range in {
		want[i] = in[i].EntityID
	}
	if !slices.Equal(ids(got), want) {
		t.Fatalf("paged ids %v, want %v (append order)", ids(got), want)
	}
}

// mixed appends events of two projects; WEB-1's item events are ids i1, i3, i5.
func mixed(t *testing.T, a streams.Appender) {
	mustAppend(t, a,
		ev("WEB", "item.created", "item", "i1", "WEB-1"),
		ev("API", "item.created", "item", "a1", "API-1"),
		ev("WEB", "item.created", "item", "i2", "WEB-2"),
		ev("WEB", "item.updated", "item", "i3", "WEB-1"),
		ev("WEB", "comment.added", "comment", "c1", "WEB-1"), // not an item event
		ev("API", "project.created", "project", "API", "API"),
	)
	mustAppend(t, a,
		ev("WEB", "item.updated", "item", "i5", "WEB-1"),
		ev("WEB", "dependency.added", "dependency", "d1", ""),
	)
}

func testStreamProject(t *testing.T, l streams.Log, a streams.Appender) {
	mixed(t, a)
	checkStreams(t, l, streams.StreamProject, []streamEvents{
		{"WEB", []string{"i1", "i2", "i3", "c1", "i5", "d1"}},
		{"API", []string{"a1", "API"}},
		{"NOPE", nil},
		{"web", nil},
	})
}

func testStreamItem(t *testing.T, l streams.Log, a streams.Appender) {
	mixed(t, a)
	checkStreams(t, l, streams.StreamItem, []streamEvents{
		{"WEB-1", []string{"i1", "i3", "i5"}},
		{"WEB-2", []string{"i2"}},
		{"API", nil}, // a project entity with that key is not an item
		{"WEB-9", nil},
	})
}

// streamEvents names a stream's key and the ids of its events, in order.
type streamEvents struct {
	key  string
	want []string
}

// checkStreams reads each stream of kind whole: its events are the ones wanted, in seq order,
// each of the stream, and a Counter counts as many.
func checkStreams(t *testing.T, l streams.Log, kind streams.StreamKind, cases []streamEvents) {
	t.Helper()
	ctx := ctxT(t)
	head, _ := l.Head(ctx)
	for _, tc := range cases {
		s := streams.Stream{Kind: kind, Key: tc.key}
		evs, err := l.ReadStream(ctx, s, 0, head, 100)
		if err != nil {
			t.Fatal(err)
		}
		checkIncreasing(t, evs)
		if !slices.Equal(ids(evs), tc.want) && !(len(evs) == 0 && len(tc.want) == 0) {
			t.Fatalf("%s: ids %v, want %v", s, ids(evs), tc.want)
		}
		checkCount(t, l, s, head, len(tc.want))
		for i := range evs {
			if !s.Matches(&evs[i]) {
				t.Fatalf("%s returned non-matching %+v", s, evs[i])
			}
		}
	}
}

func testStreamBounds(t *testing.T, l streams.Log, a streams.Appender) {
	mixed(t, a)
	ctx := ctxT(t)
	all := readAll(t, l)
	seqOf := map[string]int64{}
	for _, e := range all {
		seqOf[e.EntityID] = e.Seq
	}
	web := streams.Stream{Kind: streams.StreamProject, Key: "WEB"}
	item := streams.Stream{Kind: streams.StreamItem, Key: "WEB-1"}
	for _, tc := range []struct {
		s           streams.Stream
		after, upto int64
		limit       int
		want        []string
	}{
		{web, seqOf["i1"], seqOf["d1"], 100, []string{"i2", "i3", "c1", "i5", "d1"}},
		{web, seqOf["i1"] - 1, seqOf["i3"], 100, []string{"i1", "i2", "i3"}},
		{web, 0, seqOf["i5"] - 1, 100, []string{"i1", "i2", "i3", "c1"}},
		{web, 0, 1 << 40, 2, []string{"i1", "i2"}},
		{web, seqOf["i2"], 1 << 40, 2, []string{"i3", "c1"}},
		{web, seqOf["d1"], 1 << 40, 100, nil},
		{web, seqOf["i3"], seqOf["i3"], 100, nil}, // empty range
		{web, seqOf["i5"], seqOf["i1"], 100, nil}, // upto below after
		{item, seqOf["i1"], 1 << 40, 100, []string{"i3", "i5"}},
		{item, 0, seqOf["i3"], 100, []string{"i1", "i3"}},
		{item, 0, 1 << 40, 1, []string{"i1"}},
	} {
		evs, err := l.ReadStream(ctx, tc.s, tc.after, tc.upto, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(evs), tc.want) && !(len(evs) == 0 && len(tc.want) == 0) {
			t.Errorf("ReadStream(%s, %d, %d, %d) = %v, want %v", tc.s, tc.after, tc.upto, tc.limit, ids(evs), tc.want)
		}
	}
}

func testBadLimit(t *testing.T, l streams.Log, _ streams.Appender) {
	ctx := ctxT(t)
	if _, err := l.ReadAfter(ctx, 0, 0); !errors.Is(err, streams.ErrInvalid) {
		t.Fatalf("ReadAfter limit 0 = %v, want ErrInvalid", err)
	}
	s := streams.Stream{Kind: streams.StreamProject, Key: "WEB"}
	if _, err := l.ReadStream(ctx, s, 0, 10, -1); !errors.Is(err, streams.ErrInvalid) {
		t.Fatalf("ReadStream limit -1 = %v, want ErrInvalid", err)
	}
}

// checkCount checks a Counter's count of the stream's events up to head, whole and capped.
func checkCount(t *testing.T, l streams.Log, s streams.Stream, head int64, want int) {
	t.Helper()
	c, ok := l.(streams.Counter)
	if !ok {
		return
	}
	for _, limit := range []int{100, 1} {
		n, err := c.CountStream(ctxT(t), s, 0, head, limit)
		if err != nil || n != min(want, limit) {
			t.Fatalf("%s: CountStream(limit %d) = %d, %v; want %d", s, limit, n, err, min(want, limit))
		}
	}
	if n, err := c.CountStream(ctxT(t), s, head, head, 100); err != nil || n != 0 {
		t.Fatalf("%s: CountStream of an empty range = %d, %v", s, n, err)
	}
}
