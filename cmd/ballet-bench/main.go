package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/buildinfo"
	"github.com/ballet/gateway/internal/cli"
)

// version is the build's version, set with go build -ldflags "-X main.version=v1.2.3".
var version string

func main() { cli.Main(run) }

// exitFailed is the exit status of a run that failed or whose checks did not hold, beside
// cli.ExitOK and cli.ExitUsage.
const exitFailed = 1

const usage = `usage: ballet-bench [flags]

modes (--mode):
  live          N subscribers; the writer at --rate for --duration: commit→client
                latency percentiles, deliveries/s, gaps, duplicates (default)
  saturate      the writer as fast as the subscribers take it (--batch 200, at most
                --window events ahead of the slowest): deliveries/s, gaps
  idle          N subscribed connections held for --duration: server RSS per connection
  replay        one client replays --replay-events events --repeat times: p50/p99
  replay-storm  N clients disconnect, --storm-events are written, all reconnect at once
                with from_seq: time until all caught up, gaps, duplicates
  writer        --writers batched writers at full speed: events/s, commit order check
  burst         N subscribers, the last --paused of them not reading; then one transaction
                of --burst-events events: deliveries/s, the server's CPU per delivery and
                peak RSS growth, disconnects and stream.closed by code, every event once
  planner       plays the model (--model-listen) for --turns planner sessions answered at
                once: emit→watcher latency per delta, deliveries/s, gaps, duplicates,
                turns whose done never came

flags:
  --url URL             the gateway's /rpc (default $BALLET_BENCH_URL or ws://127.0.0.1:8080/rpc);
                        planner: the replicas' /rpc, separated by commas
  --db URL              Postgres of the gateway, for the writer (default $BALLET_DATABASE_URL)
  --token TOKEN         access token (default $BALLET_TOKEN)
  --token-cmd CMD       shell command printing a token
  --token-url URL       GET a JSON {"token"}, e.g. http://127.0.0.1:8080/dev/token?subject=bench
  --codec C             msgpack (default) or json
  --transport T         websocket (default: GET /rpc) or http (live, saturate and idle: each
                        subscriber one POST /rpc whose stream.subscribe streams NDJSON, JSON only;
                        a ws:// --url is taken as http://)
  --stream S            project:KEY or item:KEY (default project:BENCH)
  --subscribers N       connections (default 100)
  --connect-rate N      connections opened per second (0 = as fast as possible)
  --rate N              events/s in live mode (default 100)
  --batch N             events per transaction (default 1; saturate 200; others 100)
  --writers N           concurrent writer connections (default 1)
  --duration D          writing time, or holding time in idle mode (default 10s)
  --grace D             time allowed for the last deliveries (default 5s)
  --settle D            idle: wait before reading the server's RSS (default 3s)
  --payload-bytes N     approximate payload size of each event (default 100)
  --server-pid PID      idle: read the server's RSS from /proc/PID/status; burst: every 10 ms
                        from the burst's start, and the server's CPU from /proc/PID/stat
  --server-metrics URL  idle: read process_resident_memory_bytes, e.g. http://127.0.0.1:8081/metrics
  --fanout-events N     idle: after the hold, wait up to --grace until every connection has N events
                        of the stream that another program writes; report when the first and the
                        last connection had them (Unix ms) and the connections that missed some
  --source-addrs LIST   dial from these local addresses in turn, e.g. 127.0.0.2-127.0.0.9 (ranges and
                        single addresses, separated by commas): more connections than one source
                        address has ports for
  --ws-client C         lean (RFC 6455's client side read from a buffer, no allocation or lock a
                        message: the default of burst mode, where the client's CPU would otherwise
                        limit what is measured on a shared machine) or library (coder/websocket,
                        the default of the other modes)
  --db-cost             live: the transactions the database of --db ran during the run, beyond
                        the writer's own, per writer commit (waits 11 s before and after it
                        for PostgreSQL's statistics)
  --db-pid PID          live: also the CPU of that PostgreSQL server (PID of its postmaster, on
                        this machine), per writer commit; implies --db-cost. planner: its CPU
                        per planner output
  --repeat K            replay: number of replays (default 200)
  --replay-events N     replay: events per replay (default 1000)
  --storm-events N      replay-storm: events written while disconnected (default 1000)
  --window N            saturate: most events the writer runs ahead of the slowest
                        subscriber (default 1000)
  --model-listen ADDR   planner: serve the Anthropic Messages API there (the replicas'
                        BALLET_PLANNER_BASE_URL is http://ADDR)
  --turns N             planner: sessions, each answered once, all at once (default 100)
  --outputs-per-second N  planner: text deltas a second of each answer (default 25)
  --turn-seconds S      planner: how long each answer streams (default 10)
  --watchers N          planner: watches of each session (default 2)
  --connections N       planner: connections to each replica the watches share (default 4)
  --project KEY         planner: the project of the sessions (default BENCH)
  --subjects N          planner: the people sending, turn i by bench-(i mod N), each creating
                        its sessions; the token's subject (an admin of --project) makes them
                        members; the watches stay on the token (default --turns)
  --subject-token-url URL  planner: GET a JSON {"token"} for each sender, {subject} replaced by
                        its name, e.g. http://127.0.0.1:8080/dev/token?subject={subject}; without
                        it, --subjects 1 sends as the token's subject
  --burst-events N      burst: events of the one transaction (default 2000)
  --event-bytes N       burst: approximate payload size of each event (default 2048)
  --paused K            burst: the last K subscribers stop reading their sockets before the
                        write (default 0)
  --pause D             burst: the paused subscribers read again D after the commit; 0: once
                        the others have every event (default 0)
  --explicit-tx         write with BEGIN; INSERT; COMMIT instead of one INSERT statement
  --json                one JSON object per line instead of a table
  --cpuprofile FILE     write the load generator's own CPU profile (go tool pprof)
  --version             print the version of this build
  -h, --help            print this

The benchmark creates nothing on the server but the planner mode's sessions and members:
create the project and grant the token's subject at least viewer; for the planner
mode admin, or member with --subjects 1 (ballet-gateway admin project-create BENCH
Bench; ballet-gateway admin grant BENCH SUBJECT viewer).

Exit status: 0 all checks passed, 1 a check failed or the run failed, 2 usage.
`

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, &runOptions{Getenv: getenv, Stdout: stdout, Stderr: stderr})
}

