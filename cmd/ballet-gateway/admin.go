package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/pglog"
)

// The actor recorded for every change made from the command line.
const (
	adminActorKind    = streams.ActorSystem
	adminActorSubject = "ballet-gateway admin"
)

func admin(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) == 0 {
		return badUsage("admin", "admin needs a subcommand")
	}
	if args[0] == "connections" {
		return adminConnections(ctx, args[1:], getenv)
	}
	want := map[string]int{"project-create": 2, "grant": 3, "revoke": 2, "sign-out": 1, "block": 1, "unblock": 1}
	n, ok := want[args[0]]
	if !ok {
		return badUsage("admin", "unknown admin subcommand %q", args[0])
	}
	if len(args)-1 != n {
		plural := "s"
		if n == 1 {
			plural = ""
		}
		return badUsage("admin "+args[0], "admin %s takes %d argument%s", args[0], n, plural)
	}
	if args[0] == "grant" {
		if _, err := auth.ParseRole(args[3]); err != nil {
			return badUsage("admin grant", "role %q: want viewer, member or admin", args[3])
		}
	}
	pool, err := adminPool(ctx, getenv)
	if err != nil {
		return err
	}
	defer pool.Close()
	log, err := pglog.Open(ctx, pool, nil)
	if err != nil {
		return err
	}
	defer log.Close()
	switch args[0] {
	case "project-create":
		err = log.CreateProjectAs(ctx, args[1], args[2], adminActorKind, adminActorSubject)
	case "grant":
		err = log.Grant(ctx, args[1], args[2], args[3], adminActorKind, adminActorSubject)
	case "revoke":
		err = log.Revoke(ctx, args[1], args[2], adminActorKind, adminActorSubject)
	case "sign-out":
		_, err = log.ChangeSubject(ctx, streams.EventSubjectSignedOut, args[1], adminActorKind, adminActorSubject)
	case "block", "unblock":
		_, err = log.ChangeSubject(ctx, streams.BlockEventType(args[0] == "block"), args[1], adminActorKind, adminActorSubject)
	}
	switch {
	case errors.Is(err, streams.ErrExists):
		return fmt.Errorf("project %s already exists", args[1])
	case errors.Is(err, streams.ErrNotFound) && args[0] == "revoke":
		return fmt.Errorf("%s is not a member of project %s", args[2], args[1])
	case errors.Is(err, streams.ErrNotFound):
		return fmt.Errorf("project %s not found", args[1])
	case errors.Is(err, streams.ErrInvalid):
		return fmt.Errorf("%s: %w", args[0], err)
	case err != nil:
		return err
	}
	fmt.Println("ok")
	return nil
}
