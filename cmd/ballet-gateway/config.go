package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/gateway/gateway"
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
	tailMaxLag      time.Duration // BALLET_TAIL_MAX_LAG: standby lag beyond which /readyz fails; 5 s when not set
	oidcIssuer      string        // BALLET_OIDC_ISSUER
	oidcAudience    string        // BALLET_OIDC_AUDIENCE
	logLevel        slog.Level    // BALLET_LOG_LEVEL
	provider        providerConfig

	gateway gateway.Config
	tracker tracker.Options
	// planner holds the planner's settings; plannerOptions adds its model, logger and observer.
	planner planner.Options
	hub     streams.HubOptions // RecentBytes (BALLET_RECENT_EVENTS_BYTES)
}

// maxPlannerMessageBytes is the ceiling of BALLET_MAX_PLANNER_MESSAGE_BYTES: a message
// arrives in one frame, which BALLET_READ_LIMIT bounds too.
const maxPlannerMessageBytes = 1 << 20

// loadConfig reads the environment through getenv; addr is the client port's address when
// BALLET_ADDR is not set. A bad value is an error naming the variable, never a silent
// default, and every bad one is reported at once.
func loadConfig(getenv func(string) string, addr string) (*config, error) {
	c := &config{addr: addr, adminAddr: "127.0.0.1:8081", tailMaxLag: 5 * time.Second}
	var errs []error
	for _, s := range c.settings() {
		if v := getenv(s.name); v != "" {
			if msg := s.parse(v); msg != "" {
				errs = append(errs, &configError{s.name, v, msg})
			}
		}
	}
	if len(errs) > 0 {
		return c, multiError(errs)
	}
	return c, nil
}

// A setting is one BALLET_* variable: parse reads a value into field, or says what is wrong
// with it.
type setting struct {
	name  string
	field any // a pointer to the field parse sets
	parse func(v string) (msg string)
}

