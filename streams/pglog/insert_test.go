package pglog_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/streams/pgtest"
)

// TestInsertInCallersTransaction holds Insert, which the stores call inside their own
// transactions, to what Append promises: events in order with their last seq, all or none
// with the caller's transaction, and nothing invalid written.
func TestInsertInCallersTransaction(t *testing.T) {
	pool := pgtest.Pool(t)
	l := open(t, pool, nil)
	ctx := ctxT(t, time.Minute)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := []streams.NewEvent{
		{ProjectKey: "WEB", Type: "a", EntityType: "item", EntityID: "1", EntityKey: "WEB-1", OccurredAt: at, ActorKind: "human", ActorSubject: "alice", Payload: []byte(`{"n":1}`)},
		{ProjectKey: "WEB", Type: "b", EntityType: "session", EntityID: "2", ActorKind: "system"},
	}

	// Several events go in with one statement, one alone with another: both are checked.
	var last int64
	for _, batch := range [][]streams.NewEvent{evs, evs[:1], evs[1:]} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if n, err := pglog.Insert(ctx, tx); n != 0 || err != nil {
				t.Errorf("Insert of nothing = %d, %v; want 0, nil", n, err)
			}
			n, err := pglog.Insert(ctx, tx, batch...)
			if err == nil && n <= last {
				t.Errorf("Insert returned seq %d after %d", n, last)
			}
			last = n
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.ReadAfter(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[3].Seq != last {
		t.Fatalf("read %+v, want four events ending at seq %d", got, last)
	}
	for i, e := range got {
		if i%2 == 0 && (e.Type != "a" || e.EntityKey != "WEB-1" || !e.OccurredAt.Equal(at) || string(e.Payload) != `{"n": 1}`) ||
			i%2 == 1 && (e.Type != "b" || e.EntityKey != "" || e.OccurredAt.IsZero() || string(e.Payload) != `{}`) {
			t.Errorf("event %d: %+v", i, e)
		}
	}

	// A rolled-back transaction takes its events with it.
	rollback := errors.New("rollback")
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := pglog.Insert(ctx, tx, evs...); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatalf("rolled-back transaction: %v", err)
	}

	// An invalid event is refused before anything is written: the valid one beside it is not
	// inserted either, and the transaction is still usable.
	bad := evs[1]
	bad.EntityID = "x\x00"
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := pglog.Insert(ctx, tx, evs[0], bad); !errors.Is(err, streams.ErrInvalid) {
			t.Errorf("Insert of an invalid event = %v, want ErrInvalid", err)
		}
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if head, err := l.Head(ctx); err != nil || head != last {
		t.Fatalf("head %d, %v; want %d: nothing after the first transaction", head, err, last)
	}
}
