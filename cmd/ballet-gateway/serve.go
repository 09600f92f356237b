package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/operator/pglisting"
	"github.com/ballet/gateway/planner"
	plannerpg "github.com/ballet/gateway/planner/pgstore"
	"github.com/ballet/gateway/presence/pgpresence"
	"github.com/ballet/gateway/streams/migrations"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/tracker"
	"github.com/ballet/gateway/tracker/pgstore"
)

// defaultGOGC is the Go collector's target when GOGC is not set. A
// gateway's heap is mostly long-lived connection state, which the default
// of 100 lets grow to twice its size between collections: at 75 an idle
// connection costs about 1.3 KB less RSS (docs/benchmarks.md) for
// collections a third more often.
const defaultGOGC = 75

// applyGCDefault sets defaultGOGC unless the environment sets GOGC (which
// the runtime has applied already).
func applyGCDefault(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGOGC)
	}
}

func serve(ctx context.Context, args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	doMigrate := fs.Bool("migrate", false, "apply the database migrations before serving")
	if err := fs.Parse(args); err != nil {
		return badUsage("serve", "serve: %v", err)
	}
	applyGCDefault(getenv)
	cfg, err := loadConfig(getenv, serveAddr)
	if err := cfg.requireServe(err); err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	warnIgnored(logger, cfg, getenv, forServe, "serve")
	if limit := applyMemoryLimit(getenv, cgroupMemoryFiles("/proc/self/cgroup")); limit > 0 {
		logger.Info("memory limit from the cgroup's", "go_memory_limit_bytes", limit)
	}
	tr, err := startTracing(cfg, logger)
	if err != nil {
		return err
	}
	defer stopTracing(tr, logger) // last: after the server's last spans
	pool, err := openPool(ctx, cfg.databaseURL, tr.Provider())
	if err != nil {
		return err
	}
	defer pool.Close()
	if *doMigrate {
		applied, err := migrations.Apply(ctx, pool)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		for _, v := range applied {
			logger.Info("applied migration", "version", v)
		}
	} else if err := migrations.Check(ctx, pool); err != nil {
		return err
	}
	tailPool, err := openTailPool(ctx, cfg.tailDatabaseURL, tr.Provider())
	if err != nil {
		return err
	}
	if tailPool != nil {
		defer tailPool.Close()
		if err := migrations.Check(ctx, tailPool); err != nil {
			return fmt.Errorf("BALLET_TAIL_DATABASE_URL: %w", err)
		}
	}
	log, err := pglog.Open(ctx, pool, &pglog.Options{Logger: logger, Tail: tailPool})
	if err != nil {
		if tailPool != nil {
			return fmt.Errorf("BALLET_TAIL_DATABASE_URL: %w", err)
		}
		return err
	}
	defer log.Close()
	// Closed after the server (run returns once its sessions ended): this replica's members
	// leave for the other replicas at once.
	presenceStore, err := pgpresence.Open(ctx, pool, &pgpresence.Options{Logger: logger, ID: cfg.replica})
	if err != nil {
		return err
	}
	defer presenceStore.Close()
	if tailPool != nil {
		logger.Info("tailing a standby", "host", tailPool.Config().ConnConfig.Host, "max_lag", cfg.tailMaxLag.String())
	}
	metrics := gateway.NewMetrics()
	// The issuer may be down: the replica starts, refuses tokens and fails /readyz until its
	// discovery document and keys are fetched.
	issuerVerifier, err := auth.StartVerifier(cfg.oidcIssuer, cfg.oidcAudience, nil, &auth.DiscoveryOptions{
		OnFailure: func(err error) {
			metrics.IssuerFailures.Inc()
			logger.Warn("OIDC issuer unreachable; tokens are refused until it answers", "issuer", cfg.oidcIssuer, "err", err)
		},
		OnLoaded: func() {
			metrics.IssuerLoaded.Set(1)
			logger.Info("OIDC issuer loaded", "issuer", cfg.oidcIssuer)
		},
	})
	if err != nil {
		return fmt.Errorf("BALLET_OIDC_ISSUER: %w", err)
	}
	defer issuerVerifier.Close()
	// Every surface refuses the tokens operators signed out or blocked.
	revs := auth.NewRevocations()
	verifier := revs.Verifier(issuerVerifier)
	svc := tracker.NewService(pgstore.New(pool), &cfg.tracker)
	plannerOpts, err := cfg.plannerOptions(logger, metrics)
	if err != nil {
		return err
	}
	restOpts := cfg.restOptions(logger, metrics)
	var plannerSvc *planner.Service
	var plannerAPI http.Handler
	if plannerOpts != nil {
		bus, err := plannerpg.OpenBus(ctx, pool, &plannerpg.BusOptions{Logger: logger})
		if err != nil {
			return fmt.Errorf("planner bus: %w", err)
		}
		defer bus.Close()
		plannerOpts.Bus = bus
		plannerSvc = planner.New(plannerpg.New(pool), svc, plannerOpts)
		defer plannerSvc.Close()
		plannerAPI = planner.NewHandler(plannerSvc, verifier, restOpts)
	}
	metrics.Registry.MustRegister(gateway.NewPoolCollector(pool))
	// Every replica answers operators' listings of connections through the database.
	server := &gateway.ServerRef{}
	listOpts := cfg.listings
	listOpts.Observe = metrics.ListingObserver()
	lister, err := pglisting.Open(ctx, pool, &pglisting.Options{
		ListOptions: listOpts, Replica: presenceStore.ID(), Source: server, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer lister.Close()
	a := &app{
		server: server, replica: cfg.replica,
		cfg: cfg, logger: logger, store: log, verifier: verifier, revs: revs, metrics: metrics, presence: presenceStore,
		api: apiMux(tracker.NewHandler(svc, verifier, restOpts),
			operator.NewHandler(log, verifier, operator.Options{Revocations: revs, Admins: cfg.tracker.AdminSubjects, Connections: lister}, restOpts), plannerAPI),
		ready: func(ctx context.Context) error {
			if err := pool.Ping(ctx); err != nil {
				return errors.New("database unreachable")
			}
			if err := issuerVerifier.Ready(); err != nil {
				return err
			}
			return tailReady(log.TailStatus(), cfg.tailMaxLag)
		},
		tailLag: func() time.Duration { return log.TailStatus().Lag },
		tracer:  tr.Provider(),
	}
	if plannerSvc != nil {
		a.planner, a.closeWatches = plannerSvc, plannerSvc.CloseWatches
	}
	return a.run(ctx)
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
