package logtest

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ballet/gateway/streams"
)

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

// writtenHead returns the highest seq written so far, once the log's Head has reached it: for a
// streams.Follower (a log read from a standby) the primary's head, waited for on the copy.
func writtenHead(t *testing.T, l streams.Log) int64 {
	t.Helper()
	ctx := ctxT(t)
	head, err := l.Head(ctx)
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	f, ok := l.(streams.Follower)
	if !ok || !f.Tailing() {
		return head
	}
	primary, err := f.PrimaryHead(ctx)
	if err != nil {
		t.Fatalf("PrimaryHead: %v", err)
	}
	for head < primary {
		select {
		case <-ctx.Done():
			t.Fatalf("the copy stayed at %d, the primary is at %d: %v", head, primary, ctx.Err())
		case <-time.After(time.Millisecond):
		}
		if head, err = l.Head(ctx); err != nil {
			t.Fatalf("Head: %v", err)
		}
	}
	return primary
}

// readAll reads every event of the log, once it has every event written so far.
func readAll(t *testing.T, l streams.Log) []streams.Event {
	t.Helper()
	writtenHead(t, l) // a copy read from a standby has every event written so far
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
