package planner

import (
	"context"
	"time"

	"github.com/ballet/gateway/planner/provider"
)

// Observer is told how turns and model calls went, for metrics. Its methods are called
// from the turns' goroutines, concurrently; they must be quick and must not block.
type Observer interface {
	// TurnEnded reports a turn ended on this replica with done's reason (DoneEndTurn,
	// DoneCancelled, DoneError, DoneMaxRounds) after running for d. A turn whose replica
	// stopped without ending it is reported by the replica that ends it for watchers, as
	// DoneError with d zero (its start is unknown there).
	TurnEnded(reason string, d time.Duration)
	// ModelCalled reports one model call: the provider's name, the time from the request
	// to the complete response or the error, and one of them. Calls cut short because
	// their turn was cancelled or stopped are not reported.
	ModelCalled(provider string, d time.Duration, resp *provider.Response, err error)
	// Refused reports a request refused by one of the planner's limits of a subject
	// (LimitTurns, LimitSessions).
	Refused(limit string)
	// OutputsWritten reports a batch of outputs stored and sent: how many, their bytes, and
	// how long the write and the notifications took.
	OutputsWritten(outputs, bytes int, d time.Duration)
	// OutputsWaited reports an output that waited for room in a full batch.
	OutputsWaited()
}

type nopObserver struct{}

func (nopObserver) TurnEnded(string, time.Duration)                              {}
func (nopObserver) ModelCalled(string, time.Duration, *provider.Response, error) {}
func (nopObserver) Refused(string)                                               {}
func (nopObserver) OutputsWritten(int, int, time.Duration)                       {}
func (nopObserver) OutputsWaited()                                               {}

// stream makes one model call of t's, for purpose, under a span of its own, and reports it to
// the observer.
func (s *Service) stream(ctx context.Context, t *turn, purpose string, req *provider.Request, onDelta func(provider.Delta) error) (*provider.Response, error) {
	start := time.Now()
	cctx, span := s.startModelCall(ctx, t, purpose, req)
	resp, err := s.prov.Stream(cctx, req, onDelta)
	if err != nil {
		resp = nil
	}
	span.end(resp, err, ctx.Err() != nil)
	if resp != nil {
		t.usage.InputTokens += resp.Usage.InputTokens
		t.usage.OutputTokens += resp.Usage.OutputTokens
		if purpose == purposeAnswer {
			t.rounds++
		}
	}
	if ctx.Err() == nil {
		s.obs.ModelCalled(s.prov.Name(), time.Since(start), resp, err)
	}
	return resp, err
}
