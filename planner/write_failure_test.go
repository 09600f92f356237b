package planner_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// failingWrites is a store whose AppendOutputs fails for batches holding an output whose text
// starts with "lost" (always) or "flaky" (the first twice).
type failingWrites struct {
	planner.Store
	mu     sync.Mutex
	flakes int // failures of "flaky" batches so far
}

func (s *failingWrites) AppendOutputs(ctx context.Context, b planner.OutputBatch) error {
	for _, o := range b.Outputs {
		switch {
		case strings.HasPrefix(o.Text, "lost"):
			return errors.New("the database is gone")
		case strings.HasPrefix(o.Text, "flaky"):
			s.mu.Lock()
			s.flakes++
			n := s.flakes
			s.mu.Unlock()
			if n <= 2 {
				return errors.New("the database hiccuped")
			}
		}
	}
	return s.Store.AppendOutputs(ctx, b)
}

// stalling is a model that streams its texts, each in an output window of its own (100 ms
// apart), then, when the last is "lost…", waits for the turn to be stopped.
type stalling struct{ texts []string }

func (stalling) Name() string  { return "stalling" }
func (stalling) Model() string { return "stalling" }

func (m stalling) Stream(ctx context.Context, _ *provider.Request, onDelta func(provider.Delta) error) (*provider.Response, error) {
	for i, text := range m.texts {
		if i > 0 {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if err := onDelta(provider.Delta{Type: provider.DeltaText, Text: text}); err != nil {
			return nil, err
		}
	}
	if strings.HasPrefix(m.texts[len(m.texts)-1], "lost") {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &provider.Response{Content: []provider.Block{{Type: provider.BlockText, Text: strings.Join(m.texts, "")}},
		StopReason: provider.StopEndTurn}, nil
}

// A window whose store write fails is tried again; one that fails for good is not sent, and
// its turn stops as if it had lost its lease: its watchers, live or resuming, get the same
// outputs, without a hole, then the error and done of the replica that ends the turn.
func TestWindowNotStoredIsNotSent(t *testing.T) {
	for _, window := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(window.String(), func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b *backend) {
				b.store = &failingWrites{Store: b.store}
				texts := func(outs []planner.Output) []string {
					var got []string
					for _, o := range outs {
						if o.Type == planner.OutputText {
							got = append(got, o.Text)
						}
					}
					return got
				}

				opts := &planner.Options{Provider: stalling{[]string{"one ", "flaky ", "three"}}}
				setWindow(opts, window)
				flaky, _ := b.service(t, opts, nil)
				id := b.newSession(t, flaky)
				w := watch(t, flaky, alice, id)
				if _, err := flaky.Send(ctxT(t), alice, id, "go"); err != nil {
					t.Fatal(err)
				}
				outs := w.until(t, planner.OutputDone)
				offsets(t, outs, outs[0].Turn, 1)
				if got := texts(outs); !slices.Equal(got, []string{"one ", "flaky ", "three"}) || outs[len(outs)-1].Text != planner.DoneEndTurn {
					t.Fatalf("output after a write tried again: %v", shape(outs))
				}
				stored, res := watchFrom(t, flaky, alice, id, planner.WatchOptions{Turn: outs[0].Turn, After: after(0)})
				if res.Resumed == nil || !*res.Resumed {
					t.Fatalf("resume after the turn: %+v", res)
				}
				if again := stored.until(t, planner.OutputDone); !slices.Equal(shape(again), shape(outs)) {
					t.Fatalf("resumed %v, live %v", shape(again), shape(outs))
				}

				const lease = 600 * time.Millisecond
				opts = &planner.Options{Lease: lease, Provider: stalling{[]string{"one ", "two ", "lost"}}}
				setWindow(opts, window)
				lost, _ := b.service(t, opts, nil)
				id = b.newSession(t, lost)
				live := watch(t, lost, alice, id)
				if _, err := lost.Send(ctxT(t), alice, id, "go"); err != nil {
					t.Fatal(err)
				}
				outs = live.until(t, planner.OutputDone)
				turn := outs[0].Turn
				offsets(t, outs, turn, 1)
				if got := texts(outs); !slices.Equal(got, []string{"one ", "two "}) {
					t.Fatalf("live output %v, want the texts stored alone", shape(outs))
				}
				if end := outs[len(outs)-2:]; end[0].Text != planner.StaleText || end[1].Text != planner.DoneError {
					t.Fatalf("live output %v, want the error and done of a turn ended by another", shape(outs))
				}
				resumed, res := watchFrom(t, lost, alice, id, planner.WatchOptions{Turn: turn, After: after(0)})
				if res.Resumed == nil || !*res.Resumed {
					t.Fatalf("resume after the turn: %+v", res)
				}
				if again := resumed.until(t, planner.OutputDone); !slices.Equal(shape(again), shape(outs)) {
					t.Fatalf("resumed %v, live %v", shape(again), shape(outs))
				}
			})
		})
	}
}
