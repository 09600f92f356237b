package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ListenError says that Run could not listen on a port.
type ListenError struct {
	Admin bool   // the admin port's (Options.AdminAddr), else the client port's (Options.Addr)
	Addr  string // the address
	Err   error
}

func (e *ListenError) Error() string {
	port := "client"
	if e.Admin {
		port = "admin"
	}
	return fmt.Sprintf("the %s port %s: cannot listen: %v", port, e.Addr, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// shutdownGrace is how long a shutdown waits beyond the drain window: for the last sessions'
// close handshakes (the gateway keeps a second of it for them) and the in-flight requests of
// both ports, before Run returns regardless.
const shutdownGrace = 5 * time.Second

// Deadlines of the admin port's sockets (the client port's are the gateway's HTTPServer's),
// whose callers are probes and scrapers of /metrics, /readyz and /healthz, and pprof.
const (
	// adminHeaderTimeout bounds the time to send a request's header, from the socket's accept
	// or from the end of the previous request.
	adminHeaderTimeout = 10 * time.Second
	// adminIdleTimeout is how long a keep-alive socket may wait for its next request: long
	// enough for a scraper's next scrape, typically a minute later, to reuse its connection.
	adminIdleTimeout = 2 * time.Minute
)

// Run starts the replica (Start), listens on both ports and serves until ctx ends or a port
// fails. Then it drains: /readyz turns unready, the client port stops accepting, then open
// sessions are closed with 1001 spread over the drain window, and the admin port stops last.
// Close the Server after it.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	srv := s.Gateway
	clientLn := s.o.ClientListener
	if clientLn == nil {
		var err error
		if clientLn, err = net.Listen("tcp", s.o.Addr); err != nil {
			return &ListenError{Addr: s.o.Addr, Err: err}
		}
	}
	adminLn, err := net.Listen("tcp", s.o.AdminAddr)
	if err != nil {
		clientLn.Close()
		return &ListenError{Admin: true, Addr: s.o.AdminAddr, Err: err}
	}
	errLog := slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn)
	// Every socket of the client port counts against BALLET_MAX_CONNECTIONS and has a
	// deadline in every state (the gateway's HTTPServer and Listener).
	client := srv.HTTPServer(s.Handler(), errLog)
	adminSrv := &http.Server{Handler: srv.AdminHandler(), ReadHeaderTimeout: adminHeaderTimeout,
		IdleTimeout: adminIdleTimeout, ErrorLog: errLog}
	serveErr := make(chan error, 2)
	go func() { serveErr <- client.Serve(srv.Listener(clientLn)) }()
	go func() { serveErr <- adminSrv.Serve(adminLn) }()
	s.logger.Info("listening", "addr", clientLn.Addr().String(), "admin_addr", adminLn.Addr().String(), "replica", s.Replica)
	if s.discover(ctx) && s.o.Started != nil {
		s.o.Started()
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	}
	drain := srv.DrainWindow()
	s.logger.Info("shutting down", "drain_window", drain.String(), "sessions", srv.Sessions())
	srv.BeginDrain()
	stopCtx, cancel := context.WithTimeout(context.Background(), drain+shutdownGrace)
	defer cancel()
	if err := client.Shutdown(stopCtx); err != nil {
		s.logger.Warn("client port shutdown", "err", err)
	}
	if err := srv.Shutdown(stopCtx); err != nil {
		s.logger.Warn("sessions did not all end in time", "err", err)
	}
	_ = adminSrv.Shutdown(stopCtx)
	s.logger.Info("stopped")
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) {
		return runErr
	}
	return nil
}
