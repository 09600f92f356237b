package tracker

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
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
	// MaxBodyBytes limits request bodies; larger ones are refused with 413. Default 1 MiB.
	MaxBodyBytes int64
}

// NewHandler returns the REST API at /api/v1/ (it expects the full path, so mount it at
// "/api/v1/" without stripping):
//
//	GET    /api/v1/projects                                  visible projects
//	POST   /api/v1/projects                                  {"key","name"}: admin subjects
//	GET    /api/v1/projects/{key}
//	PUT    /api/v1/projects/{key}/members/{subject}          {"role"}: tracker.manage
//	DELETE /api/v1/projects/{key}/members/{subject}
//	GET    /api/v1/projects/{key}/items[?state=&q=]          {"seq","items"}
//	POST   /api/v1/projects/{key}/items                      {"title","description"?,"state"?}
//	GET    /api/v1/items/{key}
//	PATCH  /api/v1/items/{key}                               If-Match
//	DELETE /api/v1/items/{key}                               If-Match
//	PUT    /api/v1/items/{key}/dependencies/{blocker}        blocker blocks key
//	DELETE /api/v1/items/{key}/dependencies/{blocker}
//
// Every request needs "Authorization: Bearer <token>". Errors are application/problem+json.
func NewHandler(svc *Service, v TokenVerifier, opts *HandlerOptions) http.Handler {
	h := &handler{svc: svc, verifier: v, logger: slog.Default(), max: 1 << 20}
	if opts != nil {
		if opts.Logger != nil {
			h.logger = opts.Logger
		}
		if opts.MaxBodyBytes > 0 {
			h.max = opts.MaxBodyBytes
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/projects", h.route(methods{"GET": h.listProjects, "POST": h.createProject}))
	mux.Handle("/api/v1/projects/{project}", h.route(methods{"GET": h.getProject}))
	mux.Handle("/api/v1/projects/{project}/members/{subject}", h.route(methods{"PUT": h.setMember, "DELETE": h.removeMember}))
	mux.Handle("/api/v1/projects/{project}/items", h.route(methods{"GET": h.listItems, "POST": h.createItem}))
	mux.Handle("/api/v1/items/{item}", h.route(methods{"GET": h.getItem, "PATCH": h.patchItem, "DELETE": h.deleteItem}))
	mux.Handle("/api/v1/items/{item}/dependencies/{blocker}", h.route(methods{"PUT": h.addDependency, "DELETE": h.removeDependency}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, h.logger, requestError(http.StatusNotFound, "no such resource"))
	})
	return mux
}

type handler struct {
	svc      *Service
	verifier TokenVerifier
	logger   *slog.Logger
	max      int64
}

type apiFunc func(w http.ResponseWriter, r *http.Request, a Actor) error

type methods map[string]apiFunc

// route dispatches on the method (405 with Allow otherwise; HEAD as GET), authenticates the
// caller (401) and answers errors as problems.
func (h *handler) route(ms methods) http.Handler {
	var allow []string
	for m := range ms {
		allow = append(allow, m)
	}
	if ms["GET"] != nil {
		allow = append(allow, "HEAD")
	}
	slices.Sort(allow)
	allowed := strings.Join(allow, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := r.Method
		if m == "HEAD" {
			m = "GET"
		}
		f := ms[m]
		if f == nil {
			writeProblem(w, r, h.logger, &httpError{status: http.StatusMethodNotAllowed,
				detail: r.Method + " is not allowed here", header: http.Header{"Allow": {allowed}}})
			return
		}
		a, err := h.authenticate(r)
		if err == nil {
			err = f(w, r, a)
		}
		if err != nil {
			writeProblem(w, r, h.logger, err)
		}
	})
}

func (h *handler) authenticate(r *http.Request) (Actor, error) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Actor{}, &httpError{status: http.StatusUnauthorized, detail: "an OIDC access token is required: Authorization: Bearer <token>",
			header: http.Header{"Www-Authenticate": {`Bearer`}}}
	}
	p, err := h.verifier.Verify(r.Context(), token)
	if err != nil {
		if auth.Reason(err) == auth.ReasonUnavailable {
			h.logger.WarnContext(r.Context(), "token verification unavailable", "err", err)
			return Actor{}, &httpError{status: http.StatusServiceUnavailable, detail: "tokens cannot be verified right now",
				header: http.Header{"Retry-After": {"5"}}}
		}
		return Actor{}, &httpError{status: http.StatusUnauthorized, detail: "the access token is not valid (" + auth.Reason(err) + ")",
			header: http.Header{"Www-Authenticate": {`Bearer error="invalid_token"`}}}
	}
	return ActorFor(p), nil
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

