package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/ballet/gateway/internal/server"
	"github.com/ballet/gateway/streams/migrations"
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
	o, err := cfg.serverOptions(logger)
	if err != nil {
		return err
	}
	o.Postgres = &server.Postgres{Pool: pool, Tail: tailPool}
	o.Issuer = server.Issuer{URL: cfg.oidcIssuer, Audience: cfg.oidcAudience}
	o.TracerProvider = tr.Provider()
	s, err := server.New(ctx, o)
	if err != nil {
		return err
	}
	return runServer(ctx, s)
}
