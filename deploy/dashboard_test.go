package deploy

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Datasource  *dsRef `json:"datasource"`
	GridPos     grid   `json:"gridPos"`
	Panels      []panel
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds struct {
				Steps []struct {
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr       string `json:"expr"`
		RefID      string `json:"refId"`
		Datasource *dsRef `json:"datasource"`
	} `json:"targets"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grid struct{ H, W, X, Y int }

// all is the panels, with those nested in collapsed rows.
func (d *dashboard) all() []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

func (d *dashboard) exprs() []string {
	var out []string
	for _, p := range d.all() {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			if s, ok := q["query"].(string); ok {
				out = append(out, s)
			}
		} else if s, ok := v.Query.(string); ok && v.Type == "query" {
			out = append(out, s)
		}
	}
	return out
}

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	raw := readFile(t, filepath.Join("grafana", "ballet-gateway.json"))
	if !json.Valid([]byte(raw)) {
		t.Fatal("grafana/ballet-gateway.json is not valid JSON")
	}
	var d dashboard
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title")
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" {
		t.Error("no datasource variable")
	}
	for _, name := range []string{"job", "instance"} {
		if vars[name] != "query" {
			t.Errorf("no %s query variable", name)
		}
	}

	ids := map[int]string{}
	var cells []panel
	for _, p := range d.all() {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for _, c := range cells {
			o := c.GridPos
			if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
				t.Errorf("panels %q and %q overlap", c.Title, p.Title)
			}
		}
		cells = append(cells, p)
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q query %s does not use the datasource variable", p.Title, tg.RefID)
			}
			// Every selector is filtered by the job and instance variables.
			for _, ref := range metricRefs(tg.Expr) {
				if !strings.Contains(ref.sel, `job=~"$job"`) || !strings.Contains(ref.sel, `instance=~"$instance"`) {
					t.Errorf("panel %q: %s is not filtered by $job and $instance: %q", p.Title, ref.name, tg.Expr)
				}
			}
		}
	}
}

// TestDashboardPanels checks the panels operators look for first.
func TestDashboardPanels(t *testing.T) {
	d := loadDashboard(t)
	has := func(substr ...string) *panel {
		for _, p := range d.all() {
			for _, tg := range p.Targets {
				ok := true
				for _, s := range substr {
					ok = ok && strings.Contains(tg.Expr, s)
				}
				if ok {
					return &p
				}
			}
		}
		t.Errorf("no panel queries %q", substr)
		return nil
	}
	has("sum by (codec)", "ballet_gateway_connections{")
	has("sum by (code)", "ballet_gateway_closes_total")
	has("sum by (reason)", "ballet_gateway_auth_failures_total")
	has("sum by (method)", `code!="0"`, "ballet_gateway_rpc_requests_total")
	has("histogram_quantile(0.5,", "ballet_gateway_rpc_request_duration_seconds_bucket")
	has("histogram_quantile(0.99,", "ballet_gateway_rpc_request_duration_seconds_bucket")
	has("sum by (kind)", "ballet_gateway_subscriptions")
	has("histogram_quantile(0.5,", "ballet_gateway_delivery_latency_seconds_bucket")
	has("ballet_gateway_log_head", "- ballet_gateway_tailer_position")
	has("go_goroutines")
	has("go_memstats_heap_inuse_bytes")
	has("go_gc_duration_seconds_count")
	has("process_resident_memory_bytes")
	has("process_cpu_seconds_total")
	has("process_open_fds")
	// The delivery latency panel marks the API's 200 ms.
	if p := has("histogram_quantile(0.99,", "ballet_gateway_delivery_latency_seconds_bucket"); p != nil {
		found := false
		for _, p := range d.all() {
			if !strings.Contains(p.Title, "Delivery latency") || p.FieldConfig.Defaults.Unit != "s" {
				continue
			}
			for _, s := range p.FieldConfig.Defaults.Thresholds.Steps {
				found = found || (s.Value != nil && *s.Value == 0.2)
			}
		}
		if !found {
			t.Error("no delivery latency panel in seconds with a threshold at 0.2")
		}
	}
}
