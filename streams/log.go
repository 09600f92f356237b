package streams

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
)

// Log is the event log as the gateway reads it.
type Log interface {
	// Head is the highest committed seq (0 for an empty log). Every event with a seq at or
	// below it is already visible: seq is assigned in commit order.
	Head(ctx context.Context) (int64, error)
	// ReadAfter returns events with seq > after in seq order, at most limit (for tailing).
	ReadAfter(ctx context.Context, after int64, limit int) ([]Event, error)
	// ReadStream returns the stream's events with after < seq <= upto in seq order, at most limit.
	ReadStream(ctx context.Context, s Stream, after, upto int64, limit int) ([]Event, error)
	// Wait blocks until the log may have events after `after` (a wake-up, may be spurious),
	// or ctx ends (ctx.Err()), or the log is closed (ErrClosed). It returns at once when the
	// log already has events after `after`.
	Wait(ctx context.Context, after int64) error
}

// Follower is implemented by a Log that may read a copy of the log which is behind the
// primary the events are appended to (a streaming standby). While Tailing reports true, its
// Head is the copy's, and reads may even go back in time (several copies, a restarted one);
// PrimaryHead is the primary's: every seq up to it is committed and reaches the copy in seq
// order. The hub asks it before answering a from_seq beyond Head with ErrResyncRequired.
type Follower interface {
	Tailing() bool
	PrimaryHead(ctx context.Context) (int64, error)
}

// Counter is implemented by a Log that counts a stream's events with after < seq <= upto, at
// most limit of them, without reading them: a subscription catching up from the log asks how
// far behind it is before it reads a page of events.
type Counter interface {
	CountStream(ctx context.Context, s Stream, after, upto int64, limit int) (int, error)
}

// Appender appends events in one transaction: all or none. It returns the seq of the last one
// (0 when evs is empty). Real writers insert with SQL in their own transaction instead.
type Appender interface {
	Append(ctx context.Context, evs ...NewEvent) (lastSeq int64, err error)
}

// Member roles.
const (
	RoleViewer = "viewer" // tracker.read
	RoleMember = "member" // tracker.read + tracker.write
	RoleAdmin  = "admin"  // tracker.read + tracker.write + manage
)

// ProjectStore keeps projects and their members. Every change appends its event
// (project.created, member.granted, member.revoked) on the project's stream in the same
// transaction.
type ProjectStore interface {
	// CreateProject creates the project; ErrExists if it exists, ErrInvalid for a bad key.
	CreateProject(ctx context.Context, key, name, createdBy string) error
	// Grant sets subject's role (upsert); ErrNotFound if the project does not exist.
	Grant(ctx context.Context, key, subject, role, actorKind, actorSubject string) error
	// Revoke removes subject from the project; ErrNotFound if it is not a member.
	Revoke(ctx context.Context, key, subject, actorKind, actorSubject string) error
	// Role returns subject's role ("" if none) and whether the project exists.
	Role(ctx context.Context, key, subject string) (role string, projectExists bool, err error)
}

var projectKeyRE = regexp.MustCompile(`^[A-Z][A-Z0-9]{0,19}$`)

// ValidProjectKey reports whether key is a valid project key: an upper-case letter followed by
// up to 19 upper-case letters or digits.
func ValidProjectKey(key string) bool { return projectKeyRE.MatchString(key) }

// ValidRole reports whether role is viewer, member or admin.
func ValidRole(role string) bool {
	return role == RoleViewer || role == RoleMember || role == RoleAdmin
}

// The helpers below keep the project stores' validation and events identical.

// CheckProject validates CreateProject's arguments (ErrInvalid).
func CheckProject(key, name, createdBy string) error {
	if !ValidProjectKey(key) {
		return fmt.Errorf("project key %q: want an upper-case letter and up to 19 upper-case letters or digits: %w", key, ErrInvalid)
	}
	if !validText(name) || !validText(createdBy) {
		return fmt.Errorf("project name or creator: not UTF-8 text without NUL: %w", ErrInvalid)
	}
	return nil
}

// ProjectCreatedEvent is the event CreateProject appends. Its actor is (human, createdBy), or
// (system, "") when createdBy is empty.
func ProjectCreatedEvent(key, name, createdBy string) NewEvent {
	kind := ActorHuman
	if createdBy == "" {
		kind = ActorSystem
	}
	return ProjectCreatedEventBy(key, name, kind, createdBy)
}

// ProjectCreatedEventBy is the project.created event of the actor (actorKind, actorSubject).
func ProjectCreatedEventBy(key, name, actorKind, actorSubject string) NewEvent {
	return projectEvent(key, "project.created", actorKind, actorSubject, map[string]string{"key": key, "name": name})
}

// MemberGrantedEvent validates Grant's arguments (ErrInvalid for a bad role or subject,
// ErrNotFound for a key no project can have) and returns the event it appends.
func MemberGrantedEvent(key, subject, role, actorKind, actorSubject string) (NewEvent, error) {
	if !ValidRole(role) {
		return NewEvent{}, fmt.Errorf("role %q: want viewer, member or admin: %w", role, ErrInvalid)
	}
	if err := checkMember(key, subject, actorKind, actorSubject); err != nil {
		return NewEvent{}, err
	}
	return projectEvent(key, "member.granted", actorKind, actorSubject, map[string]string{"subject": subject, "role": role}), nil
}

// MemberRevokedEvent validates Revoke's arguments like MemberGrantedEvent and returns the
// event it appends.
func MemberRevokedEvent(key, subject, actorKind, actorSubject string) (NewEvent, error) {
	if err := checkMember(key, subject, actorKind, actorSubject); err != nil {
		return NewEvent{}, err
	}
	return projectEvent(key, "member.revoked", actorKind, actorSubject, map[string]string{"subject": subject}), nil
}

func checkMember(key, subject, actorKind, actorSubject string) error {
	if subject == "" || !validText(subject) || !validText(actorKind) || !validText(actorSubject) {
		return fmt.Errorf("subject or actor: want non-empty UTF-8 text without NUL: %w", ErrInvalid)
	}
	if !ValidProjectKey(key) {
		return fmt.Errorf("project %q: %w", key, ErrNotFound)
	}
	return nil
}

func projectEvent(key, typ, actorKind, actorSubject string, payload map[string]string) NewEvent {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err) // a map of strings always marshals
	}
	return NewEvent{
		ProjectKey: key, Type: typ, EntityType: "project", EntityID: key, EntityKey: key,
		ActorKind: actorKind, ActorSubject: actorSubject, Payload: b,
	}
}
