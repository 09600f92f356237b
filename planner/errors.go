package planner

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sentinel errors of the planner. Compare with errors.Is. The gateway maps them to the
// JSON-RPC codes -32004, -32003, -32009, -32602 and -32029, REST to 404, 403, 409, 422 and
// 429.
var (
	// ErrNotFound: the session (or its project) does not exist.
	ErrNotFound = errors.New("planner: not found")
	// ErrForbidden: the caller lacks the permission, or is not a human where one is needed.
	ErrForbidden = errors.New("planner: forbidden")
	// ErrConflict: a turn of the session is running already (on any replica).
	ErrConflict = errors.New("planner: conflict")
	// ErrInvalid: an argument is not acceptable (empty or oversized text, long title).
	ErrInvalid = errors.New("planner: invalid argument")
	// ErrClosed: the Service was closed.
	ErrClosed = errors.New("planner: closed")
	// ErrLimit: a limit of the caller's was reached; the *LimitError says which.
	ErrLimit = errors.New("planner: limit reached")
)

// The planner's limits of one subject: LimitError's Limit, the limit of the gateway's -32029
// and of its ballet_gateway_limit_rejections_total.
const (
	// LimitTurns: running turns of the subject, on all replicas (Options.TurnsPerSubject).
	LimitTurns = "planner_turns"
	// LimitSessions: sessions the subject created in the last minute (Options.SessionRate).
	LimitSessions = "planner_sessions"
)

// LimitError refuses what would take the caller beyond one of its limits. It matches ErrLimit
// with errors.Is, and its text is safe to show to the caller.
type LimitError struct {
	Limit string // LimitTurns or LimitSessions
	Max   int    // the limit's value
	// RetryAfter is how long until the request would be admitted; 0 when that is not known (a
	// running turn must end first).
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	switch e.Limit {
	case LimitTurns:
		return "limit reached: at most " + strconv.Itoa(e.Max) + " planner turns of one person run at once"
	case LimitSessions:
		return "limit reached: at most " + strconv.Itoa(e.Max) + " planner sessions of one person a minute"
	}
	return "limit reached: " + e.Limit + " (at most " + strconv.Itoa(e.Max) + ")"
}

func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Limited names the limit, its value and when to retry, for REST problems (httpapi.Limited).
func (e *LimitError) Limited() (string, int, time.Duration) { return e.Limit, e.Max, e.RetryAfter }

// Error is a planner error with a detail that is safe to show to the caller. It matches its
// sentinel with errors.Is.
type Error struct {
	Err    error  // one of the sentinels
	Detail string // names only what the caller sent or may see
}

func (e *Error) Error() string { return e.Detail }
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error matching sentinel with a formatted detail.
func Errorf(sentinel error, format string, args ...any) error {
	return &Error{Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// Detail returns the caller-safe detail of err, or "" when it has none (its text may hold
// internals and belongs in the logs only).
func Detail(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Detail
	}
	var le *LimitError
	if errors.As(err, &le) {
		return le.Error()
	}
	return ""
}
