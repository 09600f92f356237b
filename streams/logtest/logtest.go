package logtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/streams"
)

// Open returns a fresh, empty log; its cleanup is registered on t.
type Open func(t *testing.T) (streams.Log, streams.Appender)

// Run runs the conformance suite against the logs open returns.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		f    func(t *testing.T, l streams.Log, a streams.Appender)
	}{
		{"EmptyLog", testEmpty},
		{"AppendAndReadAfter", testAppendReadAfter},
		{"ReadAfterPaging", testPaging},
		{"ReadStreamProject", testStreamProject},
		{"ReadStreamItem", testStreamItem},
		{"ReadStreamBounds", testStreamBounds},
		{"NullEntityKey", testNullEntityKey},
		{"PayloadRoundTrip", testPayload},
		{"InvalidEventsAppendNothing", testInvalid},
		{"OccurredAt", testOccurredAt},
		{"WaitWakesOnAppend", testWaitWakes},
		{"WaitReturnsAtOnceWhenBehind", testWaitBehind},
		{"WaitHonoursContext", testWaitCtx},
		{"ConcurrentAppends", testConcurrent},
		{"BadLimit", testBadLimit},
		{"Projects", testProjects},
		{"CloseEndsWait", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, a := open(t)
			tc.f(t, l, a)
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func ev(project, typ, etype, eid, ekey string) streams.NewEvent {
	return streams.NewEvent{
		ProjectKey: project, Type: typ, EntityType: etype, EntityID: eid, EntityKey: ekey,
		ActorKind: "human", ActorSubject: "sub-1", Payload: []byte(`{"n":"` + eid + `"}`),
	}
}

func mustAppend(t *testing.T, a streams.Appender, evs ...streams.NewEvent) int64 {
	t.Helper()
	last, err := a.Append(ctxT(t), evs...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return last
}

func readAll(t *testing.T, l streams.Log) []streams.Event {
	t.Helper()
	evs, err := l.ReadAfter(ctxT(t), 0, 1<<20)
	if err != nil {
		t.Fatalf("ReadAfter: %v", err)
	}
	return evs
}

func seqs(evs []streams.Event) []int64 {
	s := make([]int64, len(evs))
	for i := range evs {
		s[i] = evs[i].Seq
	}
	return s
}

func ids(evs []streams.Event) []string {
	s := make([]string, len(evs))
	for i := range evs {
		s[i] = evs[i].EntityID
	}
	return s
}

func checkIncreasing(t *testing.T, evs []streams.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Fatalf("seq not strictly increasing: %v", seqs(evs))
		}
	}
}

func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	if !json.Valid(got) {
		t.Fatalf("payload %q is not valid JSON", got)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("payload %s, want %s", got, want)
	}
}

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
	ctx := ctxT(t)
	head, _ := l.Head(ctx)
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{"WEB", []string{"i1", "i2", "i3", "c1", "i5", "d1"}},
		{"API", []string{"a1", "API"}},
		{"NOPE", nil},
		{"web", nil},
	} {
		s := streams.Stream{Kind: streams.StreamProject, Key: tc.key}
		evs, err := l.ReadStream(ctx, s, 0, head, 100)
		if err != nil {
			t.Fatal(err)
		}
		checkIncreasing(t, evs)
		if !slices.Equal(ids(evs), tc.want) && !(len(evs) == 0 && len(tc.want) == 0) {
			t.Fatalf("%s: ids %v, want %v", s, ids(evs), tc.want)
		}
		for i := range evs {
			if !s.Matches(&evs[i]) {
				t.Fatalf("%s returned non-matching %+v", s, evs[i])
			}
		}
	}
}

func testStreamItem(t *testing.T, l streams.Log, a streams.Appender) {
	mixed(t, a)
	ctx := ctxT(t)
	head, _ := l.Head(ctx)
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{"WEB-1", []string{"i1", "i3", "i5"}},
		{"WEB-2", []string{"i2"}},
		{"API", nil}, // a project entity with that key is not an item
		{"WEB-9", nil},
	} {
		s := streams.Stream{Kind: streams.StreamItem, Key: tc.key}
		evs, err := l.ReadStream(ctx, s, 0, head, 100)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(evs), tc.want) && !(len(evs) == 0 && len(tc.want) == 0) {
			t.Fatalf("%s: ids %v, want %v", s, ids(evs), tc.want)
		}
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

