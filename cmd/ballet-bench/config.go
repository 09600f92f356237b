package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/streams"
)

// Modes of a run.
const (
	modeLive        = "live"
	modeSaturate    = "saturate"
	modeIdle        = "idle"
	modeReplay      = "replay"
	modeReplayStorm = "replay-storm"
	modeWriter      = "writer"
	modePlanner     = "planner"
	modeBurst       = "burst"
)

// config is a parsed command line.
type config struct {
	url           string
	urls          []string // --url split at commas: the replicas (planner mode)
	db            string
	token         string
	tokenCmd      string
	tokenURL      string
	codec         codec.Codec
	transport     string // --transport: websocket, or http (POST /rpc's streamed responses)
	stream        streams.Stream
	streamName    string
	subscribers   int
	connectRate   float64
	rate          float64
	batch         int
	writers       int
	duration      time.Duration
	grace         time.Duration
	settle        time.Duration
	payloadBytes  int
	mode          string
	serverPID     int
	serverMetrics string
	dbPID         int
	dbCost        bool
	json          bool
	repeat        int
	replayEvents  int
	stormEvents   int
	explicitTx    bool
	window        int
	cpuProfile    string
	help          bool
	sourceAddrs   []netip.Addr // --source-addrs: local addresses dialed from in turn
	wsClient      string       // --ws-client: lean or library; "" for the mode's default
	fanoutEvents  int          // idle: events of the stream every connection must receive after the hold
	version       bool         // --version: print the build's version

	// burst mode
	burstEvents int           // events of the one transaction
	paused      int           // subscribers that stop reading during the burst
	pause       time.Duration // how long they stop after the commit; 0: until the others have it all

	// planner mode
	modelListen      string
	outputsPerSecond float64
	turnSeconds      float64
	turns            int
	project          string
	watchers         int
	connections      int
	subjects         int    // senders: turn i is sent by subject i mod subjects
	subjectTokenURL  string // a sender's token: GET with {subject} replaced by its name
}

// usageError is a command-line mistake (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErr(format string, a ...any) error {
	return &usageError{fmt.Sprintf(format, a...)}
}

