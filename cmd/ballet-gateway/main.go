// Command ballet-gateway is Ballet Core's realtime gateway: JSON-RPC 2.0 over
// WebSocket on /rpc, change streams from the Postgres event log, and the
// planner.
//
// Usage:
//
//	ballet-gateway serve [--migrate]   production server (configuration from BALLET_* variables)
//	ballet-gateway dev                 development server: in-memory store, built-in OIDC issuer
//	ballet-gateway migrate             apply the database migrations
//	ballet-gateway admin project-create KEY NAME
//	ballet-gateway admin grant KEY SUBJECT ROLE
//	ballet-gateway admin revoke KEY SUBJECT
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage:
  ballet-gateway serve [--migrate]   production server (configuration from BALLET_* variables)
  ballet-gateway dev                 development server: in-memory store, built-in OIDC issuer
  ballet-gateway migrate             apply the database migrations (needs BALLET_DATABASE_URL)
  ballet-gateway admin project-create KEY NAME
  ballet-gateway admin grant KEY SUBJECT ROLE      (roles: viewer, member, admin)
  ballet-gateway admin revoke KEY SUBJECT
`

// errUsage marks a command line that does not parse.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv)
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		fmt.Fprintf(os.Stderr, "ballet-gateway: %v\n\n%s", err, usage)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "ballet-gateway: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command given", errUsage)
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], getenv)
	case "dev":
		return dev(ctx, args[1:], getenv)
	case "migrate":
		return migrate(ctx, args[1:], getenv)
	case "admin":
		return admin(ctx, args[1:], getenv)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}
