package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/internal/tailmetrics"
	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/planner"
	plannermem "github.com/ballet/gateway/planner/memstore"
	plannerpg "github.com/ballet/gateway/planner/pgstore"
	"github.com/ballet/gateway/presence/pgpresence"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/memlog"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/tracker"
	"github.com/ballet/gateway/tracker/memstore"
	"github.com/ballet/gateway/tracker/pgstore"
)

// DefaultTailMaxLag is Options.TailMaxLag's default.
const DefaultTailMaxLag = 5 * time.Second

// How long the server waits on the database and the issuer for its own calls.
const (
	// loadControlsTimeout bounds reading every sign-out and block at Start, once, before the
	// first connection: a whole table, on a database that may itself be starting.
	loadControlsTimeout = 30 * time.Second
	// discoverTimeout bounds the discovery of an issuer on the client port: two HTTP round
	// trips to this process (the discovery document, then the keys).
	discoverTimeout = 10 * time.Second
	// headTimeout bounds the read of the log's head at scrape time: one indexed query, well
	// within a scrape's own timeout, so that a slow database fails the gauge (-1), not the
	// scrape.
	headTimeout = 2 * time.Second
)

// Store is what the gateway needs of the event log and project store.
type Store interface {
	streams.Log
	streams.ProjectStore
	streams.Appender
	streams.SubjectStore
}

// Options configure New. Zero fields keep each package's defaults.
type Options struct {
	// Replica names this process among the replicas: in presence_replicas, connection
	// listings, the planner's leases and the logs. With Postgres, empty lets presence choose
	// one; in memory, empty is "local".
	Replica string
	// Logger receives the replica's logs. Default slog.Default().
	Logger *slog.Logger
	// Postgres, when set, is the database the replica runs on, shared with the other
	// replicas; nil runs a lone replica in memory.
	Postgres *Postgres
	// Issuer is the OIDC issuer whose access tokens the replica accepts.
	Issuer Issuer

	Config   gateway.Config        // the gateway's settings
	Hub      streams.HubOptions    // the hub's settings; its callbacks are set here
	Tailer   streams.TailerOptions // the tailer's settings; its logger is Logger
	Tracker  tracker.Options       // AdminSubjects are the operators' administrators too
	Listings operator.ListOptions  // the operators' listings of connections
	// Planner, with its Provider, runs the planner; nil leaves it off. Its logger, observer,
	// replica id and (on Postgres) bus are set here.
	Planner *planner.Options
	// REST bounds each subject's REST requests, one budget for every surface; nil leaves them
	// unbounded.
	REST *httpapi.RateOptions
	// RESTListings bound the REST listings in flight and a page's bytes, for every surface.
	RESTListings httpapi.ListingOptions
	// TailMaxLag is the lag of the standby the log is read from beyond which /readyz fails
	// (BALLET_TAIL_MAX_LAG). Default DefaultTailMaxLag.
	TailMaxLag time.Duration
	// TracerProvider, when set, records the server's spans (tracing is on), and
	// AttributeValueLength bounds their attributes' values.
	TracerProvider       trace.TracerProvider
	AttributeValueLength int
	// Metrics are the replica's metrics. Default: a new set.
	Metrics *gateway.Metrics

	// Addr and AdminAddr are where Run listens: the client port, unless ClientListener is
	// set, and the admin port.
	Addr, AdminAddr string
	ClientListener  net.Listener
	// Board serves / on the client port (dev's project board), when set.
	Board http.Handler
	// Routes adds handlers to the client port (dev's issuer and token mint), when set.
	Routes func(mux *http.ServeMux)
	// Started, when set, is called once Run's ports accept connections and, for an issuer on
	// the client port, once its discovery succeeded.
	Started func()

	// AdjustGateway, when set, adjusts the gateway's options before the server is made: the
	// tests' WebSocket options, roles, clock or REST timeout.
	AdjustGateway func(o *gateway.Options)
	// API, when set, is what serves /api/v1/ in place of the replica's REST API, which it is
	// given: the tests mount handlers of their own.
	API func(rest *httpapi.Router) http.Handler
}

// Postgres is the database a replica runs on: the event log, presence, the tracker's and
// the planner's stores, and the operators' listings.
type Postgres struct {
	// Pool is on the primary; the caller opens it (its schema current) and closes it.
	Pool *pgxpool.Pool
	// Tail, when set, is a streaming hot standby the log is read from
	// (BALLET_TAIL_DATABASE_URL).
	Tail *pgxpool.Pool
	// PollInterval is the log's (pglog.Options); zero keeps its default.
	PollInterval time.Duration
}

// Issuer is the OIDC issuer of the tokens a replica accepts.
type Issuer struct {
	URL      string
	Audience string
	// Options adjust the verifier (its key refresh, HTTP client).
	Options *auth.VerifierOptions
	// OnClientPort says the issuer is served on the replica's own client port (dev's): its
	// discovery is made once Run listens, and tokens wait for it. Otherwise the discovery runs
	// in the background from New on, retried until it succeeds, and /readyz fails until then.
	OnClientPort bool
}

