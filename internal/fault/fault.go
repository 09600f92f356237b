package fault

import (
	"errors"
	"fmt"
	"time"
)

// Kind is what went wrong, as a caller can act on it. The zero Kind, Internal, is no kind: an
// error the caller can do nothing about.
type Kind uint8

// The kinds of the domain packages' errors.
const (
	Internal     Kind = iota // not one of the others: the server's own failure
	NotFound                 // the thing (project, item, session, member) does not exist
	Forbidden                // the caller lacks the permission
	Conflict                 // the change contradicts the stored state, or one running already
	Precondition             // the stored state is not the version the caller expected
	Invalid                  // an argument is not acceptable
	Limit                    // a limit of the caller's was reached; Error.Limit names it
	Resync                   // the caller's position in a stream cannot be served: start again
	Unavailable              // the service is closing or cannot answer now
)

// Error is an error of a kind, with the error it wraps (a sentinel it matches with errors.Is,
// or the cause) and a detail that names only what the caller sent or may see.
type Error struct {
	Kind   Kind
	Err    error
	Detail string
	// Limit and Max name the limit that refused the request and its value, "" and 0 for an
	// error no limit refused; RetryAfter is when to try again, 0 when that is not known.
	Limit      string
	Max        int
	RetryAfter time.Duration
}

// Error returns the detail, or the wrapped error's text when there is none.
func (e *Error) Error() string {
	if e.Detail != "" || e.Err == nil {
		return e.Detail
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Limited names the limit that refused the request, its value and when to retry
// (httpapi.Limited): name is "" for an error no limit refused.
func (e *Error) Limited() (name string, max int, retry time.Duration) {
	return e.Limit, e.Max, e.RetryAfter
}

// New returns a sentinel of kind whose text is for the logs only ("planner: not found").
// Errors made from it by Errorf match it with errors.Is.
func New(kind Kind, text string) *Error {
	return &Error{Kind: kind, Err: errors.New(text)}
}

// Errorf returns an error of sentinel's kind that matches sentinel, with a formatted detail.
func Errorf(sentinel error, format string, args ...any) error {
	return &Error{Kind: KindOf(sentinel), Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of kind wrapping err, with detail for the caller.
func Wrap(kind Kind, err error, detail string) error {
	return &Error{Kind: kind, Err: err, Detail: detail}
}

// KindOf returns the kind of the first *Error err wraps; Internal for nil and for an error that
// wraps none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// Detail returns the caller-safe detail of the first *Error err wraps, "" when it has none (the
// text of an error without one may hold internals and belongs in the logs only).
func Detail(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Detail
	}
	return ""
}
