package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/operator/pglisting"
	"github.com/ballet/gateway/streams"
)

// adminConnections lists the connections of every live replica, of one subject when args
// name it: a table, or with --json the document GET /api/v1/admin/connections answers.
func adminConnections(ctx context.Context, args []string, getenv func(string) string) error {
	var subject string
	asJSON, n := false, 0
	for _, a := range args {
		switch {
		case a == "--json" || a == "-json":
			asJSON = true
		case strings.HasPrefix(a, "-"):
			return badUsage("admin connections", "admin connections: unknown flag %s", a)
		default:
			subject, n = a, n+1
		}
	}
	if n > 1 {
		return badUsage("admin connections", "admin connections takes at most one argument")
	}
	if n == 1 {
		if err := streams.CheckSubjectChange(streams.EventSubjectSignedOut, subject, adminActorKind, adminActorSubject); err != nil {
			return fmt.Errorf("connections: %w", err)
		}
	}
	pool, err := adminPool(ctx, getenv)
	if err != nil {
		return err
	}
	defer pool.Close()
	lister, err := pglisting.Open(ctx, pool, nil)
	if err != nil {
		return err
	}
	defer lister.Close()
	l, err := lister.List(ctx, subject, operator.DefaultListLimit)
	if err != nil {
		return err
	}
	return writeListing(os.Stdout, l, asJSON)
}

// writeListing writes l as a table, or as the REST API's JSON document.
func writeListing(w io.Writer, l *operator.Listing, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(l)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tANSWERED")
	for _, r := range l.Replicas {
		answered := "yes"
		if !r.Answered {
			answered = fmt.Sprintf("no: not within %s", operator.ListWait)
		}
		fmt.Fprintf(tw, "%s\t%s\n", r.Replica, answered)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "REPLICA\tCONNECTION\tSUBJECT\tCLIENT\tCODEC\tTRANSPORT\tCONNECTED\tREMOTE\tSUBSCRIPTIONS\tWATCHES\tEXPIRES")
	for _, c := range l.Connections {
		fmt.Fprintf(tw, "%s\t%s\t%q\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", c.Replica, c.ID, c.Subject, dash(c.ClientID), c.Codec, dash(c.Transport),
			c.ConnectedAt.Format(time.RFC3339), c.RemoteAddr, c.Subscriptions, c.Watches, c.ExpiresAt.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	more := ""
	if l.Truncated {
		more = fmt.Sprintf(" (truncated: there are more than these; GET /api/v1/admin/connections?limit= shows up to %d)",
			operator.MaxListLimit)
	}
	_, err := fmt.Fprintf(w, "\n%d connections%s\n", len(l.Connections), more)
	return err
}

// dash is s, or "-" when it is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