// parse reads the command line; getenv supplies the fallbacks.
func parse(args []string, getenv func(string) string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("ballet-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.url, "url", "", "")
	fs.StringVar(&c.db, "db", "", "")
	fs.StringVar(&c.token, "token", "", "")
	fs.StringVar(&c.tokenCmd, "token-cmd", "", "")
	fs.StringVar(&c.tokenURL, "token-url", "", "")
	codecName := fs.String("codec", "msgpack", "")
	fs.StringVar(&c.transport, "transport", transportWebSocket, "")
	fs.StringVar(&c.streamName, "stream", "project:BENCH", "")
	fs.IntVar(&c.subscribers, "subscribers", 100, "")
	fs.Float64Var(&c.connectRate, "connect-rate", 0, "")
	fs.Float64Var(&c.rate, "rate", 100, "")
	fs.IntVar(&c.batch, "batch", 1, "")
	fs.IntVar(&c.writers, "writers", 1, "")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "")
	fs.DurationVar(&c.grace, "grace", 5*time.Second, "")
	fs.DurationVar(&c.settle, "settle", 3*time.Second, "")
	fs.IntVar(&c.payloadBytes, "payload-bytes", 100, "")
	fs.StringVar(&c.mode, "mode", modeLive, "")
	fs.IntVar(&c.serverPID, "server-pid", 0, "")
	fs.StringVar(&c.serverMetrics, "server-metrics", "", "")
	fs.IntVar(&c.dbPID, "db-pid", 0, "")
	fs.BoolVar(&c.dbCost, "db-cost", false, "")
	fs.BoolVar(&c.json, "json", false, "")
	fs.IntVar(&c.repeat, "repeat", 200, "")
	fs.IntVar(&c.replayEvents, "replay-events", 1000, "")
	fs.IntVar(&c.stormEvents, "storm-events", 1000, "")
	fs.BoolVar(&c.explicitTx, "explicit-tx", false, "")
	fs.IntVar(&c.window, "window", 1000, "")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "")
	fs.BoolVar(&c.version, "version", false, "")
	fs.StringVar(&c.modelListen, "model-listen", "", "")
	fs.Float64Var(&c.outputsPerSecond, "outputs-per-second", 25, "")
	fs.Float64Var(&c.turnSeconds, "turn-seconds", 10, "")
	fs.IntVar(&c.turns, "turns", 100, "")
	fs.StringVar(&c.project, "project", "BENCH", "")
	fs.IntVar(&c.watchers, "watchers", 2, "")
	fs.IntVar(&c.connections, "connections", 4, "")
	fs.IntVar(&c.subjects, "subjects", 0, "")
	fs.StringVar(&c.subjectTokenURL, "subject-token-url", "", "")
	fs.IntVar(&c.burstEvents, "burst-events", 2000, "")
	eventBytes := fs.Int("event-bytes", 2048, "")
	fs.IntVar(&c.paused, "paused", 0, "")
	sourceAddrs := fs.String("source-addrs", "", "")
	fs.StringVar(&c.wsClient, "ws-client", "", "")
	fs.IntVar(&c.fanoutEvents, "fanout-events", 0, "")
	fs.DurationVar(&c.pause, "pause", 0, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.help = true
			return c, nil
		}
		return nil, usageErr("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usageErr("unexpected argument %q", fs.Arg(0))
	}
	if c.version {
		return c, nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if c.url == "" {
		c.url = getenv("BALLET_BENCH_URL")
	}
	if c.url == "" {
		c.url = "ws://127.0.0.1:8080/rpc"
	}
	c.urls = strings.Split(c.url, ",")
	for _, s := range c.urls {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "ws" && u.Scheme != "wss" && u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageErr("--url %q: want ws://HOST:PORT/rpc", s)
		}
	}
	if len(c.urls) > 1 && c.mode != modePlanner {
		return nil, usageErr("--url: several replicas (URLs separated by commas) are for --mode planner")
	}
	c.url = c.urls[0]
	if c.db == "" {
		c.db = getenv("BALLET_DATABASE_URL")
	}
	switch *codecName {
	case "msgpack":
		c.codec = codec.MsgPack
	case "json":
		c.codec = codec.JSON
	default:
		return nil, usageErr("--codec %q: want msgpack or json", *codecName)
	}
	st, err := streams.ParseStream(c.streamName)
	if err != nil {
		return nil, usageErr("--stream %q: want project:KEY or item:KEY", c.streamName)
	}
	c.stream = st
	if st.Project() == "" {
		return nil, usageErr("--stream %q: an item key is PROJECT-NUMBER", c.streamName)
	}

	switch c.mode {
	case modeLive, modeSaturate, modeIdle, modeReplay, modeReplayStorm, modeWriter:
	case modeBurst:
		if err := c.checkBurst(set, *eventBytes); err != nil {
			return nil, err
		}
	case modePlanner:
		if err := c.checkPlanner(); err != nil {
			return nil, err
		}
	default:
		return nil, usageErr("--mode %q: want live, saturate, idle, replay, replay-storm, writer, burst or planner", c.mode)
	}
	switch c.wsClient {
	case "", "lean", "library":
	default:
		return nil, usageErr("--ws-client %q: want lean or library", c.wsClient)
	}
	if err := c.checkTransport(set); err != nil {
		return nil, err
	}
	if *sourceAddrs != "" {
		if c.sourceAddrs, err = parseSourceAddrs(*sourceAddrs); err != nil {
			return nil, usageErr("--source-addrs: %v", err)
		}
	}
	if c.fanoutEvents < 0 || (c.fanoutEvents > 0 && c.mode != modeIdle) {
		return nil, usageErr("--fanout-events is a positive number of events, for --mode idle")
	}
	if c.mode == modeSaturate && !set["batch"] {
		c.batch = 200
	}
	if (c.mode == modeReplay || c.mode == modeReplayStorm) && !set["batch"] {
		c.batch = 100
	}
	if c.mode == modeWriter && !set["batch"] {
		c.batch = 100
	}
	if c.mode == modeReplay && !set["subscribers"] {
		c.subscribers = 1
	}
	positive := []struct {
		name string
		v    float64
	}{
		{"subscribers", float64(c.subscribers)}, {"batch", float64(c.batch)},
		{"writers", float64(c.writers)}, {"duration", float64(c.duration)},
		{"repeat", float64(c.repeat)}, {"replay-events", float64(c.replayEvents)},
		{"storm-events", float64(c.stormEvents)}, {"window", float64(c.window)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return nil, usageErr("--%s must be positive", p.name)
		}
	}
	if c.mode == modeLive && c.rate <= 0 {
		return nil, usageErr("--rate must be positive (saturate mode writes as fast as it can)")
	}
	if c.connectRate < 0 || c.grace < 0 || c.settle < 0 || c.payloadBytes < 0 || c.serverPID < 0 || c.dbPID < 0 {
		return nil, usageErr("--connect-rate, --grace, --settle, --payload-bytes, --server-pid and --db-pid must not be negative")
	}
	if c.dbPID != 0 && c.mode != modePlanner {
		c.dbCost = true
	}
	if c.dbCost && c.mode != modeLive {
		return nil, usageErr("--db-cost measures the live mode, --db-pid the live and planner modes")
	}
	if c.payloadBytes > 512<<10 {
		return nil, usageErr("--payload-bytes and --event-bytes must be at most %d", 512<<10)
	}
	if c.serverPID != 0 && c.serverMetrics != "" {
		return nil, usageErr("--server-pid and --server-metrics exclude each other")
	}
	if c.mode == modeReplay && c.subscribers != 1 {
		return nil, usageErr("replay mode uses one client (--subscribers 1)")
	}

	if c.mode != modeIdle && c.mode != modePlanner && c.db == "" {
		return nil, usageErr("--mode %s writes events: give --db or set BALLET_DATABASE_URL", c.mode)
	}
	if c.mode != modeWriter {
		n := 0
		for _, s := range []string{c.token, c.tokenCmd, c.tokenURL} {
			if s != "" {
				n++
			}
		}
		if n > 1 {
			return nil, usageErr("--token, --token-cmd and --token-url exclude each other")
		}
		if n == 0 {
			c.token = getenv("BALLET_TOKEN")
			if c.token == "" {
				return nil, usageErr("no token: give --token, --token-cmd, --token-url or set BALLET_TOKEN")
			}
		}
	}
	return c, nil
}

