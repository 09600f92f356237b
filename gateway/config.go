package gateway

import (
	"net/netip"
	"time"

	"github.com/ballet/gateway/streams"
)

// Config is what the server reads of the process's configuration (the BALLET_* variable of
// each field, docs/configuration.md). A zero field means its default, which NewServer applies
// (WithDefaults).
type Config struct {
	// AllowedOrigins are the browser Origin host patterns allowed on /rpc (BALLET_ALLOWED_ORIGINS);
	// none means the same origin only.
	AllowedOrigins []string
	// TrustedProxies are the peers whose X-Forwarded-For names the client's address
	// (BALLET_TRUSTED_PROXIES); none means every peer is the client.
	TrustedProxies []netip.Prefix

	AuthTimeout       time.Duration // BALLET_AUTH_TIMEOUT: zero means 10 s
	HeartbeatInterval time.Duration // BALLET_HEARTBEAT_INTERVAL: zero means 15 s
	DrainWindow       time.Duration // BALLET_DRAIN_WINDOW: zero means 10 s
	ReplayLimit       int           // BALLET_REPLAY_LIMIT: zero means streams.DefaultReplayLimit (1000)
	SubscriberQueue   int           // BALLET_SUBSCRIBER_QUEUE: planner outputs and presence changes waiting per subscription; zero means DefaultSubscriberQueue
	ReadLimit         int64         // BALLET_READ_LIMIT: largest accepted frame in bytes; zero means 1 MiB
	// RESTWriteStall closes a REST answer's connection once its client has taken none of it
	// for this long (BALLET_REST_WRITE_STALL), within the answer's RESTTimeout; zero means 5 s.
	RESTWriteStall time.Duration

	MaxSubscriptions         int // BALLET_MAX_SUBSCRIPTIONS: stream subscriptions and planner watches per connection; zero means 256
	RequestRate              int // BALLET_REQUEST_RATE: requests per second per connection, burst twice that; zero means 100
	MaxConnectionsPerSubject int // BALLET_MAX_CONNECTIONS_PER_SUBJECT: authenticated connections of one subject, per replica; zero means 100
	MaxConnections           int // BALLET_MAX_CONNECTIONS: sockets on the client port per replica, of any kind; zero means 100,000
	MaxConnectionsPerIP      int // BALLET_MAX_CONNECTIONS_PER_IP: sockets and /rpc connections of one address not yet authenticated; zero means 64
	MaxPendingSockets        int // BALLET_MAX_PENDING_SOCKETS: sockets not yet a session nor idle (new, or a request being read or served); zero means a sixteenth of MaxConnections, at least 1024
	ConnectionQueueBytes     int // BALLET_CONNECTION_QUEUE_BYTES: bytes queued for one connection and not yet written; zero means 4 MiB
	ReplicaQueueBytes        int // BALLET_REPLICA_QUEUE_BYTES: bytes queued for all connections together; zero means a quarter of the Go memory limit, or 1 GiB without one
	// PartialMessageBytes is BALLET_PARTIAL_MESSAGE_BYTES: the memory all connections together
	// hold for WebSocket messages not yet whole; zero means an eighth of the Go memory limit, or
	// 256 MiB without one; never less than twice ReadLimit and 64 KiB (limits.go).
	PartialMessageBytes int64
	SocketBufferBytes   int // BALLET_SOCKET_BUFFER_BYTES: the kernel's send and receive buffers of each client socket (SO_SNDBUF, SO_RCVBUF); zero means 256 KiB

	PresenceWindow     time.Duration // BALLET_PRESENCE_WINDOW: presence changes are coalesced per stream over this; zero means presence.DefaultWindow
	PresenceMaxMembers int           // BALLET_PRESENCE_MAX_MEMBERS: the longest member list presence reports per stream; zero means presence.DefaultMaxMembers

	// CPU budgets of one subject on a replica, shared by its connections (budgets.go).
	SubjectRequestRate int // BALLET_SUBJECT_REQUEST_RATE: requests per second of one subject, burst twice that; zero means 200
	ReplayRate         int // BALLET_REPLAY_RATE: events replayed per second for one subject, burst twice that (at least ReplayLimit); zero means 1000

	// AddrRate is BALLET_ADDR_RATE: what one client address may ask before it is
	// authenticated, per second, burst twice that (addrrate.go); zero means 50.
	AddrRate int

	// Pprof serves Go's /debug/pprof/ on the admin port (BALLET_PPROF); false means those
	// paths answer 404, since profiles reveal the process's memory to whoever reaches the port.
	Pprof bool
}

// DefaultSubscriberQueue is Config.SubscriberQueue's default: the planner outputs or presence
// changes one subscription may have waiting for its client before it is closed lagging.
// (Stream events do not wait in a queue: a subscription is a position in the hub's window.)
const DefaultSubscriberQueue = 4096

// WithDefaults returns c with its zero fields set to their defaults, as NewServer applies
// them. ReplicaQueueBytes, PartialMessageBytes and MaxPendingSockets stay zero (NewServer reads the memory limit), and the presence
// fields too (presence.New applies its defaults).
func (c Config) WithDefaults() Config {
	orDefault(&c.AuthTimeout, 10*time.Second)
	orDefault(&c.HeartbeatInterval, 15*time.Second)
	orDefault(&c.DrainWindow, 10*time.Second)
	orDefault(&c.ReplayLimit, streams.DefaultReplayLimit)
	orDefault(&c.SubscriberQueue, DefaultSubscriberQueue)
	orDefault(&c.ReadLimit, 1<<20)
	orDefault(&c.RESTWriteStall, 5*time.Second)
	orDefault(&c.MaxSubscriptions, 256)
	orDefault(&c.RequestRate, 100)
	orDefault(&c.MaxConnectionsPerSubject, 100)
	orDefault(&c.MaxConnections, 100_000)
	orDefault(&c.MaxConnectionsPerIP, 64)
	orDefault(&c.ConnectionQueueBytes, 4<<20)
	orDefault(&c.SocketBufferBytes, 256<<10)
	orDefault(&c.SubjectRequestRate, 200)
	orDefault(&c.ReplayRate, 1000)
	orDefault(&c.AddrRate, 50)
	return c
}

// orDefault sets *v to def when it is zero or less.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
