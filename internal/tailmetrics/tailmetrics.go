package tailmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/gateway/streams"
)

// Metrics are the tailer's metrics, named ballet_gateway_*.
type Metrics struct {
	Position        prometheus.Gauge     // highest event seq dispatched
	Events          prometheus.Counter   // events read from the log and dispatched
	DeliveryLatency prometheus.Histogram // from an event's occurred_at to its dispatch
	MaxLag          prometheus.Gauge     // BALLET_TAIL_MAX_LAG in seconds, as the command applies it
}

// New makes the tailer's metrics, unregistered.
func New() *Metrics {
	const ns = "ballet_gateway"
	return &Metrics{
		Position: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "tailer_position",
			Help: "Highest event seq this gateway has dispatched."}),
		Events: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "tailer_events_total",
			Help: "Events read from the log and dispatched."}),
		DeliveryLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "delivery_latency_seconds",
			Help:    "Time from an event's occurred_at to its dispatch to subscribers.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 5, 10}}),
		MaxLag: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "tail_max_lag_seconds",
			Help: "BALLET_TAIL_MAX_LAG: /readyz fails while ballet_gateway_tail_lag_seconds is above it."}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Position, m.Events, m.DeliveryLatency, m.MaxLag}
}

// Dispatched counts a batch of events the tailer dispatched, which is never empty, and moves
// the position to its last.
func (m *Metrics) Dispatched(evs []streams.Event) {
	m.Events.Add(float64(len(evs)))
	m.Position.Set(float64(evs[len(evs)-1].Seq))
}

// Delivered observes an event's delivery latency as the hub dispatches it.
func (m *Metrics) Delivered(ev *streams.Event) {
	m.DeliveryLatency.Observe(time.Since(ev.OccurredAt).Seconds())
}