// checkTransport checks --transport: HTTP subscribers speak JSON, hold a subscription each (the
// modes whose connections are subscribers that stay), and reach --url's host over http(s).
func (c *config) checkTransport(set map[string]bool) error {
	switch c.transport {
	case transportWebSocket:
		return nil
	case transportHTTP:
	default:
		return usageErr("--transport %q: want websocket or http", c.transport)
	}
	switch c.mode {
	case modeLive, modeSaturate, modeIdle:
	default:
		return usageErr("--transport http is for --mode live, saturate and idle, not %s", c.mode)
	}
	if set["codec"] && c.codec.Binary() {
		return usageErr("--transport http speaks JSON only: drop --codec msgpack")
	}
	c.codec = codec.JSON
	if set["ws-client"] {
		return usageErr("--ws-client chooses a WebSocket client: not with --transport http")
	}
	u, err := httpURL(c.url)
	if err != nil {
		return usageErr("--url %q: %v", c.url, err)
	}
	c.url, c.urls[0] = u, u
	return nil
}

// checkPlanner checks the planner mode's flags.
func (c *config) checkPlanner() error {
	for _, p := range []struct {
		name string
		v    float64
	}{
		{"turns", float64(c.turns)}, {"watchers", float64(c.watchers)}, {"connections", float64(c.connections)},
		{"outputs-per-second", c.outputsPerSecond}, {"turn-seconds", c.turnSeconds},
	} {
		if p.v <= 0 {
			return usageErr("--%s must be positive", p.name)
		}
	}
	if c.subjects == 0 {
		c.subjects = c.turns
	}
	if c.subjects < 0 || c.subjects > c.turns {
		return usageErr("--subjects must be between 1 and --turns (%d)", c.turns)
	}
	if c.subjectTokenURL != "" && !strings.Contains(c.subjectTokenURL, subjectPlaceholder) {
		return usageErr("--subject-token-url %q: want a URL with %s where the subject goes", c.subjectTokenURL, subjectPlaceholder)
	}
	if c.subjects > 1 && c.subjectTokenURL == "" {
		return usageErr("--subjects %d sends as that many people: give --subject-token-url (or --subjects 1 to send as the token's subject)", c.subjects)
	}
	if c.modelListen == "" {
		return usageErr("--mode planner plays the model: give --model-listen ADDR (the replicas' BALLET_PLANNER_BASE_URL)")
	}
	if _, _, err := net.SplitHostPort(c.modelListen); err != nil {
		return usageErr("--model-listen %q: want HOST:PORT", c.modelListen)
	}
	if c.project == "" {
		return usageErr("--project must not be empty")
	}
	if n := c.deltasPerTurn(); n < 1 || n > 1_000_000 {
		return usageErr("--outputs-per-second × --turn-seconds must be between 1 and 1000000, not %d", n)
	}
	// A connection watches a session once: each replica's watchers of one session need
	// connections of their own.
	if perReplica := (c.watchers + len(c.urls) - 2) / max(len(c.urls)-1, 1); len(c.urls) > 1 && perReplica > c.connections {
		return usageErr("--watchers %d over %d other replicas needs --connections of at least %d", c.watchers, len(c.urls)-1, perReplica)
	} else if len(c.urls) == 1 && c.watchers > c.connections {
		return usageErr("--watchers %d on one replica needs --connections of at least %d", c.watchers, c.watchers)
	}
	return nil
}

