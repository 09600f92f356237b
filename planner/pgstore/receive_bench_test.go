package pgstore

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ballet/gateway/planner"
)

// BenchmarkReceive measures what a replica spends per note it receives: decoded for a
// watcher (wanted) or skipped unread (a session without watchers here).
func BenchmarkReceive(b *testing.B) {
	var notes []planner.Note
	for i := range 40 {
		s := fmt.Sprintf("01a23443-fe0e-761c-9a2b-%012d", i)
		notes = append(notes, planner.Note{Session: s, Output: &planner.Output{Session: s, Turn: "7f3a9c2e1b4d6a80",
			Offset: int64(i + 1), Type: planner.OutputText, Text: "forty bytes of model output, more or les"}})
	}
	payloads, err := encodeNotes(notes)
	if err != nil {
		b.Fatal(err)
	}
	for _, wanted := range []bool{true, false} {
		b.Run(fmt.Sprintf("wanted=%v", wanted), func(b *testing.B) {
			bus := &Bus{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			got := 0
			cancel := bus.Subscribe(func(string, bool) bool { return wanted }, func(planner.Note) { got++ })
			defer cancel()
			b.ReportAllocs()
			for range b.N {
				for _, p := range payloads {
					bus.receive(&pgconn.Notification{Payload: p})
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(notes)), "ns/note")
		})
	}
}
