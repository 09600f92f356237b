package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/internal/tracing"
	"github.com/ballet/gateway/streams/migrations"
)

// openPool connects to url, BALLET_DATABASE_URL; with tp, the queries run under a span are
// traced.
func openPool(ctx context.Context, url string, tp trace.TracerProvider) (*pgxpool.Pool, error) {
	if url == "" {
		return nil, &configError{Var: "BALLET_DATABASE_URL", Msg: "required: the Postgres connection string"}
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &configError{Var: "BALLET_DATABASE_URL", Msg: "not a valid Postgres connection string: " + redact(err.Error(), url)}
	}
	traceQueries(pc, tp)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %s", redact(err.Error(), url))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to Postgres at %s: %s", pc.ConnConfig.Host, redact(err.Error(), url))
	}
	return pool, nil
}

// openTailPool connects to u, BALLET_TAIL_DATABASE_URL, the standby the log is read from; nil
// when it is not set.
func openTailPool(ctx context.Context, u string, tp trace.TracerProvider) (*pgxpool.Pool, error) {
	const name = "BALLET_TAIL_DATABASE_URL"
	if u == "" {
		return nil, nil
	}
	pc, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, &configError{Var: name, Msg: "not a valid Postgres connection string: " + redactAs(err.Error(), u, name)}
	}
	traceQueries(pc, tp)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("%s: connect to the standby: %s", name, redactAs(err.Error(), u, name))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: connect to the standby at %s: %s", name, pc.ConnConfig.Host, redactAs(err.Error(), u, name))
	}
	return pool, nil
}

// poolFromEnv reads the configuration and connects to its database.
func poolFromEnv(ctx context.Context, getenv func(string) string) (*pgxpool.Pool, error) {
	cfg, err := loadConfig(getenv, serveAddr)
	if cfg.databaseURL == "" {
		// Named with the settings' other errors, not after them.
		err = multiError(append(settingErrors(err), &configError{Var: "BALLET_DATABASE_URL", Msg: "required: the Postgres connection string"}))
	}
	if err != nil {
		return nil, err
	}
	return openPool(ctx, cfg.databaseURL, nil)
}

// traceQueries makes pc's connections record the queries run under a span, when tp is set.
func traceQueries(pc *pgxpool.Config, tp trace.TracerProvider) {
	if tp != nil {
		pc.ConnConfig.Tracer = tracing.NewQueryTracer(tp)
	}
}

// adminPool is poolFromEnv's pool, once its schema is known to be current: the admin
// commands'.
func adminPool(ctx context.Context, getenv func(string) string) (*pgxpool.Pool, error) {
	pool, err := poolFromEnv(ctx, getenv)
	if err != nil {
		return nil, err
	}
	if err := migrations.Check(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// redact keeps a connection string's password out of messages.
func redact(msg, url string) string { return redactAs(msg, url, "BALLET_DATABASE_URL") }

// redactAs replaces the connection string url in msg by the name of its variable.
func redactAs(msg, url, name string) string {
	if url != "" {
		msg = strings.ReplaceAll(msg, url, name)
	}
	return msg
}

func migrate(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) > 0 {
		return badUsage("migrate", "migrate takes no arguments")
	}
	pool, err := poolFromEnv(ctx, getenv)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := migrations.Apply(ctx, pool)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if len(applied) == 0 {
		fmt.Printf("schema is up to date (%s)\n", migrations.Latest())
		return nil
	}
	for _, v := range applied {
		fmt.Printf("applied %s\n", v)
	}
	return nil
}
