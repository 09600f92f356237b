package gateway_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

const metricsScript = `{"chunk": 4, "rules": [
 {"match": "plan", "steps": [[{"text": "Listing."}, {"tool": "list_items", "input": {}}]], "final": "Done."},
 {"match": "fail", "steps": [[{"text": "partial"}, {"error": "upstream exploded"}]]},
 {"match": "slow", "steps": [[{"text": "Thinking"}, {"pause_ms": 20000}]]}
]}`

// plannerTraffic starts a gateway with the planner feeding its metrics and plays a
// finished, a failed and a cancelled turn; it returns the admin port's /metrics text.
func plannerTraffic(t *testing.T) string {
	t.Helper()
	script, err := provider.ParseScript(strings.NewReader(metricsScript))
	if err != nil {
		t.Fatal(err)
	}
	m := gateway.NewMetrics()
	env := gatewaytest.Start(t, &gatewaytest.Options{
		Planner: provider.NewScripted(script), Metrics: m,
		PlannerOptions: planner.Options{Observer: m.PlannerObserver("scripted")},
	})
	env.Project(t, "WEB", "alice", "member")
	alice := login(t, env, codec.JSON, "alice")
	for i, text := range []string{"plan the week", "fail now", "slow please"} {
		session := createSession(t, env, env.Token(t, "alice"))
		sub := "p" + strconv.Itoa(i)
		alice.mustCall("planner.watch", map[string]any{"subscription": sub, "session": session}, nil)
		alice.mustCall("planner.send", map[string]any{"session": session, "text": text}, nil)
		if text == "slow please" {
			for o := alice.outputs1(sub); o.Type != "text"; o = alice.outputs1(sub) {
			}
			alice.mustCall("planner.cancel", map[string]any{"session": session}, nil)
		}
		alice.outputs(sub)
	}
	admin := httptest.NewServer(env.Server.AdminHandler())
	defer admin.Close()
	resp, err := http.Get(admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// outputs1 reads the next planner.output of sub.
func (k *wsClient) outputs1(sub string) output {
	k.t.Helper()
	for {
		m := k.mustNext()
		if m.Method != "planner.output" {
			continue
		}
		var o output
		if err := k.c.Unmarshal(m.Params, &o); err != nil {
			k.t.Fatal(err)
		}
		if o.Subscription == sub {
			return o
		}
	}
}

func TestPlannerMetrics(t *testing.T) {
	body := plannerTraffic(t)
	for _, want := range []string{
		`ballet_gateway_planner_turns_total{outcome="end_turn"} 1`,
		`ballet_gateway_planner_turns_total{outcome="error"} 1`,
		`ballet_gateway_planner_turns_total{outcome="cancelled"} 1`,
		`ballet_gateway_planner_turns_total{outcome="max_rounds"} 0`,
		`ballet_gateway_planner_turn_duration_seconds_count 3`,
		// Two calls for the finished turn, one failed; the cancelled call is not counted.
		`ballet_gateway_planner_provider_latency_seconds_count{provider="scripted"} 3`,
		`ballet_gateway_planner_provider_errors_total{kind="server",provider="scripted"} 1`,
		`ballet_gateway_planner_provider_errors_total{kind="rate_limited",provider="scripted"} 0`,
		`ballet_gateway_planner_provider_errors_total{kind="malformed",provider="scripted"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, kind := range []string{"input", "output"} {
		re := regexp.MustCompile(`ballet_gateway_planner_tokens_total\{kind="` + kind + `",provider="scripted"\} ([0-9.e+]+)\n`)
		m := re.FindStringSubmatch(body)
		if m == nil {
			t.Errorf("metrics lack %s tokens", kind)
			continue
		}
		if v, _ := strconv.ParseFloat(m[1], 64); v <= 0 {
			t.Errorf("%s tokens %s", kind, m[1])
		}
	}
}

// TestMetricsPassPromtool runs the exposition through promtool's linter.
func TestMetricsPassPromtool(t *testing.T) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed")
		}
		t.Skip("promtool is not installed")
	}
	body := plannerTraffic(t)
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
	if s := strings.TrimSpace(out.String()); s != "" {
		t.Fatalf("promtool check metrics:\n%s", s)
	}
}