// Server is a replica's object graph.
type Server struct {
	// Gateway serves /rpc, the REST API and the admin port.
	Gateway *gateway.Server
	Hub     *streams.Hub
	Tailer  *streams.Tailer
	// Log is the event log and project store: Memory, or PGLog on Postgres.
	Log    Store
	Memory *memlog.Log
	PGLog  *pglog.Log
	// Presence shares presence with the other replicas on Postgres; nil in memory.
	Presence *pgpresence.Store
	Tracker  *tracker.Service
	// Planner is nil unless Options.Planner is set.
	Planner *planner.Service
	// API is the replica's REST API: the tracker's, the operators' and the planner's.
	API *httpapi.Router
	// Revocations are the operators' sign-outs and blocks, which every surface refuses:
	// loaded at Start and kept by the tailed log.
	Revocations *auth.Revocations
	// Replica is this replica's id (Options.Replica, or the one chosen for it).
	Replica string
	Metrics *gateway.Metrics
	// Tail are the tailer's metrics, registered on Metrics' registry.
	Tail *tailmetrics.Metrics

	o       *Options
	logger  *slog.Logger
	issuer  *issuer
	bus     *plannerpg.Bus
	lister  interface{ Close() error }
	started bool
}

// New builds the replica's graph. On an error what it built is closed.
func New(ctx context.Context, o *Options) (_ *Server, err error) {
	s := &Server{o: o, logger: o.Logger, Metrics: o.Metrics, Tail: tailmetrics.New(), Revocations: auth.NewRevocations()}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.Metrics == nil {
		s.Metrics = gateway.NewMetrics()
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.openStores(ctx); err != nil {
		return nil, err
	}
	if s.issuer, err = s.newIssuer(); err != nil {
		return nil, err
	}
	verifier := s.Revocations.Verifier(s.issuer.verifier)
	if err := s.openPlanner(ctx); err != nil {
		return nil, err
	}
	hubOpts := o.Hub
	// Called by the tailer alone, which starts after the server is made (Start).
	hubOpts.OnEvent = func(ev *streams.Event) {
		s.Tail.Delivered(ev)
		var closer operator.SubjectCloser
		if s.Gateway != nil {
			closer = s.Gateway
		}
		operator.ApplySubjectEvent(s.Revocations, func(action string) {
			s.Metrics.OperatorActions.WithLabelValues(action).Inc()
		}, closer, ev)
	}
	if s.Planner != nil {
		hubOpts.OnAccessLost = s.Planner.CloseWatches
	}
	s.Metrics.ObserveHub(&hubOpts)
	s.Hub = streams.NewHub(&hubOpts)
	if err := s.newGateway(verifier); err != nil {
		return nil, err
	}
	if err := s.mountAPI(ctx, verifier); err != nil {
		return nil, err
	}
	s.registerMetrics()
	return s, nil
}

// openStores opens the log, presence and the tracker on Postgres, or in memory.
func (s *Server) openStores(ctx context.Context) error {
	pg := s.o.Postgres
	if pg == nil {
		s.Memory = memlog.New()
		s.Log = s.Memory
		s.Replica = s.o.Replica
		if s.Replica == "" {
			s.Replica = "local"
		}
		s.Tracker = tracker.NewService(memstore.New(s.Memory), &s.o.Tracker)
		return nil
	}
	l, err := pglog.Open(ctx, pg.Pool, &pglog.Options{PollInterval: pg.PollInterval, Logger: s.logger, Tail: pg.Tail})
	if err != nil {
		if pg.Tail != nil {
			return fmt.Errorf("BALLET_TAIL_DATABASE_URL: %w", err)
		}
		return err
	}
	s.PGLog, s.Log = l, l
	// Closed after the server (Run returns once its sessions ended): this replica's members
	// leave for the other replicas at once.
	if s.Presence, err = pgpresence.Open(ctx, pg.Pool, &pgpresence.Options{Logger: s.logger, ID: s.o.Replica}); err != nil {
		return err
	}
	s.Replica = s.Presence.ID()
	if pg.Tail != nil {
		s.logger.Info("tailing a standby", "host", pg.Tail.Config().ConnConfig.Host, "max_lag", s.tailMaxLag().String())
	}
	s.Tracker = tracker.NewService(pgstore.New(pg.Pool), &s.o.Tracker)
	return nil
}

// openPlanner makes the planner, when Options.Planner says so, on the log's store.
func (s *Server) openPlanner(ctx context.Context) error {
	if s.o.Planner == nil {
		return nil
	}
	po := *s.o.Planner
	name := po.Provider.Name()
	po.Logger, po.Observer, po.ReplicaID = s.logger, s.Metrics.PlannerObserver(name), s.Replica
	s.logger.Info("planner enabled", "provider", name)
	var store planner.Store
	if pg := s.o.Postgres; pg != nil {
		bus, err := plannerpg.OpenBus(ctx, pg.Pool, &plannerpg.BusOptions{Logger: s.logger})
		if err != nil {
			return fmt.Errorf("planner bus: %w", err)
		}
		s.bus, po.Bus = bus, bus
		store = plannerpg.New(pg.Pool)
	} else {
		store = plannermem.New(s.Memory)
	}
	s.Planner = planner.New(store, s.Tracker, &po)
	return nil
}

// newGateway makes the gateway's server.
func (s *Server) newGateway(verifier gateway.TokenVerifier) error {
	o := &gateway.Options{
		Config: s.o.Config, Verifier: verifier, Log: s.Log, Hub: s.Hub, Roles: s.Log,
		Metrics: s.Metrics, Logger: s.logger, Root: s.o.Board, Revocations: s.Revocations,
		TracerProvider: s.o.TracerProvider, AttributeValueLength: s.o.AttributeValueLength, Ready: s.ready,
	}
	if s.Planner != nil {
		o.Planner = s.Planner
	}
	if s.Presence != nil {
		o.PresenceStore = s.Presence
	}
	if s.o.AdjustGateway != nil {
		s.o.AdjustGateway(o)
	}
	srv, err := gateway.NewServer(o)
	if err != nil {
		return err
	}
	s.Gateway = srv
	return nil
}

// ready checks the replica's dependencies for /readyz: the database, the issuer, the
// standby's lag.
func (s *Server) ready(ctx context.Context) error {
	if pg := s.o.Postgres; pg != nil {
		if err := pg.Pool.Ping(ctx); err != nil {
			return errors.New("database unreachable")
		}
	}
	if err := s.issuer.ready(); err != nil {
		return err
	}
	if s.PGLog != nil {
		return tailReady(s.PGLog.TailStatus(), s.tailMaxLag())
	}
	return nil
}

func (s *Server) tailMaxLag() time.Duration {
	if s.o.TailMaxLag > 0 {
		return s.o.TailMaxLag
	}
	return DefaultTailMaxLag
}

// tailReady fails once the standby the log reads is further behind than maxLag (while it does
// not answer, or does not stream, the time since it was last known caught up).
func tailReady(st pglog.TailStatus, maxLag time.Duration) error {
	if st.Lag <= maxLag {
		return nil
	}
	switch {
	case st.Err != nil:
		return fmt.Errorf("the standby (BALLET_TAIL_DATABASE_URL) has not answered for %s, more than BALLET_TAIL_MAX_LAG %s",
			st.Lag.Round(time.Millisecond), maxLag)
	case !st.Streaming:
		return fmt.Errorf("the standby (BALLET_TAIL_DATABASE_URL) has not streamed from the primary for %s, more than BALLET_TAIL_MAX_LAG %s",
			st.Lag.Round(time.Millisecond), maxLag)
	}
	return fmt.Errorf("the standby (BALLET_TAIL_DATABASE_URL) is %s behind, more than BALLET_TAIL_MAX_LAG %s",
		st.Lag.Round(time.Millisecond), maxLag)
}

// Start starts the tailer and loads the operators' sign-outs and blocks: call it once, before
// the first connection (Run does).
func (s *Server) Start(ctx context.Context) error {
	if s.started {
		return errors.New("server: started twice")
	}
	s.started = true
	tailerOpts := s.o.Tailer
	tailerOpts.Logger = s.logger
	s.Tailer = streams.NewTailer(s.Log, func(evs []streams.Event) {
		s.Hub.Dispatch(evs)
		s.Tail.Dispatched(evs)
	}, &tailerOpts)
	// The tailer outlives ctx: it keeps delivering while connections drain.
	if err := s.Tailer.Start(context.Background()); err != nil {
		return fmt.Errorf("start the log tailer: %w", err)
	}
	// Before the first connection: the tailer applies what changes from its start on.
	lctx, lcancel := context.WithTimeout(ctx, loadControlsTimeout)
	err := operator.LoadSubjectControls(lctx, s.Log, s.Revocations)
	lcancel()
	if err != nil {
		return err
	}
	s.Tail.Position.Set(float64(s.Tailer.Position()))
	s.logger.Info("queued bytes budget", "replica_queue_bytes", s.Gateway.QueuedBytesBudget())
	return nil
}

// Close closes the parts: the tailer, the hub, the listings, the planner, the verifier,
// presence and the log, in that order, after the server has shut down (Run). It does not close
// Options.Postgres's pools.
func (s *Server) Close() {
	if s.Tailer != nil {
		s.Tailer.Close()
	}
	if s.Hub != nil {
		s.Hub.Close()
	}
	if s.lister != nil {
		s.lister.Close()
	}
	if s.Planner != nil {
		s.Planner.Close()
	}
	if s.bus != nil {
		s.bus.Close()
	}
	if s.issuer != nil {
		s.issuer.close()
	}
	if s.Presence != nil {
		s.Presence.Close()
	}
	if s.PGLog != nil {
		s.PGLog.Close()
	}
	if s.Memory != nil {
		s.Memory.Close()
	}
}
