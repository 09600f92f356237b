package tracker

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
)

// problem is an RFC 7807 problem document.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// httpError is a failure of the request itself (before the Service is asked).
type httpError struct {
	status int
	detail string
	header http.Header // extra response headers
}

func (e *httpError) Error() string { return e.detail }

func requestError(status int, detail string) error { return &httpError{status: status, detail: detail} }

// writeProblem answers err as application/problem+json. Errors without a caller-safe detail
// are 500s whose text goes to the log only.
func writeProblem(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	status, detail := HTTPStatus(err), Detail(err)
	var he *httpError
	if errors.As(err, &he) {
		status, detail = he.status, he.detail
		for k, vs := range he.header {
			w.Header()[k] = vs
		}
	}
	if status == http.StatusInternalServerError {
		logger.ErrorContext(r.Context(), "tracker request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		detail = "the server could not complete the request; it has been logged"
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("ETag")
	h.Del("Location")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
}