func testNullEntityKey(t *testing.T, l streams.Log, a streams.Appender) {
	mustAppend(t, a, ev("WEB", "dependency.added", "item", "d1", ""))
	evs := readAll(t, l)
	if len(evs) != 1 || evs[0].EntityKey != "" {
		t.Fatalf("events %+v, want one with empty entity key", evs)
	}
	// An item event without a key belongs to no item stream, not even one named "".
	head, _ := l.Head(ctxT(t))
	for _, key := range []string{"WEB-1", "d1"} {
		got, err := l.ReadStream(ctxT(t), streams.Stream{Kind: streams.StreamItem, Key: key}, 0, head, 10)
		if err != nil || len(got) != 0 {
			t.Fatalf("item:%s = %+v, %v; want none", key, got, err)
		}
	}
}

func testPayload(t *testing.T, l streams.Log, a streams.Appender) {
	payloads := []string{
		``, // nil means {}
		`{}`,
		`{"from":"backlog","to":"ready"}`,
		`{ "nested": {"a": [1, 2.5, -3e2, true, false, null], "s": "x\"y\\z"}, "u": "héllo ✓ \u00e9 \ud83d\ude00" }`,
		`[1,2,3]`,
		`"text"`,
		`42`,
		`{"big": 12345678901234567890, "dup": 1, "dup": 2}`,
	}
	var in []streams.NewEvent
	for i, p := range payloads {
		e := ev("WEB", "t", "item", fmt.Sprint("p", i), "WEB-1")
		e.Payload = nil
		if p != "" {
			e.Payload = []byte(p)
		}
		in = append(in, e)
	}
	mustAppend(t, a, in...)
	evs := readAll(t, l)
	if len(evs) != len(payloads) {
		t.Fatalf("read %d events", len(evs))
	}
	for i, e := range evs {
		want := payloads[i]
		if want == "" {
			want = "{}"
			if !bytes.Equal(e.Payload, []byte("{}")) {
				t.Fatalf("empty payload read as %q, want {}", e.Payload)
			}
		}
		if i == 7 { // a big integer keeps its digits; the last duplicate key wins
			var m map[string]json.Number
			d := json.NewDecoder(bytes.NewReader(e.Payload))
			d.UseNumber()
			if err := d.Decode(&m); err != nil || m["big"] != "12345678901234567890" || m["dup"] != "2" {
				t.Fatalf("payload %s decoded %v, %v", e.Payload, m, err)
			}
			continue
		}
		sameJSON(t, e.Payload, []byte(want))
	}
}

func testInvalid(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	good := ev("WEB", "t", "item", "ok", "WEB-1")
	bad := []streams.NewEvent{
		{ProjectKey: "WEB", Payload: []byte(`{"a":`)},
		{ProjectKey: "WEB", Payload: []byte(`{"a":1} {"b":2}`)},
		{ProjectKey: "WEB", Payload: []byte(`{"a":"\u0000"}`)},
		{ProjectKey: "WEB", Payload: []byte(`{"a":"\ud800"}`)},
		{ProjectKey: "WEB\x00"},
		{ProjectKey: "WEB", EntityKey: "\xff"},
	}
	for i, b := range bad {
		if _, err := a.Append(ctx, good, b); !errors.Is(err, streams.ErrInvalid) {
			t.Errorf("bad event %d: Append error %v, want ErrInvalid", i, err)
		}
	}
	// Valid payloads that only look suspicious.
	for _, p := range []string{`{"a":"\\u0000"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\\"}`} {
		e := good
		e.Payload = []byte(p)
		if _, err := a.Append(ctx, e); err != nil {
			t.Errorf("payload %s: %v", p, err)
		}
	}
	evs := readAll(t, l)
	if len(evs) != 3 {
		t.Fatalf("log holds %d events, want only the 3 valid ones", len(evs))
	}
}

func testOccurredAt(t *testing.T, l streams.Log, a streams.Appender) {
	before := time.Now().Add(-time.Minute)
	given := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	e1 := ev("WEB", "t", "item", "now1", "WEB-1")
	e2 := ev("WEB", "t", "item", "now2", "WEB-1")
	e3 := ev("WEB", "t", "item", "given", "WEB-1")
	e3.OccurredAt = given
	mustAppend(t, a, e1, e2, e3)
	after := time.Now().Add(time.Minute)
	evs := readAll(t, l)
	if len(evs) != 3 {
		t.Fatalf("read %d events", len(evs))
	}
	// The clocks of this process and the store can differ a little, hence the minute.
	if at := evs[0].OccurredAt; at.Before(before) || at.After(after) {
		t.Fatalf("occurred_at %v not near now", at)
	}
	if !evs[0].OccurredAt.Equal(evs[1].OccurredAt) {
		t.Fatalf("events of one append have different times %v, %v", evs[0].OccurredAt, evs[1].OccurredAt)
	}
	if want := given.Truncate(time.Microsecond); !evs[2].OccurredAt.Equal(want) {
		t.Fatalf("given occurred_at read as %v, want %v", evs[2].OccurredAt, want)
	}
}

