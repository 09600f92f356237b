package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/presence"
	"github.com/ballet/gateway/streams"
)

// store is what the gateway needs of the event log and project store.
type store interface {
	streams.Log
	streams.ProjectStore
	streams.Appender
	streams.SubjectStore
}

// app wires a store, a verifier and the gateway into running servers.
type app struct {
	cfg      *config
	logger   *slog.Logger
	store    store
	verifier gateway.TokenVerifier
	// revs are the operators' sign-outs and blocks verifier refuses; run loads them and
	// applies the log's changes to them.
	revs *auth.Revocations
	// api serves /api/v1/ (the tracker's REST, planner sessions).
	api http.Handler
	// root serves / on the client port (the board, in dev).
	root http.Handler
	// planner serves planner chat on /rpc, when set.
	planner gateway.Planner
	// presence shares presence with the other replicas, when set (serve); without it
	// presence is this process's own (dev).
	presence presence.Store
	// closeWatches, when set, ends the planner watches of whoever the log says
	// lost access to a project (planner.Service.CloseWatches).
	closeWatches func(project, subject, reason string)
	// metrics, when set, are the gateway's metrics (the planner's observer feeds them).
	metrics *gateway.Metrics
	// ready adds dependency checks to /readyz (the database, the standby's lag).
	ready func(ctx context.Context) error
	// tailLag, when set, is how far the standby the log is read from is behind.
	tailLag func() time.Duration
	// routes adds handlers to the client port (the development issuer).
	routes func(mux *http.ServeMux)
	// clientLn, when set, is used instead of listening on cfg.addr.
	clientLn net.Listener
	// tracer, when set, records the server's spans (tracing is on).
	tracer trace.TracerProvider
	// started, when set, is called once both ports accept connections.
	started func()
	// server is the gateway once run made it: the operators' listing of connections (in
	// api) reads it. Default: a new one.
	server *gateway.ServerRef
	// replica is this process's id (config.replica): in listings, presence_replicas, spans.
	replica string
}

