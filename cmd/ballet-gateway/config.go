package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/edge"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/internal/server"
	"github.com/ballet/gateway/internal/tracing"
	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// The client port's address when BALLET_ADDR is not set.
const (
	serveAddr = "0.0.0.0:8080"
	devAddr   = "127.0.0.1:8080"
)

// config is the process's configuration, read from the BALLET_* variables (docs/configuration.md):
// the binary's own settings, and the options it hands each package. An option the environment
// does not set stays zero, which means the package's default.
type config struct {
	addr            string        // BALLET_ADDR: serveAddr or devAddr when not set
	adminAddr       string        // BALLET_ADMIN_ADDR: 127.0.0.1:8081 when not set
	databaseURL     string        // BALLET_DATABASE_URL
	tailDatabaseURL string        // BALLET_TAIL_DATABASE_URL: a hot standby to tail and replay from
	tailMaxLag      time.Duration // BALLET_TAIL_MAX_LAG: standby lag beyond which /readyz fails; server.DefaultTailMaxLag when not set
	oidcIssuer      string        // BALLET_OIDC_ISSUER
	oidcAudience    string        // BALLET_OIDC_AUDIENCE
	devAllowRemote  bool          // BALLET_DEV_ALLOW_REMOTE: dev may listen beyond loopback
	logLevel        slog.Level    // BALLET_LOG_LEVEL
	provider        providerConfig

	gateway gateway.Config
	tracker tracker.Options
	// planner holds the planner's settings; plannerOptions adds its model, logger and observer.
	planner planner.Options
	// hub: RecentBytes (BALLET_RECENT_EVENTS_BYTES), CatchUps (BALLET_MAX_CATCH_UPS), CatchUpLimit
	// (BALLET_CATCH_UP_LIMIT), CatchUpBytes (BALLET_CATCH_UP_BYTES).
	hub    streams.HubOptions
	tailer streams.TailerOptions // Coalesce (BALLET_STREAM_COALESCE)
	rest   httpapi.RateOptions   // Rate (BALLET_REST_RATE): one budget per subject for every REST surface
	// listingsREST bound the REST listings in flight and a page's bytes, for every surface.
	listingsREST httpapi.ListingOptions
	// tracing is what the OTEL_* variables say (tracing.go); off unless they name an endpoint.
	tracing tracing.Options
	// replica names this process: service.instance.id of its spans, the planner's lease owner.
	replica string
	// listings bound operators' connection listings (BALLET_ADMIN_MAX_LISTINGS).
	listings operator.ListOptions
}

// maxPlannerMessageBytes is the ceiling of BALLET_MAX_PLANNER_MESSAGE_BYTES: a message
// arrives in one frame, which BALLET_READ_LIMIT bounds too.
const maxPlannerMessageBytes = 1 << 20

// loadConfig reads the environment through getenv; addr is the client port's address when
// BALLET_ADDR is not set. A bad value is an error naming the variable, never a silent
// default, and every bad one is reported at once.
func loadConfig(getenv func(string) string, addr string) (*config, error) {
	c := &config{addr: addr, adminAddr: "127.0.0.1:8081", tailMaxLag: server.DefaultTailMaxLag, replica: newReplicaID()}
	var errs []error
	for _, s := range c.settings() {
		if v := getenv(s.name); v != "" {
			if msg := s.parse(v); msg != "" {
				errs = append(errs, &configError{s.name, v, msg})
			}
		}
	}
	var terrs []error
	c.tracing, terrs = readTracing(getenv)
	errs = append(errs, terrs...)
	if len(errs) > 0 {
		return c, multiError(errs)
	}
	return c, nil
}

// A setting is one BALLET_* variable: parse reads a value into field, or says what is wrong
// with it. doc, unset and shown are what --help says of it.
type setting struct {
	name  string
	field any // a pointer to the field parse sets
	parse func(v string) (msg string)
	doc   string   // what it sets, in a few words
	cmds  commands // the commands that read it
	unset string   // what the setting's absence means when its default is empty ("" for none)
	shown string   // the default, when it depends on more than the setting (else computed)
}

