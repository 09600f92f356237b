package planner_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// windows are the batching settings tests run with: the default window, and none (each
// output stored and sent alone).
var windows = map[string]time.Duration{"batched": 0, "unbatched": -1}

// A turn that went past its kept-output bound, whose replica then died: the replica that
// ends it numbers its error and done after the last output its watchers saw (recorded on
// the lease), not after the last one stored (the cut), which they would drop as seen.
func TestDeadTurnPastItsBoundEndsAfterWhatWasSeen(t *testing.T) {
	for name, window := range windows {
		t.Run(name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b *backend) {
				sc, err := provider.ParseScript(strings.NewReader(boundScript))
				if err != nil {
					t.Fatal(err)
				}
				// Long enough that renewals keep it on a loaded machine (see TestReplicaDiesMidTurn).
				const lease = 1500 * time.Millisecond
				bus := b.bus(t) // the memory backend's replicas share one bus
				opts := &planner.Options{Lease: lease, TurnOutputs: 5, OutputWindow: window, Provider: provider.NewScripted(sc)}
				a, _ := b.service(t, opts, bus)
				if b.kind == "postgres" {
					bus = nil
				}
				bb, _ := b.service(t, &planner.Options{Lease: lease, OutputWindow: window}, bus)
				id := b.newSession(t, a)
				w := watch(t, bb, alice, id)
				if _, err := a.Send(ctxT(t), alice, id, "long"); err != nil {
					t.Fatal(err)
				}
				var seen []planner.Output
				for range 21 {
					seen = append(seen, w.next(t))
				}
				planner.Abandon(a)
				end := w.until(t, planner.OutputDone)
				if got := shape(end); !slices.Equal(got, []string{"error " + planner.StaleText, "done error"}) {
					t.Fatalf("output after the replica died: %v", got)
				}
				offsets(t, append(seen, end...), seen[0].Turn, 1)
				// A watcher resuming the ended turn from the last output seen gets error and done.
				r, res := watchFrom(t, bb, alice, id, planner.WatchOptions{Turn: seen[0].Turn, After: after(21)})
				if res.Resumed == nil || !*res.Resumed {
					t.Fatalf("resume after the last output seen: %+v", res)
				}
				offsets(t, r.until(t, planner.OutputDone), seen[0].Turn, 22)
			})
		})
	}
}

// batches records the batches of outputs a replica writes.
type batches struct {
	observer
	mu      sync.Mutex
	largest int
	waits   int
}

func (o *batches) OutputsWritten(n, _ int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.largest = max(o.largest, n)
}

func (o *batches) OutputsWaited() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waits++
}

// A window holds at most OutputBatch outputs: a turn whose outputs come faster waits for
// room, and its watchers still get all of them, in order. A replica's window gathers the
// outputs of all its turns.
func TestOutputBatchBound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		obs := &batches{}
		svc, _ := b.service(t, &planner.Options{OutputWindow: 50 * time.Millisecond, OutputBatch: 2, Observer: obs}, nil)
		var ids []string
		var ws []*watcher
		for range 3 {
			id := b.newSession(t, svc)
			ids, ws = append(ids, id), append(ws, watch(t, svc, alice, id))
		}
		for _, id := range ids {
			if _, err := svc.Send(ctxT(t), alice, id, "please plan"); err != nil {
				t.Fatal(err)
			}
		}
		for _, w := range ws {
			outs := w.until(t, planner.OutputDone)
			offsets(t, outs, outs[0].Turn, 1)
			if len(outs) < 10 {
				t.Fatalf("output %v", shape(outs))
			}
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if obs.largest != 2 || obs.waits == 0 {
			t.Fatalf("largest batch %d, %d waits for room; want 2 and some", obs.largest, obs.waits)
		}
	})
}

// setWindow sets the benchmarks' output window: 0 for none.
func setWindow(o *planner.Options, d time.Duration) {
	if d == 0 {
		d = -1
	}
	o.OutputWindow = d
}