// checkBurst checks the burst mode's flags; --event-bytes is its --payload-bytes.
func (c *config) checkBurst(set map[string]bool, eventBytes int) error {
	if set["payload-bytes"] {
		return usageErr("--mode burst sizes its events with --event-bytes")
	}
	if eventBytes < 0 {
		return usageErr("--event-bytes must not be negative")
	}
	c.payloadBytes = eventBytes
	if c.burstEvents <= 0 {
		return usageErr("--burst-events must be positive")
	}
	if c.paused < 0 || c.paused > c.subscribers {
		return usageErr("--paused must be between 0 and --subscribers (%d)", c.subscribers)
	}
	if c.pause < 0 {
		return usageErr("--pause must not be negative")
	}
	if c.serverMetrics != "" {
		return usageErr("--mode burst samples the server's RSS every %s from /proc: give --server-pid", rssInterval)
	}
	return nil
}

// leanClient reports whether connections read with the lean WebSocket client (lean.go): by
// --ws-client, else in burst mode, whose millions of small messages would measure the client.
func (c *config) leanClient() bool {
	return c.wsClient == "lean" || c.wsClient == "" && c.mode == modeBurst
}

// sourceDialer dials from --source-addrs, or is nil without them.
func (c *config) sourceDialer() *sourceDialer {
	if len(c.sourceAddrs) == 0 {
		return nil
	}
	return &sourceDialer{addrs: c.sourceAddrs}
}

// deltasPerTurn is the number of text deltas of each answer.
func (c *config) deltasPerTurn() int { return int(math.Round(c.outputsPerSecond * c.turnSeconds)) }

// params lists the run's settings for the report.
func (c *config) params() []field {
	fs := []field{{"mode", c.mode, ""}, {"codec", codecLabel(c.codec), ""}}
	if c.mode != modeWriter {
		fs = append(fs, field{"transport", c.transport, ""})
	}
	if c.mode != modePlanner {
		fs = append(fs, field{"stream", c.streamName, ""})
	}
	switch c.mode {
	case modeLive, modeSaturate:
		fs = append(fs, field{"subscribers", c.subscribers, ""})
		if c.mode == modeLive {
			fs = append(fs, field{"rate", c.rate, "events/s"})
		} else {
			fs = append(fs, field{"window", c.window, "events"})
		}
		fs = append(fs, field{"batch", c.batch, "events/tx"}, field{"writers", c.writers, ""},
			field{"duration_s", c.duration.Seconds(), "s"}, field{"payload_bytes", c.payloadBytes, ""})
	case modeIdle:
		fs = append(fs, field{"subscribers", c.subscribers, ""}, field{"duration_s", c.duration.Seconds(), "s"})
		if c.fanoutEvents > 0 {
			fs = append(fs, field{"fanout_wait_s", c.grace.Seconds(), "s"})
		}
	case modeReplay:
		fs = append(fs, field{"repeat", c.repeat, ""}, field{"replay_events", c.replayEvents, ""},
			field{"payload_bytes", c.payloadBytes, ""})
	case modeReplayStorm:
		fs = append(fs, field{"subscribers", c.subscribers, ""}, field{"storm_events", c.stormEvents, ""},
			field{"batch", c.batch, "events/tx"}, field{"payload_bytes", c.payloadBytes, ""})
	case modeWriter:
		fs = append(fs, field{"writers", c.writers, ""}, field{"batch", c.batch, "events/tx"},
			field{"duration_s", c.duration.Seconds(), "s"}, field{"payload_bytes", c.payloadBytes, ""},
			field{"explicit_tx", c.explicitTx, ""})
	case modeBurst:
		fs = append(fs, field{"subscribers", c.subscribers, ""}, field{"paused", c.paused, ""},
			field{"pause_s", c.pause.Seconds(), "s"}, field{"burst_events", c.burstEvents, ""},
			field{"event_bytes", c.payloadBytes, ""}, field{"explicit_tx", c.explicitTx, ""})
	case modePlanner:
		fs = append(fs, field{"replicas", len(c.urls), ""}, field{"turns", c.turns, ""},
			field{"watchers_per_session", c.watchers, ""}, field{"connections_per_replica", c.connections, ""},
			field{"subjects", c.subjects, ""}, field{"outputs_per_second", c.outputsPerSecond, "outputs/s"}, field{"turn_seconds", c.turnSeconds, "s"},
			field{"project", c.project, ""})
	}
	if len(c.sourceAddrs) > 0 {
		fs = append(fs, field{"source_addrs", len(c.sourceAddrs), ""})
	}
	if c.connectRate > 0 && c.mode != modeWriter {
		fs = append(fs, field{"connect_rate_limit", c.connectRate, "conn/s"})
	}
	return fs
}

func codecLabel(c codec.Codec) string {
	if c.Binary() {
		return "msgpack"
	}
	return "json"
}

// formatFloat renders a measurement with sensible precision.
func formatFloat(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1 || v <= -1:
		return strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
