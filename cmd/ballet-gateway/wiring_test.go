package main

import (
	"bufio"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner/provider"
)

// TestServeAndHarnessOneWiring: `serve` and the tests' harness build their replica in one
// place, so they export the same metrics, each once: a part wired in one and not the other
// would show here.
func TestServeAndHarnessOneWiring(t *testing.T) {
	c := newCluster(t, 1, "BALLET_PLANNER_PROVIDER=scripted")
	resp, err := http.Get("http://" + c.replicas[0].admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	serve := map[string]int{}
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			serve[f[2]]++
		}
	}

	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Planner: provider.NewScripted(provider.DefaultScript())})
	gathered, err := env.Server.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	harness := map[string]int{}
	for _, f := range gathered {
		harness[f.GetName()]++
	}

	names := slices.Sorted(maps.Keys(serve))
	for name := range maps.Keys(harness) {
		if serve[name] == 0 {
			names = append(names, name)
		}
	}
	for _, name := range names {
		if s, h := serve[name], harness[name]; s != 1 || h != 1 {
			t.Errorf("%s: exported %d times by serve, %d by the harness", name, s, h)
		}
	}
	if len(serve) < 50 {
		t.Fatalf("serve exports %d metrics: the scrape is not whole", len(serve))
	}
}
