package pglisten_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/internal/pglisten"
)

// TestNotify holds Notify to its promise: payloads arrive in order, and several sent outside
// a transaction are one transaction of their own (pgx runs a batch as one), all or none.
func TestNotify(t *testing.T) {
	e := newEnv(t)
	in := newInbox()
	e.open(t, []string{"ch"}, in.options())
	ctx := t.Context()
	expect := func(want ...string) {
		t.Helper()
		for _, w := range want {
			if n := in.next(t); n.Payload != w {
				t.Fatalf("payload %.20q, want %.20q", n.Payload, w)
			}
		}
	}

	if err := pglisten.Notify(ctx, e.admin, "ch", "one"); err != nil {
		t.Fatal(err)
	}
	expect("one")

	var many []string
	for i := 0; i < 60; i++ {
		many = append(many, fmt.Sprint("note ", i))
	}
	many = append(many, strings.Repeat("ü", pglisten.MaxPayload/2))
	if err := pglisten.Notify(ctx, e.admin, "ch", many...); err != nil {
		t.Fatal(err)
	}
	expect(many...)

	// One refused payload (NOTIFY's limit is 8000 bytes) takes the others with it.
	if err := pglisten.Notify(ctx, e.admin, "ch", "before", strings.Repeat("x", 8000), "after"); err == nil {
		t.Fatal("a payload of 8000 bytes was sent")
	}
	// Inside a transaction they are the caller's: rolled back, they are not sent.
	rollback := errors.New("rollback")
	err := pgx.BeginFunc(ctx, e.admin, func(tx pgx.Tx) error {
		if err := pglisten.Notify(ctx, tx, "ch", "rolled", "back"); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, e.admin, func(tx pgx.Tx) error {
		return pglisten.Notify(ctx, tx, "ch", "committed", "together")
	})
	if err != nil {
		t.Fatal(err)
	}
	expect("committed", "together")
}
