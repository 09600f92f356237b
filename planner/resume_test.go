package planner_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// watchFrom is watch with resume options; it returns the result too.
func watchFrom(t testing.TB, svc *planner.Service, c planner.Caller, session string, opts planner.WatchOptions) (*watcher, planner.WatchResult) {
	t.Helper()
	w := &watcher{ch: make(chan planner.Output, 10000)}
	res, stop, err := svc.WatchFrom(ctxT(t), c, session, opts, func(o planner.Output) bool {
		select {
		case w.ch <- o:
			return true
		default:
			t.Errorf("watcher buffer full")
			return false
		}
	})
	if err != nil {
		t.Fatalf("watch from %+v: %v", opts, err)
	}
	w.stop, w.running = stop, res.Running
	t.Cleanup(stop)
	return w, res
}

func after(n int64) *int64 { return &n }

// offsets checks that outs are one turn's outputs first..first+len-1, in order.
func offsets(t testing.TB, outs []planner.Output, turn string, first int64) {
	t.Helper()
	for i, o := range outs {
		if o.Turn != turn || o.Offset != first+int64(i) {
			t.Fatalf("output %d is %s/%d (%s), want %s/%d", i, o.Turn, o.Offset, o.Type, turn, first+int64(i))
		}
	}
}

func TestOutputsCarryTurnAndOffset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		svc, _ := b.service(t, nil, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		var turns []string
		for range 2 {
			if _, err := svc.Send(ctxT(t), alice, id, "please plan"); err != nil {
				t.Fatal(err)
			}
			outs := w.until(t, planner.OutputDone)
			if outs[0].Turn == "" {
				t.Fatalf("no turn: %+v", outs[0])
			}
			offsets(t, outs, outs[0].Turn, 1)
			turns = append(turns, outs[0].Turn)
		}
		if turns[0] == turns[1] {
			t.Fatalf("two turns share the id %s", turns[0])
		}
	})
}

// A watcher on another replica resumes the running turn from any offset: the stored
// outputs first, then live, with no gap and no duplicate, the same as a watcher that
// never left.
func TestResumeRunningTurnOnAnotherReplica(t *testing.T) {
	b := newBackend(t, "postgres")
	a, _ := b.service(t, nil, nil)
	bb, _ := b.service(t, nil, nil)
	id := b.newSession(t, a)
	stay := watch(t, a, alice, id)
	if _, err := a.Send(ctxT(t), alice, id, "slow"); err != nil {
		t.Fatal(err)
	}
	first := stay.until(t, planner.OutputText)
	turn := first[0].Turn
	if s, _, err := bb.Transcript(ctxT(t), alice, id); err != nil || !s.Running || s.Turn != turn {
		t.Fatalf("session %+v %v, want running turn %s", s, err, turn)
	}
	// From the start without naming the turn; from the middle naming it.
	w0, r0 := watchFrom(t, bb, victor, id, planner.WatchOptions{After: after(0)})
	w1, r1 := watchFrom(t, bb, alice, id, planner.WatchOptions{Turn: turn, After: after(1)})
	for _, r := range []planner.WatchResult{r0, r1} {
		if !r.Running || r.Turn != turn || r.Resumed == nil || !*r.Resumed {
			t.Fatalf("result %+v, want running, resumed turn %s", r, turn)
		}
	}
	if err := bb.Cancel(ctxT(t), alice, id); err != nil {
		t.Fatal(err)
	}
	all := append(first, stay.until(t, planner.OutputDone)...)
	offsets(t, all, turn, 1)
	got0, got1 := w0.until(t, planner.OutputDone), w1.until(t, planner.OutputDone)
	offsets(t, got0, turn, 1)
	offsets(t, got1, turn, 2)
	if len(got0) != len(all) || len(got1) != len(all)-1 {
		t.Fatalf("resumed watchers saw %d and %d outputs, the one that stayed %d", len(got0), len(got1), len(all))
	}
	w0.quiet(t, 300*time.Millisecond)
	// The resumed watch goes on with the next turn, live.
	if _, err := bb.Send(ctxT(t), alice, id, "hello"); err != nil {
		t.Fatal(err)
	}
	next := w1.until(t, planner.OutputDone)
	if next[0].Turn == turn || next[0].Type != planner.OutputMessage {
		t.Fatalf("next turn's first output %+v", next[0])
	}
	offsets(t, next, next[0].Turn, 1)
}

