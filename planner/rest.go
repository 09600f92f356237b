package planner

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/internal/httpapi"
)

// TokenVerifier checks an OIDC access token (auth.Verifier does, as /rpc's auth).
type TokenVerifier = httpapi.TokenVerifier

// HandlerOptions configure NewHandler. A nil *HandlerOptions means defaults: the log is
// slog.Default(), MaxBodyBytes (beyond which a body is refused with 413) is 64 KiB.
type HandlerOptions = httpapi.HandlerOptions

// NewHandler returns the planner's REST API. It expects full paths; it is an
// *httpapi.Router, mounted beside the tracker's with httpapi.Join. Routes:
//
//	POST /api/v1/projects/{project}/planner/sessions   {"title"?}: tracker.write, a person; 201
//	GET  /api/v1/projects/{project}/planner/sessions   ?limit&after: {"sessions", "next"}, newest first: tracker.read
//	GET  /api/v1/planner/sessions/{session}            the session and "messages": tracker.read
//
// The sessions listing is paged: at most limit sessions (default 100, at most 500) after the
// cursor after, with next the cursor of the following page (null on the last). Every request
// needs "Authorization: Bearer <token>". Errors are application/problem+json (RFC 7807): 400,
// 401, 403, 404, 405, 413, 415, 422, and 429 with Retry-After beyond Options.SessionRate or
// HandlerOptions.Rate.
func NewHandler(svc *Service, v TokenVerifier, opts *HandlerOptions) http.Handler {
	h := &handler{svc: svc, api: httpapi.New(httpapi.Config{
		Name: "planner", Verifier: v, MaxBodyBytes: 64 << 10, Classify: classify,
	}, opts)}
	mux := h.api.NewRouter()
	mux.Handle("/api/v1/projects/{project}/planner/sessions", httpapi.Route(h.api, CallerFor, httpapi.Methods[Caller]{"GET": h.list, "POST": h.create}))
	mux.Handle("/api/v1/planner/sessions/{session}", httpapi.Route(h.api, CallerFor, httpapi.Methods[Caller]{"GET": h.get}))
	return mux
}

type handler struct {
	svc *Service
	api *httpapi.API
}

func (h *handler) create(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req struct {
		Title string `json:"title"`
	}
	if err := h.api.DecodeOptionalBody(w, r, &req); err != nil {
		return err
	}
	sess, err := h.svc.CreateSession(r.Context(), c, r.PathValue("project"), req.Title)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/planner/sessions/"+url.PathEscape(sess.ID))
	return httpapi.WriteJSON(w, http.StatusCreated, sess)
}

// sessionsCursor is the kind of the sessions listing's cursors, whose scope is the project
// and whose fields the created_at (Unix microseconds) and id of the session the page ended at.
const sessionsCursor = "sessions"

// maxCursorMicros is the latest created_at a cursor may name: the end of year 9999.
const maxCursorMicros = 253402300799999999

func (h *handler) list(w http.ResponseWriter, r *http.Request, c Caller) error {
	project := r.PathValue("project")
	limit, after, err := httpapi.ParsePage(r, sessionsCursor, project, 2)
	if err != nil {
		return err
	}
	// A page of sessions fits the page budget whatever its limit (httpapi.MinPageBytes).
	release, _, err := h.api.Listing(c.Subject)
	if err != nil {
		return err
	}
	defer release()
	page := SessionPage{Limit: limit}
	if after != nil {
		us, err := strconv.ParseInt(after[0], 10, 64)
		if err != nil || us < 0 || us > maxCursorMicros || !ValidID(after[1]) {
			return httpapi.BadCursor()
		}
		page.After = &SessionKey{CreatedAt: time.UnixMicro(us).UTC(), ID: after[1]}
	}
	list, err := h.svc.Sessions(r.Context(), c, project, page)
	if err != nil {
		return err
	}
	var next string
	if list.Next != nil {
		next = httpapi.EncodeCursor(sessionsCursor, project, strconv.FormatInt(list.Next.CreatedAt.UnixMicro(), 10), list.Next.ID)
	}
	return httpapi.WritePage(w, "sessions", list.Sessions, next)
}

func (h *handler) get(w http.ResponseWriter, r *http.Request, c Caller) error {
	release, _, err := h.api.Listing(c.Subject)
	if err != nil {
		return err
	}
	defer release()
	sess, msgs, err := h.svc.Transcript(r.Context(), c, r.PathValue("session"))
	if err != nil {
		return err
	}
	if msgs == nil {
		msgs = []Message{}
	}
	return httpapi.WriteJSON(w, http.StatusOK, struct {
		sessionJSON
		Messages []Message `json:"messages"`
	}{sess.json(), msgs})
}

// classify maps an error of the Service to its status and caller-safe detail (package
// fault's), saying why a 503 is one when the error does not.
func classify(err error) (int, string) {
	status, detail := fault.HTTPStatus(err), fault.Detail(err)
	if status == http.StatusServiceUnavailable && detail == "" {
		detail = "the planner is shutting down"
	}
	return status, detail
}
