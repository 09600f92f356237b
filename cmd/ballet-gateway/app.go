package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ballet/gateway/internal/server"
)

// serverOptions are the replica's options from the configuration, for serve and dev alike;
// each adds its store, its issuer and what else differs.
func (c *config) serverOptions(logger *slog.Logger) (*server.Options, error) {
	plannerOpts, err := c.plannerOptions()
	if err != nil {
		return nil, err
	}
	return &server.Options{
		Replica: c.replica, Logger: logger, Addr: c.addr, AdminAddr: c.adminAddr,
		Config: c.gateway, Hub: c.hub, Tailer: c.tailer, Tracker: c.tracker, Listings: c.listings,
		Planner: plannerOpts, REST: &c.rest, RESTListings: c.listingsREST, TailMaxLag: c.tailMaxLag,
		AttributeValueLength: c.tracing.AttributeValueLength,
	}, nil
}

// runServer runs s until ctx ends, then closes it; a port it cannot listen on is an error of
// its setting.
func runServer(ctx context.Context, s *server.Server) error {
	defer s.Close()
	err := s.Run(ctx)
	var le *server.ListenError
	if errors.As(err, &le) {
		name := "BALLET_ADDR"
		if le.Admin {
			name = "BALLET_ADMIN_ADDR"
		}
		return &configError{Var: name, Value: le.Addr, Msg: "cannot listen: " + le.Err.Error()}
	}
	return err
}