// A turn that ended less than the resume window ago is resumed up to its done; after the
// window, or for an unknown turn, resumed is false and only live output follows.
func TestResumeEndedTurn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		// The window is long where the turn must still be resumed, however slowly the test
		// gets there; a second replica with a short one tells a turn that ended before it.
		svc, _ := b.service(t, &planner.Options{ResumeWindow: time.Minute}, nil)
		const window = 100 * time.Millisecond
		short, _ := b.service(t, &planner.Options{ResumeWindow: window}, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		if _, err := svc.Send(ctxT(t), alice, id, "please plan"); err != nil {
			t.Fatal(err)
		}
		all := w.until(t, planner.OutputDone)
		turn := all[0].Turn
		r, res := watchFrom(t, svc, alice, id, planner.WatchOptions{Turn: turn, After: after(3)})
		if res.Running || res.Turn != turn || res.Resumed == nil || !*res.Resumed {
			t.Fatalf("result %+v", res)
		}
		got := r.until(t, planner.OutputDone)
		offsets(t, got, turn, 4)
		if len(got) != len(all)-3 {
			t.Fatalf("resumed %d outputs, want %d", len(got), len(all)-3)
		}
		for _, opts := range []planner.WatchOptions{
			{Turn: "no-such-turn", After: after(0)},
			{After: after(0)}, // no turn runs
		} {
			w, res := watchFrom(t, svc, alice, id, opts)
			if res.Resumed == nil || *res.Resumed || res.Turn != "" {
				t.Fatalf("%+v: result %+v, want not resumed", opts, res)
			}
			w.quiet(t, 100*time.Millisecond)
		}
		// The done was stored before it reached the watcher: it is older than this.
		time.Sleep(2 * window)
		if _, res := watchFrom(t, short, alice, id, planner.WatchOptions{Turn: turn, After: after(0)}); res.Resumed == nil || *res.Resumed {
			t.Fatalf("resumed a turn that ended before the window: %+v", res)
		}
	})
}

// Past its bound, a turn's output is live only: resuming the ended turn where an output
// after the offset was not kept is refused.
func TestResumePastTheKeptOutput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		svc, _ := b.service(t, &planner.Options{TurnOutputs: 4}, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		if _, err := svc.Send(ctxT(t), alice, id, "please plan"); err != nil {
			t.Fatal(err)
		}
		all := w.until(t, planner.OutputDone)
		turn := all[0].Turn
		if len(all) < 8 {
			t.Fatalf("only %d outputs", len(all))
		}
		if _, res := watchFrom(t, svc, alice, id, planner.WatchOptions{Turn: turn, After: after(5)}); *res.Resumed {
			t.Fatal("resumed past the kept output")
		}
		// From 2: 3 and 4 are kept, then error/done of the turn's end are, with a hole
		// before them: not resumable as a whole either.
		if _, res := watchFrom(t, svc, alice, id, planner.WatchOptions{Turn: turn, After: after(2)}); *res.Resumed {
			t.Fatal("resumed across a hole")
		}
	})
}

func TestIdempotentSend(t *testing.T) {
	b := newBackend(t, "postgres")
	a, _ := b.service(t, nil, nil)
	bb, _ := b.service(t, nil, nil)
	id := b.newSession(t, a)
	w := watch(t, a, alice, id)
	seq, err := a.SendWithKey(ctxT(t), alice, id, "slow", "k-1")
	if err != nil {
		t.Fatal(err)
	}
	w.until(t, planner.OutputText)
	// The same key while that turn runs, on either replica: its seq, no conflict.
	for _, svc := range []*planner.Service{a, bb} {
		if again, err := svc.SendWithKey(ctxT(t), alice, id, "slow", "k-1"); err != nil || again != seq {
			t.Fatalf("same key during the turn: %d %v, want %d", again, err, seq)
		}
	}
	// Another key, or another subject's same key, is a new send: the session is busy.
	if _, err := bb.SendWithKey(ctxT(t), alice, id, "slow", "k-2"); !errors.Is(err, planner.ErrConflict) {
		t.Fatalf("another key during the turn: %v, want ErrConflict", err)
	}
	if err := a.Cancel(ctxT(t), alice, id); err != nil {
		t.Fatal(err)
	}
	w.until(t, planner.OutputDone)
	if again, err := bb.SendWithKey(ctxT(t), alice, id, "slow", "k-1"); err != nil || again != seq {
		t.Fatalf("same key after the turn: %d %v, want %d", again, err, seq)
	}
	w.quiet(t, 300*time.Millisecond) // started nothing
	if msgs := transcript(t, a, id); strings.Count(roles(msgs), "human") != 1 {
		t.Fatalf("transcript %s: the key was sent twice", roles(msgs))
	}
	for _, key := range []string{strings.Repeat("k", planner.MaxIdempotencyKey+1), "bad\x00"} {
		if _, err := a.SendWithKey(ctxT(t), alice, id, "hello", key); !errors.Is(err, planner.ErrInvalid) {
			t.Fatalf("key %q: %v, want ErrInvalid", key, err)
		}
	}
}

