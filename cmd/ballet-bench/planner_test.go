package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/internal/cli"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// plannerEnv is two replicas on one Postgres, each running the planner with the Anthropic
// provider pointed at the model the benchmark serves on ln, the BENCH project whose admin
// "bench" holds token, and tokenURL, a token mint answering as the dev server's /dev/token.
type plannerEnv struct {
	urls     string
	token    string
	tokenURL string
	ln       net.Listener
}

func startPlanner(t *testing.T) *plannerEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	prov, err := provider.NewAnthropic(&provider.AnthropicOptions{BaseURL: "http://" + ln.Addr().String(), APIKey: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	o := &gatewaytest.Options{
		Postgres: true, Planner: prov,
		// The one subject of --subjects 1 stands for every person of its run.
		Config:         gateway.Config{SubjectRequestRate: 1_000_000, RequestRate: 1_000_000},
		PlannerOptions: planner.Options{TurnsPerSubject: 1000, SessionRate: 1000},
	}
	a := gatewaytest.Start(t, o)
	a.Project(t, "BENCH", "bench", "admin")
	o2 := *o
	o2.Database, o2.Issuer = a.DatabaseURL, a.Issuer
	b := gatewaytest.Start(t, &o2)
	mint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := a.Issuer.Mint(r.URL.Query().Get("subject"), auth.TokenOptions{Audience: []string{gatewaytest.Audience}})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"token": tok})
	}))
	t.Cleanup(mint.Close)
	return &plannerEnv{urls: a.URL + "," + b.URL, token: a.Token(t, "bench"), ln: ln,
		tokenURL: mint.URL + "/dev/token?subject={subject}"}
}

func (pe *plannerEnv) run(t *testing.T, drop func(int, int) bool, args ...string) *outcome {
	t.Helper()
	all := append([]string{"--mode", "planner", "--url", pe.urls, "--token", pe.token, "--json",
		"--model-listen", pe.ln.Addr().String(), "--grace", graceLoaded, "--subject-token-url", pe.tokenURL}, args...)
	return runBench(t, &runOptions{ModelListener: pe.ln, DropDelta: drop}, all)
}

func TestPlanner(t *testing.T) {
	pe := startPlanner(t)
	const turns, watchers, deltas = 6, 2, 20
	// Three people, two turns each; a turn of each on either replica.
	o := pe.run(t, nil, "--turns", "6", "--watchers", "2", "--connections", "2",
		"--outputs-per-second", "20", "--turn-seconds", "1", "--subjects", "3")
	o.want(t, cli.ExitOK)
	pe.checkSenders(t, 3, turns)
	for _, k := range []string{"gaps", "duplicates", "out_of_order", "offset_gaps", "offset_duplicates",
		"turns_without_done", "watchers_without_done"} {
		if v := o.num(t, k); v != 0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}
	want := float64(turns * watchers * deltas)
	if e, d := o.num(t, "expected_deliveries"), o.num(t, "delivered_deltas"); e != want || d != want {
		t.Errorf("expected %v, delivered %v, want %v", e, d, want)
	}
	if n := o.num(t, "latency_samples"); n != want {
		t.Errorf("latency_samples = %v, want %v", n, want)
	}
	if o.num(t, "deltas_emitted") != turns*deltas || o.num(t, "model_requests") != turns || o.num(t, "sends") != turns {
		t.Errorf("report %v", o.report)
	}
	// Each turn: its text outputs, the stored answer's message, done.
	if n := o.num(t, "outputs"); n < turns*3 {
		t.Errorf("outputs = %v", n)
	}
	p50, p99, mx := o.num(t, "latency_p50_ms"), o.num(t, "latency_p99_ms"), o.num(t, "latency_max_ms")
	if p50 <= 0 || p99 < p50 || mx < p99 {
		t.Errorf("latency p50 %v p99 %v max %v", p50, p99, mx)
	}
	if o.report["mode"] != "planner" || o.num(t, "replicas") != 2 || o.num(t, "subjects") != 3 {
		t.Errorf("report %v", o.report)
	}
}