// runWith is run with test hooks.
func runWith(ctx context.Context, args []string, o *runOptions) int {
	cfg, err := parse(args, o.Getenv)
	if err != nil {
		fmt.Fprintf(o.Stderr, "ballet-bench: %v\n\n%s", err, usage)
		return cli.ExitUsage
	}
	if cfg.help {
		fmt.Fprint(o.Stdout, usage)
		return cli.ExitOK
	}
	if cfg.version {
		fmt.Fprint(o.Stdout, buildinfo.String("ballet-bench", version))
		return cli.ExitOK
	}
	r := &report{fields: cfg.params()}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(o.Stderr, "ballet-bench: --cpuprofile: %v\n", err)
			return cli.ExitUsage
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	if err := execute(ctx, cfg, o, r); err != nil {
		fmt.Fprintf(o.Stderr, "ballet-bench: %v\n", err)
		r.fail("run failed: %v", err)
	}
	if cfg.json {
		err = r.writeJSON(o.Stdout)
	} else {
		err = r.writeTable(o.Stdout)
	}
	if err != nil || !r.ok() {
		return exitFailed
	}
	return cli.ExitOK
}

// execute runs the configured mode, filling r.
func execute(ctx context.Context, cfg *config, o *runOptions, r *report) error {
	b := &bench{cfg: cfg, opts: o, http: newHTTPClient(cfg.sourceDialer()), start: time.Now()}
	defer b.http.CloseIdleConnections()
	if cfg.mode != modeWriter {
		n := cfg.subscribers
		if cfg.mode == modePlanner {
			// And the model's streams.
			n = len(cfg.urls)*cfg.connections + cfg.senderConnections() + cfg.turns + restConcurrency
		}
		if err := checkFileLimit(n); err != nil {
			return err
		}
		tok, err := fetchToken(ctx, cfg)
		if err != nil {
			return err
		}
		b.token = tok
	}
	if cfg.mode != modeIdle && cfg.mode != modePlanner {
		pc, err := pgxpool.ParseConfig(cfg.db)
		if err != nil {
			return fmt.Errorf("--db: %w", err)
		}
		pc.MaxConns = int32(cfg.writers + 2)
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return fmt.Errorf("--db: %w", err)
		}
		defer pool.Close()
		b.pool = pool
	}
	switch cfg.mode {
	case modeLive, modeSaturate:
		return b.runLive(ctx, r)
	case modeIdle:
		return b.runIdle(ctx, r)
	case modeReplay:
		return b.runReplay(ctx, r)
	case modeReplayStorm:
		return b.runStorm(ctx, r)
	case modeWriter:
		return b.runWriter(ctx, r)
	case modePlanner:
		return b.runPlanner(ctx, r)
	case modeBurst:
		return b.runBurst(ctx, r)
	}
	return nil
}
