// Package poolmetrics exports a pgx pool's statistics as Prometheus metrics
// (ballet_gateway_db_pool_*), read from the pool at scrape time.
//
// Entry point: New, whose Collector the composition root registers for the primary's pool.
// Its Describe needs no pool, so that a test can list the families without a database.
package poolmetrics
