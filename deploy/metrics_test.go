package deploy

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/internal/poolmetrics"
	"github.com/ballet/gateway/internal/tailmetrics"
)

// metricInfo is a metric family the queries may name.
type metricInfo struct {
	kind   dto.MetricType
	labels map[string]bool
}

// registeredInRoot are the metrics the replica's composition root (internal/server)
// registers on the gateway's registry itself (they read the parts at scrape time). The
// test checks that the root still registers them.
var registeredInRoot = map[string]metricInfo{
	"ballet_gateway_log_head":                     {kind: dto.MetricType_GAUGE},
	"ballet_gateway_tail_lag_seconds":             {kind: dto.MetricType_GAUGE},
	"ballet_gateway_recent_events_bytes":          {kind: dto.MetricType_GAUGE},
	"ballet_gateway_catch_ups_running":            {kind: dto.MetricType_GAUGE},
	"ballet_gateway_catch_up_bytes":               {kind: dto.MetricType_GAUGE},
	"ballet_gateway_catch_up_pages_dropped_total": {kind: dto.MetricType_COUNTER},
	"ballet_gateway_queued_bytes":                 {kind: dto.MetricType_GAUGE},
	"ballet_gateway_queued_bytes_budget":          {kind: dto.MetricType_GAUGE},
}

// poolDescRE reads a Desc's name and variable labels from its String form.
var poolDescRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// plannedMetrics are metrics the dashboard and the alert rules query before
// the gateway exports them; when one is registered, delete it from this list.
// Any other unknown name fails the test.
var plannedMetrics = map[string]metricInfo{}

// touchVectors gives every labelled vector among the fields of the metrics struct v one
// child, so that its family and label names show up when gathered.
func touchVectors(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		get := v.Field(i).MethodByName("GetMetricWithLabelValues")
		if !get.IsValid() {
			continue
		}
		// The label count is not exported: try arities until one fits.
		touched := false
		for n := 0; n <= 8 && !touched; n++ {
			args := make([]reflect.Value, n)
			for j := range args {
				args[j] = reflect.ValueOf("x")
			}
			out := get.Call(args)
			touched = out[1].IsNil()
		}
		if !touched {
			t.Fatalf("could not create a child of %s.%s", v.Type().Name(), v.Type().Field(i).Name)
		}
	}
}

// replicaMetrics are the gateway's metrics with the tailer's, which the root registers on the
// same registry.
func replicaMetrics() *gateway.Metrics {
	m := gateway.NewMetrics()
	m.Registry.MustRegister(tailmetrics.New().Collectors()...)
	return m
}

// gatewayMetrics gathers the gateway's registry (with the planner's metrics) after giving
// every labelled vector one child, so that each family and its label names show up.
func gatewayMetrics(t *testing.T) map[string]metricInfo {
	t.Helper()
	m := replicaMetrics()
	touchVectors(t, reflect.ValueOf(m).Elem())
	touchVectors(t, reflect.ValueOf(m.Planner).Elem())
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metricInfo{}
	for _, fam := range fams {
		info := metricInfo{kind: fam.GetType(), labels: map[string]bool{}}
		for _, mt := range fam.GetMetric() {
			for _, l := range mt.GetLabel() {
				info.labels[l.GetName()] = true
			}
		}
		out[fam.GetName()] = info
	}
	app := readFile(t, filepath.Join(root, "internal", "server", "metrics.go"))
	for name, info := range registeredInRoot {
		if !strings.Contains(app, fmt.Sprintf("Name: %q", name)) {
			t.Fatalf("internal/server/metrics.go no longer registers %s: update registeredInRoot", name)
		}
		out[name] = info
	}
	// The Postgres pool's collector (registered by serve) describes its
	// families without a pool.
	descs := make(chan *prometheus.Desc, 16)
	poolmetrics.New(nil).Describe(descs)
	close(descs)
	for d := range descs {
		m := poolDescRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		info := metricInfo{kind: dto.MetricType_GAUGE, labels: map[string]bool{}}
		if strings.HasSuffix(m[1], "_total") {
			info.kind = dto.MetricType_COUNTER
		}
		for _, l := range strings.Fields(strings.NewReplacer(",", " ").Replace(m[2])) {
			info.labels[l] = true
		}
		out[m[1]] = info
	}
	for name := range plannedMetrics {
		if _, ok := out[name]; ok {
			t.Errorf("%s is registered now: remove it from plannedMetrics", name)
		}
	}
	return out
}

