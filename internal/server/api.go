package server

import (
	"context"
	"net/http"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/operator/pglisting"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/tracker"
)

// mountAPI makes the REST API (the tracker's, the operators' and the planner's, with one
// budget per subject for all of them) and mounts it on the gateway, which lists its own
// connections for the operators: through the database on Postgres, where every replica
// answers, else alone.
func (s *Server) mountAPI(ctx context.Context, verifier httpapi.TokenVerifier) error {
	listOpts := s.o.Listings
	listOpts.Observe = s.Metrics.ListingObserver()
	var conns operator.Lister
	if pg := s.o.Postgres; pg != nil {
		l, err := pglisting.Open(ctx, pg.Pool, &pglisting.Options{
			ListOptions: listOpts, Replica: s.Replica, Source: s.Gateway, Logger: s.logger,
		})
		if err != nil {
			return err
		}
		s.lister, conns = l, l
	} else {
		conns = operator.NewLocal(s.Replica, s.Gateway, &listOpts)
	}
	rest := s.restOptions()
	routers := []http.Handler{
		tracker.NewHandler(s.Tracker, verifier, rest),
		operator.NewHandler(s.Log, verifier, operator.Options{
			Revocations: s.Revocations, Admins: s.o.Tracker.AdminSubjects, Connections: conns,
		}, rest),
	}
	if s.Planner != nil {
		routers = append(routers, planner.NewHandler(s.Planner, verifier, rest))
	}
	s.API = httpapi.Join(routers...)
	var api http.Handler = s.API
	if s.o.API != nil {
		api = s.o.API(s.API)
	}
	s.Gateway.SetAPI(api)
	return nil
}

// restOptions are the REST surfaces' options: their refusals and listings counted in the
// metrics.
func (s *Server) restOptions() *httpapi.HandlerOptions {
	m := s.Metrics
	l := s.o.RESTListings
	l.OnRefused, l.OnInFlight = m.RESTListingRejected, m.RESTListingsInFlight
	o := &httpapi.HandlerOptions{Logger: s.logger, Listings: httpapi.NewListings(&l)}
	if s.o.REST != nil {
		r := *s.o.REST
		r.OnRefused = m.RESTRejected
		o.Rate = httpapi.NewSubjectRate(&r)
	}
	return o
}

// Handler serves the client port: Options.Routes, then the gateway's.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.o.Routes != nil {
		s.o.Routes(mux)
	}
	mux.Handle("/", s.Gateway.Handler())
	return mux
}

var _ operator.Source = (*gateway.Server)(nil)
