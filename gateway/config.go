package gateway

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/presence"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// Config is the gateway's configuration (the configuration CONTRACT).
type Config struct {
	Addr              string        // BALLET_ADDR
	AdminAddr         string        // BALLET_ADMIN_ADDR
	DatabaseURL       string        // BALLET_DATABASE_URL
	TailDatabaseURL   string        // BALLET_TAIL_DATABASE_URL: a hot standby to tail and replay from
	TailMaxLag        time.Duration // BALLET_TAIL_MAX_LAG: standby lag beyond which /readyz fails
	OIDCIssuer        string        // BALLET_OIDC_ISSUER
	OIDCAudience      string        // BALLET_OIDC_AUDIENCE
	AdminSubjects     []string      // BALLET_ADMIN_SUBJECTS
	AllowedOrigins    []string      // BALLET_ALLOWED_ORIGINS
	AuthTimeout       time.Duration // BALLET_AUTH_TIMEOUT
	HeartbeatInterval time.Duration // BALLET_HEARTBEAT_INTERVAL
	ReplayLimit       int           // BALLET_REPLAY_LIMIT
	SubscriberQueue   int           // BALLET_SUBSCRIBER_QUEUE
	DrainWindow       time.Duration // BALLET_DRAIN_WINDOW
	ReadLimit         int64         // BALLET_READ_LIMIT: largest accepted frame in bytes
	PlannerLease      time.Duration // BALLET_PLANNER_LEASE
	PlannerResume     time.Duration // BALLET_PLANNER_RESUME_WINDOW
	PlannerProvider   string        // BALLET_PLANNER_PROVIDER
	PlannerBaseURL    string        // BALLET_PLANNER_BASE_URL
	PlannerAPIKey     string        // BALLET_PLANNER_API_KEY
	PlannerModel      string        // BALLET_PLANNER_MODEL
	PlannerMaxRounds  int           // BALLET_PLANNER_MAX_ROUNDS
	PlannerScript     string        // BALLET_PLANNER_SCRIPT: script file of the scripted provider
	LogLevel          slog.Level    // BALLET_LOG_LEVEL

	MaxSubscriptions         int // BALLET_MAX_SUBSCRIPTIONS: stream subscriptions and planner watches per connection
	RequestRate              int // BALLET_REQUEST_RATE: requests per second per connection, burst twice that
	MaxConnectionsPerSubject int // BALLET_MAX_CONNECTIONS_PER_SUBJECT: authenticated connections of one subject, per replica
	MaxConnections           int // BALLET_MAX_CONNECTIONS: sockets on the client port per replica, of any kind
	MaxConnectionsPerIP      int // BALLET_MAX_CONNECTIONS_PER_IP: sockets and /rpc connections of one address not yet authenticated
	ConnectionQueueBytes     int // BALLET_CONNECTION_QUEUE_BYTES: bytes queued for one connection and not yet written
	ReplicaQueueBytes        int // BALLET_REPLICA_QUEUE_BYTES: bytes queued for all connections together; 0: a quarter of the Go memory limit, or 1 GiB without one
	RecentEventsBytes        int // BALLET_RECENT_EVENTS_BYTES: memory of the recent events kept for replays

	// BALLET_TRUSTED_PROXIES: the peers whose X-Forwarded-For names the client's address.
	TrustedProxies []netip.Prefix

	PresenceWindow     time.Duration // BALLET_PRESENCE_WINDOW: presence changes are coalesced per stream over this
	PresenceMaxMembers int           // BALLET_PRESENCE_MAX_MEMBERS: the longest member list presence reports per stream

	// CPU budgets of one subject on a replica, shared by its connections (budgets.go).
	SubjectRequestRate int // BALLET_SUBJECT_REQUEST_RATE: requests per second of one subject, burst twice that
	ReplayRate         int // BALLET_REPLAY_RATE: events replayed per second for one subject, burst twice that (at least BALLET_REPLAY_LIMIT)

	// What one person may write and make the planner spend (tracker.Options, planner.Options).
	MaxTitleChars          int // BALLET_MAX_TITLE_CHARS: item titles, in characters
	MaxDescriptionBytes    int // BALLET_MAX_DESCRIPTION_BYTES: item descriptions, in bytes of UTF-8
	MaxPlannerMessageBytes int // BALLET_MAX_PLANNER_MESSAGE_BYTES: the text of planner.send, in bytes
	PlannerTurnsPerSubject int // BALLET_PLANNER_TURNS_PER_SUBJECT: running planner turns of one person, on all replicas
	PlannerSessionRate     int // BALLET_PLANNER_SESSION_RATE: planner sessions one person creates a minute, per replica
}

