package planner_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// observation is one call of an Observer.
type observation struct {
	turn     string // TurnEnded's reason; "" for ModelCalled and Refused
	refused  string // Refused's limit
	d        time.Duration
	provider string
	resp     *provider.Response
	err      error
}

// observer records what the Service reports.
type observer struct {
	mu  sync.Mutex
	obs []observation
}

func (o *observer) TurnEnded(reason string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs = append(o.obs, observation{turn: reason, d: d})
}

func (o *observer) ModelCalled(name string, d time.Duration, resp *provider.Response, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs = append(o.obs, observation{d: d, provider: name, resp: resp, err: err})
}

func (o *observer) Refused(limit string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs = append(o.obs, observation{refused: limit})
}

// Batches of outputs are not observations here: how outputs fall into batches is timing.
func (o *observer) OutputsWritten(int, int, time.Duration) {}
func (o *observer) OutputsWaited()                         {}

// take returns and forgets the observations so far.
func (o *observer) take() []observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.obs
	o.obs = nil
	return out
}

var _ planner.Observer = (*observer)(nil)

func TestObserver(t *testing.T) {
	b := newBackend(t, "memory")
	obs := &observer{}
	svc, _ := b.service(t, &planner.Options{Observer: obs}, nil)
	// Each case has its own session: a turn that stored no answer would reach the model
	// with the next one.
	session := func(t *testing.T) (string, *watcher) {
		id := b.newSession(t, svc)
		return id, watch(t, svc, alice, id)
	}

	t.Run("full turn", func(t *testing.T) {
		id, w := session(t)
		if _, err := svc.Send(ctxT(t), alice, id, "plan the sprint"); err != nil {
			t.Fatal(err)
		}
		w.until(t, planner.OutputDone)
		got := obs.take()
		if len(got) != 4 {
			t.Fatalf("%d observations, want 3 model calls and a turn: %+v", len(got), got)
		}
		for i, o := range got[:3] {
			if o.turn != "" || o.provider != "scripted" || o.err != nil || o.resp == nil || o.d <= 0 {
				t.Fatalf("model call %d: %+v", i, o)
			}
			if o.resp.Usage.InputTokens <= 0 || o.resp.Usage.OutputTokens <= 0 {
				t.Fatalf("model call %d usage: %+v", i, o.resp.Usage)
			}
		}
		if last := got[3]; last.turn != planner.DoneEndTurn || last.d <= 0 {
			t.Fatalf("turn: %+v", last)
		}
	})

	t.Run("cancelled turn", func(t *testing.T) {
		id, w := session(t)
		if _, err := svc.Send(ctxT(t), alice, id, "slow"); err != nil {
			t.Fatal(err)
		}
		w.until(t, planner.OutputText)
		if err := svc.Cancel(ctxT(t), alice, id); err != nil {
			t.Fatal(err)
		}
		w.until(t, planner.OutputDone)
		// The interrupted model call is not the provider's doing: only the turn is reported.
		got := obs.take()
		if len(got) != 1 || got[0].turn != planner.DoneCancelled || got[0].d <= 0 {
			t.Fatalf("observations: %+v", got)
		}
	})

	t.Run("provider error", func(t *testing.T) {
		id, w := session(t)
		if _, err := svc.Send(ctxT(t), alice, id, "fail"); err != nil {
			t.Fatal(err)
		}
		w.until(t, planner.OutputDone)
		got := obs.take()
		var pe *provider.Error
		if len(got) != 2 || got[0].provider != "scripted" || got[0].resp != nil || !errors.As(got[0].err, &pe) || pe.Message != "upstream exploded" {
			t.Fatalf("observations: %+v", got)
		}
		if got[1].turn != planner.DoneError || got[1].d <= 0 {
			t.Fatalf("turn: %+v", got[1])
		}
	})

	t.Run("max rounds", func(t *testing.T) {
		svc, _ := b.service(t, &planner.Options{Observer: obs, MaxRounds: 2}, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		if _, err := svc.Send(ctxT(t), alice, id, "loop"); err != nil {
			t.Fatal(err)
		}
		w.until(t, planner.OutputDone)
		got := obs.take()
		var turns []string
		for _, o := range got {
			if o.turn != "" {
				turns = append(turns, o.turn)
			}
		}
		if len(got) != 3 || !slices.Equal(turns, []string{planner.DoneMaxRounds}) {
			t.Fatalf("observations: %+v", got)
		}
	})
}

func TestObserverTakeover(t *testing.T) {
	const lease = 300 * time.Millisecond
	b := newBackend(t, "memory")
	bus := b.bus(t)
	obsA, obsB := &observer{}, &observer{}
	a, _ := b.service(t, &planner.Options{Observer: obsA, Lease: lease}, bus)
	bb, _ := b.service(t, &planner.Options{Observer: obsB, Lease: lease}, bus)
	id := b.newSession(t, a)
	wb := watch(t, bb, alice, id)
	if _, err := a.Send(ctxT(t), alice, id, "slow"); err != nil {
		t.Fatal(err)
	}
	wb.until(t, planner.OutputText)
	planner.Abandon(a)
	wb.until(t, planner.OutputDone)
	if got := obsB.take(); len(got) != 1 || got[0].turn != planner.DoneError || got[0].d != 0 {
		t.Fatalf("observations of the replica that took over: %+v", got)
	}
	if got := obsA.take(); len(got) != 0 {
		t.Fatalf("observations of the dead replica: %+v", got)
	}
}
