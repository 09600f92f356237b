package main

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/presence"
)

const usage = `usage:
  ballet-gateway serve [--migrate]   production server (configuration from BALLET_* variables)
  ballet-gateway dev                 development server: in-memory store, built-in OIDC issuer
  ballet-gateway migrate             apply the database migrations (needs BALLET_DATABASE_URL)
  ballet-gateway admin project-create KEY NAME
  ballet-gateway admin grant KEY SUBJECT ROLE      (roles: viewer, member, admin)
  ballet-gateway admin revoke KEY SUBJECT
  ballet-gateway admin sign-out SUBJECT | block SUBJECT | unblock SUBJECT
  ballet-gateway admin connections [SUBJECT] [--json]
  ballet-gateway version             the version of this build

Run 'ballet-gateway COMMAND --help' for a command's settings and their defaults.
Exit status: 0 success, 1 failure (the message says what), 2 bad command line.
`

// commandUsage is the --help text of each command, without its settings.
var commandUsage = map[string]string{
	"serve": `usage: ballet-gateway serve [--migrate]

The production server: the event log in Postgres, tokens from an OIDC issuer.

flags:
  --migrate   apply the database migrations before serving (without it, serve refuses an
              outdated schema)
`,
	"dev": `usage: ballet-gateway dev

The development server: an in-memory store (lost on exit), a built-in OIDC issuer that mints
tokens for anyone who asks (GET /dev/token), and a demo project. Not for production: it listens
on loopback only unless BALLET_DEV_ALLOW_REMOTE=true.
`,
	"migrate": `usage: ballet-gateway migrate

Applies the embedded database migrations. Safe when several replicas run it at once.
`,
	"admin": `usage:
  ballet-gateway admin project-create KEY NAME   create a project
  ballet-gateway admin grant KEY SUBJECT ROLE    make SUBJECT a viewer, member or admin of KEY
  ballet-gateway admin revoke KEY SUBJECT        remove SUBJECT from KEY
  ballet-gateway admin sign-out SUBJECT          refuse SUBJECT's tokens issued until now
  ballet-gateway admin block SUBJECT             refuse all of SUBJECT's tokens
  ballet-gateway admin unblock SUBJECT           accept SUBJECT's tokens again
  ballet-gateway admin connections [SUBJECT]     list the connections of every live replica
`,
	"admin project-create": `usage: ballet-gateway admin project-create KEY NAME

Creates project KEY (an upper-case letter, then up to 19 upper-case letters or digits) named NAME.
`,
	"admin grant": `usage: ballet-gateway admin grant KEY SUBJECT ROLE

Gives SUBJECT the role ROLE in project KEY: viewer (reads), member (reads and writes) or admin
(also manages the project).
`,
	"admin revoke": `usage: ballet-gateway admin revoke KEY SUBJECT

Removes SUBJECT from project KEY; their open subscriptions on it close on every replica.
`,
	"admin sign-out": `usage: ballet-gateway admin sign-out SUBJECT

Signs SUBJECT out everywhere: its tokens issued at or before this second are refused, and its
connections close with 4001 on every replica. Tokens issued later work.
`,
	"admin block": `usage: ballet-gateway admin block SUBJECT

Blocks SUBJECT: every token of it is refused, and its connections close with 4001 on every
replica, until admin unblock.
`,
	"admin connections": fmt.Sprintf(`usage: ballet-gateway admin connections [SUBJECT] [--json]

Lists the connections of every live replica (of SUBJECT only, when given), at most %d: each
replica answers through the database within %s, or is listed as not answering. A table, or
with --json the document GET /api/v1/admin/connections answers.
`, operator.DefaultListLimit, operator.ListWait),
	"version": `usage: ballet-gateway version

Prints the version of this build and the Go toolchain that made it.
`,
	"help": `usage: ballet-gateway help [COMMAND [SUBCOMMAND]]

Prints the commands, or a command's usage and settings (as COMMAND --help does).
`,
	"admin unblock": `usage: ballet-gateway admin unblock SUBJECT

Ends a block of SUBJECT: its tokens are accepted again, except those a sign-out refuses.
`,
}

