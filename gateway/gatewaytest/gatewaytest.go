// Package gatewaytest starts a complete gateway for tests: a real OIDC
// issuer over HTTP, the event log (in memory, or Postgres in a throwaway
// database), the tailer and hub, and the server on a loopback port. Two
// gateways started on one database (Options.Database) are two replicas.
package gatewaytest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/internal/wsnet"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/internal/pgstandby"
	"github.com/ballet/gateway/internal/tracing"
	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/operator/pglisting"
	"github.com/ballet/gateway/planner"
	plannermem "github.com/ballet/gateway/planner/memstore"
	plannerpg "github.com/ballet/gateway/planner/pgstore"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/presence"
	"github.com/ballet/gateway/presence/pgpresence"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/memlog"
	"github.com/ballet/gateway/streams/migrations"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/streams/pgtest"
	"github.com/ballet/gateway/tracker"
	"github.com/ballet/gateway/tracker/memstore"
	"github.com/ballet/gateway/tracker/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
)

// Audience is the audience of the test issuer's tokens.
const Audience = "ballet-test"

// Store is the event log and project store a test gateway runs on.
type Store interface {
	streams.Log
	streams.ProjectStore
	streams.Appender
	streams.SubjectStore
}

// Options configure Start. A nil *Options means memory store and defaults.
type Options struct {
	// Postgres runs the gateway on a throwaway Postgres database, with
	// presence shared through it (pgpresence).
	Postgres bool
	// Database, with Postgres, is the database to run on instead of a new
	// one: another Env's DatabaseURL, to run a second replica. Its issuer
	// is another Env's too (Issuer).
	Database string
	// Issuer signs the tokens; default a new one. Replicas share one.
	Issuer *auth.Issuer
	// Standby (implies Postgres) runs it on a database of a primary and a streaming hot
	// standby, reading the log from the standby: StandbyPair's (one of the test's own, for
	// tests that pause or stop the standby), else one shared by the test binary. Store's
	// Append returns once the standby has replayed the append; PGLog.Append does not wait.
	Standby     bool
	StandbyPair *pgstandby.Pair
	// TailConfig, when set, adjusts the configuration of the standby's pool (to put several
	// standbys behind it, say).
	TailConfig func(*pgxpool.Config)
	// Config is the server's; zero fields keep the defaults.
	Config gateway.Config
	// RecentBytes is the hub's (BALLET_RECENT_EVENTS_BYTES); zero keeps the default.
	RecentBytes int
	// CatchUpLimit is the hub's (BALLET_CATCH_UP_LIMIT); zero keeps the default.
	CatchUpLimit int
	// API is mounted at /api/v1/ when set; it may be set after Start
	// through Env.SetAPI.
	API http.Handler
	// Tracker runs the tracker on the same store: its REST API at /api/v1/
	// (unless API is set) and item checks for item:<KEY> subscriptions.
	Tracker bool
	// AdminSubjects may create projects through the tracker.
	AdminSubjects []string
	// TrackerOptions adjust the tracker (AdminSubjects are added to theirs).
	TrackerOptions tracker.Options
	// Planner runs the planner (implies Tracker) with this provider; its
	// sessions REST API is mounted next to the tracker's.
	Planner provider.Provider
	// PlannerOptions adjust the planner (Provider and Bus are set here).
	PlannerOptions planner.Options
	// Logger receives the server's logs. Default: discarded.
	Logger *slog.Logger
	// Metrics are the server's metrics. Default: a new set.
	Metrics *gateway.Metrics
	// RESTTimeout is the server's RESTTimeout.
	RESTTimeout time.Duration
	// RESTRate, when set, bounds each subject's REST requests (BALLET_REST_RATE), refusals
	// counted in Metrics; zero leaves REST unbounded.
	RESTRate int
	// RESTListings bound the REST listings in flight and a page's bytes, refusals and
	// listings counted in Metrics; zero fields keep the defaults.
	RESTListings httpapi.ListingOptions
	// WebSockets is the server's WebSockets.
	WebSockets *wsnet.Options
	// Listings bound the operators' listings of connections.
	Listings operator.ListOptions
	// Roles, when set, wraps the roles the server checks (the Store's), e.g. to change
	// them at a chosen point of a request.
	Roles func(gateway.Roles) gateway.Roles
	// TracerProvider is the server's, and traces the Postgres pool's queries (Postgres).
	TracerProvider trace.TracerProvider
	// KeyRefreshInterval is the verifier's (auth.VerifierOptions): a token of a key the
	// issuer's set lacks waits for it to end. Zero keeps the default, 10 s.
	KeyRefreshInterval time.Duration
}

