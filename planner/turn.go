package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/tracker"
)

// run plays turn t to its end and reports the end to watchers.
func (s *Service) run(t *turn) {
	defer s.turnsWG.Done()
	defer t.cancel(nil)
	ctx, span := s.startTurn(t)
	t.span = span
	reason, text := s.play(ctx, t)
	s.finish(ctx, t, reason, text)
	endTurn(t, reason, text)
}

// finish frees the session, then publishes error (when text is set) and done. A turn that
// lost its lease or whose replica was abandoned ends silently.
func (s *Service) finish(ctx context.Context, t *turn, reason, text string) {
	if silent(t) {
		s.forget(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if text != "" {
		s.publish(ctx, t, Output{Type: OutputError, Text: text})
	}
	if err := s.giveBack(ctx, t); err != nil {
		// The lease expires by itself; until then the session refuses Sends.
		s.logger.Warn("planner: release lease", "session", t.session.ID, "err", err)
	}
	s.forget(t)
	s.obs.TurnEnded(reason, time.Since(t.started))
	if sent := s.publish(ctx, t, Output{Type: OutputDone, Text: reason}); sent != nil {
		select {
		case <-sent:
		case <-ctx.Done():
		}
	}
}

// giveBack releases t's lease. t is marked first: the keeper, which may be renewing the
// lease meanwhile and find it gone, would otherwise take t for a turn that lost its lease
// and stop it silently, and t's watchers would never get its done.
func (s *Service) giveBack(ctx context.Context, t *turn) error {
	s.mu.Lock()
	t.gaveBack = true
	s.mu.Unlock()
	return s.store.Release(ctx, t.session.ID, t.owner)
}

// silent reports whether t must end without touching shared state.
func silent(t *turn) bool {
	cause := context.Cause(t.ctx)
	return errors.Is(cause, errLeaseLost) || errors.Is(cause, errKilled)
}

// emit publishes o for t's watchers even when t is being cancelled (ctx, t's or its send's,
// is for its values: the trace).
func (s *Service) emit(ctx context.Context, t *turn, o Output) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	s.publish(ctx, t, o)
}

// publish numbers o as t's next output and queues it for the replica's next batch (outbox),
// which stores it for watchers that resume (within the turn's bounds; error and done always),
// then sends it to every replica's watchers. The first output past the bounds stores the
// turn's cut instead, and no output after it is stored but error and done: a watcher that
// resumes the turn then is told that output it lacks is missing, rather than finding a hole
// in the live output. The channel returned is closed once o is sent; nil when it is not.
func (s *Service) publish(ctx context.Context, t *turn, o Output) <-chan struct{} {
	if silent(t) || ctx.Err() != nil {
		return nil // not numbered: watchers would see a hole where it was
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	t.pubMu.Lock()
	defer t.pubMu.Unlock()
	size := len(o.Text) + len(o.Input) + 128
	sent, err := s.out.add(ctx, size, func() queued {
		t.offset++
		o.Session, o.Turn, o.Offset = t.session.ID, t.id, t.offset
		q := queued{o: o, owner: t.owner, size: size}
		switch {
		case o.Type == OutputError || o.Type == OutputDone ||
			(!t.cut && t.keptOutputs < s.keepOutputs && t.keptBytes+size <= s.keepBytes):
			t.keptOutputs++
			t.keptBytes += size
			q.keep = keepOutput
		case !t.cut:
			t.cut = true
			q.keep = keepCut
		}
		return q
	})
	if err != nil && !errors.Is(err, errOutboxClosed) {
		s.logger.Warn("planner: output not sent", "session", t.session.ID, "type", o.Type, "err", err)
	}
	return sent
}

// play runs the rounds of a turn: call the model, store its answer, run the tools it
// called, store their results, until the model stops. It returns done's reason and, for
// failures, the error text.
func (s *Service) play(ctx context.Context, t *turn) (reason, errText string) {
	tools := newToolbox(s, t)
	for round := 1; ; round++ {
		req, err := s.prepare(ctx, t, tools)
		if err != nil {
			return s.failure(t, "prepare the model call", err)
		}
		resp, err := s.stream(ctx, t, purposeAnswer, req, func(d provider.Delta) error {
			switch d.Type {
			case provider.DeltaText:
				s.publish(ctx, t, Output{Type: OutputText, Text: d.Text})
			case provider.DeltaToolCall:
				s.publish(ctx, t, Output{Type: OutputToolCall, Tool: d.Name, ToolUseID: d.ToolUseID, Input: codec.RawJSON(objectJSON(d.Input))})
			}
			return nil
		})
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return s.failure(t, "model call", err)
		}
		answer := assistantContent(resp)
		if _, err := s.store1(ctx, t, RoleAssistant, answer); err != nil {
			return s.failure(t, "store the answer", err)
		}
		if len(answer.ToolCalls) == 0 {
			if resp.StopReason == "" || resp.StopReason == provider.StopToolUse {
				return DoneEndTurn, ""
			}
			return resp.StopReason, ""
		}
		if round >= s.maxRounds {
			results := make([]ToolResult, len(answer.ToolCalls))
			for i, c := range answer.ToolCalls {
				results[i] = ToolResult{ToolUseID: c.ID, Tool: c.Name, IsError: true,
					Text: fmt.Sprintf("not run: the turn reached its limit of %d rounds", s.maxRounds)}
				s.emitResult(ctx, t, results[i])
			}
			if _, err := s.store1(context.WithoutCancel(ctx), t, RoleTool, ToolContent{Results: results}); err != nil {
				return s.failure(t, "store tool results", err)
			}
			return DoneMaxRounds, fmt.Sprintf("the planner stopped after %d rounds without finishing", s.maxRounds)
		}
		results := make([]ToolResult, 0, len(answer.ToolCalls))
		for _, c := range answer.ToolCalls {
			var r ToolResult
			if ctx.Err() != nil {
				r = ToolResult{ToolUseID: c.ID, Tool: c.Name, IsError: true, Text: "not run: the turn was cancelled"}
			} else {
				r = tools.call(ctx, c)
			}
			s.emitResult(ctx, t, r)
			results = append(results, r)
		}
		// Results of tools that ran are recorded even when the turn is being cancelled:
		// their changes to the tracker happened.
		if _, err := s.store1(context.WithoutCancel(ctx), t, RoleTool, ToolContent{Results: results}); err != nil {
			return s.failure(t, "store tool results", err)
		}
		if ctx.Err() != nil {
			return s.failure(t, "tools", ctx.Err())
		}
	}
}

func (s *Service) emitResult(ctx context.Context, t *turn, r ToolResult) {
	isErr := r.IsError
	s.emit(ctx, t, Output{Type: OutputToolResult, Tool: r.Tool, ToolUseID: r.ToolUseID, Text: r.Text, IsError: &isErr})
}

// store1 appends one message of the planner (acting for the human) and announces it.
func (s *Service) store1(ctx context.Context, t *turn, role string, content any) (*Message, error) {
	if silent(t) {
		return nil, context.Cause(t.ctx)
	}
	b, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, storeMessageTimeout)
	defer cancel()
	m, err := s.store.AppendMessage(ctx, t.session.ID, NewMessage{
		Role: role, Content: b, Actor: tracker.Actor{Kind: tracker.ActorAgent, Subject: t.human},
	})
	if err != nil {
		return nil, err
	}
	s.emit(ctx, t, Output{Type: OutputMessage, Seq: m.Seq})
	return m, nil
}

