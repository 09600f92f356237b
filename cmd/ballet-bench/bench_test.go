package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/internal/cli"
)

// benchEnv is a gateway on Postgres with the BENCH project, whose viewer
// "bench" holds token.
type benchEnv struct {
	env   *gatewaytest.Env
	token string
}

func startBench(t *testing.T, cfg *gateway.Config) *benchEnv {
	t.Helper()
	o := &gatewaytest.Options{}
	if cfg != nil {
		o.Config = *cfg
	}
	return startBenchWith(t, o)
}

// startBenchWith is startBench with the server's options (Postgres is always on).
func startBenchWith(t *testing.T, o *gatewaytest.Options) *benchEnv {
	t.Helper()
	o.Postgres = true
	// Every connection of the tool is one subject: the subject's budgets
	// must not stand in for the many clients it models.
	o.Config.SubjectRequestRate = max(o.Config.SubjectRequestRate, 1_000_000)
	o.Config.ReplayRate = max(o.Config.ReplayRate, 1_000_000)
	env := gatewaytest.Start(t, o)
	env.Project(t, "BENCH", "bench", "viewer")
	return &benchEnv{env: env, token: env.Token(t, "bench")}
}

// outcome is one in-process run of the command.
type outcome struct {
	code   int
	report map[string]any
	stderr string
}

func (o *outcome) num(t *testing.T, name string) float64 {
	t.Helper()
	v, ok := o.report[name]
	if !ok {
		t.Fatalf("report has no %q: %v\nstderr:\n%s", name, o.report, o.stderr)
	}
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("report %q = %v (%T), want a number", name, v, v)
	}
	return f
}

func (o *outcome) want(t *testing.T, code int) {
	t.Helper()
	if o.code != code {
		t.Fatalf("exit status %d, want %d; report %v\nstderr:\n%s", o.code, code, o.report, o.stderr)
	}
}

// run runs the command against be with the common flags plus args.
func (be *benchEnv) run(t *testing.T, drop func(int, int64) bool, args ...string) *outcome {
	t.Helper()
	all := append([]string{"--url", be.env.URL, "--db", be.env.DatabaseURL, "--token", be.token, "--json"}, args...)
	return runBench(t, &runOptions{DropEvent: drop}, all)
}

// runBench runs the command in process with o's hooks and reads its JSON report.
func runBench(t *testing.T, o *runOptions, all []string) *outcome {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o.Getenv, o.Stdout, o.Stderr = func(string) string { return "" }, &out, &errb
	code := runWith(ctx, all, o)
	res := &outcome{code: code, stderr: errb.String()}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one JSON line on stdout, got %q\nstderr:\n%s", out.String(), res.stderr)
	}
	if err := json.Unmarshal([]byte(lines[0]), &res.report); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, lines[0])
	}
	if ok, _ := res.report["ok"].(bool); ok != (code == cli.ExitOK) {
		t.Fatalf("report ok=%v but exit status %d", res.report["ok"], code)
	}
	t.Logf("%s\n%s", lines[0], res.stderr)
	t0 := time.Now()
	noBenchGoroutines(t)
	t.Logf("goroutine check %s", time.Since(t0))
	return res
}

// noBenchGoroutines fails when a connection reader or writer of the run
// is still running.
func noBenchGoroutines(t *testing.T) {
	t.Helper()
	var stacks string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "main.(*client).readLoop") &&
			!strings.Contains(stacks, "main.(*writerSet).writer") &&
			!strings.Contains(stacks, "main.(*bench).connectAll") &&
			!strings.Contains(stacks, "main.(*modelServer)") &&
			!strings.Contains(stacks, "main.(*burstSub).drive") &&
			!strings.Contains(stacks, "main.(*rssSampler).run") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("goroutines of the run outlive it:\n%s", stacks)
}

func checkClean(t *testing.T, o *outcome) {
	t.Helper()
	for _, k := range []string{"gaps", "duplicates", "out_of_order"} {
		if v := o.num(t, k); v != 0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}
}

