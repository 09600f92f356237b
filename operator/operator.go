package operator

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/streams"
)

// Options configure NewHandler.
type Options struct {
	// Admins may call the API (BALLET_ADMIN_SUBJECTS).
	Admins []string
	// Revocations, when set, are the replica's (those its verifier refuses): a change is
	// applied to them before the answer, so that it holds on this replica once answered, and
	// on the others as soon as they read its event.
	Revocations *auth.Revocations
	// Connections lists the connections of every live replica; without it the listing is
	// not served.
	Connections Lister
}

// NewHandler returns the API, an *httpapi.Router to Join beside the others. v should refuse
// what the gateway refuses (auth.Revocations.Verifier): a blocked administrator is refused.
func NewHandler(store streams.SubjectStore, v httpapi.TokenVerifier, o Options, opts *httpapi.HandlerOptions) *httpapi.Router {
	h := &handler{store: store, revs: o.Revocations, conns: o.Connections, admins: map[string]bool{}}
	for _, a := range o.Admins {
		if a != "" {
			h.admins[a] = true
		}
	}
	api := httpapi.New(httpapi.Config{Name: "operator", Verifier: v, MaxBodyBytes: 1 << 10}, opts)
	h.api = api
	route := func(ms httpapi.Methods[*auth.Principal]) http.Handler {
		return httpapi.Route(api, func(p *auth.Principal) *auth.Principal { return p }, ms)
	}
	mux := api.NewRouter()
	mux.Handle("/api/v1/admin/subjects/{subject}/sign-out", route(httpapi.Methods[*auth.Principal]{"POST": h.signOut}))
	mux.Handle("/api/v1/admin/subjects/{subject}/block", route(httpapi.Methods[*auth.Principal]{"PUT": h.block, "DELETE": h.unblock}))
	if h.conns != nil {
		mux.Handle("/api/v1/admin/connections", route(httpapi.Methods[*auth.Principal]{"GET": h.connections}))
	}
	return mux
}

type handler struct {
	api    *httpapi.API
	store  streams.SubjectStore
	revs   *auth.Revocations
	conns  Lister
	admins map[string]bool
}

// actorKind is the events' actor kind for a caller.
func actorKind(p *auth.Principal) string {
	if p.Human {
		return streams.ActorHuman
	}
	return streams.ActorService
}

// subject is the request's target, once its caller is known to be an administrator and its
// body, which these routes do not take, to be within the body limit (413 past it).
func (h *handler) subject(w http.ResponseWriter, r *http.Request, p *auth.Principal) (string, error) {
	if !h.admins[p.Subject] {
		return "", httpapi.Errorf(http.StatusForbidden, "only the subjects of BALLET_ADMIN_SUBJECTS may sign subjects out or block them")
	}
	if err := h.api.DiscardBody(w, r); err != nil {
		return "", err
	}
	return checkSubject(r.PathValue("subject"), p)
}

// checkSubject is s, once it is known to be a subject (badSubject otherwise).
func checkSubject(s string, p *auth.Principal) (string, error) {
	if err := streams.CheckSubjectChange(streams.EventSubjectSignedOut, s, actorKind(p), p.Subject); err != nil {
		return "", badSubject(err)
	}
	return s, nil
}

// badSubject words a store's refusal of a subject (streams.ErrInvalid) for the caller, an
// invalid argument; other errors it returns as they are.
func badSubject(err error) error {
	if errors.Is(err, streams.ErrInvalid) {
		return fault.Wrap(fault.Invalid, err, "the subject must be UTF-8 text without NUL, at most 255 bytes")
	}
	return err
}

// connections answers the listing of the live replicas' connections, of the query's subject
// only when it names one, at most its limit.
func (h *handler) connections(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if !h.admins[p.Subject] {
		return httpapi.Errorf(http.StatusForbidden, "only the subjects of BALLET_ADMIN_SUBJECTS may list connections")
	}
	q := r.URL.Query()
	var subject string
	if q.Has("subject") {
		var err error
		if subject, err = checkSubject(q.Get("subject"), p); err != nil {
			return err
		}
	}
	limit := DefaultListLimit
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > MaxListLimit {
			return httpapi.Errorf(http.StatusBadRequest, "limit: want an integer from 1 to %d", MaxListLimit)
		}
		limit = n
	}
	l, err := h.conns.List(r.Context(), subject, limit)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, l)
}

func (h *handler) signOut(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	s, err := h.subject(w, r, p)
	if err != nil {
		return err
	}
	return h.change(w, r, p, streams.EventSubjectSignedOut, s)
}

// change makes the change typ to subject s, applies it to the replica's revocations, and
// answers 204.
func (h *handler) change(w http.ResponseWriter, r *http.Request, p *auth.Principal, typ, s string) error {
	c, err := h.store.ChangeSubject(r.Context(), typ, s, actorKind(p), p.Subject)
	if err != nil {
		return badSubject(err)
	}
	if h.revs != nil {
		h.revs.Set(c.Subject, c.SignedOutAt, c.Blocked, c.Seq)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *handler) block(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	return h.setBlocked(w, r, p, true)
}

func (h *handler) unblock(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	return h.setBlocked(w, r, p, false)
}

func (h *handler) setBlocked(w http.ResponseWriter, r *http.Request, p *auth.Principal, blocked bool) error {
	s, err := h.subject(w, r, p)
	if err != nil {
		return err
	}
	if blocked && s == p.Subject {
		return httpapi.Errorf(http.StatusConflict, "an administrator cannot block itself: another one, or `ballet-gateway admin block`, can")
	}
	return h.change(w, r, p, streams.BlockEventType(blocked), s)
}