// Env is a running gateway.
type Env struct {
	Server  *gateway.Server
	Hub     *streams.Hub
	Store   Store
	Tailer  *streams.Tailer
	Issuer  *auth.Issuer
	HTTP    *httptest.Server
	URL     string // ws://127.0.0.1:port/rpc
	BaseURL string // http://127.0.0.1:port
	// PGLog is the Postgres log when Options.Postgres is set.
	PGLog *pglog.Log
	// DatabaseURL is the throwaway database when Options.Postgres is set.
	DatabaseURL string
	// Pool is the database pool when Options.Postgres is set (on the primary).
	Pool *pgxpool.Pool
	// Presence is the replica's presence store when Options.Postgres is set.
	Presence *pgpresence.Store
	// StandbyDB is the primary and standby when Options.Standby is set.
	StandbyDB *pgtest.StandbyDB
	// Tracker is the tracker service when Options.Tracker is set.
	Tracker *tracker.Service
	// Planner is the planner service when Options.Planner is set.
	Planner *planner.Service
	// API is the REST API that Start mounted at /api/v1/ when Options.Tracker is set: the
	// tracker's Router and the operators' (AdminSubjects are their administrators), joined
	// with the planner's when Options.Planner is set.
	API *httpapi.Router
	// Revocations are the operators' sign-outs and blocks, which every surface refuses: loaded
	// at Start and kept by the tailed log, as in the server.
	Revocations *auth.Revocations
	// Replica is the replica's id in operators' listings: its presence's with Postgres.
	Replica string
	// Listings lists the connections of the replicas: through the database with Postgres.
	Listings operator.Lister
	api      *swapHandler
}