// commands is a set of the commands that read a setting.
type commands uint8

const (
	forServe commands = 1 << iota
	forDev
	forDatabase // migrate and admin
)

// only says which commands read s (serve and dev unless it says otherwise).
func (s setting) only(cmds commands) setting { s.cmds = cmds; return s }

// ifUnset says what s's absence means.
func (s setting) ifUnset(text string) setting { s.unset = text; return s }

// defaultIs gives s's default in words.
func (s setting) defaultIs(text string) setting { s.shown = text; return s }

// settings are the variables, each with the field of c it sets, in the order their errors
// are reported.
func (c *config) settings() []setting {
	g, t, p := &c.gateway, &c.tracker, &c.planner
	return []setting{
		addr("BALLET_ADDR", &c.addr, "the client port (/rpc, /healthz, the REST API)"),
		addr("BALLET_ADMIN_ADDR", &c.adminAddr, "the admin port (/metrics, /readyz, /debug/pprof/ with BALLET_PPROF)"),
		boolean("BALLET_PPROF", &g.Pprof, "serve Go's /debug/pprof/ on the admin port"),
		str("BALLET_DATABASE_URL", &c.databaseURL, "Postgres connection string").
			only(forServe | forDatabase).ifUnset("required"),
		str("BALLET_TAIL_DATABASE_URL", &c.tailDatabaseURL, "a hot standby the tailer and replays read").
			only(forServe).ifUnset("none: the primary"),
		duration("BALLET_TAIL_MAX_LAG", &c.tailMaxLag, "standby lag beyond which /readyz fails").only(forServe),
		str("BALLET_OIDC_ISSUER", &c.oidcIssuer, "OIDC issuer URL").only(forServe).ifUnset("required"),
		str("BALLET_OIDC_AUDIENCE", &c.oidcAudience, "the aud access tokens must carry").
			only(forServe).ifUnset("required"),
		boolean("BALLET_DEV_ALLOW_REMOTE", &c.devAllowRemote,
			"dev only: listen on an address beyond loopback (its token mint is open to all)").only(forDev),
		list("BALLET_ADMIN_SUBJECTS", &t.AdminSubjects, "subjects that may create projects, grant roles, sign out or block subjects, and list connections"),
		atLeast("BALLET_ADMIN_MAX_LISTINGS", &c.listings.MaxListings, 1,
			"operators' connection listings a replica gathers, and answers, at once"),
		custom("BALLET_ALLOWED_ORIGINS", &g.AllowedOrigins, "browser Origin host patterns allowed on /rpc", func(v string) string {
			for _, p := range fields(v) {
				if _, err := path.Match(p, ""); err != nil {
					return fmt.Sprintf("%q is not a pattern (path.Match)", p)
				}
			}
			g.AllowedOrigins = fields(v)
			return ""
		}).
			ifUnset("none: same origin only"),
		duration("BALLET_AUTH_TIMEOUT", &g.AuthTimeout, "time from connect to the first auth"),
		duration("BALLET_HEARTBEAT_INTERVAL", &g.HeartbeatInterval, "heartbeat period"),
		atLeast("BALLET_REPLAY_LIMIT", &g.ReplayLimit, 1, "most events one subscribe replays"),
		atLeast("BALLET_SUBSCRIBER_QUEUE", &g.SubscriberQueue, 1, "planner outputs or presence changes waiting per subscription"),
		duration("BALLET_DRAIN_WINDOW", &g.DrainWindow, "on SIGTERM, connections close over this window"),
		atLeast("BALLET_READ_LIMIT", &g.ReadLimit, 1024, "largest accepted message, in bytes"),
		atLeast("BALLET_MAX_SUBSCRIPTIONS", &g.MaxSubscriptions, 1, "subscriptions and watches per connection"),
		atLeast("BALLET_REQUEST_RATE", &g.RequestRate, 1, "requests per second per connection"),
		atLeast("BALLET_MAX_CONNECTIONS_PER_SUBJECT", &g.MaxConnectionsPerSubject, 1,
			"authenticated connections of one subject"),
		atLeast("BALLET_MAX_CONNECTIONS", &g.MaxConnections, 1, "sockets on the client port"),
		atLeast("BALLET_MAX_CONNECTIONS_PER_IP", &g.MaxConnectionsPerIP, 1,
			"unauthenticated sockets of one client address"),
		atLeast("BALLET_MAX_PENDING_SOCKETS", &g.MaxPendingSockets, 1,
			"sockets not yet a session nor idle, all addresses together").
			defaultIs(fmt.Sprintf("%s of BALLET_MAX_CONNECTIONS, at least %d",
				fraction(edge.PendingSocketsDivisor), edge.MinPendingSockets)),
		atLeast("BALLET_CONNECTION_QUEUE_BYTES", &g.ConnectionQueueBytes, 64<<10,
			"bytes queued for one connection"),
		atLeast("BALLET_REPLICA_QUEUE_BYTES", &g.ReplicaQueueBytes, 1<<20, "bytes queued for all connections").
			defaultIs(fmt.Sprintf("%s of the Go memory limit, %s without one",
				fraction(gateway.ReplicaQueueDivisor), binaryBytes(gateway.DefaultReplicaQueueBytes))),
		atLeast("BALLET_PARTIAL_MESSAGE_BYTES", &g.PartialMessageBytes, 1<<20,
			"memory of WebSocket messages not yet whole, all connections together").
			defaultIs(fmt.Sprintf("%s of the Go memory limit, %s without one",
				fraction(gateway.PartialMessageDivisor), binaryBytes(gateway.DefaultPartialMessageBytes))),
		atLeast("BALLET_SOCKET_BUFFER_BYTES", &g.SocketBufferBytes, 4<<10, "kernel buffers of each client socket"),
		atLeast("BALLET_RECENT_EVENTS_BYTES", &c.hub.RecentBytes, 1<<20,
			"memory of the window of recent events subscriptions read and replays use"),
		atLeast("BALLET_MAX_CATCH_UPS", &c.hub.CatchUps, 1,
			"subscriptions behind the window that read the log at once"),
		atLeast("BALLET_CATCH_UP_LIMIT", &c.hub.CatchUpLimit, 1,
			"most events a subscription may be behind the window and still catch up from the log"),
		atLeast("BALLET_CATCH_UP_BYTES", &c.hub.CatchUpBytes, 1<<20,
			"memory of the pages read from the log that subscriptions hold until their clients read them"),
		custom("BALLET_STREAM_COALESCE", &c.tailer.Coalesce, "the tailer waits this long after a wake-up before it reads; 0: none",
			func(v string) string {
				d, err := time.ParseDuration(v)
				if err != nil || d < 0 {
					return "want a duration such as 2ms, or 0 for none"
				}
				c.tailer.Coalesce = d
				return ""
			}),
		custom("BALLET_TRUSTED_PROXIES", &g.TrustedProxies, "CIDRs of the proxies in front", func(v string) string {
			ps, err := parsePrefixes(v)
			if err != nil {
				return err.Error()
			}
			g.TrustedProxies = ps
			return ""
		}),
		duration("BALLET_PRESENCE_WINDOW", &g.PresenceWindow, "presence changes are coalesced over this"),
		atLeast("BALLET_PRESENCE_MAX_MEMBERS", &g.PresenceMaxMembers, 1, "most subjects presence reports per stream"),
		duration("BALLET_PLANNER_LEASE", &p.Lease, "a planner turn's lease"),
		duration("BALLET_PLANNER_RESUME_WINDOW", &p.ResumeWindow, "how long an ended turn can be resumed"),
		custom("BALLET_PLANNER_PROVIDER", &c.provider.name, "anthropic, openai or scripted", func(v string) string {
			if providers[v] == nil {
				return "want anthropic, openai or scripted"
			}
			c.provider.name = v
			return ""
		}).ifUnset("none: the planner is off"),
		str("BALLET_PLANNER_BASE_URL", &c.provider.baseURL, "the model provider's URL").ifUnset("the provider's"),
		str("BALLET_PLANNER_API_KEY", &c.provider.apiKey, "the model provider's API key"),
		str("BALLET_PLANNER_MODEL", &c.provider.model, "the model").ifUnset("the provider's"),
		atLeast("BALLET_PLANNER_MAX_ROUNDS", &p.MaxRounds, 1, "model calls of one planner turn"),
		str("BALLET_PLANNER_SCRIPT", &c.provider.script, "script file of the scripted provider").
			ifUnset("the built-in script"),
		custom("BALLET_LOG_LEVEL", &c.logLevel, "DEBUG, INFO, WARN or ERROR", func(v string) string {
			if c.logLevel.UnmarshalText([]byte(v)) != nil {
				return "want DEBUG, INFO, WARN or ERROR"
			}
			return ""
		}),
		atLeast("BALLET_SUBJECT_REQUEST_RATE", &g.SubjectRequestRate, 1, "requests per second of one subject"),
		atLeast("BALLET_REPLAY_RATE", &g.ReplayRate, 1, "events one subject's replays read per second"),
		atLeast("BALLET_REST_RATE", &c.rest.Rate, 1, "REST requests per second of one subject"),
		atLeast("BALLET_ADDR_RATE", &g.AddrRate, 1,
			"/rpc upgrades and failed authentications per second of one client address"),
		atLeast("BALLET_REST_PAGE_BYTES", &c.listingsREST.PageBytes, httpapi.MinPageBytes,
			"bytes of the entries of one REST listing page"),
		atLeast("BALLET_REST_LISTINGS_PER_SUBJECT", &c.listingsREST.PerSubject, 1,
			"REST listings of one subject answered at once"),
		atLeast("BALLET_REST_MAX_LISTINGS", &c.listingsREST.Replica, 1, "REST listings answered at once"),
		duration("BALLET_REST_WRITE_STALL", &g.RESTWriteStall, "a REST answer its client takes nothing of for this long is cut off"),
		within("BALLET_MAX_TITLE_CHARS", &t.MaxTitleChars, tracker.CeilingTitleChars, "item titles, in characters"),
		within("BALLET_MAX_DESCRIPTION_BYTES", &t.MaxDescriptionBytes, tracker.CeilingDescriptionBytes,
			"item descriptions, in bytes"),
		within("BALLET_MAX_PLANNER_MESSAGE_BYTES", &p.MaxMessageBytes, maxPlannerMessageBytes,
			"the text of planner.send, in bytes"),
		atLeast("BALLET_PLANNER_TURNS_PER_SUBJECT", &p.TurnsPerSubject, 1, "planner turns of one person at once"),
		atLeast("BALLET_PLANNER_SESSION_RATE", &p.SessionRate, 1, "planner sessions one person creates a minute"),
		custom("BALLET_PLANNER_OUTPUT_WINDOW", &p.OutputWindow, "planner outputs are gathered over this; 0: none",
			func(v string) string {
				d, err := time.ParseDuration(v)
				switch {
				case err != nil || d < 0:
					return "want a duration such as 20ms, or 0 for none"
				case d == 0:
					d = -1 // planner.Options: no batching
				}
				p.OutputWindow = d
				return ""
			}),
		atLeast("BALLET_PLANNER_OUTPUT_BATCH", &p.OutputBatch, 1, "planner outputs gathered in one window"),
		atLeast("BALLET_PLANNER_OUTPUT_BATCH_BYTES", &p.OutputBatchBytes, 4096, "bytes of the planner outputs of one window"),
	}
}

