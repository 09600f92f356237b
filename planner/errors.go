package planner

import (
	"errors"
	"fmt"
)

// Sentinel errors of the planner. Compare with errors.Is. The gateway maps them to the
// JSON-RPC codes -32004, -32003, -32009 and -32602, REST to 404, 403, 409 and 422.
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
)

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
	return ""
}
