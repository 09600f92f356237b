package pgstore_test

import (
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/pgstore"
	"github.com/ballet/gateway/streams/pgtest"
	"github.com/ballet/gateway/tracker"
)

// Outputs have no foreign key to their session (migration 0013_planner_cheaper_writes): the
// session's deletion still deletes them, a project's too, and outputs of a session that is
// gone are not stored.
func TestOutputsGoWithTheirSession(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := t.Context()
	st := pgstore.New(pool)
	if _, err := pool.Exec(ctx, "INSERT INTO projects (key, name) VALUES ('WEB', 'web'), ('OPS', 'ops')"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, project := range []string{"WEB", "WEB", "OPS"} {
		s := &planner.Session{ID: tracker.NewID(time.Now()), Project: project, CreatedBy: "alice", CreatedAt: time.Now()}
		if err := st.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	var b planner.OutputBatch
	for _, id := range ids {
		for off := int64(1); off <= 3; off++ {
			b.Outputs = append(b.Outputs, planner.Output{Session: id, Turn: "1", Offset: off, Type: planner.OutputText, Text: "x"})
		}
		b.Cuts = append(b.Cuts, planner.Output{Session: id, Turn: "1", Offset: 4})
	}
	if err := st.AppendOutputs(ctx, b); err != nil {
		t.Fatal(err)
	}
	stored := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM planner_outputs").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := stored(); n != 12 {
		t.Fatalf("%d rows stored, want 12", n)
	}
	if _, err := pool.Exec(ctx, "DELETE FROM planner_sessions WHERE id = $1", ids[0]); err != nil {
		t.Fatal(err)
	}
	if n := stored(); n != 8 {
		t.Fatalf("%d rows after a session's deletion, want 8", n)
	}
	if _, err := pool.Exec(ctx, "DELETE FROM projects WHERE key = 'WEB'"); err != nil {
		t.Fatal(err)
	}
	if n := stored(); n != 4 {
		t.Fatalf("%d rows after a project's deletion, want the other project's 4", n)
	}
	// A window with outputs of a deleted session stores the others.
	for _, batch := range []planner.OutputBatch{b, {Outputs: b.Outputs[:1]}, {Outputs: []planner.Output{{Session: ids[2], Turn: "2", Offset: 1, Type: planner.OutputText}}}} {
		if err := st.AppendOutputs(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if n := stored(); n != 5 {
		t.Fatalf("%d rows after writes for deleted sessions, want 5", n)
	}
}