func TestLive(t *testing.T) {
	be := startBench(t, nil)
	for _, c := range []string{"msgpack", "json"} {
		t.Run(c, func(t *testing.T) {
			o := be.run(t, nil, "--codec", c, "--subscribers", "10", "--rate", "50", "--batch", "5",
				"--duration", "2s", "--connect-rate", "200")
			o.want(t, cli.ExitOK)
			checkClean(t, o)
			committed := o.num(t, "committed_events")
			if committed < 5 {
				t.Fatalf("committed_events = %v", committed)
			}
			if d, e := o.num(t, "delivered_events"), o.num(t, "expected_deliveries"); d != e || e != committed*10 {
				t.Errorf("delivered %v, expected %v, committed %v × 10", d, e, committed)
			}
			if n := o.num(t, "latency_samples"); n != committed*10 {
				t.Errorf("latency_samples = %v, want %v", n, committed*10)
			}
			p50, p99, mx := o.num(t, "latency_p50_ms"), o.num(t, "latency_p99_ms"), o.num(t, "latency_max_ms")
			if p50 < 0 || p99 < p50 || mx < p99 || mx <= 0 {
				t.Errorf("latency p50 %v p99 %v max %v", p50, p99, mx)
			}
			if o.num(t, "deliveries_per_s") <= 0 || o.num(t, "connect_rate") <= 0 || o.num(t, "connections") != 10 {
				t.Errorf("report %v", o.report)
			}
			if o.report["codec"] != c || o.report["mode"] != "live" {
				t.Errorf("codec %v mode %v", o.report["codec"], o.report["mode"])
			}
			if m, _ := o.report["latency_method"].(string); !strings.Contains(m, "COMMIT") {
				t.Errorf("latency_method = %q", m)
			}
		})
	}
}

func TestSaturate(t *testing.T) {
	be := startBench(t, nil)
	o := be.run(t, nil, "--mode", "saturate", "--subscribers", "10", "--batch", "50", "--duration", "1s")
	o.want(t, cli.ExitOK)
	checkClean(t, o)
	if o.num(t, "deliveries_per_s") <= 0 || o.num(t, "written_events_per_s") <= 0 {
		t.Errorf("report %v", o.report)
	}
	if _, ok := o.report["lagging_closes"]; !ok {
		t.Error("no lagging_closes in the report")
	}
}

func TestIdle(t *testing.T) {
	// A short heartbeat interval proves the connections stay alive: the
	// server closes silent ones after three intervals, fewer than the run
	// holds them. (Not so short that a loaded machine's pauses outlast three.)
	be := startBench(t, &gateway.Config{HeartbeatInterval: 500 * time.Millisecond})
	t.Run("pid", func(t *testing.T) {
		o := be.run(t, nil, "--mode", "idle", "--subscribers", "10", "--settle", "100ms", "--duration", "2s",
			"--server-pid", itoa(os.Getpid()))
		o.want(t, cli.ExitOK)
		if o.num(t, "connections") != 10 || o.num(t, "server_rss_after_bytes") <= 0 || o.num(t, "held_s") < 1 {
			t.Errorf("report %v", o.report)
		}
		o.num(t, "server_rss_per_conn_bytes")
	})
	t.Run("metrics", func(t *testing.T) {
		admin := httptest.NewServer(be.env.Server.AdminHandler())
		defer admin.Close()
		o := be.run(t, nil, "--mode", "idle", "--codec", "json", "--subscribers", "5", "--settle", "50ms",
			"--duration", "100ms", "--server-metrics", admin.URL+"/metrics")
		o.want(t, cli.ExitOK)
		if o.num(t, "server_rss_before_bytes") <= 0 {
			t.Errorf("report %v", o.report)
		}
	})
}

func TestReplay(t *testing.T) {
	be := startBench(t, nil)
	for _, c := range []string{"msgpack", "json"} {
		t.Run(c, func(t *testing.T) {
			o := be.run(t, nil, "--mode", "replay", "--codec", c, "--repeat", "3", "--replay-events", "200")
			o.want(t, cli.ExitOK)
			checkClean(t, o)
			if o.num(t, "replays_completed") != 3 || o.num(t, "replayed_events") != 200 || o.num(t, "replay_p99_ms") <= 0 {
				t.Errorf("report %v", o.report)
			}
		})
	}
}

func TestReplayStorm(t *testing.T) {
	be := startBench(t, nil)
	o := be.run(t, nil, "--mode", "replay-storm", "--subscribers", "10", "--storm-events", "300", "--writers", "2")
	o.want(t, cli.ExitOK)
	checkClean(t, o)
	if o.num(t, "caught_up") != 10 || o.num(t, "storm_events") != 300 || o.num(t, "delivered_events") != 3000 {
		t.Errorf("report %v", o.report)
	}
	if o.num(t, "all_caught_up_s") <= 0 {
		t.Errorf("all_caught_up_s = %v", o.report["all_caught_up_s"])
	}
}

func TestWriter(t *testing.T) {
	be := startBench(t, nil)
	for _, explicit := range []bool{false, true} {
		args := []string{"--mode", "writer", "--writers", "3", "--batch", "20", "--duration", "1s"}
		if explicit {
			args = append(args, "--explicit-tx")
		}
		o := be.run(t, nil, args...)
		o.want(t, cli.ExitOK)
		n := o.num(t, "committed_events")
		if n < 20 || o.num(t, "read_back_rows") != n || o.num(t, "commit_order_violations") != 0 || o.num(t, "missing_events") != 0 {
			t.Errorf("report %v", o.report)
		}
		if o.num(t, "events_per_s") <= 0 {
			t.Errorf("events_per_s = %v", o.report["events_per_s"])
		}
	}
}