// Concurrent sends of one key, from two replicas, store one message.
func TestIdempotentSendRace(t *testing.T) {
	b := newBackend(t, "postgres")
	a, _ := b.service(t, nil, nil)
	bb, _ := b.service(t, nil, nil)
	id := b.newSession(t, a)
	for round := range 5 {
		key := fmt.Sprint("race-", round)
		seqs := make(chan int64, 4)
		errs := make(chan error, 4)
		for i := range 4 {
			svc := []*planner.Service{a, bb}[i%2]
			go func() {
				seq, err := svc.SendWithKey(ctxT(t), alice, id, "hello", key)
				seqs <- seq
				errs <- err
			}()
		}
		var got []int64
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			got = append(got, <-seqs)
		}
		if slices.Min(got) != slices.Max(got) {
			t.Fatalf("round %d: one key answered seqs %v", round, got)
		}
		waitFor(t, "the turn to end", func() bool {
			s, _, err := a.Transcript(ctxT(t), alice, id)
			return err == nil && !s.Running
		})
	}
	if msgs := transcript(t, a, id); strings.Count(roles(msgs), "human") != 5 {
		t.Fatalf("transcript %s, want 5 human messages", roles(msgs))
	}
}

// dropCancels is a bus that loses cancel notes, as a listener that is reconnecting does.
type dropCancels struct{ planner.Bus }

func (d dropCancels) Publish(ctx context.Context, notes ...planner.Note) error {
	notes = slices.DeleteFunc(slices.Clone(notes), func(n planner.Note) bool { return n.Cancel })
	return d.Bus.Publish(ctx, notes...)
}

func TestCancelSurvivesALostNotification(t *testing.T) {
	b := newBackend(t, "postgres")
	// The default lease: the cancel is found by a renewal, and a shorter lease's renewals
	// (with a third of it to answer) can fail on a loaded machine until the lease is lost.
	a, _ := b.service(t, nil, nil)
	bb, _ := b.service(t, nil, dropCancels{b.bus(t)})
	id := b.newSession(t, a)
	w := watch(t, bb, alice, id)
	if _, err := a.Send(ctxT(t), alice, id, "slow"); err != nil {
		t.Fatal(err)
	}
	w.until(t, planner.OutputText)
	if err := bb.Cancel(ctxT(t), alice, id); err != nil {
		t.Fatal(err)
	}
	if got := shape(w.until(t, planner.OutputDone)); got[len(got)-1] != "done cancelled" {
		t.Fatalf("output after a cancel whose notification was lost: %v", got)
	}
}

// With the default lease, a turn whose replica dies ends for the watchers of another
// replica within about 4/3 of the lease (4 s; under 5 s on a quiet machine), its error and
// done numbered after its last output. The bound checked allows 10 s more for a loaded one.
func TestFailoverWithinFiveSeconds(t *testing.T) {
	b := newBackend(t, "postgres")
	a, _ := b.service(t, nil, nil)
	bb, _ := b.service(t, nil, nil)
	id := b.newSession(t, a)
	w := watch(t, bb, alice, id)
	if _, err := a.Send(ctxT(t), alice, id, "slow"); err != nil {
		t.Fatal(err)
	}
	before := w.until(t, planner.OutputText)
	time.Sleep(100 * time.Millisecond)
	for len(w.ch) > 0 {
		before = append(before, <-w.ch)
	}
	planner.Abandon(a)
	died := time.Now()
	end := w.until(t, planner.OutputDone)
	took := time.Since(died)
	if got := shape(end); !slices.Equal(got[len(got)-2:], []string{"error " + planner.StaleText, "done error"}) {
		t.Fatalf("output after the replica died: %v", got)
	}
	offsets(t, append(before, end...), before[0].Turn, 1)
	t.Logf("error and done %v after the replica died", took)
	if bound := planner.DefaultLease*4/3 + 10*time.Second; took > bound {
		t.Fatalf("the dead turn ended for watchers after %v, more than %v", took, bound)
	}
	if _, err := bb.Send(ctxT(t), alice, id, "hello"); err != nil {
		t.Fatalf("Send right after done: %v", err)
	}
}

