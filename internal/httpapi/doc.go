// Package httpapi is the plumbing the REST handlers share (tracker and planner): bearer
// authentication, method dispatch, request bodies read with a size limit and decoded
// strictly, JSON answers, and errors answered as RFC 7807 problems.
//
// New returns an API for one surface: its name for the logs, the TokenVerifier, how the
// surface's errors map to a status and a caller-safe detail (by default package fault's
// HTTPStatus and Detail), and its default body limit.
// Route serves one path: HEAD as GET, 405 with Allow for other methods, 401 (or 503 while
// tokens cannot be verified) before the method's function runs, and its error as a problem.
// A SubjectRate (HandlerOptions.Rate) bounds each authenticated subject's requests: 429.
// Failures of the request itself are *Error values (Errorf), with their status and headers.
// A Router (API.NewRouter) serves a surface's routes and lists them (Endpoints); Join mounts
// several surfaces side by side, so the server's routes can be checked against docs/openapi.yaml.
// Listings are paged: ParsePage reads limit and after (an opaque cursor, EncodeCursor), and
// WritePage streams one page with the next page's cursor, an entry at a time.
//
// A 500 never shows its error: the text goes to the log, the caller reads a fixed detail.
// This package imports none of the handlers that use it.
package httpapi