// custom is a setting that parse reads; it is read by serve and dev.
func custom(name string, field any, doc string, parse func(v string) string) setting {
	return setting{name: name, field: field, parse: parse, doc: doc, cmds: forServe | forDev}
}

func str(name string, dst *string, doc string) setting {
	return custom(name, dst, doc, func(v string) string { *dst = v; return "" })
}

func boolean(name string, dst *bool, doc string) setting {
	return custom(name, dst, doc, func(v string) string {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "want true or false"
		}
		*dst = b
		return ""
	})
}

func addr(name string, dst *string, doc string) setting {
	return custom(name, dst, doc, func(v string) string {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return "want host:port"
		}
		*dst = v
		return ""
	})
}

func duration(name string, dst *time.Duration, doc string) setting {
	return custom(name, dst, doc, func(v string) string {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return "want a positive duration such as 10s or 1m30s"
		}
		*dst = d
		return ""
	})
}

func atLeast[T int | int64](name string, dst *T, min int, doc string) setting {
	return custom(name, dst, doc, func(v string) string {
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return fmt.Sprintf("want an integer of at least %d", min)
		}
		*dst = T(n)
		return ""
	})
}

func within(name string, dst *int, max int, doc string) setting {
	return custom(name, dst, doc, func(v string) string {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			return fmt.Sprintf("want an integer from 1 to %d", max)
		}
		*dst = n
		return ""
	})
}

