package streams

import (
	"context"
	"encoding/json"
	"fmt"
)

// The events of an operator's action on a subject. They are recorded with the project key ""
// (SubjectProjectKey), which no project can have: they belong to no project stream and reach
// no subscriber, but every gateway's tailer reads them in order with the rest of the log.
const (
	EventSubjectSignedOut = "subject.signed_out"
	EventSubjectBlocked   = "subject.blocked"
	EventSubjectUnblocked = "subject.unblocked"
	SubjectProjectKey     = ""
	SubjectEntityType     = "subject"
)

// SubjectControl is what operators have taken from one subject.
type SubjectControl struct {
	Subject string
	// SignedOutAt is the second (Unix time) of the latest sign-out: the subject's tokens
	// issued at or before it are refused. 0 when never signed out.
	SignedOutAt int64
	// Blocked refuses every token of the subject.
	Blocked bool
	// Seq is the event that last changed it.
	Seq int64
}

// SubjectStore keeps the operators' sign-outs and blocks. Every change appends its event
// (subject.signed_out, subject.blocked, subject.unblocked) in the same transaction.
type SubjectStore interface {
	// ChangeSubject makes the change of the event type typ: EventSubjectSignedOut refuses, from
	// now on, the subject's tokens issued at or before this second; EventSubjectBlocked blocks
	// the subject, EventSubjectUnblocked ends that. It returns the subject's state after.
	ChangeSubject(ctx context.Context, typ, subject, actorKind, actorSubject string) (SubjectControl, error)
	// SubjectControls returns every subject with a sign-out or a block, in no order.
	SubjectControls(ctx context.Context) ([]SubjectControl, error)
}

// subjectPayload is the payload of the subject events: the subject, the acting
// administrator, and for a sign-out the second its tokens are refused up to.
type subjectPayload struct {
	Subject     string `json:"subject"`
	Admin       string `json:"admin"`
	SignedOutAt int64  `json:"signed_out_at,omitempty"`
}

// CheckSubjectChange validates ChangeSubject's arguments (ErrInvalid).
func CheckSubjectChange(typ, subject, actorKind, actorSubject string) error {
	switch typ {
	case EventSubjectSignedOut, EventSubjectBlocked, EventSubjectUnblocked:
	default:
		return fmt.Errorf("subject change %q: %w", typ, ErrInvalid)
	}
	if subject == "" || len(subject) > 255 || !validText(subject) || !validText(actorKind) || !validText(actorSubject) {
		return fmt.Errorf("subject or actor: want non-empty UTF-8 text without NUL, the subject at most 255 bytes: %w", ErrInvalid)
	}
	return nil
}

// BlockEventType is the type of the event that blocks (true) or unblocks a subject.
func BlockEventType(blocked bool) string {
	if blocked {
		return EventSubjectBlocked
	}
	return EventSubjectUnblocked
}

// SubjectEvent returns the event of an action on subject: typ is one of the EventSubject*
// types, signedOutAt the second of a sign-out (0 for the others).
func SubjectEvent(typ, subject, actorKind, actorSubject string, signedOutAt int64) NewEvent {
	b, err := json.Marshal(subjectPayload{Subject: subject, Admin: actorSubject, SignedOutAt: signedOutAt})
	if err != nil {
		panic(err) // strings and an integer always marshal
	}
	return NewEvent{
		ProjectKey: SubjectProjectKey, Type: typ, EntityType: SubjectEntityType, EntityID: subject,
		ActorKind: actorKind, ActorSubject: actorSubject, Payload: b,
	}
}

// SubjectChange returns the change ev makes when it is an action on a subject: its subject,
// SignedOutAt for subject.signed_out, Blocked for subject.blocked, and Seq. ok is false for
// any other event, or one whose payload names no subject.
func SubjectChange(ev *Event) (c SubjectControl, ok bool) {
	switch ev.Type {
	case EventSubjectSignedOut, EventSubjectBlocked, EventSubjectUnblocked:
	default:
		return c, false
	}
	var p subjectPayload
	if ev.EntityType != SubjectEntityType || json.Unmarshal(ev.Payload, &p) != nil || p.Subject == "" {
		return c, false
	}
	c = SubjectControl{Subject: p.Subject, Blocked: ev.Type == EventSubjectBlocked, Seq: ev.Seq}
	if ev.Type == EventSubjectSignedOut {
		if p.SignedOutAt <= 0 {
			return c, false
		}
		c.SignedOutAt = p.SignedOutAt
	}
	return c, true
}
