package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/streams/migrations"
)

// openPool connects to BALLET_DATABASE_URL.
func openPool(ctx context.Context, cfg *gateway.Config) (*pgxpool.Pool, error) {
	if cfg.DatabaseURL == "" {
		return nil, &gateway.ConfigError{Var: "BALLET_DATABASE_URL", Msg: "required: the Postgres connection string"}
	}
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, &gateway.ConfigError{Var: "BALLET_DATABASE_URL", Msg: "not a valid Postgres connection string: " + redact(err.Error(), cfg.DatabaseURL)}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %s", redact(err.Error(), cfg.DatabaseURL))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to Postgres at %s: %s", pc.ConnConfig.Host, redact(err.Error(), cfg.DatabaseURL))
	}
	return pool, nil
}

// poolFromEnv reads the configuration and connects to its database.
func poolFromEnv(ctx context.Context, getenv func(string) string) (*pgxpool.Pool, error) {
	cfg, err := gateway.LoadConfig(gateway.Defaults(), getenv)
	if err != nil {
		return nil, err
	}
	return openPool(ctx, &cfg)
}

// redact keeps a connection string's password out of messages.
func redact(msg, url string) string {
	if url != "" {
		msg = strings.ReplaceAll(msg, url, "BALLET_DATABASE_URL")
	}
	return msg
}

func migrate(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: migrate takes no arguments", errUsage)
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
