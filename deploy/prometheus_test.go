package deploy

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	promtoolHint = "install Debian's prometheus package (apt-get install --no-install-recommends prometheus)"
	runbookBase  = "https://github.com/ballet/gateway/blob/main/docs/runbooks.md#"
)

type alertRule struct {
	name, expr  string
	labels      map[string]any
	annotations map[string]any
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	doc := loadYAML(t, filepath.Join("prometheus", "alerts.yml"))[0][0]
	var rules []alertRule
	for _, g := range list(doc, "groups") {
		for _, r := range list(g, "rules") {
			rules = append(rules, alertRule{
				name: str(r, "alert"), expr: str(r, "expr"),
				labels: dict(r, "labels"), annotations: dict(r, "annotations"),
			})
		}
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	return rules
}

func TestPromtool(t *testing.T) {
	promtool := requireTool(t, "promtool", promtoolHint)
	dir := "prometheus"
	t.Run("check rules", func(t *testing.T) { run(t, dir, promtool, "check", "rules", "alerts.yml") })
	t.Run("test rules", func(t *testing.T) { run(t, dir, promtool, "test", "rules", "alerts_test.yml") })
	t.Run("check config", func(t *testing.T) { run(t, dir, promtool, "check", "config", "prometheus.yml") })
}

func TestAlertRules(t *testing.T) {
	want := []string{
		"BalletGatewayDown", "BalletGatewayNoReadyReplicas", "BalletGatewayDatabaseUnreachable",
		"BalletGatewayTailerBehind", "BalletGatewayStandbyLag", "BalletGatewayDeliveryLatencyHigh", "BalletGatewayLagging",
		"BalletGatewayShedding", "BalletGatewayAuthFailures", "BalletGatewayIssuerUnavailable",
		"BalletGatewayPlannerProviderErrors", "BalletGatewayPlannerTurnErrors",
	}
	rules := alertRules(t)
	byName := map[string]alertRule{}
	for _, r := range rules {
		if r.name == "" {
			t.Errorf("a rule without an alert name (recording rules belong elsewhere): %q", r.expr)
			continue
		}
		if _, dup := byName[r.name]; dup {
			t.Errorf("alert %s defined twice", r.name)
		}
		byName[r.name] = r
		switch r.labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("%s: severity label %v, want critical, warning or info", r.name, r.labels["severity"])
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if s, _ := r.annotations[a].(string); strings.TrimSpace(s) == "" {
				t.Errorf("%s: no %s annotation", r.name, a)
			}
		}
		if u, want := r.annotations["runbook_url"], runbookBase+runbookAnchor(r.name); u != want {
			t.Errorf("%s: runbook_url %v, want %s", r.name, u, want)
		}
	}
	for _, name := range want {
		if _, ok := byName[name]; !ok {
			t.Errorf("no alert %s", name)
		}
	}
	if r := byName["BalletGatewayDeliveryLatencyHigh"]; !strings.Contains(r.expr, "> 0.2") {
		t.Errorf("BalletGatewayDeliveryLatencyHigh does not compare with the spec's 200 ms: %q", r.expr)
	}
	if r := byName["BalletGatewayDatabaseUnreachable"]; !strings.Contains(r.expr, "ballet_gateway_log_head == -1") {
		t.Errorf("BalletGatewayDatabaseUnreachable does not test log_head == -1: %q", r.expr)
	}
	if r := byName["BalletGatewayPlannerTurnErrors"]; !strings.Contains(r.expr, `outcome="error"`) {
		t.Errorf("BalletGatewayPlannerTurnErrors does not select outcome=\"error\": %q", r.expr)
	}

	// alerts_test.yml has, for every alert, a case where it fires and one
	// where it does not.
	tests := loadYAML(t, filepath.Join("prometheus", "alerts_test.yml"))[0][0]
	if files := list(tests, "rule_files"); len(files) != 1 || files[0] != "alerts.yml" {
		t.Errorf("alerts_test.yml rule_files = %v, want [alerts.yml]", files)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range list(tests, "tests") {
		for _, c := range list(tc, "alert_rule_test") {
			name := str(c, "alertname")
			if _, ok := byName[name]; !ok {
				t.Errorf("alerts_test.yml tests unknown alert %q", name)
			}
			if len(list(c, "exp_alerts")) > 0 {
				fires[name] = true
			} else {
				quiet[name] = true
			}
		}
	}
	for name := range byName {
		if !fires[name] {
			t.Errorf("alerts_test.yml has no case where %s fires", name)
		}
		if !quiet[name] {
			t.Errorf("alerts_test.yml has no case where %s stays quiet", name)
		}
	}
}

// runbookAnchor is the anchor GitHub gives the heading "Alert: NAME".
func runbookAnchor(alert string) string { return "alert-" + strings.ToLower(alert) }

var headingRE = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)

// githubSlug is GitHub's anchor for a Markdown heading: lower case, spaces to
// hyphens, punctuation other than hyphens and underscores dropped.
func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestRunbookAnchors checks that every alert's runbook_url lands on a heading of
// docs/runbooks.md, that every runbook there is of an alert, and that every alert has a row
// in deploy/README.md's table.
func TestRunbookAnchors(t *testing.T) {
	path := filepath.Join(root, "docs", "runbooks.md")
	doc, anchors := readFile(t, path), headingAnchors(t, path)
	readme := readFile(t, "README.md")
	alerts := map[string]bool{}
	for _, r := range alertRules(t) {
		alerts[r.name] = true
		u, _ := r.annotations["runbook_url"].(string)
		_, anchor, _ := strings.Cut(u, "#")
		if !anchors[anchor] {
			t.Errorf("%s: docs/runbooks.md has no heading %q (anchor #%s)", r.name, "Alert: "+r.name, anchor)
		}
		if !strings.Contains(readme, "\n| "+r.name+" |") {
			t.Errorf("%s has no row in deploy/README.md's table of alerts", r.name)
		}
	}
	for _, m := range runbookRE.FindAllStringSubmatch(doc, -1) {
		if !alerts[m[1]] {
			t.Errorf("docs/runbooks.md has a runbook of %s, which alerts.yml does not define", m[1])
		}
	}
}

var runbookRE = regexp.MustCompile(`(?m)^#{1,6}\s+Alert: (\S+)\s*$`)

func TestGithubSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Alert: BalletGatewayLagging": "alert-balletgatewaylagging",
		"Operating ballet-gateway":    "operating-ballet-gateway",
		"`/readyz` and probes":        "readyz-and-probes",
	} {
		if got := githubSlug(in); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScrapeConfig(t *testing.T) {
	cfg := loadYAML(t, filepath.Join("prometheus", "prometheus.yml"))[0][0]
	found := false
	for _, f := range list(cfg, "rule_files") {
		found = found || f == "alerts.yml"
	}
	if !found {
		t.Error("prometheus.yml does not load alerts.yml")
	}
	var job any
	for _, sc := range list(cfg, "scrape_configs") {
		if str(sc, "job_name") == "ballet-gateway" {
			job = sc
		}
	}
	if job == nil {
		t.Fatal(`prometheus.yml has no job "ballet-gateway" (the alert rules select it)`)
	}
	if p := str(job, "metrics_path"); p != "" && p != "/metrics" {
		t.Errorf("metrics_path %q, want /metrics", p)
	}
	for _, sc := range list(job, "static_configs") {
		for _, target := range list(sc, "targets") {
			if s, _ := target.(string); !strings.HasSuffix(s, ":8081") {
				t.Errorf("target %v is not an admin port (8081)", target)
			}
		}
	}
}