// settings are the variables, each with the field of c it sets, in the order their errors
// are reported.
func (c *config) settings() []setting {
	g, t, p := &c.gateway, &c.tracker, &c.planner
	return []setting{
		addr("BALLET_ADDR", &c.addr),
		addr("BALLET_ADMIN_ADDR", &c.adminAddr),
		str("BALLET_DATABASE_URL", &c.databaseURL),
		str("BALLET_TAIL_DATABASE_URL", &c.tailDatabaseURL),
		duration("BALLET_TAIL_MAX_LAG", &c.tailMaxLag),
		str("BALLET_OIDC_ISSUER", &c.oidcIssuer),
		str("BALLET_OIDC_AUDIENCE", &c.oidcAudience),
		list("BALLET_ADMIN_SUBJECTS", &t.AdminSubjects),
		list("BALLET_ALLOWED_ORIGINS", &g.AllowedOrigins),
		duration("BALLET_AUTH_TIMEOUT", &g.AuthTimeout),
		duration("BALLET_HEARTBEAT_INTERVAL", &g.HeartbeatInterval),
		atLeast("BALLET_REPLAY_LIMIT", &g.ReplayLimit, 1),
		atLeast("BALLET_SUBSCRIBER_QUEUE", &g.SubscriberQueue, 1),
		duration("BALLET_DRAIN_WINDOW", &g.DrainWindow),
		atLeast("BALLET_READ_LIMIT", &g.ReadLimit, 1024),
		atLeast("BALLET_MAX_SUBSCRIPTIONS", &g.MaxSubscriptions, 1),
		atLeast("BALLET_REQUEST_RATE", &g.RequestRate, 1),
		atLeast("BALLET_MAX_CONNECTIONS_PER_SUBJECT", &g.MaxConnectionsPerSubject, 1),
		atLeast("BALLET_MAX_CONNECTIONS", &g.MaxConnections, 1),
		atLeast("BALLET_MAX_CONNECTIONS_PER_IP", &g.MaxConnectionsPerIP, 1),
		atLeast("BALLET_CONNECTION_QUEUE_BYTES", &g.ConnectionQueueBytes, 64<<10),
		atLeast("BALLET_REPLICA_QUEUE_BYTES", &g.ReplicaQueueBytes, 1<<20),
		atLeast("BALLET_SOCKET_BUFFER_BYTES", &g.SocketBufferBytes, 4<<10),
		atLeast("BALLET_RECENT_EVENTS_BYTES", &c.hub.RecentBytes, 1<<20),
		{"BALLET_TRUSTED_PROXIES", &g.TrustedProxies, func(v string) string {
			ps, err := parsePrefixes(v)
			if err != nil {
				return err.Error()
			}
			g.TrustedProxies = ps
			return ""
		}},
		duration("BALLET_PRESENCE_WINDOW", &g.PresenceWindow),
		atLeast("BALLET_PRESENCE_MAX_MEMBERS", &g.PresenceMaxMembers, 1),
		duration("BALLET_PLANNER_LEASE", &p.Lease),
		duration("BALLET_PLANNER_RESUME_WINDOW", &p.ResumeWindow),
		{"BALLET_PLANNER_PROVIDER", &c.provider.name, func(v string) string {
			if providers[v] == nil {
				return "want anthropic, openai or scripted"
			}
			c.provider.name = v
			return ""
		}},
		str("BALLET_PLANNER_BASE_URL", &c.provider.baseURL),
		str("BALLET_PLANNER_API_KEY", &c.provider.apiKey),
		str("BALLET_PLANNER_MODEL", &c.provider.model),
		atLeast("BALLET_PLANNER_MAX_ROUNDS", &p.MaxRounds, 1),
		str("BALLET_PLANNER_SCRIPT", &c.provider.script),
		{"BALLET_LOG_LEVEL", &c.logLevel, func(v string) string {
			if c.logLevel.UnmarshalText([]byte(v)) != nil {
				return "want DEBUG, INFO, WARN or ERROR"
			}
			return ""
		}},
		atLeast("BALLET_SUBJECT_REQUEST_RATE", &g.SubjectRequestRate, 1),
		atLeast("BALLET_REPLAY_RATE", &g.ReplayRate, 1),
		within("BALLET_MAX_TITLE_CHARS", &t.MaxTitleChars, tracker.CeilingTitleChars),
		within("BALLET_MAX_DESCRIPTION_BYTES", &t.MaxDescriptionBytes, tracker.CeilingDescriptionBytes),
		within("BALLET_MAX_PLANNER_MESSAGE_BYTES", &p.MaxMessageBytes, maxPlannerMessageBytes),
		atLeast("BALLET_PLANNER_TURNS_PER_SUBJECT", &p.TurnsPerSubject, 1),
		atLeast("BALLET_PLANNER_SESSION_RATE", &p.SessionRate, 1),
	}
}

func str(name string, dst *string) setting {
	return setting{name, dst, func(v string) string { *dst = v; return "" }}
}

func addr(name string, dst *string) setting {
	return setting{name, dst, func(v string) string {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return "want host:port"
		}
		*dst = v
		return ""
	}}
}

func duration(name string, dst *time.Duration) setting {
	return setting{name, dst, func(v string) string {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return "want a positive duration such as 10s or 1m30s"
		}
		*dst = d
		return ""
	}}
}

func atLeast[T int | int64](name string, dst *T, min int) setting {
	return setting{name, dst, func(v string) string {
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return fmt.Sprintf("want an integer of at least %d", min)
		}
		*dst = T(n)
		return ""
	}}
}

func within(name string, dst *int, max int) setting {
	return setting{name, dst, func(v string) string {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			return fmt.Sprintf("want an integer from 1 to %d", max)
		}
		*dst = n
		return ""
	}}
}

func list(name string, dst *[]string) setting {
	return setting{name, dst, func(v string) string { *dst = fields(v); return "" }}
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

// requireServe checks what `serve` cannot run without.
func (c *config) requireServe() error {
	var errs []error
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
