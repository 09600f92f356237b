// Package pglisten keeps one Postgres connection LISTENing on a few channels; Notify is the
// sending side (payloads in order, all or none), and Pack and Unpacker the one format its
// senders use: items, one a line after a head line, as many to a payload as MaxPayload allows,
// an item too long for one cut into fragments and put together again.
//
// Open connects and LISTENs before it returns (an error then is returned); one goroutine then
// hands every notification to Options.OnNotify, in the order Postgres delivers them. When the
// connection is lost it connects again with backoff (100 ms doubling to 5 s, ±20%), LISTENs
// again and calls Options.OnReconnect: notifications sent while no connection listened are
// gone, so the caller catches up from its tables. A connection idle for 30 s is pinged, so a
// silently dead one is noticed.
//
// The connection is a dedicated one, not taken from a pool: its settings are a pgx.ConnConfig
// (a pool's, pool.Config().ConnConfig, or a URL's, pgx.ParseConfig). An application_name set
// there is kept, so operators see their own name; without one, Options.ApplicationName names
// the connection's role.
//
// Close stops the goroutine, closes the connection and waits; it is safe to call twice.
package pglisten