// readers are the commands whose --help lists settings, with the set each reads and the
// configuration it starts from.
var readers = map[string]struct {
	cmds commands
	load func(getenv func(string) string) (*config, error)
}{
	"serve":   {forServe, serveConfig},
	"dev":     {forDev, devConfig},
	"migrate": {forDatabase, serveConfig},
	"admin":   {forDatabase, serveConfig},
}

func serveConfig(getenv func(string) string) (*config, error) { return loadConfig(getenv, serveAddr) }

// shortUsage is the usage of command ("admin grant" for a subcommand, "" for the top level)
// without the settings it reads.
func shortUsage(command string) string {
	if text, ok := commandUsage[command]; ok {
		return text + "\nRun 'ballet-gateway " + command + " --help' for its settings.\n"
	}
	return usage
}

// help writes the --help text of command ("admin grant" for a subcommand).
func help(w io.Writer, command string) {
	text, ok := commandUsage[command]
	if !ok {
		fmt.Fprint(w, usage)
		return
	}
	fmt.Fprint(w, text)
	name, _, _ := strings.Cut(command, " ")
	if r, ok := readers[name]; ok {
		fmt.Fprintln(w, "\nsettings (environment variables), with their defaults:")
		writeSettings(w, r.cmds, r.load)
		if r.cmds&(forServe|forDev) != 0 {
			var ignored []string
			for _, s := range (&config{}).settings() {
				if s.cmds&r.cmds == 0 && s.cmds&(forServe|forDev) != 0 {
					ignored = append(ignored, s.name)
				}
			}
			fmt.Fprintf(w, "\n%s ignores these, with a warning when one is set:\n  %s\n", name, strings.Join(ignored, "\n  "))
		}
	}
}

// writeSettings lists the settings cmds read, each with its default: the value load gives it
// from an empty environment once the packages have filled in theirs.
func writeSettings(w io.Writer, cmds commands, load func(func(string) string) (*config, error)) {
	c, _ := load(func(string) string { return "" })
	c.applyDefaults()
	for _, s := range c.settings() {
		if s.cmds&cmds == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s\n      %s\n", describeDefault(s), s.doc)
	}
}

// describeDefault is NAME=default, or NAME (what its absence means).
func describeDefault(s setting) string {
	if s.shown != "" {
		return fmt.Sprintf("%s (default: %s)", s.name, s.shown)
	}
	if v := formatValue(s.field); v != "" {
		return s.name + "=" + v
	}
	return fmt.Sprintf("%s (%s)", s.name, cmp.Or(s.unset, "none"))
}

// formatValue writes the value field points to as the setting's syntax would give it.
func formatValue(field any) string {
	switch v := reflect.ValueOf(field).Elem().Interface().(type) {
	case time.Duration:
		s := v.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	case slog.Level:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case string:
		return v
	}
	rv := reflect.ValueOf(field).Elem()
	if rv.Kind() == reflect.Slice {
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(rv.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(rv.Interface())
}

// applyDefaults fills in the defaults the packages apply to the options the environment left
// zero, each from the package's own WithDefaults.
func (c *config) applyDefaults() {
	c.gateway = c.gateway.WithDefaults()
	c.planner = c.planner.WithDefaults()
	c.tracker = c.tracker.WithDefaults()
	// The gateway hands its presence settings to presence.New, which fills them in.
	p := presence.Options{Window: c.gateway.PresenceWindow, MaxMembers: c.gateway.PresenceMaxMembers}.WithDefaults()
	c.gateway.PresenceWindow, c.gateway.PresenceMaxMembers = p.Window, p.MaxMembers
	c.hub = c.hub.WithDefaults()
	c.rest = c.rest.WithDefaults()
	c.listingsREST = c.listingsREST.WithDefaults()
	c.listings = c.listings.WithDefaults()
}

// fraction names one n-th in words, as --help gives a default that is a share of a bound.
func fraction(n int) string {
	if w, ok := map[int]string{2: "a half", 4: "a quarter", 8: "an eighth", 16: "a sixteenth"}[n]; ok {
		return w
	}
	return fmt.Sprintf("1/%d", n)
}

// binaryBytes writes n bytes in the largest binary unit that divides them: 1 GiB, 256 MiB.
func binaryBytes(n int) string {
	for _, u := range []struct {
		size int
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