// checkSenders checks that the run's turns sessions were created by the people subjects
// bench-0 … bench-(people-1), as many by each.
func (pe *plannerEnv) checkSenders(t *testing.T, people, turns int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, restBase(strings.Split(pe.urls, ",")[0])+"/api/v1/projects/BENCH/planner/sessions?limit=100", nil)
	req.Header.Set("Authorization", "Bearer "+pe.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Sessions []struct {
			CreatedBy string `json:"created_by"`
			Running   bool   `json:"running"`
		} `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sessions: %s, %v", resp.Status, err)
	}
	by := map[string]int{}
	for _, s := range page.Sessions {
		by[s.CreatedBy]++
	}
	if len(page.Sessions) != turns || len(by) != people {
		t.Fatalf("sessions by subject %v, want %d of each of %d people", by, turns/people, people)
	}
	for j := range people {
		if n := by[senderName(j)]; n != turns/people {
			t.Errorf("%s created %d sessions, want %d", senderName(j), n, turns/people)
		}
	}
}

func TestPlannerOneSubject(t *testing.T) {
	pe := startPlanner(t)
	o := runBench(t, &runOptions{ModelListener: pe.ln}, []string{"--mode", "planner", "--url", pe.urls, "--token", pe.token,
		"--json", "--model-listen", pe.ln.Addr().String(), "--grace", graceLoaded, "--subjects", "1",
		"--turns", "3", "--watchers", "1", "--connections", "1", "--outputs-per-second", "20", "--turn-seconds", "0.5"})
	o.want(t, cli.ExitOK)
	if o.num(t, "sends") != 3 || o.num(t, "subjects") != 1 {
		t.Errorf("report %v", o.report)
	}
}

func TestPlannerLossIsDetected(t *testing.T) {
	pe := startPlanner(t)
	var mu sync.Mutex
	dropped := false
	drop := func(w, n int) bool {
		mu.Lock()
		defer mu.Unlock()
		if w == 1 && n == 3 && !dropped {
			dropped = true
			return true
		}
		return false
	}
	o := pe.run(t, drop, "--turns", "2", "--watchers", "1", "--connections", "1",
		"--outputs-per-second", "20", "--turn-seconds", "0.5")
	o.want(t, exitFailed)
	if g := o.num(t, "gaps"); g != 1 {
		t.Errorf("gaps = %v, want 1", g)
	}
	if f, _ := o.report["failures"].([]any); len(f) != 1 || !strings.Contains(f[0].(string), "never delivered") {
		t.Errorf("failures = %v", o.report["failures"])
	}
}

func TestPlannerUsage(t *testing.T) {
	base := []string{"--mode", "planner", "--token", "x", "--model-listen", "127.0.0.1:0"}
	cases := map[string][]string{
		"no model":         {"--mode", "planner", "--token", "x"},
		"model address":    {"--mode", "planner", "--token", "x", "--model-listen", "nowhere"},
		"turns":            append(base, "--turns", "0"),
		"rate":             append(base, "--outputs-per-second", "0"),
		"too few conns":    append(base, "--watchers", "3", "--connections", "2"),
		"replicas other":   append(base, "--url", "ws://a:1/rpc,ws://b:1/rpc", "--watchers", "3", "--connections", "2"),
		"urls elsewhere":   {"--token", "x", "--db", "postgres://x", "--url", "ws://a:1/rpc,ws://b:1/rpc"},
		"db-cost planner":  append(base, "--db-cost"),
		"subjects, no url": append(base, "--turns", "4", "--subjects", "2"),
		"default subjects": append(base, "--turns", "4"),
		"too many people":  append(base, "--turns", "4", "--subjects", "5", "--subject-token-url", "http://a/{subject}"),
		"no placeholder":   append(base, "--subjects", "1", "--subject-token-url", "http://a/token"),
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), args, func(string) string { return "" }, &out, &errb); code != cli.ExitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, cli.ExitUsage, errb.String())
			}
		})
	}
	cfg, err := parse(append(base, "--url", "ws://a:1/rpc,ws://b:1/rpc,ws://c:1/rpc", "--watchers", "4", "--connections", "2",
		"--subject-token-url", "http://a/t?s={subject}"), func(string) string { return "" })
	if err != nil || len(cfg.urls) != 3 || cfg.deltasPerTurn() != 250 || cfg.subjects != cfg.turns {
		t.Fatalf("cfg %+v, %v", cfg, err)
	}
}

func TestParseStamps(t *testing.T) {
	var got []string
	junk := parseStamps("[0@12][1@34]x[2@]y[3@56]", func(n int, ts int64) {
		got = append(got, stamp(n, ts))
	})
	if strings.Join(got, "") != "[0@12][1@34][3@56]" || junk != 6 {
		t.Errorf("got %v, junk %d", got, junk)
	}
}