// Defaults returns the configuration defaults of the CONTRACT.
func Defaults() Config {
	return Config{
		Addr:              "0.0.0.0:8080",
		AdminAddr:         "127.0.0.1:8081",
		AuthTimeout:       10 * time.Second,
		HeartbeatInterval: 15 * time.Second,
		ReplayLimit:       1000,
		SubscriberQueue:   4096,
		DrainWindow:       10 * time.Second,
		TailMaxLag:        5 * time.Second,
		ReadLimit:         1 << 20,
		PlannerLease:      3 * time.Second,
		PlannerResume:     5 * time.Minute,
		PlannerMaxRounds:  16,

		MaxSubscriptions:         256,
		RequestRate:              100,
		MaxConnectionsPerSubject: 100,
		MaxConnections:           100000,
		MaxConnectionsPerIP:      64,
		ConnectionQueueBytes:     4 << 20,
		RecentEventsBytes:        streams.DefaultRecentBytes,

		PresenceWindow:     presence.DefaultWindow,
		PresenceMaxMembers: presence.DefaultMaxMembers,

		SubjectRequestRate: 200,
		ReplayRate:         1000,

		MaxTitleChars:          tracker.DefaultMaxTitleChars,
		MaxDescriptionBytes:    tracker.DefaultMaxDescriptionBytes,
		MaxPlannerMessageBytes: planner.DefaultMaxMessageBytes,
		PlannerTurnsPerSubject: planner.DefaultTurnsPerSubject,
		PlannerSessionRate:     planner.DefaultSessionRate,
	}
}

// maxPlannerMessageBytes is the ceiling of BALLET_MAX_PLANNER_MESSAGE_BYTES: a message
// arrives in one frame, which BALLET_READ_LIMIT bounds too.
const maxPlannerMessageBytes = 1 << 20

// ConfigError names the setting that has a bad value.
type ConfigError struct {
	Var   string
	Value string
	Msg   string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Var, e.Msg)
	}
	return fmt.Sprintf("%s=%q: %s", e.Var, e.Value, e.Msg)
}

