package httpapi

import (
	"net/http"
	"slices"
)

// Endpoint is one pattern a Router serves (net/http's pattern syntax, without a method) and
// the methods answered there, sorted; HEAD, answered wherever GET is, is not listed.
type Endpoint struct {
	Pattern string
	Methods []string
	h       http.Handler
}

// Router is the ServeMux of REST routes: it answers a path that no route matches with a 404
// problem, and it can list what it serves (Endpoints), so that the API's description can be
// checked against the server rather than against a copy of its routes.
type Router struct {
	mux       *http.ServeMux
	notFound  http.Handler
	endpoints []Endpoint
}

// NewRouter returns a Router without routes, whose 404s are a's problems.
func (a *API) NewRouter() *Router {
	return newRouter(a.NotFound())
}

func newRouter(notFound http.Handler) *Router {
	rt := &Router{mux: http.NewServeMux(), notFound: notFound}
	rt.mux.Handle("/", notFound)
	return rt
}

// Handle serves h, which Route returned, at pattern. It panics for another handler (its
// methods would be unknown) or a pattern that conflicts with one already served.
func (rt *Router) Handle(pattern string, h http.Handler) {
	m, ok := h.(*methodHandler)
	if !ok {
		panic("httpapi: Router.Handle wants a handler from Route")
	}
	rt.mux.Handle(pattern, h)
	rt.endpoints = append(rt.endpoints, Endpoint{Pattern: pattern, Methods: m.methods, h: h})
}

// ServeHTTP answers r with the route its path matches.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.mux.ServeHTTP(w, r) }

// Endpoints returns what rt serves, in the order it was added.
func (rt *Router) Endpoints() []Endpoint {
	es := slices.Clone(rt.endpoints)
	for i := range es {
		es[i].Methods = slices.Clone(es[i].Methods)
	}
	return es
}

// Join returns one Router serving every route of routers (Routers that NewRouter made, or
// Join did), so that surfaces mounted side by side need no list of their prefixes. Paths
// that no route matches are the first one's 404s. It panics for a handler that is not a
// Router, or routes that conflict.
func Join(routers ...http.Handler) *Router {
	if len(routers) == 0 {
		panic("httpapi: Join wants at least one Router")
	}
	var joined *Router
	for _, h := range routers {
		rt, ok := h.(*Router)
		if !ok {
			panic("httpapi: Join wants Routers")
		}
		if joined == nil {
			joined = newRouter(rt.notFound)
		}
		for _, e := range rt.endpoints {
			joined.mux.Handle(e.Pattern, e.h)
			joined.endpoints = append(joined.endpoints, e)
		}
	}
	return joined
}

// methodHandler is what Route returns: one path's methods and the function answering them.
type methodHandler struct {
	methods []string // sorted, without HEAD
	serve   http.HandlerFunc
}

func (m *methodHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.serve(w, r) }