// dropNth drops the n-th event that connection 0 receives.
func dropNth(n int64) func(int, int64) bool {
	var seen atomic.Int64
	return func(conn int, _ int64) bool {
		return conn == 0 && seen.Add(1) == n
	}
}

// graceLoaded is the --grace of the tests that count what was delivered: the tool waits for
// the last deliveries until none has come for this long, and returns as soon as every
// subscriber has caught up or been closed, so a long one costs nothing on a quick machine and
// lets a loaded one deliver late rather than report them as gaps.
const graceLoaded = "30s"

func TestInjectedGapIsDetected(t *testing.T) {
	be := startBench(t, nil)
	t.Run("live", func(t *testing.T) {
		o := be.run(t, dropNth(3), "--subscribers", "3", "--rate", "50", "--batch", "5", "--duration", "1s", "--grace", graceLoaded)
		o.want(t, exitFailed)
		if g := o.num(t, "gaps"); g != 1 {
			t.Errorf("gaps = %v, want 1", g)
		}
		if f, _ := o.report["failures"].([]any); len(f) == 0 || !strings.Contains(f[0].(string), "gap") {
			t.Errorf("failures = %v", o.report["failures"])
		}
	})
	t.Run("replay", func(t *testing.T) {
		o := be.run(t, dropNth(10), "--mode", "replay", "--repeat", "2", "--replay-events", "50")
		o.want(t, exitFailed)
		if g := o.num(t, "gaps"); g != 1 {
			t.Errorf("gaps = %v, want 1", g)
		}
	})
	t.Run("storm", func(t *testing.T) {
		o := be.run(t, dropNth(7), "--mode", "replay-storm", "--subscribers", "3", "--storm-events", "40")
		o.want(t, exitFailed)
		if g := o.num(t, "gaps"); g != 1 {
			t.Errorf("gaps = %v, want 1", g)
		}
	})
}

func TestWrongTokenFails(t *testing.T) {
	be := startBench(t, nil)
	be.token = "not-a-token"
	o := be.run(t, nil, "--mode", "idle", "--subscribers", "2", "--settle", "0s", "--duration", "10ms")
	o.want(t, exitFailed)
	if !strings.Contains(o.stderr, "-32001") {
		t.Errorf("stderr = %q, want the -32001 error", o.stderr)
	}
}

func TestTokenURL(t *testing.T) {
	be := startBench(t, nil)
	srv := httptest.NewServer(tokenHandler(be.token))
	defer srv.Close()
	var out, errb bytes.Buffer
	code := runWith(context.Background(), []string{"--url", be.env.URL, "--token-url", srv.URL, "--mode", "idle",
		"--subscribers", "2", "--settle", "0s", "--duration", "10ms"},
		&runOptions{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errb})
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	t.Logf("%s", out.String())
	if !strings.Contains(out.String(), "result: PASS") {
		t.Errorf("table output = %q", out.String())
	}
}

