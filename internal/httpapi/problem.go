package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Error is a failure of the request itself (before the service is asked), answered with its
// status, its detail and its extra headers.
type Error struct {
	Status int
	Detail string      // for the caller
	Header http.Header // extra response headers, canonical keys
}

func (e *Error) Error() string { return e.Detail }

// Errorf returns an *Error of status with a formatted detail.
func Errorf(status int, format string, args ...any) error {
	return &Error{Status: status, Detail: fmt.Sprintf(format, args...)}
}

// Limited is an error that a limit refused; name is "" when it is not one. Its problem names the
// limit and its value ("limit", "max"), and a positive retry is its Retry-After, in whole
// seconds rounded up.
type Limited interface {
	Limited() (name string, max int, retry time.Duration)
}

// problem is an RFC 7807 problem document, with the limit that refused the request, if any.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Limit  string `json:"limit,omitempty"`
	Max    int    `json:"max,omitempty"`
}

// problem answers err as application/problem+json: an *Error as it says, other errors as
// Classify maps them. Errors without a caller-safe detail are 500s whose text goes to the log
// only. Headers meant for a success (ETag, Location) are dropped.
func (a *API) problem(w http.ResponseWriter, r *http.Request, err error) {
	status, detail := a.classify(err)
	var e *Error
	if errors.As(err, &e) {
		status, detail = e.Status, e.Detail
		for k, vs := range e.Header {
			w.Header()[k] = vs
		}
	}
	if status == http.StatusInternalServerError {
		a.logger.ErrorContext(r.Context(), a.name+" request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		detail = "the server could not complete the request; it has been logged"
	}
	p := problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail}
	h := w.Header()
	var lim Limited
	if errors.As(err, &lim) && status != http.StatusInternalServerError {
		var retry time.Duration
		if p.Limit, p.Max, retry = lim.Limited(); p.Limit != "" && retry > 0 {
			h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(retry.Seconds())), 10))
		}
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("ETag")
	h.Del("Location")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// WriteJSON answers v as JSON with status, not to be cached.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}