func list(name string, dst *[]string, doc string) setting {
	return custom(name, dst, doc, func(v string) string { *dst = fields(v); return "" })
}

// fields splits a list separated by commas or spaces.
func fields(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
}

// parsePrefixes parses a list of CIDRs (or single addresses).
func parsePrefixes(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range fields(v) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an address", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// warnIgnored logs a line for each setting the environment sets that cmds do not read.
func warnIgnored(logger *slog.Logger, c *config, getenv func(string) string, cmds commands, command string) {
	for _, s := range c.settings() {
		if s.cmds&cmds == 0 && getenv(s.name) != "" {
			logger.Warn(fmt.Sprintf("%s ignores %s (read by %s)", command, s.name, readersOf(s.cmds)))
		}
	}
}

// readersOf names the commands of cmds.
func readersOf(cmds commands) string {
	var names []string
	for _, c := range []struct {
		cmds commands
		name string
	}{{forServe, "serve"}, {forDev, "dev"}, {forDatabase, "migrate, admin"}} {
		if cmds&c.cmds != 0 {
			names = append(names, c.name)
		}
	}
	return strings.Join(names, ", ")
}

// requireServe checks what `serve` cannot run without, and returns its failures with those of
// loaded (loadConfig's error): one start names every bad setting.
func (c *config) requireServe(loaded error) error {
	errs := settingErrors(loaded)
	if c.databaseURL == "" {
		errs = append(errs, &configError{Var: "BALLET_DATABASE_URL", Msg: "required: the Postgres connection string"})
	}
	if c.oidcIssuer == "" {
		errs = append(errs, &configError{Var: "BALLET_OIDC_ISSUER", Msg: "required: the OIDC issuer URL"})
	}
	if c.oidcAudience == "" {
		errs = append(errs, &configError{Var: "BALLET_OIDC_AUDIENCE", Msg: "required: the audience access tokens must carry"})
	}
	if len(errs) > 0 {
		return multiError(errs)
	}
	return nil
}

// settingErrors is err's list of errors (a multiError's, else err alone; none for nil).
func settingErrors(err error) []error {
	var m multiError
	if errors.As(err, &m) {
		return append([]error(nil), m...)
	}
	if err != nil {
		return []error{err}
	}
	return nil
}

// configError names the setting that has a bad value.
type configError struct {
	Var   string
	Value string
	Msg   string
}

func (e *configError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Var, e.Msg)
	}
	return fmt.Sprintf("%s=%q: %s", e.Var, e.Value, e.Msg)
}

type multiError []error

func (m multiError) Error() string {
	parts := make([]string, len(m))
	for i, e := range m {
		parts[i] = e.Error()
	}
	return "configuration: " + strings.Join(parts, "; ")
}

func (m multiError) Unwrap() []error { return m }
