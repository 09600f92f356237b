package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/streams"
)

// Send stores the human's message and starts the planner's turn in the background; it
// returns the message's seq. It needs tracker.write on the session's project and a human
// caller (ErrForbidden), an existing session (ErrNotFound), non-empty text of at most
// Options.MaxMessageBytes (ErrInvalid), no turn of the session running on any replica
// (ErrConflict), and fewer than Options.TurnsPerSubject turns of the caller's running on
// all replicas (ErrLimit, a LimitReached for LimitTurns).
func (s *Service) Send(ctx context.Context, c Caller, session, text string) (int64, error) {
	return s.SendWithKey(ctx, c, session, text, "")
}

// SendWithKey is Send with an idempotency key (1–64 characters; "" for none): a key the
// caller used on the session less than SendKeyWindow ago returns the seq of that first send
// and starts nothing, on any replica, also while that turn still runs.
func (s *Service) SendWithKey(ctx context.Context, c Caller, session, text, key string) (int64, error) {
	if err := checkText(text, s.maxText); err != nil {
		return 0, err
	}
	if err := checkKey(key); err != nil {
		return 0, err
	}
	sess, err := s.session(ctx, c, session, auth.PermWrite)
	if err != nil {
		return 0, err
	}
	if !c.Human {
		return 0, fault.Errorf(ErrForbidden, "only a person can talk to the planner")
	}
	if seq, found, err := s.sentWithKey(ctx, c, session, key, 0); err != nil || found {
		return seq, err
	}
	tctx, cancel := context.WithCancelCause(context.Background())
	id := randomID()
	t := &turn{session: sess, id: id, human: c.Subject, owner: s.replica + "/" + id, ctx: tctx, cancel: cancel, started: time.Now(),
		parent: trace.SpanContextFromContext(ctx)}

	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		cancel(nil)
		return 0, ErrClosed
	case s.turns[session] != nil:
		s.mu.Unlock()
		cancel(nil)
		return s.conflict(ctx, c, session, key)
	}
	s.turns[session] = t
	s.turnsWG.Add(1)
	s.mu.Unlock()

	b, err := s.begin(ctx, c, t, text, key)
	if err != nil || b.repeated {
		s.forget(t)
		t.cancel(nil)
		s.turnsWG.Done()
		return b.seq, err
	}
	go s.run(t)
	return b.seq, nil
}

// begun is what begin did: stored the message of seq and took the lease for its turn, or,
// repeated, found the key already used by the send of seq and started nothing.
type begun struct {
	seq      int64
	repeated bool
}

// sentWithKey looks the key up, retrying for up to wait while the send that holds the
// session may still be storing the message that carries the key.
func (s *Service) sentWithKey(ctx context.Context, c Caller, session, key string, wait time.Duration) (int64, bool, error) {
	if key == "" {
		return 0, false, nil
	}
	deadline := time.Now().Add(wait)
	for {
		seq, found, err := s.store.SentWithKey(ctx, session, c.Subject, key, SendKeyWindow)
		if err != nil {
			return 0, false, fmt.Errorf("planner: look up idempotency key: %w", err)
		}
		if found || time.Now().After(deadline) {
			return seq, found, nil
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, false, ctx.Err()
		}
	}
}

// conflictWait is how long a send that finds the session busy waits for the message of an
// earlier send of the same key to be stored: the time between that send taking the lease
// and its message's commit.
const conflictWait = 500 * time.Millisecond

// conflict answers a send that found the session busy: the first send of the same key
// holds it (its seq), or another turn runs (ErrConflict).
func (s *Service) conflict(ctx context.Context, c Caller, session, key string) (int64, error) {
	if seq, found, err := s.sentWithKey(ctx, c, session, key, conflictWait); err != nil || found {
		return seq, err
	}
	return 0, fault.Errorf(ErrConflict, "the planner is still answering in this session")
}

func checkKey(key string) error {
	if key == "" {
		return nil
	}
	if n := utf8.RuneCountInString(key); n > MaxIdempotencyKey || !streams.ValidText(key) {
		return fault.Errorf(ErrInvalid, "idempotency_key must be 1 to %d characters of text", MaxIdempotencyKey)
	}
	return nil
}

// begin takes the lease and stores the human message. Under a key that a send stored
// meanwhile it gives the lease back and returns that send's seq, repeated.
func (s *Service) begin(ctx context.Context, c Caller, t *turn, text, key string) (begun, error) {
	id := t.session.ID
	if s.atLimitHere(t.human) {
		return begun{}, s.refuseTurn()
	}
	s.reapSession(ctx, id) // a dead turn's watchers hear of it before the next turn starts
	leave, err := s.enterGate(ctx, t.human)
	if err != nil {
		return begun{}, err
	}
	if s.atLimitHere(t.human) {
		leave()
		return begun{}, s.refuseTurn()
	}
	taken, stale, err := s.store.Acquire(ctx, id, t.owner, t.human, s.turnsPer, s.lease, traceContextOf(t.parent))
	if err == nil && taken {
		s.mu.Lock() // before the next send of the person's counts the turns here
		t.leased = true
		t.renewedAt = time.Now()
		s.mu.Unlock()
	}
	leave()
	if errors.Is(err, ErrLimit) {
		s.obs.Refused(LimitTurns)
		return begun{}, err
	}
	if err != nil {
		return begun{}, fmt.Errorf("planner: take the lease of session %s: %w", id, err)
	}
	if !taken {
		seq, err := s.conflict(ctx, c, id, key)
		if err != nil {
			return begun{}, err
		}
		return begun{seq: seq, repeated: true}, nil
	}
	if stale {
		// Replaced between reapSession and Acquire: its turn is unknown here.
		s.logger.Warn("planner: a turn's replica stopped without ending it", "session", id)
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		if rerr := s.giveBack(rctx, t); rerr != nil {
			s.logger.Warn("planner: release lease", "session", id, "err", rerr)
		}
	}
	// The first send of the key released the lease only after storing its message.
	if seq, found, err := s.sentWithKey(ctx, c, id, key, 0); err != nil || found {
		release()
		if err != nil {
			return begun{}, err
		}
		return begun{seq: seq, repeated: true}, nil
	}
	content, _ := json.Marshal(text)
	m, err := s.store.AppendMessage(ctx, id, NewMessage{Role: RoleHuman, Content: content, Actor: c.actor(), IdempotencyKey: key})
	if err != nil {
		release()
		return begun{}, fmt.Errorf("planner: store message: %w", err)
	}
	s.emit(ctx, t, Output{Type: OutputMessage, Seq: m.Seq})
	return begun{seq: m.Seq}, nil
}
