package tailmetrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/gateway/internal/tailmetrics"
	"github.com/ballet/gateway/streams"
)

// TestTailMaxLagGauge: the standby's lag bound is exported, zero until the command sets it.
func TestTailMaxLagGauge(t *testing.T) {
	r := prometheus.NewRegistry()
	m := tailmetrics.New()
	r.MustRegister(m.Collectors()...)
	m.MaxLag.Set(1.5)
	fams, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "ballet_gateway_tail_max_lag_seconds" {
			if got := f.GetMetric()[0].GetGauge().GetValue(); got != 1.5 {
				t.Errorf("ballet_gateway_tail_max_lag_seconds %v, want 1.5", got)
			}
			return
		}
	}
	t.Error("no ballet_gateway_tail_max_lag_seconds")
}

// TestDispatched: a batch counts its events and moves the position to its last seq.
func TestDispatched(t *testing.T) {
	r := prometheus.NewRegistry()
	m := tailmetrics.New()
	r.MustRegister(m.Collectors()...)
	m.Dispatched([]streams.Event{{Seq: 7}, {Seq: 9}})
	m.Delivered(&streams.Event{Seq: 9, OccurredAt: time.Now()})
	fams, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		m := f.GetMetric()[0]
		got[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
	}
	want := map[string]float64{"ballet_gateway_tailer_position": 9, "ballet_gateway_tailer_events_total": 2,
		"ballet_gateway_delivery_latency_seconds": 1, "ballet_gateway_tail_max_lag_seconds": 0}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
}
