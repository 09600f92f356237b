package planner

import (
	"strconv"
	"time"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/protocol"
)

// Sentinel errors of the planner, of package fault's kinds. Compare with errors.Is; the
// gateway answers them with fault.Code (-32004, -32003, -32009, -32602 and -32029), REST with
// fault.HTTPStatus (404, 403, 409, 422, 429 and 503).
var (
	// ErrNotFound: the session (or its project) does not exist.
	ErrNotFound = fault.New(fault.NotFound, "planner: not found")
	// ErrForbidden: the caller lacks the permission, or is not a human where one is needed.
	ErrForbidden = fault.New(fault.Forbidden, "planner: forbidden")
	// ErrConflict: a turn of the session is running already (on any replica).
	ErrConflict = fault.New(fault.Conflict, "planner: conflict")
	// ErrInvalid: an argument is not acceptable (empty or oversized text, long title).
	ErrInvalid = fault.New(fault.Invalid, "planner: invalid argument")
	// ErrClosed: the Service was closed.
	ErrClosed = fault.New(fault.Unavailable, "planner: closed")
	// ErrLimit: a limit of the caller's was reached; the error's Limit says which.
	ErrLimit = fault.New(fault.Limit, "planner: limit reached")
)

// The planner's limits of one subject: a limit error's Limit, the limit of the gateway's
// -32029 and of its ballet_gateway_limit_rejections_total.
const (
	// LimitTurns: running turns of the subject, on all replicas (Options.TurnsPerSubject).
	LimitTurns = protocol.LimitPlannerTurns
	// LimitSessions: sessions the subject created in the last minute (Options.SessionRate).
	LimitSessions = "planner_sessions"
)

// LimitReached returns the *fault.Error that refuses what would take the caller beyond limit
// (LimitTurns or LimitSessions), of value max. It matches ErrLimit, and its detail says which
// limit. retryAfter is how long until the request would be admitted; 0 when that is not known
// (a running turn must end first).
func LimitReached(limit string, max int, retryAfter time.Duration) error {
	var detail string
	switch limit {
	case LimitTurns:
		detail = "limit reached: at most " + strconv.Itoa(max) + " planner turns of one person run at once"
	case LimitSessions:
		detail = "limit reached: at most " + strconv.Itoa(max) + " planner sessions of one person a minute"
	default:
		detail = "limit reached: " + limit + " (at most " + strconv.Itoa(max) + ")"
	}
	return &fault.Error{Kind: fault.Limit, Err: ErrLimit, Detail: detail, Limit: limit, Max: max, RetryAfter: retryAfter}
}