// seriesNames maps each name a query may use to its family: a histogram is
// queried as _bucket, _sum and _count, a summary as itself, _sum and _count.
func seriesNames(fams map[string]metricInfo) map[string]string {
	out := map[string]string{}
	for name, info := range fams {
		switch info.kind {
		case dto.MetricType_HISTOGRAM:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[name+s] = name
			}
		case dto.MetricType_SUMMARY:
			for _, s := range []string{"", "_sum", "_count"} {
				out[name+s] = name
			}
		default:
			out[name] = name
		}
	}
	return out
}

var (
	metricRefRE = regexp.MustCompile(`\b((?:ballet_gateway|go|process)_[a-zA-Z0-9_]+)\b(\{[^}]*\})?`)
	matcherRE   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// metricRef is one metric named in a query, with the label names its
// selector matches on.
type metricRef struct {
	name   string
	labels []string
	sel    string
}

func metricRefs(expr string) []metricRef {
	var refs []metricRef
	for _, m := range metricRefRE.FindAllStringSubmatch(expr, -1) {
		r := metricRef{name: m[1], sel: m[2]}
		for _, l := range matcherRE.FindAllStringSubmatch(m[2], -1) {
			r.labels = append(r.labels, l[1])
		}
		refs = append(refs, r)
	}
	return refs
}

// checkExprs fails for every metric an expression names that the gateway
// does not export (or plan to), and for every selector label it lacks.
func checkExprs(t *testing.T, where string, exprs []string) map[string]bool {
	t.Helper()
	fams := gatewayMetrics(t)
	for name, info := range plannedMetrics {
		fams[name] = info
	}
	series := seriesNames(fams)
	used := map[string]bool{}
	for _, expr := range exprs {
		for _, ref := range metricRefs(expr) {
			fam, ok := series[ref.name]
			if !ok {
				hint := ""
				if fams[ref.name].kind == dto.MetricType_HISTOGRAM {
					hint = " (a histogram: query _bucket, _sum or _count)"
				}
				t.Errorf("%s: unknown metric %s%s in %q", where, ref.name, hint, expr)
				continue
			}
			used[fam] = true
			for _, l := range ref.labels {
				known := fams[fam].labels[l] || l == "job" || l == "instance" ||
					(l == "le" && strings.HasSuffix(ref.name, "_bucket")) ||
					(l == "quantile" && fams[fam].kind == dto.MetricType_SUMMARY)
				if !known {
					t.Errorf("%s: %s has no label %q (it has %v) in %q", where, fam, l, keys(fams[fam].labels), expr)
				}
			}
		}
	}
	return used
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestMetricRefs(t *testing.T) {
	got := metricRefs(`sum by (reason) (rate(ballet_gateway_auth_failures_total{job=~"$job", reason!="x"}[5m])) / go_goroutines`)
	want := []metricRef{
		{name: "ballet_gateway_auth_failures_total", labels: []string{"job", "reason"}, sel: `{job=~"$job", reason!="x"}`},
		{name: "go_goroutines"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestDashboardMetricsExist(t *testing.T) {
	var d dashboard
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join("grafana", "ballet-gateway.json"))), &d); err != nil {
		t.Fatal(err)
	}
	used := checkExprs(t, "dashboard", d.exprs())
	// Every gateway metric and every planned one has a panel.
	fams := gatewayMetrics(t)
	for name := range plannedMetrics {
		fams[name] = metricInfo{}
	}
	for name := range fams {
		if strings.HasPrefix(name, "ballet_gateway_") && !used[name] {
			t.Errorf("no dashboard panel queries %s", name)
		}
	}
}

func TestAlertMetricsExist(t *testing.T) {
	rules := alertRules(t)
	var exprs []string
	for _, r := range rules {
		exprs = append(exprs, r.expr)
	}
	used := checkExprs(t, "alerts.yml", exprs)
	for _, name := range []string{
		"ballet_gateway_lagging_closes_total", "ballet_gateway_events_delivered_total",
		"ballet_gateway_delivery_latency_seconds", "ballet_gateway_log_head", "ballet_gateway_tailer_position",
		"ballet_gateway_auth_failures_total", "ballet_gateway_planner_provider_errors_total",
		"ballet_gateway_planner_turns_total",
	} {
		if !used[name] {
			t.Errorf("no alert rule uses %s", name)
		}
	}
	if !slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, `up{job="ballet-gateway"} == 0`) }) {
		t.Error(`no alert on up{job="ballet-gateway"} == 0`)
	}
}

