package provider

import (
	"context"
	"errors"
	"net"
	"net/http"
)

// Kinds of failed model calls, as ErrorKind names them (the kind label of the planner's
// provider error metric).
const (
	KindRateLimited = "rate_limited" // 429, or the provider's rate limit error
	KindOverloaded  = "overloaded"   // 529, or the provider's overloaded error
	KindServer      = "server"       // other 5xx, or an error reported in the stream
	KindAuth        = "auth"         // 401, 403: the API key or its permissions
	KindConnection  = "connection"   // unreachable, or the connection broke
	KindTimeout     = "timeout"      // the request or the connection timed out
	KindMalformed   = "malformed"    // the answer broke the provider's wire format
	KindOther       = "other"        // anything else (other 4xx, local failures)
)

// ErrorKinds lists every kind ErrorKind returns.
var ErrorKinds = []string{
	KindRateLimited, KindOverloaded, KindServer, KindAuth,
	KindConnection, KindTimeout, KindMalformed, KindOther,
}

// ErrorKind classifies the error of a model call.
func ErrorKind(err error) string {
	var pe *Error
	var ne net.Error
	switch {
	case errors.Is(err, ErrMalformed):
		return KindMalformed
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return KindTimeout
	case !errors.As(err, &pe):
		return KindOther
	case pe.Status == http.StatusTooManyRequests || pe.Type == "rate_limit_error" || pe.Type == "rate_limit_exceeded":
		return KindRateLimited
	case pe.Status == 529 || pe.Type == "overloaded_error":
		return KindOverloaded
	case pe.Status >= 500:
		return KindServer
	case pe.Status == http.StatusUnauthorized || pe.Status == http.StatusForbidden:
		return KindAuth
	case pe.Type == "connection_error":
		return KindConnection
	case pe.Status == 0:
		return KindServer
	}
	return KindOther
}
