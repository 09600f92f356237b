package pgstore_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/pgstore"
	"github.com/ballet/gateway/streams/pgtest"
)

// inbox collects the notes a bus delivers.
type inbox struct {
	mu    sync.Mutex
	notes []planner.Note
	more  chan struct{}
}

func subscribe(t *testing.T, b *pgstore.Bus) *inbox {
	in := &inbox{more: make(chan struct{}, 1)}
	cancel := b.Subscribe(nil, func(n planner.Note) {
		in.mu.Lock()
		in.notes = append(in.notes, n)
		in.mu.Unlock()
		select {
		case in.more <- struct{}{}:
		default:
		}
	})
	t.Cleanup(cancel)
	return in
}

// wait returns the first n notes, failing after a generous wait.
func (in *inbox) wait(t *testing.T, n int) []planner.Note {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		in.mu.Lock()
		if len(in.notes) >= n {
			out := append([]planner.Note(nil), in.notes[:n]...)
			in.mu.Unlock()
			return out
		}
		in.mu.Unlock()
		select {
		case <-in.more:
		case <-deadline:
			t.Fatalf("%d of %d notes within 30s", len(in.notes), n)
		}
	}
}

func openBus(t *testing.T, pool *pgxpool.Pool) *pgstore.Bus {
	t.Helper()
	b, err := pgstore.OpenBus(context.Background(), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestBusLongNotesAndOrder(t *testing.T) {
	pool := pgtest.Pool(t)
	a, b := openBus(t, pool), openBus(t, pool)
	inA, inB := subscribe(t, a), subscribe(t, b)
	ctx := context.Background()

	isErr := true
	var want []planner.Note
	long := strings.Repeat("ünïcödé \"quoted\" \\ <tags> & \x01 ", 2000) // well over NOTIFY's limit
	for i := 0; i < 60; i++ {
		o := &planner.Output{Session: "s1", Type: planner.OutputText, Text: fmt.Sprint("piece ", i)}
		switch i % 10 {
		case 3:
			o = &planner.Output{Session: "s1", Type: planner.OutputToolResult, Tool: "list_items", ToolUseID: "toolu_1", Text: long, IsError: &isErr}
		case 7:
			o = &planner.Output{Session: "s1", Type: planner.OutputToolCall, Tool: "create_item", ToolUseID: "toolu_2", Input: []byte(`{"title":"` + strings.Repeat("x", 9000) + `"}`)}
		}
		n := planner.Note{Session: "s1", Output: o}
		if i == 30 {
			n = planner.Note{Session: "s1", Cancel: true}
		}
		want = append(want, n)
		// Publishers alternate between the replicas; each Publish returns before the next.
		pub := a
		if i%2 == 1 {
			pub = b
		}
		if err := pub.Publish(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for name, in := range map[string]*inbox{"a": inA, "b": inB} {
		got := in.wait(t, len(want))
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("bus %s note %d: %+v, want %+v", name, i, got[i], want[i])
			}
		}
	}
}

func TestBusSubscribeCancel(t *testing.T) {
	pool := pgtest.Pool(t)
	b := openBus(t, pool)
	calls := 0
	var mu sync.Mutex
	cancel := b.Subscribe(nil, func(planner.Note) {
		mu.Lock()
		calls++
		mu.Unlock()
	})
	keep := subscribe(t, b)
	if err := b.Publish(context.Background(), planner.Note{Sync: "1"}); err != nil {
		t.Fatal(err)
	}
	keep.wait(t, 1)
	cancel()
	if err := b.Publish(context.Background(), planner.Note{Sync: "2"}); err != nil {
		t.Fatal(err)
	}
	keep.wait(t, 2)
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("a cancelled subscriber was called %d times, want 1", calls)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