// TestMetricsDocumented: every ballet_gateway_* metric the gateway exports has a row in
// docs/operations.md's metrics table, and every row names an exported metric.
func TestMetricsDocumented(t *testing.T) {
	doc := readFile(t, filepath.Join(root, "docs", "operations.md"))
	_, table, ok := strings.Cut(doc, "\n## Metrics\n")
	if !ok {
		t.Fatal("docs/operations.md has no Metrics section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	rows := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 {
			if name := strings.Trim(strings.TrimSpace(cells[1]), "`"); strings.HasPrefix(name, "ballet_gateway_") {
				rows[name] = true
			}
		}
	}
	fams := gatewayMetrics(t)
	for name := range fams {
		if strings.HasPrefix(name, "ballet_gateway_") && !rows[name] {
			t.Errorf("%s has no row in docs/operations.md's metrics table", name)
		}
	}
	for name := range rows {
		if _, ok := fams[name]; !ok {
			t.Errorf("docs/operations.md documents %s, which the gateway does not export", name)
		}
	}
}

// TestMetricsExportedAtStart: a fresh replica's /metrics has every metric of docs/operations.md's
// table, untouched by any event (no vector given a child by the test), except the planner
// provider's series, which come with the planner (PlannerObserver). A dashboard or an alert
// over any of them reads 0 on a new replica rather than no data.
func TestMetricsExportedAtStart(t *testing.T) {
	doc := readFile(t, filepath.Join(root, "docs", "operations.md"))
	_, table, _ := strings.Cut(doc, "\n## Metrics\n")
	table, _, _ = strings.Cut(table, "\n## ")
	gather := func(m *gateway.Metrics) map[string]bool {
		fams, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, f := range fams {
			out[f.GetName()] = true
		}
		for name := range registeredInRoot {
			out[name] = true // registered by the root, read at scrape time
		}
		descs := make(chan *prometheus.Desc, 16)
		poolmetrics.New(nil).Describe(descs)
		close(descs)
		for d := range descs {
			out[poolDescRE.FindStringSubmatch(d.String())[1]] = true // registered by serve with its pool
		}
		return out
	}
	fresh := gather(replicaMetrics())
	withPlanner := replicaMetrics()
	withPlanner.PlannerObserver("anthropic")
	planner := gather(withPlanner)
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if !strings.HasPrefix(name, "ballet_gateway_") {
			continue
		}
		onlyWithPlanner := strings.HasPrefix(name, "ballet_gateway_planner_provider_") || name == "ballet_gateway_planner_tokens_total"
		switch {
		case !onlyWithPlanner && !fresh[name]:
			t.Errorf("%s is not exported by a fresh replica: give its fixed label values a zero series", name)
		case onlyWithPlanner && fresh[name]:
			t.Errorf("%s is exported without the planner: docs/operations.md says it comes with it", name)
		case onlyWithPlanner && !planner[name]:
			t.Errorf("%s is not exported with the planner on", name)
		}
	}
}
