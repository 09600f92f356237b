package poolmetrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/gateway/internal/poolmetrics"
	"github.com/ballet/gateway/streams/pgtest"
)

func TestCollector(t *testing.T) {
	pool := pgtest.Pool(t)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(poolmetrics.New(pool))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	if got["ballet_gateway_db_pool_max_connections"] < 1 || got["ballet_gateway_db_pool_acquires_total"] < 1 {
		t.Fatalf("pool metrics %v", got)
	}
	for _, state := range []string{"idle", "acquired", "constructing"} {
		if _, ok := got["ballet_gateway_db_pool_connections{state="+state+"}"]; !ok {
			t.Fatalf("no %s series: %v", state, got)
		}
	}
	for name := range got {
		if !strings.HasPrefix(name, "ballet_gateway_db_pool_") {
			t.Fatalf("unexpected %s", name)
		}
	}
}
