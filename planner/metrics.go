package planner

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/gateway/planner/provider"
)

// Metrics are the planner's Prometheus metrics; *Metrics is an Observer. NewMetrics makes them,
// and the caller registers Collectors.
type Metrics struct {
	Turns           *prometheus.CounterVec // by outcome (done's reason)
	TurnDuration    prometheus.Histogram
	ProviderLatency *prometheus.HistogramVec // by provider
	ProviderErrors  *prometheus.CounterVec   // by provider and kind (provider.ErrorKinds)
	Tokens          *prometheus.CounterVec   // by provider and kind (input, output)
	// OutputBatch and OutputBatchSeconds observe each batch of outputs: how many, and how long
	// its write and notifications took; OutputBatchWaits counts outputs that waited for room.
	OutputBatch        prometheus.Histogram
	OutputBatchSeconds prometheus.Histogram
	OutputBatchWaits   prometheus.Counter

	refused func(limit string)
}

var _ Observer = (*Metrics)(nil)

// NewMetrics makes the planner's metrics, named namespace_planner_*, with series at zero for
// every outcome. refused counts a refusal by one of the planner's limits (Observer.Refused); nil
// ignores them.
func NewMetrics(namespace string, refused func(limit string)) *Metrics {
	m := &Metrics{
		Turns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "planner_turns_total",
			Help: "Planner turns ended on this replica, by outcome (done's reason)."}, []string{"outcome"}),
		TurnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "planner_turn_duration_seconds",
			Help:    "Time from a planner turn's start to its end, on the replica that ran it.",
			Buckets: []float64{0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}}),
		ProviderLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "planner_provider_latency_seconds",
			Help:    "Time of one model call, from the request to the complete response or the error, by provider.",
			Buckets: []float64{0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300}}, []string{"provider"}),
		ProviderErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "planner_provider_errors_total",
			Help: "Failed model calls, by provider and kind."}, []string{"provider", "kind"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "planner_tokens_total",
			Help: "Tokens of model calls as the provider reports them, by provider and kind (input, output)."}, []string{"provider", "kind"}),
		OutputBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "planner_output_batch_outputs",
			Help:    "Outputs of planner turns stored and sent together, per batch.",
			Buckets: []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 4096}}),
		OutputBatchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "planner_output_batch_seconds",
			Help:    "Time to store a batch of planner outputs and send its notifications.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}}),
		OutputBatchWaits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "planner_output_batch_waits_total",
			Help: "Planner outputs that waited for room in a full batch (BALLET_PLANNER_OUTPUT_BATCH, _BYTES)."}),
		refused: refused,
	}
	for _, o := range []string{DoneEndTurn, DoneCancelled, DoneError, DoneMaxRounds} {
		m.Turns.WithLabelValues(o)
	}
	return m
}

// Providers puts the named providers' series at zero, and returns m.
func (m *Metrics) Providers(names ...string) *Metrics {
	for _, p := range names {
		m.ProviderLatency.WithLabelValues(p)
		for _, k := range provider.ErrorKinds {
			m.ProviderErrors.WithLabelValues(p, k)
		}
		m.Tokens.WithLabelValues(p, "input")
		m.Tokens.WithLabelValues(p, "output")
	}
	return m
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Turns, m.TurnDuration, m.ProviderLatency, m.ProviderErrors, m.Tokens,
		m.OutputBatch, m.OutputBatchSeconds, m.OutputBatchWaits}
}

// turnOutcomes bounds the outcome label: done's reasons and the stop reasons the providers
// normalise to; any other stop reason counts as "other".
var turnOutcomes = map[string]bool{
	DoneEndTurn: true, DoneCancelled: true, DoneError: true, DoneMaxRounds: true,
	provider.StopMaxTokens: true, provider.StopStopSequence: true,
}

// TurnEnded counts a turn by its outcome and observes its duration (Observer).
func (m *Metrics) TurnEnded(reason string, d time.Duration) {
	if !turnOutcomes[reason] {
		reason = "other"
	}
	m.Turns.WithLabelValues(reason).Inc()
	if d > 0 {
		m.TurnDuration.Observe(d.Seconds())
	}
}

// ModelCalled observes a model call's latency and counts its error's kind or its tokens
// (Observer).
func (m *Metrics) ModelCalled(name string, d time.Duration, resp *provider.Response, err error) {
	m.ProviderLatency.WithLabelValues(name).Observe(d.Seconds())
	if err != nil {
		m.ProviderErrors.WithLabelValues(name, provider.ErrorKind(err)).Inc()
		return
	}
	if resp != nil {
		m.Tokens.WithLabelValues(name, "input").Add(float64(max(resp.Usage.InputTokens, 0)))
		m.Tokens.WithLabelValues(name, "output").Add(float64(max(resp.Usage.OutputTokens, 0)))
	}
}

// Refused passes a refusal by one of the planner's limits on (Observer).
func (m *Metrics) Refused(limit string) {
	if m.refused != nil {
		m.refused(limit)
	}
}

// OutputsWritten observes a batch of outputs (Observer).
func (m *Metrics) OutputsWritten(outputs, _ int, d time.Duration) {
	m.OutputBatch.Observe(float64(outputs))
	m.OutputBatchSeconds.Observe(d.Seconds())
}

// OutputsWaited counts an output that waited for room (Observer).
func (m *Metrics) OutputsWaited() { m.OutputBatchWaits.Inc() }
