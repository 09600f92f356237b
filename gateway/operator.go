// What an operator's sign-out or block does to the gateway: its revocations, loaded from the
// store at start and kept up to date by the tailed log, and the subject's connections, closed.

package gateway

import (
	"context"
	"fmt"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/streams"
)

// Operator actions, as the ballet_gateway_operator_actions_total label.
const (
	actionSignOut = "sign_out"
	actionBlock   = "block"
	actionUnblock = "unblock"
)

var actionLabels = []string{actionSignOut, actionBlock, actionUnblock}

// LoadSubjectControls sets revs from the store's sign-outs and blocks. Call it after the
// tailer has started (it read its head) and before the server accepts connections: an event
// the tailer applies meanwhile is newer than a loaded state or ignored as older.
func LoadSubjectControls(ctx context.Context, store streams.SubjectStore, revs *auth.Revocations) error {
	cs, err := store.SubjectControls(ctx)
	if err != nil {
		return fmt.Errorf("load sign-outs and blocks: %w", err)
	}
	for _, c := range cs {
		revs.Set(c.Subject, c.SignedOutAt, c.Blocked, c.Seq)
	}
	return nil
}

// ApplySubjectEvent applies ev to revs when it is an operator's action on a subject, counts it
// in m, and, when srv is not nil, closes every connection of the subject on srv with 4001 for
// a sign-out, and for a block while the subject is still blocked. It is the hub's OnEvent:
// every replica sees the event in the log. It must not block.
func ApplySubjectEvent(revs *auth.Revocations, m *Metrics, srv *Server, ev *streams.Event) {
	c, ok := streams.SubjectChange(ev)
	if !ok {
		return
	}
	// The replica that recorded the change has applied it already (operator.Options), and a
	// state loaded at start may include it: either way it still closes the connections.
	action, reason := actionSignOut, "signed out by an operator"
	switch ev.Type {
	case streams.EventSubjectSignedOut:
		revs.SignOut(c.Subject, c.SignedOutAt, c.Seq)
	case streams.EventSubjectBlocked:
		action, reason = actionBlock, "blocked by an operator"
		revs.SetBlocked(c.Subject, true, c.Seq)
	default:
		action = actionUnblock
		revs.SetBlocked(c.Subject, false, c.Seq)
	}
	if m != nil {
		m.OperatorActions.WithLabelValues(action).Inc()
	}
	if srv == nil || action == actionUnblock || action == actionBlock && !revs.Blocked(c.Subject) {
		return
	}
	srv.CloseSubject(c.Subject, reason)
}

// CloseSubject closes every authenticated connection of subject with 4001 and reason, counted
// in ballet_gateway_operator_closes_total, and returns how many it closed.
func (s *Server) CloseSubject(subject, reason string) int {
	n := 0
	// The subject's own connections, not every session: a sign-out applied before the
	// snapshot is seen by the auth of a connection not in it (authn.go).
	for _, sess := range s.subjectSessions(subject) {
		sess.mu.Lock()
		match := sess.principal != nil && sess.principal.Subject == subject && sess.lifecycle() < stateClosing
		sess.mu.Unlock()
		if match {
			sess.closeWith(StatusUnauthenticated, reason)
			n++
		}
	}
	if n > 0 {
		s.metrics.OperatorCloses.Add(float64(n))
		s.logger.Info("connections closed by an operator", "subject", subject, "reason", reason, "connections", n)
	}
	return n
}