// LoadConfig reads the environment through getenv on top of base. A bad value
// is an error naming the variable, never a silent default.
func LoadConfig(base Config, getenv func(string) string) (Config, error) {
	c := base
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	var errs []error
	addr := func(name string, dst *string) {
		v := getenv(name)
		if v == "" {
			return
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			errs = append(errs, &ConfigError{name, v, "want host:port"})
			return
		}
		*dst = v
	}
	dur := func(name string, dst *time.Duration) {
		v := getenv(name)
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, &ConfigError{name, v, "want a positive duration such as 10s or 1m30s"})
			return
		}
		*dst = d
	}
	integer := func(name string, dst *int, min int) {
		v := getenv(name)
		if v == "" {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			errs = append(errs, &ConfigError{name, v, fmt.Sprintf("want an integer of at least %d", min)})
			return
		}
		*dst = n
	}
	list := func(name string, dst *[]string) {
		v := getenv(name)
		if v == "" {
			return
		}
		var out []string
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			out = append(out, f)
		}
		*dst = out
	}
	addr("BALLET_ADDR", &c.Addr)
	addr("BALLET_ADMIN_ADDR", &c.AdminAddr)
	str("BALLET_DATABASE_URL", &c.DatabaseURL)
	str("BALLET_TAIL_DATABASE_URL", &c.TailDatabaseURL)
	dur("BALLET_TAIL_MAX_LAG", &c.TailMaxLag)
	str("BALLET_OIDC_ISSUER", &c.OIDCIssuer)
	str("BALLET_OIDC_AUDIENCE", &c.OIDCAudience)
	list("BALLET_ADMIN_SUBJECTS", &c.AdminSubjects)
	list("BALLET_ALLOWED_ORIGINS", &c.AllowedOrigins)
	dur("BALLET_AUTH_TIMEOUT", &c.AuthTimeout)
	dur("BALLET_HEARTBEAT_INTERVAL", &c.HeartbeatInterval)
	integer("BALLET_REPLAY_LIMIT", &c.ReplayLimit, 1)
	integer("BALLET_SUBSCRIBER_QUEUE", &c.SubscriberQueue, 1)
	dur("BALLET_DRAIN_WINDOW", &c.DrainWindow)
	var readLimit int
	integer("BALLET_READ_LIMIT", &readLimit, 1024)
	if readLimit > 0 {
		c.ReadLimit = int64(readLimit)
	}
	integer("BALLET_MAX_SUBSCRIPTIONS", &c.MaxSubscriptions, 1)
	integer("BALLET_REQUEST_RATE", &c.RequestRate, 1)
	integer("BALLET_MAX_CONNECTIONS_PER_SUBJECT", &c.MaxConnectionsPerSubject, 1)
	integer("BALLET_MAX_CONNECTIONS", &c.MaxConnections, 1)
	integer("BALLET_MAX_CONNECTIONS_PER_IP", &c.MaxConnectionsPerIP, 1)
	integer("BALLET_CONNECTION_QUEUE_BYTES", &c.ConnectionQueueBytes, 64<<10)
	integer("BALLET_REPLICA_QUEUE_BYTES", &c.ReplicaQueueBytes, 1<<20)
	integer("BALLET_RECENT_EVENTS_BYTES", &c.RecentEventsBytes, 1<<20)
	if v := getenv("BALLET_TRUSTED_PROXIES"); v != "" {
		if ps, err := parsePrefixes(v); err != nil {
			errs = append(errs, &ConfigError{"BALLET_TRUSTED_PROXIES", v, err.Error()})
		} else {
			c.TrustedProxies = ps
		}
	}
	dur("BALLET_PRESENCE_WINDOW", &c.PresenceWindow)
	integer("BALLET_PRESENCE_MAX_MEMBERS", &c.PresenceMaxMembers, 1)
	dur("BALLET_PLANNER_LEASE", &c.PlannerLease)
	dur("BALLET_PLANNER_RESUME_WINDOW", &c.PlannerResume)
	if v := getenv("BALLET_PLANNER_PROVIDER"); v != "" {
		switch v {
		case "anthropic", "openai", "scripted":
			c.PlannerProvider = v
		default:
			errs = append(errs, &ConfigError{"BALLET_PLANNER_PROVIDER", v, "want anthropic, openai or scripted"})
		}
	}
	str("BALLET_PLANNER_BASE_URL", &c.PlannerBaseURL)
	str("BALLET_PLANNER_API_KEY", &c.PlannerAPIKey)
	str("BALLET_PLANNER_MODEL", &c.PlannerModel)
	integer("BALLET_PLANNER_MAX_ROUNDS", &c.PlannerMaxRounds, 1)
	str("BALLET_PLANNER_SCRIPT", &c.PlannerScript)
	if v := getenv("BALLET_LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, &ConfigError{"BALLET_LOG_LEVEL", v, "want DEBUG, INFO, WARN or ERROR"})
		}
	}
	integer("BALLET_SUBJECT_REQUEST_RATE", &c.SubjectRequestRate, 1)
	integer("BALLET_REPLAY_RATE", &c.ReplayRate, 1)
	within := func(name string, dst *int, max int) {
		v := getenv(name)
		if v == "" {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			errs = append(errs, &ConfigError{name, v, fmt.Sprintf("want an integer from 1 to %d", max)})
			return
		}
		*dst = n
	}
	within("BALLET_MAX_TITLE_CHARS", &c.MaxTitleChars, tracker.CeilingTitleChars)
	within("BALLET_MAX_DESCRIPTION_BYTES", &c.MaxDescriptionBytes, tracker.CeilingDescriptionBytes)
	within("BALLET_MAX_PLANNER_MESSAGE_BYTES", &c.MaxPlannerMessageBytes, maxPlannerMessageBytes)
	integer("BALLET_PLANNER_TURNS_PER_SUBJECT", &c.PlannerTurnsPerSubject, 1)
	integer("BALLET_PLANNER_SESSION_RATE", &c.PlannerSessionRate, 1)
	if len(errs) > 0 {
		return c, joinErrors(errs)
	}
	return c, nil
}

// RequireServe checks what `serve` cannot run without.
func (c *Config) RequireServe() error {
	var errs []error
	if c.DatabaseURL == "" {
		errs = append(errs, &ConfigError{Var: "BALLET_DATABASE_URL", Msg: "required: the Postgres connection string"})
	}
	if c.OIDCIssuer == "" {
		errs = append(errs, &ConfigError{Var: "BALLET_OIDC_ISSUER", Msg: "required: the OIDC issuer URL"})
	}
	if c.OIDCAudience == "" {
		errs = append(errs, &ConfigError{Var: "BALLET_OIDC_AUDIENCE", Msg: "required: the audience access tokens must carry"})
	}
	if len(errs) > 0 {
		return joinErrors(errs)
	}
	return nil
}

// parsePrefixes parses a list of CIDRs (or single addresses), separated by commas or spaces.
func parsePrefixes(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
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

type multiError []error

func (m multiError) Error() string {
	parts := make([]string, len(m))
	for i, e := range m {
		parts[i] = e.Error()
	}
	return "configuration: " + strings.Join(parts, "; ")
}

func (m multiError) Unwrap() []error { return m }

func joinErrors(errs []error) error { return multiError(errs) }
