package poolmetrics

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports a pgx pool's statistics as ballet_gateway_db_pool_*.
type Collector struct {
	pool *pgxpool.Pool

	conns, maxConns, acquires, emptyAcquires, canceled, waitSeconds *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a collector reading pool's Stat at scrape time.
func New(pool *pgxpool.Pool) *Collector {
	const ns = "ballet_gateway_db_pool_"
	return &Collector{
		pool:          pool,
		conns:         prometheus.NewDesc(ns+"connections", "Postgres pool connections, by state (idle, acquired, constructing).", []string{"state"}, nil),
		maxConns:      prometheus.NewDesc(ns+"max_connections", "The pool's maximum size.", nil, nil),
		acquires:      prometheus.NewDesc(ns+"acquires_total", "Connections acquired from the pool.", nil, nil),
		emptyAcquires: prometheus.NewDesc(ns+"empty_acquires_total", "Acquires that had to wait for a connection.", nil, nil),
		canceled:      prometheus.NewDesc(ns+"canceled_acquires_total", "Acquires cancelled by their context.", nil, nil),
		waitSeconds:   prometheus.NewDesc(ns+"acquire_wait_seconds_total", "Time spent waiting for connections.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.maxConns, c.acquires, c.emptyAcquires, c.canceled, c.waitSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(c.maxConns, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.emptyAcquires, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.canceled, prometheus.CounterValue, float64(s.CanceledAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.waitSeconds, prometheus.CounterValue, s.AcquireDuration().Seconds())
}
