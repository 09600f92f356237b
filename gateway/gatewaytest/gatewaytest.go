// Package gatewaytest starts a complete gateway for tests: a real OIDC
// issuer over HTTP, and a replica built as the server builds it (internal/server:
// the event log in memory, or Postgres in a throwaway database, the tailer and
// hub, the tracker, the planner, the operators' API) served on a loopback port.
// Two gateways started on one database (Options.Database) are two replicas.
package gatewaytest

import (
	"context"
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
	"github.com/ballet/gateway/internal/server"
	"github.com/ballet/gateway/internal/tracing"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/presence/pgpresence"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/migrations"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/streams/pgtest"
	"github.com/ballet/gateway/tracker"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
)

// Audience is the audience of the test issuer's tokens.
const Audience = "ballet-test"

// Store is the event log and project store a test gateway runs on.
type Store = server.Store

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
	// Tracker mounts the replica's REST API at /api/v1/ (unless API is set): the
	// tracker's, the operators' and, with Planner, the planner's sessions.
	Tracker bool
	// AdminSubjects may create projects through the tracker, and call the operators' API.
	AdminSubjects []string
	// TrackerOptions adjust the tracker (AdminSubjects are added to theirs).
	TrackerOptions tracker.Options
	// Planner runs the planner (implies Tracker) with this provider; its
	// sessions REST API is mounted next to the tracker's.
	Planner provider.Provider
	// PlannerOptions adjust the planner (Provider is set here; its logger, observer, replica
	// id and bus as in the server).
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
	// Tracker is the tracker service, on the same store.
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
	api     *swapHandler
}

// Start runs a gateway until the test ends: the replica's graph as the server builds it
// (internal/server), served on a loopback port.
func Start(t testing.TB, o *Options) *Env {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	env := &Env{Issuer: o.Issuer, api: &swapHandler{}}
	if env.Issuer == nil {
		env.Issuer = authtest.NewIssuer(t)
	}
	so := serverOptions(o, env)
	if o.Postgres || o.Standby {
		so.Postgres = env.database(t, o)
	}
	s, err := server.New(context.Background(), so)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	t.Cleanup(s.Close)
	// The issuer is up: its discovery, in the background as in the server, takes a moment.
	for deadline := time.Now().Add(10 * time.Second); s.IssuerReady() != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gatewaytest: %v", s.IssuerReady())
		}
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	env.Server, env.Hub, env.Tailer, env.Store, env.PGLog = s.Gateway, s.Hub, s.Tailer, s.Log, s.PGLog
	env.Presence, env.Tracker, env.Planner, env.Revocations, env.Replica = s.Presence, s.Tracker, s.Planner, s.Revocations, s.Replica
	if o.Standby {
		env.Store = replayedStore{s.PGLog}
	}
	if o.Tracker {
		env.API = s.API
		env.api.set(s.API)
	}
	if o.API != nil {
		env.api.set(o.API)
	}
	// Served as the server serves its client port: its sockets counted, their deadlines.
	env.HTTP = httptest.NewUnstartedServer(nil)
	env.HTTP.Config = s.Gateway.HTTPServer(s.Handler(), nil)
	env.HTTP.Listener = s.Gateway.Listener(env.HTTP.Listener)
	env.HTTP.Start()
	env.BaseURL = env.HTTP.URL
	env.URL = "ws" + strings.TrimPrefix(env.HTTP.URL, "http") + "/rpc"
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Gateway.Shutdown(sctx)
		env.HTTP.Close()
	})
	return env
}

// serverOptions are the replica's options for o, in memory; the REST API is env's to swap.
func serverOptions(o *Options, env *Env) *server.Options {
	if o.Planner != nil {
		o.Tracker = true
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
	trackerOpts := o.TrackerOptions
	trackerOpts.AdminSubjects = slices.Concat(o.AdminSubjects, trackerOpts.AdminSubjects)
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	so := &server.Options{
		Logger: logger, Metrics: o.Metrics, Config: cfg, Tracker: trackerOpts, RESTListings: o.RESTListings,
		Hub: streams.HubOptions{RecentBytes: o.RecentBytes, CatchUpLimit: o.CatchUpLimit},
		Issuer: server.Issuer{URL: env.Issuer.URL(), Audience: Audience,
			Options: &auth.VerifierOptions{KeyRefreshInterval: o.KeyRefreshInterval}},
		TracerProvider: o.TracerProvider,
		// Tests mount handlers of their own through SetAPI; without Tracker, none until then.
		API: func(*httpapi.Router) http.Handler { return env.api },
		AdjustGateway: func(g *gateway.Options) {
			g.RESTTimeout, g.WebSockets = o.RESTTimeout, o.WebSockets
			if o.Roles != nil {
				g.Roles = o.Roles(g.Roles)
			}
		},
	}
	if o.RESTRate > 0 {
		so.REST = &httpapi.RateOptions{Rate: o.RESTRate}
	}
	if o.Planner != nil {
		po := o.PlannerOptions
		po.Provider = o.Planner
		so.Planner = &po
	}
	return so
}

// database is the Postgres database of o, a throwaway one unless o names one, migrated.
func (env *Env) database(t testing.TB, o *Options) *server.Postgres {
	ctx := context.Background()
	pg := &server.Postgres{PollInterval: 200 * time.Millisecond}
	if o.Standby {
		if o.StandbyPair != nil {
			env.StandbyDB = pgtest.StandbyOn(t, o.StandbyPair)
		} else {
			env.StandbyDB = pgtest.Standby(t)
		}
		env.DatabaseURL, pg.Pool = env.StandbyDB.PrimaryURL, env.StandbyDB.Pool
		pg.Tail = env.StandbyDB.StandbyPoolWith(t, o.TailConfig)
		env.Pool = pg.Pool
		return pg
	}
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
	if pg.Pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Pool.Close)
	if _, err := migrations.Apply(ctx, pg.Pool); err != nil {
		t.Fatal(err)
	}
	env.Pool = pg.Pool
	return pg
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