// Start runs a gateway until the test ends.
func Start(t testing.TB, o *Options) *Env {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	if o.Planner != nil {
		o.Tracker = true
	}
	env := &Env{Issuer: o.Issuer, api: &swapHandler{}}
	trackerOpts := o.TrackerOptions
	trackerOpts.AdminSubjects = slices.Concat(o.AdminSubjects, trackerOpts.AdminSubjects)
	if env.Issuer == nil {
		env.Issuer = authtest.NewIssuer(t)
	}
	ctx := context.Background()
	if o.Postgres || o.Standby {
		var pool *pgxpool.Pool
		lo := &pglog.Options{PollInterval: 200 * time.Millisecond}
		if o.Standby {
			if o.StandbyPair != nil {
				env.StandbyDB = pgtest.StandbyOn(t, o.StandbyPair)
			} else {
				env.StandbyDB = pgtest.Standby(t)
			}
			env.DatabaseURL, pool = env.StandbyDB.PrimaryURL, env.StandbyDB.Pool
			lo.Tail = env.StandbyDB.StandbyPoolWith(t, o.TailConfig)
		} else {
			env.DatabaseURL = o.Database
			if env.DatabaseURL == "" {
				env.DatabaseURL = pgtest.URL(t)
			}
			pc, err := pgxpool.ParseConfig(env.DatabaseURL)
			if err != nil {
				t.Fatal(err)
			}
			if o.TracerProvider != nil {
				pc.ConnConfig.Tracer = tracing.NewQueryTracer(o.TracerProvider)
			}
			if pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			if _, err := migrations.Apply(ctx, pool); err != nil {
				t.Fatal(err)
			}
		}
		l, err := pglog.Open(ctx, pool, lo)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		env.Store, env.PGLog, env.Pool = l, l, pool
		ps, err := pgpresence.Open(ctx, pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ps.Close() })
		env.Presence = ps
		if o.Standby {
			env.Store = replayedStore{l}
		}
		if o.Tracker {
			env.Tracker = tracker.NewService(pgstore.New(pool), &trackerOpts)
		}
	} else {
		l := memlog.New()
		t.Cleanup(func() { l.Close() })
		env.Store = l
		if o.Tracker {
			env.Tracker = tracker.NewService(memstore.New(l), &trackerOpts)
		}
	}
	cfg := o.Config
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = time.Minute
	}
	if cfg.DrainWindow == 0 {
		// Shutdown spreads its closes over the drain window: a test's clients that are still
		// open at its end would otherwise hold every test up by seconds.
		cfg.DrainWindow = 10 * time.Millisecond
	}
	if cfg.MaxConnectionsPerIP == 0 {
		// Every test client comes from one address and many connect at once.
		cfg.MaxConnectionsPerIP = 1 << 20
	}
	if cfg.AddrRate == 0 {
		// The same: and tests of refusals fail many auths from it.
		cfg.AddrRate = 1 << 20
	}
	env.Revocations = auth.NewRevocations()
	keys, err := auth.NewVerifier(context.Background(), env.Issuer.URL(), Audience,
		&auth.VerifierOptions{KeyRefreshInterval: o.KeyRefreshInterval})
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	verifier := env.Revocations.Verifier(keys)
	quiet := o.Logger
	if quiet == nil {
		quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	metrics := o.Metrics
	if metrics == nil {
		metrics = gateway.NewMetrics()
	}
	lo := o.RESTListings
	lo.OnRefused, lo.OnInFlight = metrics.RESTListingRejected, metrics.RESTListingsInFlight
	restOpts := &httpapi.HandlerOptions{Logger: quiet, Listings: httpapi.NewListings(&lo)}
	if o.RESTRate > 0 {
		restOpts.Rate = httpapi.NewSubjectRate(&httpapi.RateOptions{Rate: o.RESTRate, OnRefused: metrics.RESTRejected})
	}
	var plan gateway.Planner
	server := &gateway.ServerRef{}
	env.Listings = listings(t, env, server, o.Listings, metrics, quiet)
	if env.Tracker != nil {
		api := httpapi.Join(tracker.NewHandler(env.Tracker, verifier, restOpts),
			operator.NewHandler(env.Store, verifier, operator.Options{
				Revocations: env.Revocations, Admins: o.AdminSubjects, Connections: env.Listings,
			}, restOpts))
		if o.Planner != nil {
			po := o.PlannerOptions
			po.Provider = o.Planner
			po.Logger = quiet
			var store planner.Store
			if env.Pool != nil {
				bus, err := plannerpg.OpenBus(ctx, env.Pool, &plannerpg.BusOptions{Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { bus.Close() })
				po.Bus = bus
				store = plannerpg.New(env.Pool)
			} else {
				store = plannermem.New(env.Store.(*memlog.Log))
			}
			env.Planner = planner.New(store, env.Tracker, &po)
			t.Cleanup(func() { env.Planner.Close() })
			plan = env.Planner
			api = httpapi.Join(api, planner.NewHandler(env.Planner, verifier, restOpts))
		}
		env.API = api
		env.api.set(api)
	}
	if o.API != nil {
		env.api.set(o.API)
	}
	// As in the server: a loss of access the log records ends planner watches too.
	hubOpts := streams.HubOptions{RecentBytes: o.RecentBytes, CatchUpLimit: o.CatchUpLimit}
	if env.Planner != nil {
		hubOpts.OnAccessLost = env.Planner.CloseWatches
	}
	hubOpts.OnEvent = func(ev *streams.Event) {
		gateway.ApplySubjectEvent(env.Revocations, metrics, server.Load(), ev)
	}
	metrics.ObserveHub(&hubOpts)
	env.Hub = streams.NewHub(&hubOpts)
	t.Cleanup(env.Hub.Close)
	env.Tailer = streams.NewTailer(env.Store, env.Hub.Dispatch, nil)
	if err := env.Tailer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Tailer.Close() })
	if err := gateway.LoadSubjectControls(ctx, env.Store, env.Revocations); err != nil {
		t.Fatal(err)
	}
	var roles gateway.Roles = env.Store
	if o.Roles != nil {
		roles = o.Roles(roles)
	}
	srv, err := gateway.NewServer(&gateway.Options{
		Config: cfg, Verifier: verifier, Log: env.Store, Hub: env.Hub, Roles: roles, API: env.api, Planner: plan,
		Logger: quiet, Metrics: metrics, RESTTimeout: o.RESTTimeout, PresenceStore: presenceStore(env.Presence), WebSockets: o.WebSockets,
		Revocations: env.Revocations, TracerProvider: o.TracerProvider,
	})
	if err != nil {
		t.Fatal(err)
	}
	env.Server = srv
	server.Store(srv)
	// Served as the server serves its client port: its sockets counted, their deadlines.
	env.HTTP = httptest.NewUnstartedServer(nil)
	env.HTTP.Config = srv.HTTPServer(srv.Handler(), nil)
	env.HTTP.Listener = srv.Listener(env.HTTP.Listener)
	env.HTTP.Start()
	env.BaseURL = env.HTTP.URL
	env.URL = "ws" + strings.TrimPrefix(env.HTTP.URL, "http") + "/rpc"
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		env.HTTP.Close()
	})
	return env
}

