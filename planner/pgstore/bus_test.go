package pgstore_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/pglisten"
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

// TestBusBatch: one Publish of many notes of several sessions goes out in as few
// notifications as fit, in order; a subscriber that wants one session gets its notes and
// those of no session, and the other sessions' not at all.
func TestBusBatch(t *testing.T) {
	pool := pgtest.Pool(t)
	a, b := openBus(t, pool), openBus(t, pool)
	all := subscribe(t, b)
	var mu sync.Mutex
	var mine []planner.Note
	cancel := b.Subscribe(func(s string, _ bool) bool { return s == "s1" }, func(n planner.Note) {
		mu.Lock()
		mine = append(mine, n)
		mu.Unlock()
	})
	t.Cleanup(cancel)
	var payloads atomic.Int64
	raw, err := pglisten.Open(context.Background(), pool.Config().ConnConfig, []string{pgstore.DefaultChannel},
		&pglisten.Options{OnNotify: func(*pgconn.Notification) { payloads.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })

	var notes, want []planner.Note
	bytes := 0
	for i := 0; i < 300; i++ {
		s := fmt.Sprint("s", 1+i%3)
		n := planner.Note{Session: s, Output: &planner.Output{Session: s, Turn: "t", Offset: int64(i + 1), Type: planner.OutputText, Text: fmt.Sprint("delta ", i)}}
		notes = append(notes, n)
		if s == "s1" {
			want = append(want, n)
		}
		bytes += 100
	}
	notes = append(notes, planner.Note{Sync: "end"})
	want = append(want, planner.Note{Sync: "end"})
	if err := a.Publish(context.Background(), notes...); err != nil {
		t.Fatal(err)
	}
	if got := all.wait(t, len(notes)); !reflect.DeepEqual(got, notes) {
		t.Fatalf("the notes of one Publish arrived as %d notes, not in order", len(got))
	}
	for deadline := time.Now().Add(10 * time.Second); payloads.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the raw listener's share, had there been more
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(mine, want) {
		t.Fatalf("a subscriber of s1 got %d notes, want %d", len(mine), len(want))
	}
	if n := payloads.Load(); n < 1 || n > int64(bytes/pglisten.MaxPayload+1) {
		t.Fatalf("%d notes of about %d bytes took %d notifications", len(notes), bytes, n)
	}
}