// failure turns the error that ended a turn into done's reason and the error text.
func (s *Service) failure(t *turn, what string, err error) (string, string) {
	t.failed(err)
	if t.ctx.Err() != nil {
		switch cause := context.Cause(t.ctx); {
		case errors.Is(cause, errCancelled):
			return DoneCancelled, ""
		case errors.Is(cause, errShutdown):
			return DoneError, "the planner was stopped: the server is shutting down"
		default:
			return DoneError, "" // silent: nobody hears it
		}
	}
	var pe *provider.Error
	switch {
	case errors.As(err, &pe):
		s.logger.Warn("planner: model provider failed", "session", t.session.ID, "err", err)
		return DoneError, "the model provider failed: " + pe.Error()
	case errors.Is(err, provider.ErrMalformed):
		s.logger.Warn("planner: model provider sent a malformed answer", "session", t.session.ID, "err", err)
		return DoneError, "the model provider sent a malformed answer"
	}
	s.logger.Error("planner: turn failed", "session", t.session.ID, "step", what, "err", err)
	return DoneError, "the planner failed (" + what + "); the error has been logged"
}

// assistantContent is what is stored of a model answer.
func assistantContent(resp *provider.Response) AssistantContent {
	var text strings.Builder
	a := AssistantContent{ToolCalls: []ToolCall{}}
	for _, b := range resp.Content {
		switch b.Type {
		case provider.BlockText:
			text.WriteString(b.Text)
		case provider.BlockToolUse:
			a.ToolCalls = append(a.ToolCalls, ToolCall{ID: b.ToolUseID, Name: b.Name, Input: objectJSON(b.Input)})
		}
	}
	a.Text = text.String()
	return a
}

// objectJSON returns raw, or {} when it is empty or not a JSON object.
func objectJSON(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		return json.RawMessage("{}")
	}
	return raw
}