// boundScript answers "short" with one text output and "long" with twenty, each then
// pausing until cancelled. "long" comes first: a cancelled turn stores no answer, so the
// message after it reaches the model together with the earlier one.
const boundScript = `{"chunk": 2, "rules": [
	{"match": "long", "steps": [[{"text": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"}, {"pause_ms": 60000}, {"text": "never"}]]},
	{"match": "short", "steps": [[{"text": "ab"}, {"pause_ms": 60000}, {"text": "never"}]]}
]}`

// A running turn that has not passed its bound resumes from any offset, as it always did.
// Once past it, a watcher asking to resume the running turn, from below the bound or at or
// past it, is told it cannot (its output went out live only) and then gets the live output,
// without a lagging close at the first output after the hole. Once the turn has ended,
// resuming succeeds exactly when no output after the offset is missing.
func TestResumeRunningTurnPastItsBound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		sc, err := provider.ParseScript(strings.NewReader(boundScript))
		if err != nil {
			t.Fatal(err)
		}
		svc, _ := b.service(t, &planner.Options{TurnOutputs: 5, Provider: provider.NewScripted(sc)}, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)

		// Below the bound: message and text kept, the turn paused.
		if _, err := svc.Send(ctxT(t), alice, id, "short"); err != nil {
			t.Fatal(err)
		}
		short := []planner.Output{w.next(t), w.next(t)}
		turn := short[0].Turn
		offsets(t, short, turn, 1)
		var below []*watcher
		for _, from := range []int64{0, 1, 2} {
			r, res := watchFrom(t, svc, alice, id, planner.WatchOptions{After: after(from)})
			if !res.Running || res.Turn != turn || res.Resumed == nil || !*res.Resumed {
				t.Fatalf("below the bound, from %d: %+v, want resumed", from, res)
			}
			below = append(below, r)
		}
		if err := svc.Cancel(ctxT(t), alice, id); err != nil {
			t.Fatal(err)
		}
		w.until(t, planner.OutputDone)
		for i, r := range below {
			offsets(t, r.until(t, planner.OutputDone), turn, int64(i)+1)
		}

		// Past the bound: outputs 1-5 kept, 6-21 live only, and the turn paused.
		if _, err := svc.Send(ctxT(t), alice, id, "long"); err != nil {
			t.Fatal(err)
		}
		var long []planner.Output
		for range 21 {
			long = append(long, w.next(t))
		}
		turn = long[0].Turn
		offsets(t, long, turn, 1)
		if last := long[20]; last.Type != planner.OutputText {
			t.Fatalf("output 21: %+v, want the last text", last)
		}
		var past []*watcher
		for _, opts := range []planner.WatchOptions{
			{After: after(0)},
			{Turn: turn, After: after(3)},  // below the bound
			{Turn: turn, After: after(5)},  // the last output kept
			{Turn: turn, After: after(6)},  // the first not kept
			{Turn: turn, After: after(21)}, // the last sent: nothing is missing, but no store knows
		} {
			r, res := watchFrom(t, svc, alice, id, opts)
			if !res.Running || res.Turn != turn || res.Resumed == nil || *res.Resumed {
				t.Fatalf("past the bound, from %d: %+v, want running, not resumed", *opts.After, res)
			}
			past = append(past, r)
		}
		if err := svc.Cancel(ctxT(t), alice, id); err != nil {
			t.Fatal(err)
		}
		done := w.until(t, planner.OutputDone)
		offsets(t, done, turn, 22)
		for _, r := range past {
			got := r.until(t, planner.OutputDone)
			if len(got) != len(done) {
				t.Fatalf("a watcher that did not resume got %v, want the live %v", shape(got), shape(done))
			}
			offsets(t, got, turn, 22)
			r.quiet(t, 100*time.Millisecond) // no lagging close after done
		}

		// Ended: error (none here) and done are kept, so the hole before them shows.
		end := done[len(done)-1].Offset
		for _, c := range []struct {
			after   int64
			resumed bool
		}{{0, false}, {3, false}, {5, false}, {6, false}, {end - 2, false}, {end - 1, true}, {end, true}} {
			r, res := watchFrom(t, svc, alice, id, planner.WatchOptions{Turn: turn, After: after(c.after)})
			if res.Running || res.Resumed == nil || *res.Resumed != c.resumed {
				t.Fatalf("ended, from %d: %+v, want resumed %v", c.after, res, c.resumed)
			}
			if c.resumed && c.after < end {
				offsets(t, r.until(t, planner.OutputDone), turn, c.after+1)
			}
			r.quiet(t, 50*time.Millisecond)
		}
	})
}
