package tracker

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ballet/gateway/internal/httpapi"
)

// TokenVerifier checks an OIDC access token (auth.Verifier does, as /rpc's auth).
type TokenVerifier = httpapi.TokenVerifier

// HandlerOptions configure NewHandler. A nil *HandlerOptions means defaults: the log is
// slog.Default(), MaxBodyBytes (beyond which a body is refused with 413) is 1 MiB.
type HandlerOptions = httpapi.HandlerOptions

// NewHandler returns the REST API at /api/v1/ (it expects the full path, so mount it at
// "/api/v1/" without stripping):
//
//	GET    /api/v1/projects                                  visible projects
//	POST   /api/v1/projects                                  {"key","name"}: admin subjects
//	GET    /api/v1/projects/{key}
//	PUT    /api/v1/projects/{key}/members/{subject}          {"role"}: tracker.manage
//	DELETE /api/v1/projects/{key}/members/{subject}
//	GET    /api/v1/projects/{key}/items                      ?state&q&limit&after: {"seq","items","next"}
//	POST   /api/v1/projects/{key}/items                      {"title","description"?,"state"?}
//	GET    /api/v1/items/{key}
//	PATCH  /api/v1/items/{key}                               If-Match
//	DELETE /api/v1/items/{key}                               If-Match
//	PUT    /api/v1/items/{key}/dependencies/{blocker}        blocker blocks key
//	DELETE /api/v1/items/{key}/dependencies/{blocker}
//
// The items listing is paged, by number: at most limit items (default 100, at most 500)
// after the cursor after, with next the cursor of the following page (null on the last). A
// page also ends once its items hold the page budget (httpapi.Listings.PageBytes), after at
// least one item, and a subject's listings answered at once are bounded (429).
// Every request needs "Authorization: Bearer <token>". Errors are application/problem+json
// (RFC 7807): 400, 401, 403, 404, 405, 409, 412, 413, 415, 422, and 429 with Retry-After beyond
// HandlerOptions.Rate. The handler is an *httpapi.Router: httpapi.Join mounts it beside the
// planner's, and docs/openapi.yaml is checked against its Endpoints.
func NewHandler(svc *Service, v TokenVerifier, opts *HandlerOptions) http.Handler {
	h := &handler{svc: svc, api: httpapi.New(httpapi.Config{
		Name: "tracker", Verifier: v, MaxBodyBytes: 1 << 20,
	}, opts)}
	route := func(ms methods) http.Handler { return httpapi.Route(h.api, ActorFor, ms) }
	mux := h.api.NewRouter()
	mux.Handle("/api/v1/projects", route(methods{"GET": h.listProjects, "POST": h.createProject}))
	mux.Handle("/api/v1/projects/{project}", route(methods{"GET": h.getProject}))
	mux.Handle("/api/v1/projects/{project}/members/{subject}", route(methods{"PUT": h.setMember, "DELETE": h.removeMember}))
	mux.Handle("/api/v1/projects/{project}/items", route(methods{"GET": h.listItems, "POST": h.createItem}))
	mux.Handle("/api/v1/items/{item}", route(methods{"GET": h.getItem, "PATCH": h.patchItem, "DELETE": h.deleteItem}))
	mux.Handle("/api/v1/items/{item}/dependencies/{blocker}", route(methods{"PUT": h.addDependency, "DELETE": h.removeDependency}))
	return mux
}

type handler struct {
	svc *Service
	api *httpapi.API
}

type methods = httpapi.Methods[Actor]

func writeItem(w http.ResponseWriter, status int, it *Item) error {
	w.Header().Set("ETag", etag(it.Version))
	return httpapi.WriteJSON(w, status, it)
}

func ifMatch(r *http.Request) (*int64, error) {
	v, err := ParseIfMatch(strings.Join(r.Header.Values("If-Match"), ", "))
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusBadRequest, Detail: err.Error()}
	}
	return v, nil
}

func (h *handler) listProjects(w http.ResponseWriter, r *http.Request, a Actor) error {
	ps, err := h.svc.Projects(r.Context(), a)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, struct {
		Projects []Project `json:"projects"`
	}{ps})
}

func (h *handler) createProject(w http.ResponseWriter, r *http.Request, a Actor) error {
	var req struct {
		Key  string `json:"key"`
		Name string `json:"name"`
	}
	if err := h.api.DecodeBody(w, r, &req); err != nil {
		return err
	}
	p, err := h.svc.CreateProject(r.Context(), a, req.Key, req.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/projects/"+url.PathEscape(p.Key))
	return httpapi.WriteJSON(w, http.StatusCreated, p)
}

func (h *handler) getProject(w http.ResponseWriter, r *http.Request, a Actor) error {
	p, err := h.svc.Project(r.Context(), a, r.PathValue("project"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

func (h *handler) setMember(w http.ResponseWriter, r *http.Request, a Actor) error {
	var req struct {
		Role string `json:"role"`
	}
	if err := h.api.DecodeBody(w, r, &req); err != nil {
		return err
	}
	m, err := h.svc.SetMember(r.Context(), a, r.PathValue("project"), r.PathValue("subject"), req.Role)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, m)
}

func (h *handler) removeMember(w http.ResponseWriter, r *http.Request, a Actor) error {
	if err := h.svc.RemoveMember(r.Context(), a, r.PathValue("project"), r.PathValue("subject")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// itemsCursor is the kind of the items listing's cursors, whose scope is the project and
// whose field the number the page ended at.
const itemsCursor = "items"

func (h *handler) listItems(w http.ResponseWriter, r *http.Request, a Actor) error {
	project := r.PathValue("project")
	limit, after, err := httpapi.ParsePage(r, itemsCursor, project, 1)
	if err != nil {
		return err
	}
	release, pageBytes, err := h.api.Listing(a.Subject)
	if err != nil {
		return err
	}
	defer release()
	page := ItemPage{Limit: limit, MaxBytes: pageBytes}
	if after != nil {
		n, err := strconv.ParseInt(after[0], 10, 64)
		if err != nil || n < 1 {
			return httpapi.BadCursor()
		}
		page.After = n
	}
	q := r.URL.Query()
	list, err := h.svc.ListItems(r.Context(), a, project, ItemFilter{State: q.Get("state"), Query: q.Get("q")}, page)
	if err != nil {
		return err
	}
	var next string
	if list.Next != 0 {
		next = httpapi.EncodeCursor(itemsCursor, project, strconv.FormatInt(list.Next, 10))
	}
	return httpapi.WritePage(w, "items", list.Items, next, httpapi.Field{Name: "seq", Value: list.Seq})
}

func (h *handler) createItem(w http.ResponseWriter, r *http.Request, a Actor) error {
	var req struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		State       string `json:"state"`
	}
	if err := h.api.DecodeBody(w, r, &req); err != nil {
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
	if err := h.api.DecodeBody(w, r, &req); err != nil {
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