// listings is env's operator.Lister: the replicas on its database, or its own connections.
func listings(t testing.TB, env *Env, server *gateway.ServerRef, o operator.ListOptions, m *gateway.Metrics, logger *slog.Logger) operator.Lister {
	t.Helper()
	o.Observe = m.ListingObserver()
	if env.Presence == nil {
		env.Replica = "local"
		return operator.NewLocal(env.Replica, server, &o)
	}
	env.Replica = env.Presence.ID()
	l, err := pglisting.Open(context.Background(), env.Pool, &pglisting.Options{ListOptions: o, Replica: env.Replica, Source: server, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// presenceStore is ps as a presence.Store: nil (in-process presence) when ps is.
func presenceStore(ps *pgpresence.Store) presence.Store {
	if ps == nil {
		return nil
	}
	return ps
}

// replayedStore appends on the primary and returns once the standby the log reads has
// replayed the append, so that a test reads its own writes.
type replayedStore struct{ *pglog.Log }

func (s replayedStore) Append(ctx context.Context, evs ...streams.NewEvent) (int64, error) {
	last, err := s.Log.Append(ctx, evs...)
	for err == nil && last > 0 {
		var head int64
		if head, err = s.Head(ctx); err != nil || head >= last {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return last, err
}

// SetAPI mounts h at /api/v1/.
func (e *Env) SetAPI(h http.Handler) { e.api.set(h) }

// Token mints a token for subject with the test audience.
func (e *Env) Token(t testing.TB, subject string) string {
	t.Helper()
	return authtest.Mint(t, e.Issuer, subject, auth.TokenOptions{Audience: []string{Audience}})
}

// Project creates a project and grants roles, e.g. Project(t, "WEB", "alice", "admin", "bob", "viewer").
// On a standby it returns once the standby has replayed them, as Append does for events: a
// subscription made next must not get the project's own events live.
func (e *Env) Project(t testing.TB, key string, subjectRoles ...string) {
	t.Helper()
	ctx := context.Background()
	if err := e.Store.CreateProject(ctx, key, key+" project", "test"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(subjectRoles); i += 2 {
		if err := e.Store.Grant(ctx, key, subjectRoles[i], subjectRoles[i+1], "system", "test"); err != nil {
			t.Fatal(err)
		}
	}
	if e.StandbyDB != nil {
		// Written on the primary: a subscribe right after reads the standby's head, which must
		// be past these events, as a test that goes on expects.
		e.StandbyDB.WaitReplayed(t)
	}
}

type swapHandler struct {
	h atomicHandler
}

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	http.NotFound(w, r)
}
