package gateway_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ballet/gateway/planner"
)

// TestPlannerOutputsOfManyWatches publishes 60 outputs of each of 40 watched sessions at
// once, two of a session after each other, which their watches send on one connection
// together, more than a thousand at a time: every watch gets each of its outputs once, in
// order.
func TestPlannerOutputsOfManyWatches(t *testing.T) {
	const watches, rounds = 40, 30
	bus, k, notes := watchedSessions(t, watches)
	var batch []planner.Note
	for n := range rounds {
		for _, note := range notes {
			for j := range 2 {
				o := *note.Output
				o.Offset = int64(2*n + j + 1)
				batch = append(batch, planner.Note{Session: note.Session, Output: &o})
			}
		}
	}
	if err := bus.Publish(context.Background(), batch...); err != nil {
		t.Fatal(err)
	}
	last := map[string]int64{}
	for range watches * rounds * 2 {
		m := k.mustNext()
		var o output
		if m.Method != "planner.output" || k.c.Unmarshal(m.Params, &o) != nil {
			t.Fatalf("got %s %s", m.Method, m.Params)
		}
		if o.Offset != last[o.Subscription]+1 {
			t.Fatalf("%s: offset %d after %d", o.Subscription, o.Offset, last[o.Subscription])
		}
		last[o.Subscription] = o.Offset
	}
	for i := range watches {
		if sub := fmt.Sprint("w", i); last[sub] != 2*rounds {
			t.Errorf("%s: last offset %d", sub, last[sub])
		}
	}
}