func TestUsage(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	cases := []struct {
		name string
		args []string
	}{
		{"unknown flag", []string{"--nope"}},
		{"argument", []string{"--token", "x", "--db", "postgres://x", "extra"}},
		{"codec", []string{"--token", "x", "--db", "postgres://x", "--codec", "xml"}},
		{"mode", []string{"--token", "x", "--db", "postgres://x", "--mode", "fast"}},
		{"stream", []string{"--token", "x", "--db", "postgres://x", "--stream", "web"}},
		{"subscribers", []string{"--token", "x", "--db", "postgres://x", "--subscribers", "0"}},
		{"rate", []string{"--token", "x", "--db", "postgres://x", "--rate", "0"}},
		{"no db", []string{"--token", "x"}},
		{"no token", []string{"--db", "postgres://x"}},
		{"two tokens", []string{"--token", "x", "--token-cmd", "echo x", "--db", "postgres://x"}},
		{"rss sources", []string{"--token", "x", "--mode", "idle", "--server-pid", "1", "--server-metrics", "http://x/metrics"}},
		{"url", []string{"--token", "x", "--db", "postgres://x", "--url", "ftp://x"}},
		{"replay subscribers", []string{"--token", "x", "--db", "postgres://x", "--mode", "replay", "--subscribers", "2"}},
		{"duration", []string{"--token", "x", "--db", "postgres://x", "--duration", "0s"}},
		{"burst events", []string{"--token", "x", "--db", "postgres://x", "--mode", "burst", "--burst-events", "0"}},
		{"burst paused", []string{"--token", "x", "--db", "postgres://x", "--mode", "burst", "--subscribers", "2", "--paused", "3"}},
		{"burst pause", []string{"--token", "x", "--db", "postgres://x", "--mode", "burst", "--pause", "-1s"}},
		{"burst event bytes", []string{"--token", "x", "--db", "postgres://x", "--mode", "burst", "--event-bytes", "600000"}},
		{"burst payload", []string{"--token", "x", "--db", "postgres://x", "--mode", "burst", "--payload-bytes", "10"}},
		{"burst metrics", []string{"--token", "x", "--db", "postgres://x", "--mode", "burst", "--server-metrics", "http://x/metrics"}},
		{"fanout outside idle", []string{"--token", "x", "--db", "postgres://x", "--fanout-events", "1"}},
		{"fanout negative", []string{"--token", "x", "--mode", "idle", "--fanout-events", "-1"}},
		{"source addrs", []string{"--token", "x", "--mode", "idle", "--source-addrs", "127.0.0.9-127.0.0.2"}},
		{"transport", []string{"--token", "x", "--mode", "idle", "--transport", "quic"}},
		{"http msgpack", []string{"--token", "x", "--mode", "idle", "--transport", "http", "--codec", "msgpack"}},
		{"http replay", []string{"--token", "x", "--db", "postgres://x", "--mode", "replay", "--transport", "http"}},
		{"http burst", []string{"--token", "x", "--db", "postgres://x", "--mode", "burst", "--transport", "http"}},
		{"http ws client", []string{"--token", "x", "--mode", "idle", "--transport", "http", "--ws-client", "lean"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), c.args, getenv, &out, &errb)
			if code != cli.ExitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, cli.ExitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), "usage: ballet-bench") {
				t.Errorf("stderr lacks the usage: %q", errb.String())
			}
		})
	}
	t.Run("env fallbacks", func(t *testing.T) {
		env = map[string]string{"BALLET_TOKEN": "t", "BALLET_DATABASE_URL": "postgres://x", "BALLET_BENCH_URL": "ws://h:1/rpc"}
		defer func() { env = map[string]string{} }()
		cfg, err := parse(nil, getenv)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.token != "t" || cfg.db != "postgres://x" || cfg.url != "ws://h:1/rpc" || cfg.batch != 1 {
			t.Errorf("cfg %+v", cfg)
		}
		cfg, err = parse([]string{"--mode", "saturate"}, getenv)
		if err != nil || cfg.batch != 200 {
			t.Errorf("saturate batch %d, %v", cfg.batch, err)
		}
	})
	t.Run("help", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"--help"}, getenv, &out, &errb); code != cli.ExitOK {
			t.Fatalf("exit %d", code)
		}
		if !strings.Contains(out.String(), "replay-storm") {
			t.Errorf("help = %q", out.String())
		}
		for _, args := range [][]string{{"-h"}, {"--version"}} {
			out.Reset()
			if code := run(context.Background(), args, getenv, &out, &errb); code != cli.ExitOK || out.Len() == 0 {
				t.Errorf("%v: exit %d, stdout %q", args, code, out.String())
			}
		}
		if !strings.HasPrefix(out.String(), "ballet-bench ") {
			t.Errorf("--version = %q", out.String())
		}
	})
}

// stallFirst makes connection 0 stop reading for d at its first event, as a
// slow client: the server's socket to it fills up, then its queue.
func stallFirst(d time.Duration) func(int, int64) bool {
	var once sync.Once
	return func(conn int, _ int64) bool {
		if conn == 0 {
			once.Do(func() { time.Sleep(d) })
		}
		return false
	}
}

func TestLaggingIsReported(t *testing.T) {
	// The stalled client falls out of a window of 64 KiB of recent events once the socket
	// to it is full, and is more than 20 events behind: lagging.
	be := startBenchWith(t, &gatewaytest.Options{RecentBytes: 64 << 10, CatchUpLimit: 20, Config: gateway.Config{ReplayLimit: 20}})
	t.Run("saturate", func(t *testing.T) {
		o := be.run(t, stallFirst(time.Second), "--mode", "saturate", "--subscribers", "3", "--batch", "50",
			"--payload-bytes", "4000", "--duration", "1s")
		o.want(t, exitFailed)
		// Events the server dropped with a lagging close are not gaps.
		if o.num(t, "lagging_closes") == 0 || o.num(t, "missed_by_lagging") == 0 {
			t.Errorf("report %v", o.report)
		}
		checkClean(t, o)
		if f, _ := o.report["failures"].([]any); len(f) != 1 || !strings.Contains(f[0].(string), "lagging") {
			t.Errorf("failures = %v", o.report["failures"])
		}
	})
	t.Run("live", func(t *testing.T) {
		o := be.run(t, stallFirst(time.Second), "--subscribers", "3", "--rate", "2000", "--batch", "100",
			"--payload-bytes", "4000", "--duration", "1s", "--grace", graceLoaded)
		o.want(t, exitFailed)
		if o.num(t, "lagging_closes") == 0 {
			t.Errorf("report %v", o.report)
		}
	})
}
