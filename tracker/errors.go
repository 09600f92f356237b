package tracker

import (
	"fmt"

	"github.com/ballet/gateway/internal/fault"
)

// Sentinel errors of the tracker, of package fault's kinds. Compare with errors.Is;
// fault.HTTPStatus answers them 404, 403, 409, 412 and 422.
var (
	// ErrNotFound: the project, item, member or dependency does not exist.
	ErrNotFound = fault.New(fault.NotFound, "tracker: not found")
	// ErrForbidden: the caller lacks the permission on an existing project.
	ErrForbidden = fault.New(fault.Forbidden, "tracker: forbidden")
	// ErrConflict: the change contradicts the stored state (an existing project, a cycle).
	ErrConflict = fault.New(fault.Conflict, "tracker: conflict")
	// ErrPrecondition: the item's version is not the expected one.
	ErrPrecondition = fault.New(fault.Precondition, "tracker: precondition failed")
	// ErrInvalid: an argument is not acceptable (empty title, bad state or role, ...).
	ErrInvalid = fault.New(fault.Invalid, "tracker: invalid argument")
)

// limitError is ErrInvalid beyond limit, whose value max the format's one verb shows: its
// problem names the limit and its value.
func limitError(limit string, max int, format string) error {
	return &fault.Error{Kind: fault.Invalid, Err: ErrInvalid, Detail: fmt.Sprintf(format, max), Limit: limit, Max: max}
}
