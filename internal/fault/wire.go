package fault

import (
	"net/http"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

type wireKind struct {
	code   rpc.Coded
	status int
	typ    string
}

// wire is what each kind is on each surface. Precondition and Resync each have one surface
// (REST and /rpc): their other values are the nearest, for a surface that may come to need
// them. Unavailable has no JSON-RPC code of its own: an internal error, answered without its
// text, as the realtime API answers a server that cannot serve.
var wire = [...]wireKind{
	Internal:     {rpc.ErrInternal, http.StatusInternalServerError, semconv.ErrorTypeOther.Value.AsString()},
	NotFound:     {protocol.ErrNotFound, http.StatusNotFound, "not_found"},
	Forbidden:    {protocol.ErrForbidden, http.StatusForbidden, "forbidden"},
	Conflict:     {protocol.ErrConflict, http.StatusConflict, "conflict"},
	Precondition: {protocol.ErrConflict, http.StatusPreconditionFailed, "precondition_failed"},
	Invalid:      {rpc.ErrInvalidParams, http.StatusUnprocessableEntity, "invalid"},
	Limit:        {protocol.ErrLimitExceeded, http.StatusTooManyRequests, "limit_exceeded"},
	Resync:       {protocol.ErrResyncRequired, http.StatusConflict, "resync_required"},
	Unavailable:  {rpc.ErrInternal, http.StatusServiceUnavailable, "unavailable"},
}

// Code returns the JSON-RPC code of err's kind: -32004, -32003, -32009 (also for a failed
// precondition), -32602 for an invalid argument, -32029, -32010, and -32603 for Unavailable
// and for an error of no kind; nil for nil. Its Error() is the code's own words, the message
// of a refusal without a detail.
func Code(err error) rpc.Coded {
	if err == nil {
		return nil
	}
	return of(err).code
}

// HTTPStatus returns the HTTP status of err's kind: 404, 403, 409, 412, 422, 429, 409 for
// Resync, 503 for Unavailable and 500 for an error of no kind; 200 for nil.
func HTTPStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	return of(err).status
}

// ErrorType returns the error.type of a span that failed with err: not_found, forbidden,
// conflict, precondition_failed, invalid, limit_exceeded, resync_required, unavailable, or
// "_OTHER" for an error of no kind; "" for nil.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	return of(err).typ
}

// of is the wire entry of err's kind; a kind beyond the known ones is internal.
func of(err error) *wireKind {
	k := KindOf(err)
	if int(k) >= len(wire) {
		k = Internal
	}
	return &wire[k]
}