func testWaitWakes(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	head := mustAppend(t, a, ev("WEB", "t", "item", "x", "WEB-1"))
	woken := make(chan error, 1)
	go func() {
		for {
			// Wake-ups may be spurious: wait again until the head moved.
			if err := l.Wait(ctx, head); err != nil {
				woken <- err
				return
			}
			h, err := l.Head(ctx)
			if err != nil {
				woken <- err
				return
			}
			if h > head {
				woken <- nil
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond) // most likely blocked in Wait by now; either way is valid
	mustAppend(t, a, ev("WEB", "t", "item", "y", "WEB-1"))
	if err := <-woken; err != nil {
		t.Fatalf("Wait = %v", err)
	}
}

func testWaitBehind(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	last := mustAppend(t, a, ev("WEB", "t", "item", "x", "WEB-1"))
	// A waiter that has not read up to the head must not block (ctx would end the test).
	if err := l.Wait(ctx, last-1); err != nil {
		t.Fatalf("Wait(behind head) = %v", err)
	}
	if err := l.Wait(ctx, 0); err != nil {
		t.Fatalf("Wait(0) = %v", err)
	}
}

func testWaitCtx(t *testing.T, l streams.Log, _ streams.Appender) {
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		for {
			err := l.Wait(ctx, 0)
			if err != nil {
				done <- err
				return
			}
		}
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v, want context.Canceled", err)
	}
	dctx, dcancel := context.WithTimeout(ctxT(t), 20*time.Millisecond)
	defer dcancel()
	for {
		err := l.Wait(dctx, 0)
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("Wait with deadline = %v", err)
		}
	}
}