func (a *app) run(ctx context.Context) error {
	metrics := a.metrics
	if metrics == nil {
		metrics = gateway.NewMetrics()
	}
	if a.revs == nil {
		a.revs = auth.NewRevocations()
	}
	hubOpts := a.cfg.hub
	if a.server == nil {
		a.server = &gateway.ServerRef{}
	}
	server := a.server // nil until it exists: no connection to close
	hubOpts.OnEvent = func(ev *streams.Event) {
		metrics.DeliveryLatency.Observe(time.Since(ev.OccurredAt).Seconds())
		gateway.ApplySubjectEvent(a.revs, metrics, server.Load(), ev)
	}
	hubOpts.OnAccessLost = a.closeWatches
	metrics.ObserveHub(&hubOpts)
	hub := streams.NewHub(&hubOpts)
	defer hub.Close()
	metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_recent_events_bytes",
		Help: "Memory of the window of recent events every subscription reads, and of the bodies cached for replays from the log (BALLET_RECENT_EVENTS_BYTES bounds each).",
	}, func() float64 { return float64(hub.RecentBytes()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_catch_ups_running",
		Help: "Subscriptions catching up from the log now, reading it, waiting for their turn (BALLET_MAX_CATCH_UPS read at once) or for their subject's replay budget.",
	}, func() float64 { return float64(hub.CatchUpsRunning()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_catch_up_bytes",
		Help: "Memory of the pages of events read from the log that subscriptions hold until their clients read them (BALLET_CATCH_UP_BYTES bounds it).",
	}, func() float64 { return float64(hub.CatchUpBytes()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ballet_gateway_catch_up_pages_dropped_total",
		Help: "Pages of events read from the log let go before their clients read them, to keep within BALLET_CATCH_UP_BYTES; each is read again when its client reads.",
	}, func() float64 { return float64(hub.CatchUpPagesDropped()) }))
	tailer := streams.NewTailer(a.store, func(evs []streams.Event) {
		hub.Dispatch(evs)
		metrics.TailerDispatched.Add(float64(len(evs)))
		metrics.TailerPosition.Set(float64(evs[len(evs)-1].Seq))
	}, &streams.TailerOptions{Logger: a.logger, Coalesce: a.cfg.tailer.Coalesce})
	// The tailer outlives ctx: it keeps delivering while connections drain.
	if err := tailer.Start(context.Background()); err != nil {
		return fmt.Errorf("start the log tailer: %w", err)
	}
	defer tailer.Close()
	// Before the first connection: the tailer applies what changes from its start on.
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	err := gateway.LoadSubjectControls(lctx, a.store, a.revs)
	lcancel()
	if err != nil {
		return err
	}
	metrics.TailerPosition.Set(float64(tailer.Position()))
	metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_log_head", Help: "Highest committed event seq, read at scrape time.",
	}, func() float64 {
		hctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		head, err := a.store.Head(hctx)
		if err != nil {
			return -1
		}
		return float64(head)
	}))

	metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_tail_lag_seconds",
		Help: "How far the standby the log is read from (BALLET_TAIL_DATABASE_URL) is behind the primary; 0 when the log is read from the primary.",
	}, func() float64 {
		if a.tailLag == nil {
			return 0
		}
		return a.tailLag().Seconds()
	}))
	// The alert on the lag compares it with this, so that it follows the setting.
	metrics.TailMaxLag.Set(a.cfg.tailMaxLag.Seconds())

	gw := a.cfg.gateway.WithDefaults() // its drain window bounds the shutdown below
	srv, err := gateway.NewServer(&gateway.Options{
		Config: gw, Verifier: a.verifier, Log: a.store, Hub: hub, Roles: a.store,
		Metrics: metrics, Logger: a.logger, API: a.api, Root: a.root, Planner: a.planner,
		PresenceStore: a.presence, Revocations: a.revs, TracerProvider: a.tracer,
		AttributeValueLength: a.cfg.tracing.AttributeValueLength,
		Ready: func(ctx context.Context) error {
			if a.ready != nil {
				return a.ready(ctx)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	server.Store(srv)
	metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_queued_bytes",
		Help: "Bytes queued for the replica's connections and not yet written (BALLET_REPLICA_QUEUE_BYTES bounds them).",
	}, func() float64 { return float64(srv.QueuedBytes()) }))
	metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_queued_bytes_budget",
		Help: "BALLET_REPLICA_QUEUE_BYTES as applied: past it the connections with the most queued are closed.",
	}, func() float64 { return float64(srv.QueuedBytesBudget()) }))
	a.logger.Info("queued bytes budget", "replica_queue_bytes", srv.QueuedBytesBudget())
	mux := http.NewServeMux()
	if a.routes != nil {
		a.routes(mux)
	}
	mux.Handle("/", srv.Handler())
	clientLn := a.clientLn
	if clientLn == nil {
		if clientLn, err = net.Listen("tcp", a.cfg.addr); err != nil {
			return &configError{Var: "BALLET_ADDR", Value: a.cfg.addr, Msg: "cannot listen: " + err.Error()}
		}
	}
	adminLn, err := net.Listen("tcp", a.cfg.adminAddr)
	if err != nil {
		clientLn.Close()
		return &configError{Var: "BALLET_ADMIN_ADDR", Value: a.cfg.adminAddr, Msg: "cannot listen: " + err.Error()}
	}
	errLog := slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn)
	// Every socket of the client port counts against BALLET_MAX_CONNECTIONS and has a
	// deadline in every state (the gateway's HTTPServer and Listener).
	client := srv.HTTPServer(mux, errLog)
	adminSrv := &http.Server{Handler: srv.AdminHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: errLog}
	serveErr := make(chan error, 2)
	go func() { serveErr <- client.Serve(srv.Listener(clientLn)) }()
	go func() { serveErr <- adminSrv.Serve(adminLn) }()
	a.logger.Info("listening", "addr", clientLn.Addr().String(), "admin_addr", adminLn.Addr().String(), "replica", a.replica)
	if a.started != nil {
		a.started()
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	}
	// Drain: /readyz turns unready, the client port stops accepting, then
	// open sessions are closed with 1001 spread over the drain window.
	a.logger.Info("shutting down", "drain_window", gw.DrainWindow.String(), "sessions", srv.Sessions())
	srv.BeginDrain()
	stopCtx, cancel := context.WithTimeout(context.Background(), gw.DrainWindow+5*time.Second)
	defer cancel()
	if err := client.Shutdown(stopCtx); err != nil {
		a.logger.Warn("client port shutdown", "err", err)
	}
	if err := srv.Shutdown(stopCtx); err != nil {
		a.logger.Warn("sessions did not all end in time", "err", err)
	}
	_ = adminSrv.Shutdown(stopCtx)
	a.logger.Info("stopped")
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) {
		return runErr
	}
	return nil
}
