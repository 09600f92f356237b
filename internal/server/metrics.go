package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/gateway/internal/poolmetrics"
)

// registerMetrics registers, once, the tailer's metrics and those read from the parts at
// scrape time, beside those gateway.NewMetrics registers.
func (s *Server) registerMetrics() {
	r, hub, srv := s.Metrics.Registry, s.Hub, s.Gateway
	r.MustRegister(s.Tail.Collectors()...)
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_recent_events_bytes",
		Help: "Memory of the window of recent events every subscription reads, and of the bodies cached for replays from the log (BALLET_RECENT_EVENTS_BYTES bounds each).",
	}, func() float64 { return float64(hub.RecentBytes()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_catch_ups_running",
		Help: "Subscriptions catching up from the log now, reading it, waiting for their turn (BALLET_MAX_CATCH_UPS read at once) or for their subject's replay budget.",
	}, func() float64 { return float64(hub.CatchUpsRunning()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_catch_up_bytes",
		Help: "Memory of the pages of events read from the log that subscriptions hold until their clients read them (BALLET_CATCH_UP_BYTES bounds it).",
	}, func() float64 { return float64(hub.CatchUpBytes()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ballet_gateway_catch_up_pages_dropped_total",
		Help: "Pages of events read from the log let go before their clients read them, to keep within BALLET_CATCH_UP_BYTES; each is read again when its client reads.",
	}, func() float64 { return float64(hub.CatchUpPagesDropped()) }))
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_log_head", Help: "Highest committed event seq, read at scrape time.",
	}, func() float64 {
		hctx, cancel := context.WithTimeout(context.Background(), headTimeout)
		defer cancel()
		head, err := s.Log.Head(hctx)
		if err != nil {
			return -1
		}
		return float64(head)
	}))
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_tail_lag_seconds",
		Help: "How far the standby the log is read from (BALLET_TAIL_DATABASE_URL) is behind the primary; 0 when the log is read from the primary.",
	}, func() float64 {
		if s.PGLog == nil {
			return 0
		}
		return s.PGLog.TailStatus().Lag.Seconds()
	}))
	// The alert on the lag compares it with this, so that it follows the setting.
	s.Tail.MaxLag.Set(s.tailMaxLag().Seconds())
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_queued_bytes",
		Help: "Bytes queued for the replica's connections and not yet written (BALLET_REPLICA_QUEUE_BYTES bounds them).",
	}, func() float64 { return float64(srv.QueuedBytes()) }))
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_gateway_queued_bytes_budget",
		Help: "BALLET_REPLICA_QUEUE_BYTES as applied: past it the connections with the most queued are closed.",
	}, func() float64 { return float64(srv.QueuedBytesBudget()) }))
	if pg := s.o.Postgres; pg != nil {
		r.MustRegister(poolmetrics.New(pg.Pool))
	}
}