func testConcurrent(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	const writers, batches, per = 4, 25, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				var evs []streams.NewEvent
				for i := range per {
					evs = append(evs, ev("WEB", "t", "item", fmt.Sprintf("w%d-b%d-%d", w, b, i), "WEB-1"))
				}
				if _, err := a.Append(ctx, evs...); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs := readAll(t, l)
	if len(evs) != writers*batches*per {
		t.Fatalf("read %d events, want %d", len(evs), writers*batches*per)
	}
	checkIncreasing(t, evs)
	// Each batch is contiguous: nothing interleaves within one append.
	for i := 0; i < len(evs); i += per {
		var w, b int
		if _, err := fmt.Sscanf(evs[i].EntityID, "w%d-b%d-0", &w, &b); err != nil {
			t.Fatalf("event %d id %q does not start a batch", i, evs[i].EntityID)
		}
		for j := 1; j < per; j++ {
			if want := fmt.Sprintf("w%d-b%d-%d", w, b, j); evs[i+j].EntityID != want {
				t.Fatalf("event %d id %q, want %q", i+j, evs[i+j].EntityID, want)
			}
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

func testProjects(t *testing.T, l streams.Log, _ streams.Appender) {
	ps, ok := l.(streams.ProjectStore)
	if !ok {
		return // a log without projects has nothing to conform to here
	}
	ctx := ctxT(t)
	if err := ps.CreateProject(ctx, "WEB", "Web site", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := ps.CreateProject(ctx, "WEB", "again", "bob"); !errors.Is(err, streams.ErrExists) {
		t.Fatalf("duplicate CreateProject = %v, want ErrExists", err)
	}
	for _, key := range []string{"", "web", "1WEB", "W-B", "ABCDEFGHIJKLMNOPQRSTU", "WEB\n"} {
		if err := ps.CreateProject(ctx, key, "x", "alice"); !errors.Is(err, streams.ErrInvalid) {
			t.Errorf("CreateProject(%q) = %v, want ErrInvalid", key, err)
		}
	}
	if err := ps.CreateProject(ctx, "ABCDEFGHIJKLMNOPQRST", "longest key", ""); err != nil {
		t.Fatal(err)
	}

	role, exists, err := ps.Role(ctx, "WEB", "bob")
	if err != nil || role != "" || !exists {
		t.Fatalf("Role(WEB, bob) = %q, %v, %v; want \"\", true", role, exists, err)
	}
	role, exists, err = ps.Role(ctx, "NOPE", "bob")
	if err != nil || role != "" || exists {
		t.Fatalf("Role(NOPE, bob) = %q, %v, %v; want \"\", false", role, exists, err)
	}
	if err := ps.Grant(ctx, "WEB", "bob", "member", "human", "alice"); err != nil {
		t.Fatal(err)
	}
	if role, _, _ := ps.Role(ctx, "WEB", "bob"); role != "member" {
		t.Fatalf("role after grant = %q", role)
	}
	if err := ps.Grant(ctx, "WEB", "bob", "admin", "human", "alice"); err != nil {
		t.Fatal(err)
	}
	if role, _, _ := ps.Role(ctx, "WEB", "bob"); role != "admin" {
		t.Fatalf("role after regrant = %q", role)
	}
	if err := ps.Grant(ctx, "NOPE", "bob", "viewer", "human", "alice"); !errors.Is(err, streams.ErrNotFound) {
		t.Fatalf("Grant on missing project = %v, want ErrNotFound", err)
	}
	if err := ps.Grant(ctx, "web", "bob", "viewer", "human", "alice"); !errors.Is(err, streams.ErrNotFound) {
		t.Fatalf("Grant on invalid key = %v, want ErrNotFound", err)
	}
	if err := ps.Grant(ctx, "WEB", "bob", "owner", "human", "alice"); !errors.Is(err, streams.ErrInvalid) {
		t.Fatalf("Grant of bad role = %v, want ErrInvalid", err)
	}
	if err := ps.Grant(ctx, "WEB", "", "viewer", "human", "alice"); !errors.Is(err, streams.ErrInvalid) {
		t.Fatalf("Grant to empty subject = %v, want ErrInvalid", err)
	}
	if err := ps.Revoke(ctx, "WEB", "carol", "human", "alice"); !errors.Is(err, streams.ErrNotFound) {
		t.Fatalf("Revoke of non-member = %v, want ErrNotFound", err)
	}
	if err := ps.Revoke(ctx, "NOPE", "bob", "human", "alice"); !errors.Is(err, streams.ErrNotFound) {
		t.Fatalf("Revoke on missing project = %v, want ErrNotFound", err)
	}
	if err := ps.Revoke(ctx, "WEB", "bob", "human", "alice"); err != nil {
		t.Fatal(err)
	}
	if role, exists, _ := ps.Role(ctx, "WEB", "bob"); role != "" || !exists {
		t.Fatalf("role after revoke = %q, %v", role, exists)
	}
	if err := ps.Revoke(ctx, "WEB", "bob", "human", "alice"); !errors.Is(err, streams.ErrNotFound) {
		t.Fatalf("second Revoke = %v, want ErrNotFound", err)
	}

	// Every change appended its event on the project stream, and failures appended none.
	head, _ := l.Head(ctx)
	evs, err := l.ReadStream(ctx, streams.Stream{Kind: streams.StreamProject, Key: "WEB"}, 0, head, 100)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ typ, actorKind, actorSubject, payload string }
	var got []row
	for _, e := range evs {
		if e.EntityType != "project" || e.EntityID != "WEB" || e.EntityKey != "WEB" {
			t.Fatalf("event %+v: want entity project WEB", e)
		}
		var p map[string]string
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, row{e.Type, e.ActorKind, e.ActorSubject, fmt.Sprint(p)})
	}
	want := []row{
		{"project.created", "human", "alice", fmt.Sprint(map[string]string{"key": "WEB", "name": "Web site"})},
		{"member.granted", "human", "alice", fmt.Sprint(map[string]string{"subject": "bob", "role": "member"})},
		{"member.granted", "human", "alice", fmt.Sprint(map[string]string{"subject": "bob", "role": "admin"})},
		{"member.revoked", "human", "alice", fmt.Sprint(map[string]string{"subject": "bob"})},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("project events\n got %v\nwant %v", got, want)
	}
	all := readAll(t, l)
	if len(all) != 5 { // the four above and the other project's creation
		t.Fatalf("log holds %d events, want 5", len(all))
	}
	found := false
	for _, e := range all {
		if e.ProjectKey == "ABCDEFGHIJKLMNOPQRST" && e.Type == "project.created" && e.ActorKind == "system" && e.ActorSubject == "" {
			found = true
		}
	}
	if !found {
		t.Fatalf("creation without creator not recorded with a system actor: %+v", all)
	}
}

func testClose(t *testing.T, l streams.Log, a streams.Appender) {
	c, ok := l.(interface{ Close() error })
	if !ok {
		return // nothing to close
	}
	ctx := ctxT(t)
	ended := make(chan error, 1)
	go func() {
		for {
			if err := l.Wait(ctx, 0); err != nil {
				ended <- err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; !errors.Is(err, streams.ErrClosed) {
		t.Fatalf("Wait across Close = %v, want ErrClosed", err)
	}
	if err := l.Wait(ctx, 0); !errors.Is(err, streams.ErrClosed) {
		t.Fatalf("Wait after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	// Reads and appends do not depend on Close.
	if _, err := a.Append(ctx, ev("WEB", "t", "item", "x", "WEB-1")); err != nil {
		t.Fatalf("Append after Close = %v", err)
	}
	if evs, err := l.ReadAfter(ctx, 0, 10); err != nil || len(evs) != 1 {
		t.Fatalf("ReadAfter after Close = %d events, %v", len(evs), err)
	}
}
