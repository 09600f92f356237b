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
//	ballet-gateway admin sign-out SUBJECT | block SUBJECT | unblock SUBJECT
//	ballet-gateway admin connections [SUBJECT] [--json]
//	ballet-gateway version
//
// Every command and subcommand takes --help: serve's and dev's list the settings they read,
// with their defaults.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ballet/gateway/internal/buildinfo"
)

// version is the build's version, set with go build -ldflags "-X main.version=v1.2.3"; when it
// is not set, version reports what the Go toolchain recorded.
var version string

// usageError is a command line that does not parse, with the command whose usage to show.
type usageError struct {
	command string // "" for the top level, "admin grant" for a subcommand
	msg     string
}

func (e *usageError) Error() string { return e.msg }

func badUsage(command, format string, a ...any) error {
	return &usageError{command, fmt.Sprintf(format, a...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv)
	var ue *usageError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "ballet-gateway: %v\n\n%s", err, shortUsage(ue.command))
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "ballet-gateway: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) == 0 {
		return badUsage("", "no command given")
	}
	switch args[0] {
	case "serve", "dev", "migrate", "admin", "version", "help":
		if command, ok := helpWanted(args); ok {
			help(os.Stdout, command)
			return nil
		}
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
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if command, ok := helpWanted(append(args[1:], "--help")); ok {
				help(os.Stdout, command)
				return nil
			}
			return badUsage("", "help: unknown command %q", args[1])
		}
		help(os.Stdout, "")
		return nil
	case "version", "-version", "--version":
		if len(args) > 1 {
			return badUsage("", "version takes no arguments")
		}
		fmt.Print(buildinfo.String("ballet-gateway", version))
		return nil
	}
	return badUsage("", "unknown command %q", args[0])
}

// helpWanted says whether the command line asks for help (-h or --help anywhere after the
// command, or admin's "help" subcommand), and for which command: "admin grant" names
// a subcommand, "admin" alone when the subcommand is missing or unknown.
func helpWanted(args []string) (command string, ok bool) {
	for _, a := range args[1:] {
		ok = ok || a == "-h" || a == "-help" || a == "--help"
	}
	command = args[0]
	if command == "admin" && len(args) > 1 {
		if args[1] == "help" {
			return command, true
		}
		if _, known := commandUsage["admin "+args[1]]; known {
			command += " " + args[1]
		}
	}
	if _, known := commandUsage[command]; !known {
		return "", false
	}
	return command, ok
}
