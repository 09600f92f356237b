// What an operator's sign-out or block does to a replica: its revocations, loaded from the
// store at start and kept up to date by the tailed log, and the subject's connections, closed.

package operator

import (
	"context"
	"fmt"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/streams"
)

// Operators' actions, as the label of ballet_gateway_operator_actions_total.
const (
	ActionSignOut = "sign_out"
	ActionBlock   = "block"
	ActionUnblock = "unblock"
)

// Actions are the values of the action label.
var Actions = []string{ActionSignOut, ActionBlock, ActionUnblock}

// SubjectCloser closes a subject's connections on a replica (the gateway's server).
type SubjectCloser interface {
	// CloseSubject closes every authenticated connection of subject with 4001 and reason, and
	// returns how many it closed.
	CloseSubject(subject, reason string) int
}

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
// with counted (when not nil) by its action, and, when closer is not nil, closes every
// connection of the subject with 4001 for a sign-out, and for a block while the subject is
// still blocked. It is the hub's OnEvent: every replica sees the event in the log. It must not
// block.
func ApplySubjectEvent(revs *auth.Revocations, counted func(action string), closer SubjectCloser, ev *streams.Event) {
	c, ok := streams.SubjectChange(ev)
	if !ok {
		return
	}
	// The replica that recorded the change has applied it already (Options), and a state
	// loaded at start may include it: either way it still closes the connections.
	action, reason := ActionSignOut, "signed out by an operator"
	switch ev.Type {
	case streams.EventSubjectSignedOut:
		revs.SignOut(c.Subject, c.SignedOutAt, c.Seq)
	case streams.EventSubjectBlocked:
		action, reason = ActionBlock, "blocked by an operator"
		revs.SetBlocked(c.Subject, true, c.Seq)
	default:
		action = ActionUnblock
		revs.SetBlocked(c.Subject, false, c.Seq)
	}
	if counted != nil {
		counted(action)
	}
	if closer == nil || action == ActionUnblock || action == ActionBlock && !revs.Blocked(c.Subject) {
		return
	}
	closer.CloseSubject(c.Subject, reason)
}