func writeItem(w http.ResponseWriter, status int, it *Item) error {
	w.Header().Set("ETag", etag(it.Version))
	return writeJSON(w, status, it)
}

func ifMatch(r *http.Request) (*int64, error) {
	v, err := ParseIfMatch(strings.Join(r.Header.Values("If-Match"), ", "))
	if err != nil {
		return nil, requestError(http.StatusBadRequest, err.Error())
	}
	return v, nil
}

func (h *handler) listProjects(w http.ResponseWriter, r *http.Request, a Actor) error {
	ps, err := h.svc.Projects(r.Context(), a)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, struct {
		Projects []Project `json:"projects"`
	}{ps})
}

func (h *handler) createProject(w http.ResponseWriter, r *http.Request, a Actor) error {
	var req struct {
		Key  string `json:"key"`
		Name string `json:"name"`
	}
	if err := decodeBody(w, r, h.max, &req); err != nil {
		return err
	}
	p, err := h.svc.CreateProject(r.Context(), a, req.Key, req.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/projects/"+url.PathEscape(p.Key))
	return writeJSON(w, http.StatusCreated, p)
}

func (h *handler) getProject(w http.ResponseWriter, r *http.Request, a Actor) error {
	p, err := h.svc.Project(r.Context(), a, r.PathValue("project"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func (h *handler) setMember(w http.ResponseWriter, r *http.Request, a Actor) error {
	var req struct {
		Role string `json:"role"`
	}
	if err := decodeBody(w, r, h.max, &req); err != nil {
		return err
	}
	m, err := h.svc.SetMember(r.Context(), a, r.PathValue("project"), r.PathValue("subject"), req.Role)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, m)
}

func (h *handler) removeMember(w http.ResponseWriter, r *http.Request, a Actor) error {
	if err := h.svc.RemoveMember(r.Context(), a, r.PathValue("project"), r.PathValue("subject")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *handler) listItems(w http.ResponseWriter, r *http.Request, a Actor) error {
	q := r.URL.Query()
	items, seq, err := h.svc.ListItems(r.Context(), a, r.PathValue("project"), ItemFilter{State: q.Get("state"), Query: q.Get("q")})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, struct {
		Seq   int64  `json:"seq"`
		Items []Item `json:"items"`
	}{seq, items})
}

func (h *handler) createItem(w http.ResponseWriter, r *http.Request, a Actor) error {
	var req struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		State       string `json:"state"`
	}
	if err := decodeBody(w, r, h.max, &req); err != nil {
		return err
	}
	it, err := h.svc.CreateItem(r.Context(), a, r.PathValue("project"), ItemInput{Title: req.Title, Description: req.Description, State: req.State})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/items/"+url.PathEscape(it.Key))
	return writeItem(w, http.StatusCreated, it)
}

func (h *handler) getItem(w http.ResponseWriter, r *http.Request, a Actor) error {
	it, err := h.svc.GetItem(r.Context(), a, r.PathValue("item"))
	if err != nil {
		return err
	}
	return writeItem(w, http.StatusOK, it)
}

func (h *handler) patchItem(w http.ResponseWriter, r *http.Request, a Actor) error {
	var req struct {
		Title       *string `json:"title"`
		Description *string `json:"description"`
		State       *string `json:"state"`
	}
	if err := decodeBody(w, r, h.max, &req); err != nil {
		return err
	}
	v, err := ifMatch(r)
	if err != nil {
		return err
	}
	it, err := h.svc.UpdateItem(r.Context(), a, r.PathValue("item"), ItemPatch{Title: req.Title, Description: req.Description, State: req.State}, v)
	if err != nil {
		return err
	}
	return writeItem(w, http.StatusOK, it)
}

func (h *handler) deleteItem(w http.ResponseWriter, r *http.Request, a Actor) error {
	v, err := ifMatch(r)
	if err != nil {
		return err
	}
	if err := h.svc.DeleteItem(r.Context(), a, r.PathValue("item"), v); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *handler) addDependency(w http.ResponseWriter, r *http.Request, a Actor) error {
	it, added, err := h.svc.AddDependency(r.Context(), a, r.PathValue("item"), r.PathValue("blocker"))
	if err != nil {
		return err
	}
	if !added {
		return writeItem(w, http.StatusOK, it)
	}
	w.Header().Set("Location", r.URL.EscapedPath())
	return writeItem(w, http.StatusCreated, it)
}

func (h *handler) removeDependency(w http.ResponseWriter, r *http.Request, a Actor) error {
	it, err := h.svc.RemoveDependency(r.Context(), a, r.PathValue("item"), r.PathValue("blocker"))
	if err != nil {
		return err
	}
	return writeItem(w, http.StatusOK, it)
}
