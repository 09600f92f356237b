package tracker

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ballet/gateway/internal/httpapi"
)

// Sentinel errors of the tracker. Compare with errors.Is; HTTPStatus maps them to statuses.
var (
	// ErrNotFound: the project, item, member or dependency does not exist.
	ErrNotFound = errors.New("tracker: not found")
	// ErrForbidden: the caller lacks the permission on an existing project.
	ErrForbidden = errors.New("tracker: forbidden")
	// ErrConflict: the change contradicts the stored state (an existing project, a cycle).
	ErrConflict = errors.New("tracker: conflict")
	// ErrPrecondition: the item's version is not the expected one.
	ErrPrecondition = errors.New("tracker: precondition failed")
	// ErrInvalid: an argument is not acceptable (empty title, bad state or role, ...).
	ErrInvalid = errors.New("tracker: invalid argument")
)

// Error is a tracker error with a detail that is safe to show to the caller. It matches its
// sentinel with errors.Is.
type Error struct {
	Err    error  // one of the sentinels
	Detail string // for the caller: names only what the caller sent or may see
	// Limit and Max name the limit (LimitTitleChars, LimitDescriptionBytes) that refused the
	// request and its value; Limit is "" for other errors.
	Limit string
	Max   int
}

func (e *Error) Error() string { return e.Detail }
func (e *Error) Unwrap() error { return e.Err }

// Limited reports the limit that refused the request (httpapi.Limited), "" for none.
func (e *Error) Limited() (string, int, time.Duration) { return e.Limit, e.Max, 0 }

// limitError is ErrInvalid beyond limit, whose value max the format's one verb shows.
func limitError(limit string, max int, format string) error {
	return &Error{Err: ErrInvalid, Detail: fmt.Sprintf(format, max), Limit: limit, Max: max}
}

// errorf returns an *Error for sentinel with a formatted detail.
func errorf(sentinel error, format string, args ...any) error {
	return &Error{Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// Errorf returns an *Error matching sentinel with a formatted detail, for stores.
func Errorf(sentinel error, format string, args ...any) error {
	return errorf(sentinel, format, args...)
}

// HTTPStatus returns the HTTP status for err: 404, 403, 409, 412 and 422 for the sentinels,
// 500 for anything else (and 200 for nil).
func HTTPStatus(err error) int { return httpapi.StatusOf(err, statuses) }

var statuses = []httpapi.Sentinel{
	{Err: ErrNotFound, Status: http.StatusNotFound},
	{Err: ErrForbidden, Status: http.StatusForbidden},
	{Err: ErrConflict, Status: http.StatusConflict},
	{Err: ErrPrecondition, Status: http.StatusPreconditionFailed},
	{Err: ErrInvalid, Status: http.StatusUnprocessableEntity},
}

// Detail returns the caller-safe detail of err: the Detail of the *Error inside it, or "" for
// other errors (whose text may hold internals and belongs in the logs only).
func Detail(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Detail
	}
	return ""
}
