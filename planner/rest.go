package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/ballet/gateway/auth"
)

// TokenVerifier checks an OIDC access token (auth.Verifier does, as /rpc's auth).
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (*auth.Principal, error)
}

var _ TokenVerifier = (*auth.Verifier)(nil)

// HandlerOptions configure NewHandler. A nil *HandlerOptions means defaults.
type HandlerOptions struct {
	// Logger receives internal errors (their text never reaches callers). Default
	// slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes limits request bodies; larger ones are refused with 413. Default 64 KiB.
	MaxBodyBytes int64
}

// NewHandler returns the planner's REST API. It expects full paths; mount it beside the
// tracker's handler for exactly these patterns:
//
//	mux.Handle("/api/v1/projects/{project}/planner/sessions", h)
//	mux.Handle("/api/v1/planner/", h)
//
// Routes:
//
//	POST /api/v1/projects/{project}/planner/sessions   {"title"?}: tracker.write, a person; 201
//	GET  /api/v1/projects/{project}/planner/sessions   {"sessions": [...]}, newest first: tracker.read
//	GET  /api/v1/planner/sessions/{session}            the session and "messages": tracker.read
//
// Every request needs "Authorization: Bearer <token>". Errors are application/problem+json
// (RFC 7807): 400, 401, 403, 404, 405, 413, 415, 422.
func NewHandler(svc *Service, v TokenVerifier, opts *HandlerOptions) http.Handler {
	h := &handler{svc: svc, verifier: v, logger: slog.Default(), max: 64 << 10}
	if opts != nil {
		if opts.Logger != nil {
			h.logger = opts.Logger
		}
		if opts.MaxBodyBytes > 0 {
			h.max = opts.MaxBodyBytes
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/projects/{project}/planner/sessions", h.route(map[string]apiFunc{"GET": h.list, "POST": h.create}))
	mux.Handle("/api/v1/planner/sessions/{session}", h.route(map[string]apiFunc{"GET": h.get}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.problem(w, r, httpErr(http.StatusNotFound, "no such resource"))
	})
	return mux
}

type handler struct {
	svc      *Service
	verifier TokenVerifier
	logger   *slog.Logger
	max      int64
}

type apiFunc func(w http.ResponseWriter, r *http.Request, c Caller) error

func (h *handler) route(ms map[string]apiFunc) http.Handler {
	allow := "GET, HEAD"
	if ms["POST"] != nil {
		allow = "GET, HEAD, POST"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := r.Method
		if m == http.MethodHead {
			m = http.MethodGet
		}
		f := ms[m]
		if f == nil {
			w.Header().Set("Allow", allow)
			h.problem(w, r, httpErr(http.StatusMethodNotAllowed, r.Method+" is not allowed here"))
			return
		}
		c, err := h.authenticate(w, r)
		if err == nil {
			err = f(w, r, c)
		}
		if err != nil {
			h.problem(w, r, err)
		}
	})
}

func (h *handler) authenticate(w http.ResponseWriter, r *http.Request) (Caller, error) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		w.Header().Set("WWW-Authenticate", "Bearer")
		return Caller{}, httpErr(http.StatusUnauthorized, "an OIDC access token is required: Authorization: Bearer <token>")
	}
	p, err := h.verifier.Verify(r.Context(), token)
	if err != nil {
		if auth.Reason(err) == auth.ReasonUnavailable {
			h.logger.WarnContext(r.Context(), "token verification unavailable", "err", err)
			w.Header().Set("Retry-After", "5")
			return Caller{}, httpErr(http.StatusServiceUnavailable, "tokens cannot be verified right now")
		}
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		return Caller{}, httpErr(http.StatusUnauthorized, "the access token is not valid ("+auth.Reason(err)+")")
	}
	return CallerFor(p), nil
}

func (h *handler) create(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req struct {
		Title string `json:"title"`
	}
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	sess, err := h.svc.CreateSession(r.Context(), c, r.PathValue("project"), req.Title)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/planner/sessions/"+url.PathEscape(sess.ID))
	return writeJSON(w, http.StatusCreated, sess)
}

func (h *handler) list(w http.ResponseWriter, r *http.Request, c Caller) error {
	ss, err := h.svc.Sessions(r.Context(), c, r.PathValue("project"))
	if err != nil {
		return err
	}
	if ss == nil {
		ss = []Session{}
	}
	return writeJSON(w, http.StatusOK, struct {
		Sessions []Session `json:"sessions"`
	}{ss})
}

func (h *handler) get(w http.ResponseWriter, r *http.Request, c Caller) error {
	sess, msgs, err := h.svc.Transcript(r.Context(), c, r.PathValue("session"))
	if err != nil {
		return err
	}
	if msgs == nil {
		msgs = []Message{}
	}
	return writeJSON(w, http.StatusOK, struct {
		sessionJSON
		Messages []Message `json:"messages"`
	}{sess.json(), msgs})
}

// decode reads an optional JSON object body into v strictly.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return httpErr(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body exceeds %d bytes", h.max))
		}
		return httpErr(http.StatusBadRequest, "the request body could not be read")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !(mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return httpErr(http.StatusUnsupportedMediaType, "the request body must be application/json")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if body = bytes.TrimSpace(body); body[0] != '{' {
		return httpErr(http.StatusBadRequest, "the request body must be a JSON object")
	}
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return httpErr(http.StatusBadRequest, fmt.Sprintf("field %q: a JSON %s is not accepted", te.Field, te.Value))
		}
		if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return httpErr(http.StatusBadRequest, "unknown field "+msg)
		}
		return httpErr(http.StatusBadRequest, "malformed JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return httpErr(http.StatusBadRequest, "the request body must hold one JSON object only")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
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

// httpError is a failure of the request itself, before the Service is asked.
type httpError struct {
	status int
	detail string
}

func (e *httpError) Error() string { return e.detail }

func httpErr(status int, detail string) error { return &httpError{status, detail} }

// Status returns the HTTP status for err: 404, 403, 409 and 422 for the sentinels, 503 for
// ErrClosed, 500 for anything else (and 200 for nil).
func Status(err error) int {
	var he *httpError
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &he):
		return he.status
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrInvalid):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// problem answers err as an RFC 7807 problem document. Errors without a caller-safe detail
// are 500s whose text goes to the log only.
func (h *handler) problem(w http.ResponseWriter, r *http.Request, err error) {
	status, detail := Status(err), Detail(err)
	var he *httpError
	if errors.As(err, &he) {
		detail = he.detail
	}
	switch status {
	case http.StatusInternalServerError:
		h.logger.ErrorContext(r.Context(), "planner request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		detail = "the server could not complete the request; it has been logged"
	case http.StatusServiceUnavailable:
		if detail == "" {
			detail = "the planner is shutting down"
		}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail,omitempty"`
	}{"about:blank", http.StatusText(status), status, detail})
}
